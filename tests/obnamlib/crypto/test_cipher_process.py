"""The helper process that seals (encrypts and creates) chunk files and
reads them ahead: real child processes, real files, real OpenPGP."""

import errno
import os
import signal
import sys

import pytest

import obnamlib.vfs.local
from obnamlib.crypto import cipher_process, frame_pipe, openpgp, reply_ring
from obnamlib import errors
from obnamlib.repo.storage import filters, repo_fs
from obnamlib.repo.fmt_6 import chunk_store, chunk_writer
from tests.obnamlib.repo.storage.test_repo_fs import PassphraseTable

PASSPHRASE = 'c0' * 32
SIZES = [0, 1, 100, 191, 192, 8000, 8383, 8384, 70000, 1 << 20]


class CountingCipher(openpgp.SymmetricCipher):
    """The real cipher, counting what this process encrypts and decrypts
    itself (the helper has its own)."""

    def __init__(self):
        super().__init__()
        self.encrypted = 0
        self.decrypted = 0

    def encrypt_in_scratch(self, parts, passphrase, lead=b''):
        self.encrypted += 1
        return super().encrypt_in_scratch(parts, passphrase, lead)

    def decrypt_view(self, data, passphrase):
        self.decrypted += 1
        return super().decrypt_view(data, passphrase)


def payload(i, size):
    return (b'%06d' % i * (size // 6 + 1))[:size]


def encrypted_fs(root, cipher=None):
    base = obnamlib.vfs.local.LocalFS(str(root))
    return repo_fs.RepositoryFS(base, keys=PassphraseTable(
        {'chunks': PASSPHRASE}), cipher=cipher or CountingCipher())


def sealing_writer(fs, inline=0):
    assert fs.can_seal_behind
    writer = chunk_writer.ProcessChunkWriter(fs.seal_helper(), fs.seal_inline,
                                             inline=inline)
    fs.seal_behind(writer)
    return writer


def path_of(i):
    return chunk_store.idpath(1000 + i)


@pytest.fixture
def running(tmp_path):
    """(fs, writer) of an encrypted repository whose helper has sealed
    one file, path_of(0) holding b'data'."""
    fs = encrypted_fs(tmp_path)
    writer = sealing_writer(fs)
    fs.create_file(path_of(0), b'data')
    writer.flush()
    yield fs, writer
    fs.close()


def test_sealed_size_is_the_real_size():
    cipher = openpgp.SymmetricCipher()
    for size in SIZES + [65535, 65536, 16 * 1024 * 1024]:
        parts = filters.unencrypted_parts(payload(1, size))
        sealed = cipher_process.seal(cipher, parts, PASSPHRASE)
        assert len(sealed) == cipher_process.sealed_size(
            cipher, parts, PASSPHRASE)
        assert len(cipher.encrypt(b''.join(parts), PASSPHRASE)) + len(
            filters.ENCRYPT1_PREFIX) == len(sealed)


def test_sealed_files_read_back_and_are_counted_exactly(tmp_path):
    fs = encrypted_fs(tmp_path)
    writer = sealing_writer(fs)
    for i, size in enumerate(SIZES * 3):
        fs.create_file(path_of(i), payload(i, size))
    writer.flush()
    assert fs.cipher.encrypted == 0          # all sealed by the helper
    on_disk = sum(os.path.getsize(tmp_path / path_of(i))
                  for i in range(len(SIZES) * 3))
    assert fs.bytes_written == on_disk
    reader = encrypted_fs(tmp_path)
    for i, size in enumerate(SIZES * 3):
        raw = (tmp_path / path_of(i)).read_bytes()
        assert raw.startswith(filters.ENCRYPT1_PREFIX)
        assert payload(i, size)[:50] not in raw[9:] or size < 50
        assert reader.read_file(path_of(i)) == payload(i, size)
    fs.close()


def test_compressed_files_are_sealed_too(tmp_path):
    base = obnamlib.vfs.local.LocalFS(str(tmp_path))
    fs = repo_fs.RepositoryFS(base, compress=True, keys=PassphraseTable(
        {'chunks': PASSPHRASE}))
    writer = sealing_writer(fs)
    fs.create_file(path_of(1), b'z' * 100000)
    writer.flush()
    fs.close()
    assert os.path.getsize(tmp_path / path_of(1)) == fs.bytes_written < 1000
    assert encrypted_fs(tmp_path).read_file(path_of(1)) == b'z' * 100000


def test_first_files_are_sealed_inline(tmp_path):
    fs = encrypted_fs(tmp_path)
    writer = sealing_writer(fs, inline=3)
    for i in range(5):
        fs.create_file(path_of(i), payload(i, 100))
    assert fs.cipher.encrypted == 3
    assert not writer.is_pending(path_of(2))
    assert writer.is_pending(path_of(4))
    writer.flush()
    assert not writer.is_pending(path_of(4))
    reader = encrypted_fs(tmp_path)
    assert [reader.read_file(path_of(i)) for i in range(5)] == [
        payload(i, 100) for i in range(5)]
    fs.close()


def test_a_name_taken_meanwhile_is_reported_and_left_alone(tmp_path):
    fs = encrypted_fs(tmp_path)
    writer = sealing_writer(fs)
    fs.create_file(path_of(0), b'mine')
    writer.flush()
    (tmp_path / path_of(1)).write_bytes(b'somebody else')
    with pytest.raises(chunk_writer.ChunkFileTaken) as raised:
        fs.create_file(path_of(1), b'mine too')
        writer.flush()
    assert path_of(1) in str(raised.value)
    assert writer.has_failed(path_of(1))
    fs.create_file(path_of(2), b'and this')
    writer.flush()
    assert not writer.has_failed(path_of(2))
    assert (tmp_path / path_of(1)).read_bytes() == b'somebody else'
    assert encrypted_fs(tmp_path).read_file(path_of(2)) == b'and this'
    fs.close()


def test_a_create_queued_behind_a_failed_one_is_still_made(tmp_path):
    fs = encrypted_fs(tmp_path)
    helper = fs.seal_helper()
    (tmp_path / path_of(1)).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path_of(1)).write_bytes(b'somebody else')
    for i, payload in ((1, b'mine'), (2, b'queued behind it')):
        helper.create(path_of(i), list(filters.unencrypted_parts(payload)),
                      PASSPHRASE)
    failures = helper.sync()
    assert [path for path, _ in failures] == [path_of(1)]
    assert isinstance(failures[0][1], FileExistsError)
    assert (tmp_path / path_of(1)).read_bytes() == b'somebody else'
    assert encrypted_fs(tmp_path).read_file(path_of(2)) == b'queued behind it'
    fs.close()


def test_an_os_error_in_the_helper_is_raised_with_its_errno(tmp_path):
    fs = encrypted_fs(tmp_path)
    writer = sealing_writer(fs)
    (tmp_path / 'chunks').mkdir()
    (tmp_path / 'chunks' / '0').write_bytes(b'where a directory must be')
    fs.create_file(path_of(0), b'data')
    with pytest.raises(OSError) as raised:
        writer.flush()
    assert raised.value.errno == errno.EEXIST
    assert raised.value.filename == str(tmp_path / 'chunks' / '0')
    assert not writer.has_failed(path_of(1))
    fs.close()


def test_a_failure_is_reported_by_the_next_submit(tmp_path):
    """Once the failed create was written to the helper: a big one is
    written at once (small ones are held, see test_frame_pipe)."""
    fs = encrypted_fs(tmp_path)
    writer = sealing_writer(fs)
    (tmp_path / path_of(0)).parent.mkdir(parents=True)
    (tmp_path / path_of(0)).write_bytes(b'taken')
    fs.create_file(path_of(0), bytes(frame_pipe.Channel.HOLD_BYTES))
    helper = fs.seal_helper()
    while not helper.failure_reported():    # its notice comes after 'ready'
        assert helper.replies.poll(60)
    with pytest.raises(chunk_writer.ChunkFileTaken):
        fs.create_file(path_of(1), b'more')
    writer.flush()
    assert not (tmp_path / path_of(1)).exists()
    fs.close()


def test_a_killed_helper_fails_the_flush_with_one_line(running):
    fs, writer = running
    os.kill(fs.seal_helper().proc.pid, signal.SIGKILL)
    fs.seal_helper().proc.wait()
    with pytest.raises(cipher_process.CipherProcessFailed) as raised:
        fs.create_file(path_of(1), b'x' * 3000000)
        writer.flush()
    assert raised.value.code == 'RD910FX'
    assert 'exit code -9' in str(raised.value)
    assert '\n' not in str(raised.value)


def test_keys_are_not_on_the_helpers_command_line_or_environment(running):
    fs, writer = running
    pid = fs.seal_helper().proc.pid
    for name in ('cmdline', 'environ'):
        with open('/proc/%d/%s' % (pid, name), 'rb') as f:
            assert PASSPHRASE.encode() not in f.read()


def test_helper_ends_cleanly_when_closed(running):
    fs, writer = running
    proc = fs.seal_helper().proc
    fs.close()
    assert proc.returncode == 0


def test_an_unused_helper_is_stopped_without_waiting(tmp_path):
    fs = encrypted_fs(tmp_path)
    helper = fs.seal_helper()
    helper.start()
    proc = helper.proc
    fs.close()
    assert proc.returncode is not None


def stored_files(tmp_path, count, size=5000):
    fs = encrypted_fs(tmp_path)
    for i in range(count):
        fs.create_file(path_of(i), payload(i, size))
    return [path_of(i) for i in range(count)]


def test_files_read_ahead_come_from_the_helper(tmp_path):
    count = repo_fs.READ_AHEAD_AFTER + 40
    paths = stored_files(tmp_path, count)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths[:repo_fs.READ_AHEAD_AFTER])     # read in line
    fs.read_ahead(paths[repo_fs.READ_AHEAD_AFTER:])
    got = [fs.read_file(path) for path in paths]
    assert got == [payload(i, 5000) for i in range(count)]
    assert fs.cipher.decrypted == repo_fs.READ_AHEAD_AFTER
    assert fs.bytes_read == sum(os.path.getsize(tmp_path / path)
                                for path in paths)   # stored bytes, as ever
    fs.close()


def test_the_first_files_of_one_long_hint_are_read_in_line(tmp_path):
    count = repo_fs.READ_AHEAD_AFTER + 20
    paths = stored_files(tmp_path, count)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert [fs.read_file(path) for path in paths] == [
        payload(i, 5000) for i in range(count)]
    assert fs.cipher.decrypted == repo_fs.READ_AHEAD_AFTER
    fs.close()


def test_a_damaged_file_read_ahead_fails_as_it_would_in_line(tmp_path):
    count = repo_fs.READ_AHEAD_AFTER + 10
    paths = stored_files(tmp_path, count)
    damaged = tmp_path / paths[-5]
    raw = bytearray(damaged.read_bytes())
    raw[-30] ^= 1
    damaged.write_bytes(bytes(raw))
    in_line = encrypted_fs(tmp_path)
    with pytest.raises(errors.ObnamError) as expected:
        in_line.read_file(paths[-5])
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    for i, path in enumerate(paths):
        if path == paths[-5]:
            with pytest.raises(errors.ObnamError) as raised:
                fs.read_file(path)
            assert str(raised.value) == str(expected.value)
        else:
            assert fs.read_file(path) == payload(i, 5000)
    fs.close()


def test_reads_not_asked_for_or_out_of_order_still_work(tmp_path):
    count = repo_fs.READ_AHEAD_AFTER * 2
    paths = stored_files(tmp_path, count)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert fs.read_file(paths[40]) == payload(40, 5000)
    assert fs.read_file(paths[39]) == payload(39, 5000)  # dropped: in line
    assert fs.read_file(paths[41]) == payload(41, 5000)
    fs.create_file(path_of(count), b'new')      # drops what is ahead
    assert fs.read_file(paths[42]) == payload(42, 5000)
    fs.close()


def test_at_most_max_ahead_requests_are_outstanding(tmp_path, monkeypatch):
    monkeypatch.setattr(cipher_process, 'MAX_AHEAD', 5)
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    paths = stored_files(tmp_path, 12)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert len(fs.seal_helper().ahead) == 5
    assert [fs.read_file(p) for p in paths] == [
        payload(i, 5000) for i in range(12)]
    assert fs.cipher.decrypted == 7
    fs.close()


def test_unencrypted_repositories_never_start_a_helper(tmp_path):
    base = obnamlib.vfs.local.LocalFS(str(tmp_path))
    fs = repo_fs.RepositoryFS(base)
    assert not fs.can_seal_behind
    fs.read_ahead(['chunks/%d' % i for i in range(100)])
    assert fs._process is None


def test_a_crash_in_the_helper_is_one_line_and_logged(running, caplog):
    fs, writer = running
    fs.seal_helper()._send(('no such request',))
    with pytest.raises(cipher_process.CipherProcessFailed) as raised:
        fs.create_file(path_of(1), b'more')
        writer.flush()
    assert 'AttributeError' in str(raised.value)
    assert '\n' not in str(raised.value)
    assert 'Traceback' in caplog.text


def test_a_crash_report_is_read_even_when_sending_fails_first(
        running, caplog):
    fs, writer = running
    helper = fs.seal_helper()
    helper._send(('no such request',))
    helper.proc.wait()      # it has reported and ended: the pipe is broken
    with pytest.raises(cipher_process.CipherProcessFailed) as raised:
        helper.create(path_of(1), [b'x' * 3000000])  # fails before reading
    assert 'AttributeError' in str(raised.value)
    assert 'Traceback' in caplog.text


def test_the_helper_ignores_ctrl_c(running, tmp_path):
    fs, writer = running
    os.kill(fs.seal_helper().proc.pid, signal.SIGINT)
    fs.create_file(path_of(1), b'more')
    writer.flush()
    assert encrypted_fs(tmp_path).read_file(path_of(1)) == b'more'
    proc = fs.seal_helper().proc
    fs.close()
    assert proc.returncode == 0


def test_closing_with_reads_outstanding_ends_the_helper_quietly(
        tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    paths = stored_files(tmp_path, 40, size=100000)   # more than the pipe
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert fs.read_file(paths[0]) == payload(0, 100000)
    proc = fs.seal_helper().proc
    fs.close()
    assert proc.returncode == 0
    assert capfd.readouterr().err == ''


def test_a_file_encrypted_twice_reads_back_through_the_helper(
        tmp_path, monkeypatch):
    """The helper decrypts into a reused buffer; a second encrypt1 layer
    (not written by Obnam, but a valid tag chain) is read too."""
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    cipher = openpgp.SymmetricCipher()
    inner = filters.ENCRYPT1_PREFIX + cipher.encrypt(
        b'\0' + b'twice' * 5000, PASSPHRASE)
    stored = filters.ENCRYPT1_PREFIX + cipher.encrypt(inner, PASSPHRASE)
    (tmp_path / 'chunks').mkdir()
    (tmp_path / 'chunks' / 'x').write_bytes(stored)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(['chunks/x'])
    assert 'chunks/x' in fs.seal_helper().ahead
    assert fs.read_file('chunks/x') == b'twice' * 5000
    assert fs.cipher.decrypted == 0
    fs.close()


def test_without_a_helper_everything_is_done_in_line(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, 'executable', str(tmp_path / 'no-python'))
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    fs = encrypted_fs(tmp_path / 'repo')
    writer = sealing_writer(fs, inline=2)
    for i in range(10):
        fs.create_file(path_of(i), payload(i, 3000))
    writer.flush()
    assert fs.cipher.encrypted == 10
    assert fs.seal_helper().could_not_start
    paths = [path_of(i) for i in range(10)]
    fs.read_ahead(paths)
    assert [fs.read_file(p) for p in paths] == [
        payload(i, 3000) for i in range(10)]
    assert fs.cipher.decrypted == 10
    fs.close()


def test_a_few_files_asked_for_start_no_helper(tmp_path):
    paths = stored_files(tmp_path, repo_fs.READ_AHEAD_AFTER // 2)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert [fs.read_file(p) for p in paths] == [
        payload(i, 5000) for i in range(len(paths))]
    assert not fs.seal_helper().started
    fs.close()


def test_a_helper_started_ahead_is_given_every_file_once_it_has_booted(
        tmp_path):
    paths = stored_files(tmp_path, 10)
    fs = encrypted_fs(tmp_path)
    fs.expect_reads()
    helper = fs.seal_helper()
    assert helper.started
    while not helper.ready():       # it says so when it has booted
        assert helper.replies.poll(60)
    fs.read_ahead(paths)            # few files, none read in line
    assert [fs.read_file(path) for path in paths] == [
        payload(i, 5000) for i in range(10)]
    assert fs.cipher.decrypted == 0
    fs.close()


def test_few_files_start_no_helper_unless_reads_are_expected(tmp_path):
    paths = stored_files(tmp_path, 10)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert not fs.seal_helper().started
    assert [fs.read_file(path) for path in paths] == [
        payload(i, 5000) for i in range(10)]
    assert fs.cipher.decrypted == 10
    fs.close()


def test_reads_expected_in_line_start_no_helper_and_decrypt_here(
        tmp_path, monkeypatch):
    """fsck's and restore's hint when their own second process shares the
    reads: however many files are asked for, none goes to the helper;
    sealing for a backup is still the helper's."""
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    paths = stored_files(tmp_path, 10)
    fs = encrypted_fs(tmp_path)
    fs.expect_reads(in_line=True)
    fs.read_ahead(paths)
    assert not fs.seal_helper().started
    assert [fs.read_file(path) for path in paths] == [
        payload(i, 5000) for i in range(10)]
    assert fs.cipher.decrypted == 10
    assert fs.can_seal_behind
    fs.close()


def test_replies_come_around_a_small_shared_ring(tmp_path, monkeypatch):
    monkeypatch.setattr(reply_ring, 'RING_BYTES', 64 * 1024)
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    # 16384 is the most a 64 KiB ring takes; bigger come by the pipe.
    sizes = [5000, 0, 16384, 16385, 70000, 1] * 20     # ~6 times around
    fs = encrypted_fs(tmp_path)
    for i, size in enumerate(sizes):
        fs.create_file(path_of(i), payload(i, size))
    paths = [path_of(i) for i in range(len(sizes))]
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert [fs.read_file(path) for path in paths] == [
        payload(i, size) for i, size in enumerate(sizes)]
    assert fs.cipher.decrypted == 0
    ring = fs.seal_helper().ring
    assert ring.taken > 5 * ring.size       # went around, released
    fs.close()


def test_closing_with_a_full_ring_ends_the_helper_quietly(
        tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(cipher_process, 'STOP_WAIT', 10)
    monkeypatch.setattr(reply_ring, 'RING_BYTES', 64 * 1024)
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    paths = stored_files(tmp_path, 100, size=10000)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert fs.read_file(paths[0]) == payload(0, 10000)
    proc = fs.seal_helper().proc
    fs.close()
    assert proc.returncode == 0     # ended, not killed after STOP_WAIT
    assert capfd.readouterr().err == ''


def test_without_shared_memory_replies_come_through_the_pipe(
        tmp_path, monkeypatch):
    monkeypatch.setattr(reply_ring, 'new_ring', lambda size=None: None)
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    paths = stored_files(tmp_path, 30)
    fs = encrypted_fs(tmp_path)
    fs.read_ahead(paths)
    assert [fs.read_file(path) for path in paths] == [
        payload(i, 5000) for i in range(30)]
    assert fs.seal_helper().ring is None
    assert fs.cipher.decrypted == 0
    fs.close()


def test_a_crash_report_behind_ring_replies_is_not_lost(
        tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(reply_ring, 'RING_BYTES', 64 * 1024)
    monkeypatch.setattr(repo_fs, 'READ_AHEAD_AFTER', 0)
    paths = stored_files(tmp_path, 6, size=10000)     # fit the ring
    fs = encrypted_fs(tmp_path)
    writer = sealing_writer(fs)
    fs.read_ahead(paths)
    helper = fs.seal_helper()
    helper._send(('no such request',))
    helper.proc.wait()      # it has replied, reported and ended
    # Taking replies releases ring space: sends that now fail.
    assert fs.read_file(paths[0]) == payload(0, 10000)
    with pytest.raises(cipher_process.CipherProcessFailed) as raised:
        fs.create_file(path_of(99), b'more')
        writer.flush()
    assert 'AttributeError' in str(raised.value)
    assert 'Traceback' in caplog.text
    fs.close()


class _KeyFailsAfterReadAhead(PassphraseTable):
    """A toplevel whose key cannot be had (a damaged key file): every
    attempt fails, as toplevel_keys does, whoever asks first."""

    asked = 0

    def symmetric_key(self, toplevel):
        self.asked += 1
        raise openpgp.DecryptionFailed(reason='key of %s is damaged'
                                       % toplevel)


def test_a_key_that_cannot_be_had_fails_the_read_not_the_hint(tmp_path):
    paths = stored_files(tmp_path, repo_fs.READ_AHEAD_AFTER + 10)
    base = obnamlib.vfs.local.LocalFS(str(tmp_path))
    fs = repo_fs.RepositoryFS(base, keys=_KeyFailsAfterReadAhead({}),
                              cipher=CountingCipher())
    fs.seal_helper().start()
    fs.read_ahead(paths)            # a hint: nothing to report here
    assert fs.seal_helper().ahead == {}     # and nothing asked for
    fs.read_ahead(paths)            # the failed key is not tried again
    assert fs.keys.asked == 1
    with pytest.raises(openpgp.DecryptionFailed) as raised:
        fs.read_file(paths[-1])     # the read reports the key's error
    assert 'key of chunks is damaged' in str(raised.value)
    assert fs.keys.asked == 2
    fs.close()


def test_the_writer_waits_for_the_helper_when_many_files_are_pending(
        tmp_path, monkeypatch):
    """Pending paths are memory: past PENDING_MAX the writer waits, and
    every file sent so far is made."""
    monkeypatch.setattr(chunk_writer, 'PENDING_MAX', 3)
    fs = encrypted_fs(tmp_path)
    writer = sealing_writer(fs)
    for i in range(4):
        fs.create_file(path_of(i), b'file %d' % i)
    assert not any(writer.is_pending(path_of(i)) for i in range(3))
    for i in range(3):
        assert encrypted_fs(tmp_path).read_file(path_of(i)) == b'file %d' % i
    assert writer.is_pending(path_of(3))
    writer.flush()
    assert not writer.is_pending(path_of(3))
    fs.close()
