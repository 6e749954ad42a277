"""Many chunk files per SFTP round trip: restore prefetches, a push backup
creates chunks in batches.  Against a real OpenSSH sshd on 127.0.0.1; the
round trips are what SftpFS counts."""

import os

import pytest

from obnamlib.engine import backup_engine
from obnamlib.cli import backup_progress
from obnamlib.repo import factory as repo_factory
from obnamlib.repo.fmt_6 import chunk_store
from obnamlib.repo.fmt_6.chunk_writer import BatchChunkWriter, ChunkFileTaken
from obnamlib.repo.storage.repo_fs import RepositoryFS
from obnamlib.engine.restorer import Restorer
from obnamlib.vfs.local import LocalFS
from obnamlib.engine.verifier import Verifier
from obnamlib.vfs.sftp.fs import SftpFS
from tests.file_tree import snapshot
from tests.gpg_fixture import gpg_home  # noqa: F401 (a fixture)
from tests.obnamlib.restore_helpers import CLIENT, back_up
from tests.obnamlib.vfs.test_sftp import (  # noqa: F401 (a fixture)
    isolated_ssh_user, settings_for, shared_connection, shared_sshd)

SMALL_FILES = 128



def sftp_fs(path):
    sshd = shared_sshd()
    return SftpFS(sshd.url(str(path)), settings_for(sshd, 'openssh'),
                  connection=shared_connection())


def open_over_sftp(path, create=False, **settings):
    """(Repository on `path` through SftpFS, that SftpFS)."""
    fs = sftp_fs(path)
    repo = repo_factory.open_repository(
        vfs=fs, url=fs.url, create=create, lock_timeout=0, **settings)
    return repo, fs


def small_files(root, count=SMALL_FILES):
    os.makedirs(root)
    for i in range(count):
        with open(os.path.join(root, 'f%03d' % i), 'wb') as f:
            f.write(b'small file %d\n' % i * (i + 1))


def restore(repo, gen, target):
    Restorer(repo, gen, LocalFS('/'), os.fsencode(str(target))).restore()


def restore_over_sftp(tmp_path, live):
    """Restore the newest generation of tmp_path/repo over SFTP, check it
    equals live; (round trips it took, the SftpFS)."""
    repo, fs = open_over_sftp(tmp_path / 'repo')
    gen = repo.get_generation_ids(CLIENT)[-1]
    before = fs.round_trips
    restore(repo, gen, tmp_path / 'restored')
    spent = fs.round_trips - before
    assert snapshot(str(tmp_path / 'restored') + str(live)) == \
        snapshot(str(live))
    return spent, fs


# --- restore ---------------------------------------------------------------

def test_restoring_small_files_fetches_many_chunks_per_round_trip(tmp_path):
    live = str(tmp_path / 'live')
    small_files(live)
    back_up(tmp_path / 'repo', live)
    spent, fs = restore_over_sftp(tmp_path, live)
    # One by one: two round trips per chunk file (256).  In windows of 64
    # chunks: two per window (the B-tree nodes came with the generation).
    assert fs.requests['OPEN'] >= SMALL_FILES
    assert spent <= SMALL_FILES // 16, spent        # 4 when measured


def test_verify_fetches_many_chunks_per_round_trip(tmp_path):
    live = str(tmp_path / 'live')
    small_files(live)
    back_up(tmp_path / 'repo', live)
    changed = os.path.join(live, 'f100')
    st = os.stat(changed)
    with open(changed, 'r+b') as f:
        f.write(b'S')
    os.utime(changed, ns=(st.st_atime_ns, st.st_mtime_ns))
    repo, fs = open_over_sftp(tmp_path / 'repo')
    gen = repo.get_generation_ids(CLIENT)[-1]
    failures = []
    before = fs.round_trips
    Verifier(repo, LocalFS('/'), gen, failures.append).verify_paths(
        [os.fsencode(live)])
    assert fs.round_trips - before <= SMALL_FILES // 16
    assert [str(f) for f in failures] == [
        'RDF30DX: %s/f100: data changed' % live]


def test_restoring_large_files_reads_their_chunks_ahead(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    contents = {name: os.urandom(size) for name, size in
                (('a', 300000), ('b', 5), ('c', 200001), ('d', 0))}
    for name, data in contents.items():
        (live / name).write_bytes(data)
    back_up(tmp_path / 'repo', live, chunk_size=4096)
    spent, _ = restore_over_sftp(tmp_path, live)
    assert spent <= 40, spent       # 124 chunks: 248 one by one


def test_encrypted_compressed_repository_restores_over_sftp(
        tmp_path, gpg_home):  # noqa: F811
    live = str(tmp_path / 'live')
    small_files(live, count=40)
    settings = dict(encrypt_with=gpg_home.keys['Alice'],
                    gnupghome=gpg_home.path, compress_with='deflate')
    back_up(tmp_path / 'repo', live, **settings)
    chunk = next(os.path.join(d, n) for d, _, ns in
                 os.walk(tmp_path / 'repo' / 'chunks') for n in ns
                 if n not in ('key', 'userkeys', 'lock'))
    with open(chunk, 'rb') as f:
        assert b'small file' not in f.read()
    repo, fs = open_over_sftp(tmp_path / 'repo', **settings)
    gen = repo.get_generation_ids(CLIENT)[-1]
    before = fs.round_trips
    restore(repo, gen, tmp_path / 'restored')
    assert fs.round_trips - before <= 20
    assert snapshot(str(tmp_path / 'restored') + live) == snapshot(live)


def test_a_missing_chunk_fails_only_its_file(tmp_path):
    """A batch read that fails leaves each chunk to its own read, which
    names the damage."""
    live = str(tmp_path / 'live')
    small_files(live, count=10)
    local_repo, gen = back_up(tmp_path / 'repo', live)
    damaged = os.fsencode(live) + b'/f004'
    chunk_id = local_repo.get_file_chunk_ids(gen, damaged)[0]
    os.remove(tmp_path / 'repo' / chunk_store.idpath(chunk_id))
    repo, fs = open_over_sftp(tmp_path / 'repo')
    gen = repo.get_generation_ids(CLIENT)[-1]
    errors = []
    restorer = Restorer(repo, gen, LocalFS('/'),
                        os.fsencode(str(tmp_path / 'restored')))
    restorer.reporter.error = errors.append
    with pytest.raises(Exception, match='RD6259X'):
        restorer.restore()
    assert len(errors) == 1 and 'f004' in errors[0], errors
    restored = snapshot(str(tmp_path / 'restored') + live)
    expected = snapshot(live)
    del expected['f004']
    assert restored == expected


def test_fetched_chunks_stay_within_their_bounds():
    cache = chunk_store.FetchedChunks(max_bytes=1000, max_chunks=4)
    cache.keep([(1, b'a' * 400), (2, b'b' * 400), (3, b'c' * 400)])
    assert (cache.get(1), cache.get(2), cache.get(3)) == (
        b'a' * 400, b'b' * 400, None)       # a batch never evicts itself
    cache.keep([(4, b'd' * 10), (5, b'e' * 10)])
    assert cache.bytes <= 1000 and len(cache) <= 4
    assert [cache.get(i) for i in (1, 2, 4, 5)] == [
        b'a' * 400, b'b' * 400, b'd' * 10, b'e' * 10]
    cache.keep([(6, b'f' * 700)])           # the oldest make room
    assert [cache.get(i) for i in (1, 2, 4, 5, 6)] == [
        None, None, b'd' * 10, b'e' * 10, b'f' * 700]
    cache.keep([(7, b'g'), (8, b'h')])
    assert len(cache) == 4 and cache.get(4) is None
    cache.discard(6)
    assert cache.get(6) is None and cache.bytes == 12


def test_a_fetched_chunk_taken_is_kept_only_until_another_is_taken():
    cache = chunk_store.FetchedChunks(max_bytes=1000, max_chunks=4)
    cache.keep([(1, b'a'), (2, b'b')])
    assert (cache.take(1), cache.take(1)) == (b'a', b'a')   # a run of 1s
    assert len(cache) == 1 and cache.bytes == 1
    assert (cache.take(2), cache.take(1), cache.take(2)) == (b'b', None, b'b')
    cache.discard(2)
    assert cache.take(2) is None


def test_restore_keeps_at_most_the_cache_bound_in_memory(tmp_path,
                                                         monkeypatch):
    live = str(tmp_path / 'live')
    small_files(live, count=100)
    back_up(tmp_path / 'repo', live)
    monkeypatch.setattr(chunk_store, 'CACHE_CHUNKS', 16)
    repo, fs = open_over_sftp(tmp_path / 'repo')
    gen = repo.get_generation_ids(CLIENT)[-1]
    sizes = []
    real_prefetch = repo.chunks.prefetch

    def prefetch(chunk_ids):
        real_prefetch(chunk_ids)
        sizes.append(len(repo.chunks.fetched))
    repo.chunks.prefetch = prefetch
    restore(repo, gen, tmp_path / 'restored')
    assert snapshot(str(tmp_path / 'restored') + live) == snapshot(live)
    assert sizes and max(sizes) == 16


# --- push backup -----------------------------------------------------------

def push_backup(repo, live):
    backup_engine.BackupEngine(
        repo, LocalFS('/'), backup_engine.BackupOptions(CLIENT),
        backup_progress.BackupProgress(), repo_io=repo.fs,
    ).run([os.fsencode(live)])


def test_push_backup_creates_chunk_files_in_batches(tmp_path):
    live = str(tmp_path / 'live')
    small_files(live)
    repo, fs = open_over_sftp(tmp_path / 'repo', create=True)
    push_backup(repo, live)
    repo.close()
    # One by one: two round trips per chunk file (256) plus the B-tree
    # files, locks and directories (~160): 416 when measured.
    assert fs.round_trips <= SMALL_FILES * 3 // 2, fs.round_trips
    assert fs.requests['OPEN'] >= SMALL_FILES
    chunk_files = [n for _, _, ns in os.walk(tmp_path / 'repo' / 'chunks')
                   for n in ns if n != 'lock']
    assert len(chunk_files) == SMALL_FILES
    repo = repo_factory.open_repository(url=str(tmp_path / 'repo'))
    restore(repo, repo.get_generation_ids(CLIENT)[-1], tmp_path / 'back')
    assert snapshot(str(tmp_path / 'back') + live) == snapshot(live)


def test_a_batched_create_never_replaces_a_file_taken_meanwhile(tmp_path):
    (tmp_path / 'chunks' / '0').mkdir(parents=True)
    (tmp_path / 'chunks' / '0' / 'b').write_bytes(b'theirs')
    storage = RepositoryFS(sftp_fs(tmp_path))
    assert storage.can_create_in_batches
    writer = BatchChunkWriter(storage.create_many_in_base, max_files=2)
    storage.write_behind(writer)
    storage.create_file('chunks/0/a', b'A')
    assert writer.is_pending('chunks/0/a')
    storage.create_file('chunks/0/b', b'ours')
    assert not (tmp_path / 'chunks' / '0' / 'a').exists()
    with pytest.raises(ChunkFileTaken):
        storage.create_file('chunks/1/c', b'C')   # the batch was full
    assert not writer.is_pending('chunks/1/c')
    assert not (tmp_path / 'chunks' / '1').exists()     # c never tried
    assert writer.has_failed('chunks/0/b')
    assert not writer.has_failed('chunks/0/a')
    assert (tmp_path / 'chunks' / '0' / 'b').read_bytes() == b'theirs'
    assert storage.read_file('chunks/0/a') == b'A'
    storage.create_file('chunks/1/d', b'D')
    assert not (tmp_path / 'chunks' / '1' / 'd').exists()
    writer.flush()
    assert storage.read_file('chunks/1/d') == b'D'


# --- RepositoryFS.read_files ----------------------------------------------

@pytest.mark.parametrize('over_sftp', [False, True])
def test_read_files_unwraps_like_read_file(tmp_path, over_sftp):
    from obnamlib.larch import vfs as larch_vfs
    base = sftp_fs(tmp_path) if over_sftp else larch_vfs.LocalFS(
        str(tmp_path))
    storage = RepositoryFS(base, compress='deflate')
    assert storage.reads_in_batches == over_sftp
    contents = {'chunks/0/1': b'a' * 5000, 'chunks/0/2': b'',
                'chunks/1/3': os.urandom(300), 'metadata/format': b'6\n'}
    for path, data in contents.items():
        storage.write_file(path, data)
    before = storage.bytes_read
    paths = sorted(contents)
    assert storage.read_files(paths) == [contents[p] for p in paths]
    assert storage.read_files(paths) == [storage.read_file(p)
                                         for p in paths]
    raw = sum(os.path.getsize(tmp_path / p) for p in paths)
    assert storage.bytes_read - before == 3 * raw
    with pytest.raises(FileNotFoundError):
        storage.read_files(['chunks/0/1', 'chunks/9/9'])


def test_restore_and_verify_read_ahead_across_directories(tmp_path):
    live = tmp_path / 'live'
    for d in range(16):
        for f in range(8):
            path = live / ('d%02d' % d) / ('sub' * (d % 3)) / ('f%d' % f)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b'%d/%d\n' % (d, f) * (d + f + 1))
    back_up(tmp_path / 'repo', live)
    restored, _ = restore_over_sftp(tmp_path, live)
    repo, fs = open_over_sftp(tmp_path / 'repo')     # nothing cached
    gen = repo.get_generation_ids(CLIENT)[-1]
    failures = []
    before = fs.round_trips
    Verifier(repo, LocalFS('/'), gen, failures.append).verify_paths(
        [os.fsencode(str(live))])
    verified = fs.round_trips - before
    assert failures == []
    # 128 chunk files in 27 directories: 256 round trips one by one.
    assert max(restored, verified) <= 8, (restored, verified)


# --- closing ---------------------------------------------------------------

def test_closing_a_repository_the_factory_opened_ends_its_connection(
        tmp_path):
    """Otherwise the ssh process outlives the repository."""
    sshd = shared_sshd()
    repo = repo_factory.open_repository(
        settings_for(sshd, 'openssh'), url=sshd.url(str(tmp_path / 'r')),
        create=True, lock_timeout=0)
    storage = repo.fs.base
    assert storage.connection is not None
    repo.close()
    assert storage.connection is None


def test_closing_a_repository_leaves_a_given_connection_open(tmp_path):
    repo, fs = open_over_sftp(tmp_path / 'r', create=True)
    repo.close()
    assert fs.connection is not None
