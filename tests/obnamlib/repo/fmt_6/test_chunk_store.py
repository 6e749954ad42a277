"""Chunk files: ids, exclusive creation, and writing behind the caller."""

import os

import pytest

from obnamlib import larch
import obnamlib.larch.vfs
import obnamlib.vfs.local
from obnamlib import errors
from obnamlib.repo.storage import filters, repo_fs
from obnamlib.repo import factory as repo_factory
from obnamlib.repo import interface as repo_interface
from obnamlib.repo.fmt_6 import chunk_store, chunk_writer
from obnamlib.repo.fmt_6.chunk_store import ChunkStore, idpath
from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
from tests.obnamlib.mount_tables import local_fs_on
from tests.obnamlib.restore_helpers import new_repository


class FixedStarts:
    """An rng whose randint gives the listed chunk id starts in turn."""

    def __init__(self, *starts):
        self.starts = list(starts)

    def randint(self, lo, hi):
        return self.starts.pop(0)


def local_repo_fs(root, compress=False):
    return repo_fs.RepositoryFS(obnamlib.vfs.local.LocalFS(str(root)),
                                compress=compress)


def stored(root, chunk_id):
    with open(os.path.join(str(root), idpath(chunk_id)), 'rb') as f:
        return filters.unwrap(f.read(), None)


def test_ids_count_up_from_a_random_start(tmp_path):
    store = ChunkStore(local_repo_fs(tmp_path), rng=FixedStarts(0x5000))
    assert [store.put(b'%d' % i) for i in range(3)] == [0x5000, 0x5001,
                                                        0x5002]
    assert [stored(tmp_path, 0x5000 + i) for i in range(3)] == \
        [b'0', b'1', b'2']


def test_local_storage_can_write_behind_and_others_cannot(tmp_path):
    assert ChunkStore(local_repo_fs(tmp_path)).background is not None
    larch_fs = repo_fs.RepositoryFS(larch.vfs.LocalFS(str(tmp_path)))
    assert ChunkStore(larch_fs).background is None
    assert ChunkStore(repo_fs.RepositoryFS(
        larch.vfs.MemoryFS())).background is None
    format5 = repo_fs.RepositoryFS(obnamlib.vfs.local.LocalFS(str(tmp_path)),
                                   format5=True)
    assert ChunkStore(format5).background is None


@pytest.mark.parametrize('behind', [False, True])
def test_taken_name_makes_a_new_start(tmp_path, behind):
    fs = local_repo_fs(tmp_path)
    fs.create_file(idpath(0x7001), b'someone else')
    store = ChunkStore(fs, rng=FixedStarts(0x7000, 0x9000))
    store.write_behind(behind)
    assert [store.put(b'a'), store.put(b'b'), store.put(b'c')] == \
        [0x7000, 0x9000, 0x9001]
    store.flush()
    assert stored(tmp_path, 0x7001) == b'someone else'
    assert stored(tmp_path, 0x9001) == b'c'


def test_written_behind_files_are_complete_after_flush(tmp_path):
    fs = local_repo_fs(tmp_path, compress=True)
    store = ChunkStore(fs, rng=FixedStarts(0x10000))
    store.write_behind(True)
    contents = [os.urandom(1000) + bytes(50000) for _ in range(40)]
    ids = [store.put(data) for data in contents]
    # Counted when handed over, so checkpoints do not depend on timing.
    assert fs.bytes_written == sum(
        len(filters.wrap(data, True, None)) for data in contents)
    store.flush()
    assert ids == list(range(0x10000, 0x10000 + 40))
    for chunk_id, data in zip(ids, contents):
        assert fs.read_file(idpath(chunk_id)) == data
    chunk_dir = os.path.dirname(os.path.join(str(tmp_path), idpath(ids[0])))
    assert sorted(os.listdir(chunk_dir)) == sorted('%x' % i for i in ids)
    store.close()


class InterruptedHandOver(repo_fs.RepositoryFS):
    """Ctrl-C arrives while a chunk is handed to the writer thread,
    after the hand-over: put() never returns the id."""

    def create_file(self, path, data):
        super().create_file(path, data)
        raise KeyboardInterrupt()


def test_a_chunk_whose_put_was_interrupted_is_removed_with_the_rest(
        tmp_path):
    fs = InterruptedHandOver(obnamlib.vfs.local.LocalFS(str(tmp_path)))
    store = ChunkStore(fs, rng=FixedStarts(0x30000))
    store.write_behind(True)
    with pytest.raises(KeyboardInterrupt):
        store.put(b'cut short')
    assert store.remove_uncommitted() == 1
    store.close()
    assert store.ids() == []


def test_reading_a_chunk_waits_for_its_file(tmp_path):
    store = ChunkStore(local_repo_fs(tmp_path), rng=FixedStarts(0x20000))
    store.write_behind(True)
    ids = [store.put(b'chunk %d' % i) for i in range(20)]
    assert store.get(ids[-1]) == b'chunk 19'
    assert store.has(ids[-1])
    store.close()
    assert sorted(store.ids()) == ids


def creates_seem_slow(monkeypatch):
    """The chunk writer's worker takes over after the first create."""
    monkeypatch.setattr(chunk_writer, 'TIMED_CREATES', 1)
    monkeypatch.setattr(chunk_writer, 'SLOW_CREATE', -1)


@pytest.mark.parametrize('slow_create', [False, True])
def test_name_taken_while_writing_behind_stops_without_harming_it(
        tmp_path, monkeypatch, slow_create):
    """Another process creates the next name after our directory listing:
    the create stays exclusive, its put (created in line) or the next
    flush (by the worker, where creates are slow) raises ChunkFileTaken,
    and cleaning up (remove) leaves the other process's file alone."""
    if slow_create:
        creates_seem_slow(monkeypatch)
    fs = local_repo_fs(tmp_path)
    store = ChunkStore(fs, rng=FixedStarts(0x30000))
    store.write_behind(True)
    first = store.put(b'ours')
    other = obnamlib.vfs.local.LocalFS(str(tmp_path))
    second = first + 1
    other.create_file(idpath(second), b'theirs')
    with pytest.raises(chunk_writer.ChunkFileTaken) as info:
        assert store.put(b'ours too') == second
        assert store.background.threads
        store.flush()
    assert str(info.value) == (
        '%s: Chunk file %s was created by another program at the same '
        'time; the backup stopped without committing the files it was '
        'storing: run it again' % (info.value.code, idpath(second)))
    assert isinstance(info.value, errors.ObnamError)
    store.remove(second)
    store.remove(first)
    assert other.read_file(idpath(second)) == b'theirs'
    assert not fs.exists(idpath(first))
    store.flush()           # reported once


@pytest.mark.parametrize('make_writer', [
    lambda: chunk_writer.ChunkWriter(),
    lambda: chunk_writer.BatchChunkWriter(
        lambda items: [FileExistsError(17, 'File exists', where)
                       for _, where in items])])
def test_only_the_chunk_file_itself_existing_is_a_name_taken(make_writer):
    """FileExistsError for a directory on the way (a file in its place:
    a damaged repository) is that error, not ChunkFileTaken."""
    path = 'chunks/24/0/0/30000'
    for where, expected in (('/r/' + path, chunk_writer.ChunkFileTaken),
                            ('/r/chunks/24', FileExistsError)):
        writer = make_writer()

        def create(path, data):
            raise FileExistsError(17, 'File exists', data)
        writer.submit(path, where, create)
        with pytest.raises(expected):
            writer.flush()
        assert writer.has_failed(path)
        writer.close()


@pytest.mark.parametrize('slow_create', [False, True])
def test_write_error_is_raised_by_its_put_or_the_next(tmp_path, monkeypatch,
                                                      slow_create):
    """In line at once; from the worker (slow creates) by the next put."""
    if slow_create:
        creates_seem_slow(monkeypatch)
    fs = local_repo_fs(tmp_path)
    store = ChunkStore(fs, rng=FixedStarts(0x40000))
    store.write_behind(True)
    store.put(b'x')
    store.flush()
    # The chunk's directory turns into a file: every create there fails.
    chunk_dir = os.path.dirname(os.path.join(str(tmp_path),
                                             idpath(0x40001)))
    for name in os.listdir(chunk_dir):
        os.remove(os.path.join(chunk_dir, name))
    os.rmdir(chunk_dir)
    with open(chunk_dir, 'wb'):
        pass
    with pytest.raises(OSError) as info:
        store.put(b'y')
        store.background.wait()
        store.put(b'z')
    assert info.value.errno in (20, 17)      # ENOTDIR / EEXIST from mkdir


def test_stopping_write_behind_waits_and_forgets_failures(tmp_path,
                                                         monkeypatch):
    creates_seem_slow(monkeypatch)
    fs = local_repo_fs(tmp_path)
    store = ChunkStore(fs, rng=FixedStarts(0x50000))
    store.write_behind(True)
    chunk_id = store.put(b'a')
    obnamlib.vfs.local.LocalFS(str(tmp_path)).create_file(
        idpath(chunk_id + 1), b'theirs')
    store.put(b'b')
    store.write_behind(False)
    assert store.writer is None
    assert stored(tmp_path, chunk_id) == b'a'
    store.flush()
    assert store.put(b'c') == chunk_id + 2     # synchronous again
    assert stored(tmp_path, chunk_id + 2) == b'c'


def test_parse_chunk_name_ignores_temporary_files():
    name = os.path.basename(obnamlib.vfs.local.temp_name('/x'))
    assert chunk_store.parse_chunk_name(name) is None
    assert chunk_store.parse_chunk_name('1f') == 0x1f


def test_backup_session_writes_behind_and_commit_waits(tmp_path):
    """Chunks put while a client is locked are written behind; the
    client's commit waits for them, so a reader opened after the commit
    finds every chunk the generation names."""
    url = str(tmp_path / 'repo')
    repo = new_repository(url, 'c')
    repo.lock_client('c')
    assert repo.chunks.writer is not None
    gen = repo.create_generation('c')
    from tests.obnamlib.repo_interface_conformance import file_md
    contents = [os.urandom(3000) for _ in range(50)]
    ids = [repo.put_chunk_content(data) for data in contents]
    repo.set_metadata(gen, b'/f', file_md(size=150000))
    repo.set_file_chunk_ids(gen, b'/f', ids)
    repo.commit_client('c')
    assert repo.chunks.writer is None
    if obnamlib.vfs.local.LocalFS(str(tmp_path)).spread_subdirectories('p'):
        from tests.obnamlib.vfs.test_local import directory_flags
        assert directory_flags(os.path.join(url, 'chunks')) & \
            obnamlib.vfs.local._FS_TOPDIR_FL
    reader = repo_factory.open_repository(url=url)
    [gen] = reader.get_generation_ids('c')
    assert [reader.get_chunk_content(i)
            for i in reader.get_file_chunk_ids(gen, b'/f')] == contents
    repo.close()


def test_put_chunk_content_takes_the_callers_md5(tmp_path):
    import hashlib
    repo = repo_factory.open_repository(url=str(tmp_path / 'r'), create=True,
                                        lock_timeout=0)
    data = b'some chunk'
    chunk_id = repo.put_chunk_content(data, md5_digest=hashlib.md5(data)
                                      .digest())
    assert repo.find_chunk_ids_by_md5(hashlib.md5(data).digest()) == \
        [chunk_id]
    assert repo.find_chunk_ids_by_content(data) == [chunk_id]
    repo.close()


def test_removing_an_own_chunk_that_was_never_created_lists_nothing(
        tmp_path, monkeypatch):
    """Clean-up after a failed create: no walk of the whole chunk tree
    (over SFTP, a round trip per directory)."""
    store = ChunkStore(local_repo_fs(tmp_path), rng=FixedStarts(0x5000))
    chunk_id = store.put(b'data')
    os.remove(os.path.join(str(tmp_path), idpath(chunk_id)))

    def no_walk():
        raise AssertionError('the chunk tree was walked')

    monkeypatch.setattr(store, '_walk', no_walk)
    store.remove(chunk_id)


@pytest.mark.parametrize('count', [1, chunk_writer.WAKE_AT - 1,
                                   chunk_writer.WAKE_AT,
                                   3 * chunk_writer.QUEUE_DEPTH + 1])
def test_writer_writes_every_file_in_order_once_waited_for(count):
    """Fewer files than wake the worker are written when someone waits;
    more than the queue holds make submit wait for room."""
    import threading
    writer = chunk_writer.ChunkWriter()
    made = []

    def create(path, data):
        made.append((path, data, threading.current_thread().name))
    try:
        for i in range(count):
            writer.submit('p%d' % i, b'%d' % i, create)
        writer.flush()
        assert not any(writer.is_pending('p%d' % i) for i in range(count))
    finally:
        writer.close()
    assert made == [('p%d' % i, b'%d' % i, 'chunk-writer')
                    for i in range(count)]
    assert writer.threads == []


@pytest.mark.timeout(60)
def test_several_writers_have_their_creates_in_flight_together():
    import threading
    workers = 4
    writer = chunk_writer.ChunkWriter(depth=16, wake_at=1, workers=workers)
    together = threading.Barrier(workers, timeout=20)
    made = []

    def create(path, data):
        together.wait()     # broken (raised at flush) if one at a time
        made.append((path, data))
    try:
        for i in range(3 * workers):
            writer.submit('p%d' % i, b'%d' % i, create)
        writer.flush()
    finally:
        writer.close()
    assert sorted(made) == sorted(('p%d' % i, b'%d' % i)
                                  for i in range(3 * workers))
    assert writer.threads == []


def test_several_writers_report_a_failure_and_name_the_failed_file():
    writer = chunk_writer.ChunkWriter(depth=8, wake_at=1, workers=3)

    def create(path, data):
        if path == 'p5':
            raise OSError(28, 'No space left on device', path)
    try:
        with pytest.raises(OSError) as info:    # by a submit, or flush
            for i in range(10):
                writer.submit('p%d' % i, b'', create)
            writer.flush()
        assert info.value.errno == 28
        writer.wait()
        assert writer.has_failed('p5') and not writer.has_failed('p4')
    finally:
        writer.close()


def network_repo_fs(tmp_path):
    return repo_fs.RepositoryFS(local_fs_on(tmp_path, 'fuse.glusterfs'))


def test_a_network_mount_gets_several_writers_and_batched_reads(tmp_path):
    fs = network_repo_fs(tmp_path)
    store = ChunkStore(fs, rng=FixedStarts(0x9000))
    store.write_behind(True)
    assert store.background.workers == chunk_store.PARALLEL_CREATES
    assert fs.reads_in_batches
    ids = [store.put(b'chunk %d' % i) for i in range(100)]
    store.flush()
    assert [stored(tmp_path, i) for i in ids] == \
        [b'chunk %d' % i for i in range(100)]
    reader = ChunkStore(network_repo_fs(tmp_path))
    reader.prefetch(ids)
    assert len(reader.fetched) == min(100, reader.fetched.max_chunks)
    assert [reader.get(i) for i in ids] == [b'chunk %d' % i
                                            for i in range(100)]


@pytest.mark.parametrize('fstype, prefetches', [
    ('ext4', True), ('fuse.glusterfs', True), ('tmpfs', False)])
def test_prefetch_does_something_except_for_a_plain_store_in_memory(
        tmp_path, fstype, prefetches):
    fs = repo_fs.RepositoryFS(local_fs_on(tmp_path, fstype))
    assert fs.can_read_ahead is prefetches
    assert ChunkStore(fs).prefetches is prefetches
    repo = RepositoryFormat6(fs)
    assert (repo_interface.PREFETCHES_CHUNKS in repo.capabilities) is \
        prefetches


def test_a_local_disk_keeps_one_writer(tmp_path):
    store = ChunkStore(local_repo_fs(tmp_path))
    store.write_behind(True)
    assert store.background.workers == 1


def test_ids_in_ranges_walks_the_store_once_for_all_wide_ranges(
        tmp_path, monkeypatch):
    store = ChunkStore(local_repo_fs(tmp_path),
                       rng=FixedStarts(0x5000, 0x9000000))
    low = [store.put(b'%d' % i) for i in range(3)]
    store.next_id = None
    high = [store.put(b'high')]
    walks = []
    ids = store.ids
    monkeypatch.setattr(store, 'ids', lambda: walks.append(1) or ids())
    everything = (0, 2 ** 64 - 1)
    assert store.ids_in_ranges([everything, (0x5001, 0x5002), everything,
                                (0x5000, 2 ** 63)]) == [
        low + high, low[1:], low + high, low + high]
    assert len(walks) == 1


class StepClock:
    """A clock that moves `step` seconds at each reading: every create
    then takes `step`."""

    def __init__(self, step):
        self.step = step
        self.now = 0.0

    def __call__(self):
        self.now += self.step
        return self.now


def in_line_writer(create_seconds):
    return chunk_writer.ChunkWriter(in_line_while_fast=True,
                                    clock=StepClock(create_seconds))


def test_fast_creates_are_made_in_the_callers_thread():
    import threading
    writer = in_line_writer(chunk_writer.SLOW_CREATE / 2)
    made = []

    def create(path, data):
        made.append((path, threading.current_thread().name))
    count = 3 * chunk_writer.TIMED_CREATES
    for i in range(count):
        writer.submit('p%d' % i, b'', create)
        assert not writer.is_pending('p%d' % i)
    writer.flush()
    writer.close()
    assert made == [('p%d' % i, 'MainThread') for i in range(count)]


def test_slow_creates_go_to_the_worker_after_a_timed_block():
    import threading
    writer = in_line_writer(chunk_writer.SLOW_CREATE * 2)
    made = []

    def create(path, data):
        made.append((path, data, threading.current_thread().name))
    count = chunk_writer.TIMED_CREATES + 10
    try:
        for i in range(count):
            writer.submit('p%d' % i, b'%d' % i, create)
        writer.flush()
    finally:
        writer.close()
    timed = chunk_writer.TIMED_CREATES
    assert made == [('p%d' % i, b'%d' % i,
                     'MainThread' if i < timed else 'chunk-writer')
                    for i in range(count)]


def test_a_name_taken_meanwhile_stops_an_in_line_create_at_once():
    writer = in_line_writer(0)

    def create(path, data):
        raise FileExistsError(17, 'File exists', path)
    with pytest.raises(chunk_writer.ChunkFileTaken):
        writer.submit('chunks/0/1', b'', create)
    assert writer.has_failed('chunks/0/1')


def test_an_in_line_create_error_is_raised_by_its_submit():
    writer = in_line_writer(0)

    def create(path, data):
        raise OSError(28, 'No space left on device', path)
    with pytest.raises(OSError) as info:
        writer.submit('p', b'', create)
    assert info.value.errno == 28
    writer.flush()      # nothing else to report



def test_only_small_files_creates_are_timed():
    """A big file's create takes the time its size does: it is made in
    line, and its time says nothing about the filesystem."""
    import threading
    writer = in_line_writer(chunk_writer.SLOW_CREATE * 2)
    made = []

    def create(path, data):
        made.append(threading.current_thread().name)
    big = b'x' * chunk_writer.TIMED_BELOW
    try:
        for i in range(2 * chunk_writer.TIMED_CREATES):
            writer.submit('big%d' % i, big, create)
        assert writer.threads == []
        for i in range(chunk_writer.TIMED_CREATES + 1):
            writer.submit('small%d' % i, b'', create)
        writer.flush()
    finally:
        writer.close()
    assert set(made[:-1]) == {'MainThread'} and made[-1] == 'chunk-writer'


def test_a_few_stalled_creates_leave_them_in_line():
    """Under half a block of slow creates (a busy machine's stalls) does
    not hand the files to the worker."""
    times = iter([0, 1] * (chunk_writer.TIMED_CREATES // 2 - 1) +
                 [0, chunk_writer.SLOW_CREATE / 2] *
                 (chunk_writer.TIMED_CREATES // 2 + 1))
    writer = chunk_writer.ChunkWriter(in_line_while_fast=True,
                                      clock=lambda: next(times))
    for i in range(chunk_writer.TIMED_CREATES):
        writer.submit('p%d' % i, b'', lambda path, data: None)
    assert writer.threads == [] and writer.timer is not None
