import concurrent.futures
import os
import tarfile
import threading

import pytest

from obnamlib import larch
import obnamlib.larch.vfs
from obnamlib import errors
from obnamlib.crypto import gpg, openpgp, openpgp_packets
from obnamlib.repo.storage import repo_fs
from obnamlib.repo.storage import toplevel_keys
from tests.gpg_fixture import (REFERENCE_DIR, REFERENCE_KEY,  # noqa: F401
                               GpgHome, gpg_home, reference_gpg_home)
from tests.reference_data import extract_all


def packet_tags(data):
    return [tag for tag, _ in openpgp_packets.iter_packets(data)]


def open_fs(root, encrypt_with, home, compress=True):
    base = larch.vfs.LocalFS(str(root))
    keys = toplevel_keys.ToplevelKeys(base, encrypt_with,
                                      gnupghome=home.path)
    return base, repo_fs.RepositoryFS(base, compress=compress, keys=keys)


def test_new_toplevel_gets_key_and_userkeys(tmp_path, gpg_home):
    alice = gpg_home.keys['Alice']
    base, fs = open_fs(tmp_path, alice, gpg_home)
    fs.write_file('clientlist/metadata', b'[metadata]\n' * 50)
    key = base.read_file('clientlist/key')
    assert packet_tags(key) == [1, 18]
    text = gpg_home.decrypt(key).stdout.decode()
    assert len(text) == 64 and int(text, 16) >= 0
    keyring = openpgp.decrypt_symmetric(base.read_file('clientlist/userkeys'),
                                        text)
    assert gpg.keyring_key_ids(keyring) == [alice[-16:]]
    raw = base.read_file('clientlist/metadata')
    assert raw.startswith(b'encrypt1\0') and b'metadata' not in raw
    inner = gpg_home.decrypt(raw[9:], passphrase=text).stdout
    assert inner.startswith(b'deflate\0')
    assert fs.read_file('clientlist/metadata') == b'[metadata]\n' * 50


def test_metadata_toplevel_is_never_encrypted(tmp_path, gpg_home):
    base, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    fs.write_file('metadata/format', b'6\n')
    assert not base.exists('metadata/key')
    assert base.read_file('metadata/format') == b'6\n'


def test_reading_needs_only_the_secret_key(tmp_path, gpg_home):
    base, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    fs.write_file('chunks/0/0/0/1', b'data')
    fs.write_file('clientlist/metadata', b'm')
    _, reader = open_fs(tmp_path, None, gpg_home)
    assert reader.read_file('chunks/0/0/0/1') == b'data'


def test_writing_encrypted_repository_without_key_refused(tmp_path, gpg_home):
    base, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    fs.write_file('clientlist/metadata', b'm')
    _, writer = open_fs(tmp_path, None, gpg_home)
    with pytest.raises(toplevel_keys.EncryptionKeyRequired) as info:
        writer.write_file('12345/metadata', b'x')
    assert len(str(info.value).splitlines()) == 1
    assert not base.exists('12345')
    with pytest.raises(toplevel_keys.EncryptionKeyRequired):
        writer.write_file('clientlist/metadata', b'plain')
    assert fs.read_file('clientlist/metadata') == b'm'


def test_encrypt_with_on_clear_repository_refused(tmp_path, gpg_home):
    base = larch.vfs.LocalFS(str(tmp_path))
    repo_fs.RepositoryFS(base).write_file('clientlist/metadata', b'm')
    before = sorted(os.listdir(str(tmp_path / 'clientlist')))
    with pytest.raises(toplevel_keys.RepositoryNotEncrypted) as info:
        toplevel_keys.ToplevelKeys(base, gpg_home.keys['Alice'],
                                   gnupghome=gpg_home.path)
    assert len(str(info.value).splitlines()) == 1
    assert sorted(os.listdir(str(tmp_path / 'clientlist'))) == before


def test_key_without_secret_half_refused(tmp_path, gpg_home):
    with GpgHome('gs') as other:
        other.gpg('--import', input=gpg.export_public_key(
            gpg_home.keys['Alice'], gpg_home.path))
        base = larch.vfs.LocalFS(str(tmp_path))
        with pytest.raises(errors.GpgError) as info:
            toplevel_keys.ToplevelKeys(base, gpg_home.keys['Alice'],
                                       gnupghome=other.path)
    assert str(info.value).startswith('R0C79EX: GnuPG home ')
    assert 'has no secret key' in str(info.value)
    assert os.listdir(str(tmp_path)) == []


def test_client_with_other_key_cannot_read(tmp_path, gpg_home):
    _, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    fs.write_file('clientlist/metadata', b'm')
    with GpgHome('go') as other:
        carol = other.generate_key('Carol')
        _, theirs = open_fs(tmp_path, carol, other)
        with pytest.raises(errors.GpgError) as info:
            theirs.read_file('clientlist/metadata')
    assert info.value.code == 'R0C79EX'
    assert 'has no secret key' in str(info.value)


def test_add_list_remove_keys(tmp_path, gpg_home):
    alice, bob = gpg_home.keys['Alice'], gpg_home.keys['Bob']
    base, fs = open_fs(tmp_path, alice, gpg_home)
    fs.write_file('chunks/0/0/0/1', b'data')
    keys = fs.keys
    assert keys.list_keys('chunks') == [alice[-16:]]
    keys.add_key('chunks', bob)
    assert sorted(keys.list_keys('chunks')) == sorted([alice[-16:],
                                                       bob[-16:]])
    assert packet_tags(base.read_file('chunks/key')) == [1, 1, 18]
    keys.remove_key('chunks', bob[-16:])
    keys.remove_key('chunks', 'DEADBEEFDEADBEEF')
    assert keys.list_keys('chunks') == [alice[-16:]]
    assert fs.read_file('chunks/0/0/0/1') == b'data'
    assert keys.is_encrypted('chunks') and not keys.is_encrypted('chunklist')
    with pytest.raises(toplevel_keys.ToplevelNotEncrypted):
        keys.list_keys('chunklist')


def test_settings_object_accepted(tmp_path, gpg_home):
    base = larch.vfs.LocalFS(str(tmp_path))
    keys = toplevel_keys.ToplevelKeys(base, {
        'encrypt-with': gpg_home.keys['Alice'], 'gnupghome': gpg_home.path,
        'symmetric-key-bits': '128', 'weak-random': True})
    fs = repo_fs.RepositoryFS(base, keys=keys)
    fs.write_file('chunks/x', b'y')
    assert len(keys.symmetric_key('chunks')) == 32


def test_random_key_text():
    assert len(toplevel_keys.random_key_text(256)) == 64
    assert len(toplevel_keys.random_key_text(20)) == 6
    assert toplevel_keys.random_key_text() != toplevel_keys.random_key_text()


@pytest.fixture
def reference_repo(tmp_path):
    name = 'repo-format-6-encrypted-deflated.tar.xz'
    with tarfile.open(os.path.join(REFERENCE_DIR, name)) as tar:
        extract_all(tar, str(tmp_path))
    return tmp_path / 'repo'


def test_reference_repository_read_and_continued(reference_repo,
                                                 reference_gpg_home):
    base, fs = open_fs(reference_repo, None, reference_gpg_home)
    assert fs.read_file('clientlist/metadata').startswith(b'[metadata]\n')
    assert fs.keys.list_keys('clientlist') == [REFERENCE_KEY]
    base, fs = open_fs(reference_repo, REFERENCE_KEY, reference_gpg_home)
    fs.write_file('99/metadata', b'new client')
    assert fs.keys.list_keys('99') == [REFERENCE_KEY]
    key = base.read_file('99/key')
    assert len(reference_gpg_home.decrypt(key).stdout) == 64
    _, again = open_fs(reference_repo, None, reference_gpg_home)
    assert again.read_file('99/metadata') == b'new client'


def test_key_file_packets_are_readable_by_old_gpg(tmp_path, gpg_home):
    base, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    fs.write_file('chunks/0/0/0/1', b'data')
    shapes = [(tag, body[0]) for tag, body
              in openpgp_packets.iter_packets(base.read_file('chunks/key'))]
    assert shapes == [(1, 3), (18, 1)]      # PKESK v3, SEIPD v1 (MDC)


def ocb_instead_of_seipd(monkeypatch, keyid=None):
    """What gpg >= 2.3 does for keys advertising AEAD, simulated by
    turning real gpg output's SEIPD into an OCB packet (tag 20)."""
    real_run = gpg.run

    def ocb_gpg(args, data=b'', gnupghome=None, passphrase=None):
        out = real_run(args, data, gnupghome, passphrase)
        if '-e' not in args:
            return out
        packets = list(openpgp_packets.iter_packets(out))
        pkesks = [bytes(body) for _, body in packets[:-1]]
        if keyid is not None:
            pkesks = [body[:1] + keyid + body[9:] for body in pkesks]
        return b''.join(openpgp_packets.packet(1, body) for body in pkesks) \
            + openpgp_packets.packet(openpgp_packets.AEAD,
                                     bytes(packets[-1][1]))

    monkeypatch.setattr(gpg, 'run', ocb_gpg)


def test_gpg_writing_aead_still_gives_readable_key_file(tmp_path, gpg_home,
                                                        monkeypatch):
    ocb_instead_of_seipd(monkeypatch)
    base, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    fs.write_file('clientlist/metadata', b'm')
    key = base.read_file('clientlist/key')
    shapes = [(tag, body[0]) for tag, body in
              openpgp_packets.iter_packets(key)]
    assert shapes == [(1, 3), (18, 1)]
    monkeypatch.undo()
    text = gpg_home.decrypt(key).stdout.decode()
    assert text == fs.keys.symmetric_key('clientlist') and len(text) == 64


def test_unwritable_aead_key_file_leaves_repository_untouched(
        tmp_path, gpg_home, monkeypatch):
    ocb_instead_of_seipd(monkeypatch, keyid=b'\xde\xad' * 4)
    _, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    with pytest.raises(gpg.UnreadableKeyFile) as info:
        fs.write_file('clientlist/metadata', b'm')
    assert 'AEAD (tag 20)' in str(info.value)
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize('plain', [
    b'not hex at all, a foreign passphrase',
    b'\x00\xff\x10garbage',
    b'abc',             # odd number of hex digits
    b'',
])
def test_foreign_symmetric_key_is_refused(tmp_path, gpg_home, plain):
    base, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    fs.write_file('chunks/0/0/0/1', b'data')
    keyring = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    base.write_file('chunks/key', gpg.encrypt_to_keyring(plain, keyring))
    _, reader = open_fs(tmp_path, None, gpg_home)
    with pytest.raises(toplevel_keys.BadSymmetricKey) as info:
        reader.read_file('chunks/0/0/0/1')
    assert str(info.value) == (
        'R507C2X: Toplevel chunks: its key file does not hold a symmetric '
        'key as Obnam writes one (hex text); refusing to use it')


def test_key_text_with_trailing_newline_and_other_sizes_accepted():
    assert toplevel_keys.valid_key_text('x', b'ABCDEF01\n') == 'ABCDEF01'
    assert toplevel_keys.valid_key_text('x', b'd5' * 16) == 'd5' * 16


def test_symmetric_key_bits_setting(tmp_path):
    assert toplevel_keys.key_bits('') == 256
    assert toplevel_keys.key_bits(None) == 256
    assert toplevel_keys.key_bits('128') == 128
    for bad in ('lots', '0', '-8'):
        with pytest.raises(toplevel_keys.BadSymmetricKeyBits) as info:
            toplevel_keys.ToplevelKeys(larch.vfs.LocalFS(str(tmp_path)),
                                       symmetric_key_bits=bad)
        assert str(info.value) == (
            '%s: --symmetric-key-bits=%s is not a positive whole number of '
            'bits' % ('R4A7CCX', bad))


def test_first_key_asked_for_brings_the_others_in_one_round(
        tmp_path, gpg_home, monkeypatch):
    base, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    for toplevel in ('clientlist', 'chunklist', 'chunks', '1234'):
        fs.write_file(toplevel + '/metadata', toplevel.encode())
    base.write_file('chunksums/key', b'not an OpenPGP message')
    keyring = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    base.write_file('5678/key', gpg.encrypt_to_keyring(b'xyz', keyring))
    decrypted, runs = [], []
    real_decrypt, real_many = gpg.decrypt, gpg.decrypt_many
    monkeypatch.setattr(gpg, 'decrypt', lambda data, home, what=None: (
        decrypted.append(data), runs.append(1),
        real_decrypt(data, home))[2])
    monkeypatch.setattr(gpg, 'decrypt_many', lambda messages, home: (
        decrypted.extend(messages), runs.append(len(messages)),
        real_many(messages, home))[2])
    _, reader = open_fs(tmp_path, None, gpg_home)
    keys = reader.keys
    assert reader.read_file('chunks/metadata') == b'chunks'
    # one gpg run for every toplevel of this small repository
    concurrent.futures.wait(list(keys.running.values()))
    assert len(decrypted) == 6 and runs == [6]
    assert set(keys.running) == {
        'clientlist', 'chunklist', 'chunksums', '1234', '5678'}
    assert set(keys.cache) == {'chunks'}
    for toplevel in ('clientlist', 'chunklist', '1234'):
        assert reader.read_file(toplevel + '/metadata') == toplevel.encode()
    assert len(decrypted) == 6
    # keys that could not be read are tried again, and fail, when needed
    with pytest.raises(errors.GpgError):
        keys.symmetric_key('chunksums')
    with pytest.raises(toplevel_keys.BadSymmetricKey):
        keys.symmetric_key('5678')
    assert len(decrypted) == 8      # those two only: the others once only
    assert runs == [6, 1, 1]


def test_a_repository_of_many_toplevels_reads_shared_keys_ahead_only(
        tmp_path, gpg_home, monkeypatch):
    base, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    names = ['clientlist', 'chunklist', 'chunksums', 'chunks'] + [
        str(i) for i in range(toplevel_keys.MANY_TOPLEVELS)]
    for toplevel in names:
        fs.write_file(toplevel + '/metadata', b'm')
    _, reader = open_fs(tmp_path, None, gpg_home)
    reader.read_file('3/metadata')
    assert set(reader.keys.cache) | set(reader.keys.running) == {
        'clientlist', 'chunklist', 'chunksums', 'chunks', '3'}


def _encrypted_repository(tmp_path, gpg_home, toplevels):
    _, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    for toplevel in toplevels:
        fs.write_file(toplevel + '/metadata', toplevel.encode())


def _record_gpg_runs(monkeypatch):
    runs = []
    real_many, real_one = gpg.decrypt_many, gpg.decrypt
    real_check = gpg.require_secret_key
    monkeypatch.setattr(gpg, 'decrypt_many', lambda messages, home: (
        runs.append('decrypt %d' % len(messages)),
        real_many(messages, home))[1])
    monkeypatch.setattr(gpg, 'decrypt', lambda data, home, what=None: (
        runs.append('decrypt'), real_one(data, home))[1])
    monkeypatch.setattr(gpg, 'require_secret_key', lambda keyid, home: (
        runs.append('check'), real_check(keyid, home))[1])
    return runs


@pytest.mark.parametrize('agent', [True, False])
def test_encrypt_with_starts_gpg_before_any_key_is_asked_for(
        tmp_path, gpg_home, monkeypatch, agent):
    toplevels = ('clientlist', 'chunklist', '1234')
    _encrypted_repository(tmp_path, gpg_home, toplevels)
    runs = _record_gpg_runs(monkeypatch)
    if not agent:
        monkeypatch.setattr(toplevel_keys.gpg_agent, 'socket_path',
                            lambda home: None)
    _, writer = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    # the key reading (and the secret-key check) go on while the command
    # starts
    assert set(writer.keys.running) == set(toplevels)
    assert writer.keys.secret_check is not None
    assert writer.keys.cache == {}
    for toplevel in toplevels:
        assert writer.read_file(toplevel + '/metadata') == toplevel.encode()
    writer.write_file('1234/other', b'o')
    # with an agent to ask, no gpg runs but the check; else one for all
    assert runs == ['check'] if agent else sorted(runs) == [
        'check', 'decrypt 3']


def test_key_without_secret_half_refused_before_anything_is_written(
        tmp_path, gpg_home):
    """--encrypt-with a key whose secret half this user lacks, on an
    encrypted repository that another of the user's keys opens."""
    _, fs = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    fs.write_file('clientlist/metadata', b'x')
    keys = fs.keys
    keys.add_key('clientlist', gpg_home.keys['Bob'])
    with GpgHome('gs') as other:
        other.gpg('--import', input=gpg.export_public_key(
            gpg_home.keys['Alice'], gpg_home.path))
        bob_secret = gpg_home.gpg('--export-secret-keys',
                                  gpg_home.keys['Bob'])
        other.gpg('--import', input=bob_secret.stdout)
        before = sorted(os.listdir(str(tmp_path)))
        _, reader = open_fs(tmp_path, gpg_home.keys['Alice'], other)
        assert reader.read_file('clientlist/metadata') == b'x'  # Bob's key
        for write in (lambda: reader.write_file('clientlist/new', b'n'),
                      lambda: reader.write_file('5678/new', b'n'),
                      lambda: reader.lock('clientlist/lock'),
                      lambda: reader.remove('clientlist/metadata')):
            with pytest.raises(errors.GpgError) as info:
                write()
            assert str(info.value).startswith('R0C79EX: ')
            assert 'has no secret key' in str(info.value)
        assert sorted(os.listdir(str(tmp_path))) == before
        assert sorted(os.listdir(str(tmp_path / 'clientlist'))) == [
            'key', 'metadata', 'userkeys']


@pytest.mark.parametrize('broken', ['agent', 'gpg run', 'both'])
def test_a_failure_of_the_shared_run_never_leaves_a_key_waiting(
        tmp_path, gpg_home, monkeypatch, broken):
    toplevels = ('clientlist', 'chunklist')
    _encrypted_repository(tmp_path, gpg_home, toplevels)

    def fails(*args):
        raise RuntimeError('broken on purpose')
    if broken in ('agent', 'both'):
        monkeypatch.setattr(toplevel_keys.gpg_agent, 'decrypt_many', fails)
    if broken in ('gpg run', 'both'):
        monkeypatch.setattr(toplevel_keys.gpg_agent, 'socket_path',
                            lambda home: None)
        monkeypatch.setattr(gpg, 'decrypt_many', fails)
    _, reader = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    got = {}
    threads = [threading.Thread(target=lambda t=t: got.setdefault(
        t, reader.read_file(t + '/metadata'))) for t in toplevels * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
        assert not thread.is_alive()    # no key left waiting for ever
    assert got == {t: t.encode() for t in toplevels}


def test_keys_come_from_the_agent_in_order_of_need_each_when_ready(
        tmp_path, gpg_home, monkeypatch):
    """A command reads the client list first: its key must not wait for
    the other toplevels' keys."""
    toplevels = ('1234', 'chunklist', 'chunks', 'chunksums', 'clientlist')
    _encrypted_repository(tmp_path, gpg_home, toplevels)
    base = larch.vfs.LocalFS(str(tmp_path))
    of_message = {base.read_file(t + '/key'): t for t in toplevels}
    order, go_on = [], threading.Event()
    real_decrypt = toplevel_keys.gpg_agent.decrypt

    def decrypt(agent, message, subkeys):
        order.append(of_message[bytes(message)])
        if len(order) > 1:
            assert go_on.wait(30)
        return real_decrypt(agent, message, subkeys)
    monkeypatch.setattr(toplevel_keys.gpg_agent, 'decrypt', decrypt)
    _, writer = open_fs(tmp_path, gpg_home.keys['Alice'], gpg_home)
    assert writer.read_file('clientlist/metadata') == b'clientlist'
    assert order == ['clientlist', '1234']     # the second still waits
    go_on.set()
    for toplevel in toplevels:
        assert writer.read_file(toplevel + '/metadata') == toplevel.encode()
    assert order == ['clientlist', '1234', 'chunklist', 'chunks',
                     'chunksums']
