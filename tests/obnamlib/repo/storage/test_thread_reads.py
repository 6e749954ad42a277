"""Files read ahead by threads for an unencrypted local repository."""

import threading

import pytest

import obnamlib.repo.storage.repo_fs
import obnamlib.vfs.local
from obnamlib.repo.storage import thread_reads


def reading(files, log=None):
    def read(path):
        if log is not None:
            log.append(path)
        data = files[path]
        if isinstance(data, Exception):
            raise data
        return data, len(data)
    return read


@pytest.fixture
def reads():
    made = []

    def make(read, **kwargs):
        made.append(thread_reads.ThreadReads(read, **kwargs))
        return made[-1]
    yield make
    for r in made:
        r.close()


def test_files_read_ahead_are_taken_once(reads):
    files = {'f%d' % i: b'%d' % i * 100 for i in range(100)}
    r = reads(reading(files))
    r.read_ahead(sorted(files))
    for path in sorted(files):
        assert r.take(path) == (files[path], len(files[path]))
    assert r.take('f1') is None


def test_a_file_not_asked_for_is_none(reads):
    r = reads(reading({}))
    assert r.take('x') is None


def test_a_failed_read_is_none_for_the_caller_to_meet(reads):
    r = reads(reading({'a': OSError('broken'), 'b': b'fine'}))
    r.read_ahead(['a', 'b'])
    assert r.take('a') is None
    assert r.take('b') == (b'fine', 4)


def test_files_asked_for_earlier_are_dropped_at_a_take(reads):
    files = {'a': b'1', 'b': b'2', 'c': b'3'}
    r = reads(reading(files))
    r.read_ahead(['a', 'b', 'c'])
    assert r.take('b') == (b'2', 1)
    assert r.take('a') is None
    assert r.take('c') == (b'3', 1)


def test_readers_stop_at_the_held_bytes_and_go_on_as_files_are_taken(
        reads, monkeypatch):
    monkeypatch.setattr(thread_reads, 'MAX_HELD_BYTES', 3000)
    files = {'f%02d' % i: bytes(1000) for i in range(40)}
    log = []
    r = reads(reading(files, log), threads=1)
    r.read_ahead(sorted(files))
    first = r.take('f00')
    assert first == (bytes(1000), 1000)
    # f01.. are read, at most three held at any time: the taker never
    # waits for a file the readers will not read
    for path in sorted(files)[1:]:
        assert r.take(path) == (bytes(1000), 1000)
        assert len(log) <= int(path[1:]) + 4
    assert log == sorted(files)


def test_at_most_max_ahead_files_are_asked_for(reads, monkeypatch):
    monkeypatch.setattr(thread_reads, 'MAX_AHEAD', 5)
    gate = threading.Event()

    def read(path):
        gate.wait()
        return b'x', 1
    r = reads(read)
    r.read_ahead(['f%d' % i for i in range(10)])
    gate.set()
    assert r.take('f4') == (b'x', 1)
    assert r.take('f5') is None


def repository_fs(tmp_path, **kwargs):
    base = obnamlib.vfs.local.LocalFS(str(tmp_path))
    return obnamlib.repo.storage.repo_fs.RepositoryFS(base, **kwargs)


@pytest.mark.parametrize('compress', [False, True])
def test_repository_fs_reads_ahead_in_threads_and_counts_at_take(
        tmp_path, compress):
    fs = repository_fs(tmp_path, compress=compress)
    paths = ['chunks/0/0/0/%x' % i for i in range(20)]
    for i, path in enumerate(paths):
        fs.write_file(path, b'chunk %d' % i * 50)
    stored = sum(len(fs.read_raw(path)) for path in paths)
    fs.bytes_read = 0
    try:
        fs.read_ahead(paths)
        assert fs._threads is not None
        assert [fs.read_file(path) for path in paths] == [
            b'chunk %d' % i * 50 for i in range(20)]
        assert fs.bytes_read == stored
    finally:
        fs.close()


def test_a_file_gone_after_its_read_ahead_failed_is_reported_by_read_file(
        tmp_path):
    fs = repository_fs(tmp_path)
    try:
        fs.read_ahead(['chunks/missing'])
        with pytest.raises(FileNotFoundError):
            fs.read_file('chunks/missing')
    finally:
        fs.close()


def test_storage_without_local_files_reads_in_line(tmp_path):
    class Remote(obnamlib.vfs.local.LocalFS):
        capabilities = frozenset()
    fs = obnamlib.repo.storage.repo_fs.RepositoryFS(Remote(str(tmp_path)))
    fs.write_file('chunks/a', b'a')
    fs.read_ahead(['chunks/a'])
    assert fs._threads is None
    assert fs.read_file('chunks/a') == b'a'



def test_several_readers_read_files_together(reads):
    """With READ_THREADS > 1, a read stuck on the disk does not hold up
    the files after it."""
    first_done = threading.Event()
    finished = []

    def read(path):
        if path == 'a':
            first_done.wait(timeout=30)     # a read stuck on the disk
        finished.append(path)
        return path.encode(), 1
    r = reads(read, threads=2)
    r.read_ahead(['a', 'b'])
    try:
        assert r.take('b') == (b'b', 1)
        assert finished == ['b']
    finally:
        first_done.set()
