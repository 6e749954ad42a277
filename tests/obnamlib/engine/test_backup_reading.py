"""Reading ahead: files read and hashed in a worker, taken in order, with
their errors where serial reading raised them."""

import errno
import hashlib
import os
import threading

import pytest

import obnamlib.errors
from tests.obnamlib.backup_helpers import FatalTestError
from obnamlib.engine import backup_reading


CHUNK = 4096


def md5(data):
    return hashlib.md5(data).digest()


class Files:
    """open_file for a ReadAhead: real files, with failures on demand."""

    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.opened = []
        self.fail_open = {}       # path -> exception
        self.fail_read_after = {}  # path -> (bytes, exception)

    def make(self, name, data):
        path = os.fsencode(self.dir / name)
        with open(path, 'wb') as f:
            f.write(data)
        return path, os.lstat(path)

    def __call__(self, path):
        self.opened.append(path)
        if path in self.fail_open:
            raise self.fail_open[path]
        f = open(path, 'rb', buffering=0)
        if path in self.fail_read_after:
            return FailingRead(f, *self.fail_read_after[path])
        return f


class FailingRead:
    def __init__(self, f, after, error):
        self.f = f
        self.left = after
        self.error = error

    def read(self, n):
        if self.left <= 0:
            raise self.error
        data = self.f.read(min(n, self.left))
        self.left -= len(data)
        return data

    def close(self):
        self.f.close()


@pytest.fixture
def files(tmp_path):
    return Files(tmp_path)


def reader_for(files, budget=backup_reading.READ_AHEAD_BYTES, digest=md5):
    reader = backup_reading.ReadAhead(files, digest, CHUNK, budget)
    return reader


def test_files_come_back_in_order_as_hashed_chunks(files):
    contents = [os.urandom(n) for n in (0, 10, CHUNK, 3 * CHUNK + 5)]
    made = [files.make('f%d' % i, data) for i, data in enumerate(contents)]
    reader = reader_for(files)
    try:
        for path, st in made:
            reader.submit(path, st)
        for (path, _), data in zip(made, contents):
            taken = reader.take(path)
            pieces = list(taken)
            assert b''.join(c for c, _ in pieces) == data
            assert all(d == md5(c) for c, d in pieces)
            assert all(len(c) == CHUNK for c, _ in pieces[:-1])
            assert not taken.changed()
            assert taken.whole_digest() == md5(data)
    finally:
        reader.close()
    assert files.opened == [path for path, _ in made]


def test_a_file_not_submitted_is_not_taken(files):
    path, st = files.make('a', b'x')
    reader = reader_for(files)
    try:
        assert reader.take(path) is None
    finally:
        reader.close()


def test_asking_for_a_file_not_submitted_keeps_the_queue(files):
    """The small files between the big ones are read by the caller."""
    a = files.make('a', b'a' * 100)
    small = files.make('small', b's')
    b = files.make('b', b'b' * 100)
    reader = reader_for(files)
    try:
        reader.submit(*a)
        reader.submit(*b)
        assert [c for c, _ in reader.take(a[0])] == [b'a' * 100]
        assert reader.take(small[0]) is None
        assert [c for c, _ in reader.take(b[0])] == [b'b' * 100]
    finally:
        reader.close()
    assert files.opened == [a[0], b[0]]


def test_taking_a_later_file_drops_the_ones_before(files):
    a = files.make('a', b'a' * 100)
    b = files.make('b', b'b' * 100)
    reader = reader_for(files)
    try:
        reader.submit(*a)
        reader.submit(*b)
        assert [c for c, _ in reader.take(b[0])] == [b'b' * 100]
        assert reader.take(a[0]) is None
        assert reader.ahead == 0
    finally:
        reader.close()


def test_open_error_comes_before_any_chunk(files):
    path, st = files.make('locked', b'secret')
    files.fail_open[path] = PermissionError(errno.EACCES, 'denied', path)
    after, after_st = files.make('after', b'fine')
    reader = reader_for(files)
    try:
        reader.submit(path, st)
        reader.submit(after, after_st)
        with pytest.raises(PermissionError):
            next(iter(reader.take(path)))
        assert [c for c, _ in reader.take(after)] == [b'fine']
    finally:
        reader.close()


def test_read_error_comes_after_the_chunks_read_before_it(files):
    data = os.urandom(3 * CHUNK)
    path, st = files.make('bad', data)
    files.fail_read_after[path] = (2 * CHUNK, OSError(errno.EIO, 'EIO'))
    reader = reader_for(files)
    got = []
    try:
        reader.submit(path, st)
        with pytest.raises(OSError) as caught:
            for chunk, _ in reader.take(path):
                got.append(chunk)
    finally:
        reader.close()
    assert caught.value.errno == errno.EIO
    assert b''.join(got) == data[:2 * CHUNK]


def test_a_file_that_changed_since_its_stat_says_so(files):
    path, st = files.make('grew', b'short')
    with open(path, 'ab') as f:
        f.write(b' and longer')
    reader = reader_for(files)
    try:
        reader.submit(path, st)
        taken = reader.take(path)
        assert b''.join(c for c, _ in taken) == b'short and longer'
        assert taken.changed()
    finally:
        reader.close()


class GrowsAfterReading:
    """A local file that another program extends right after our first
    read of it."""

    def __init__(self, path):
        self.f = open(path, 'rb', buffering=0)
        self.path = path

    def read(self, n):
        data = self.f.read(n)
        with open(self.path, 'ab') as f:
            f.write(b'+')
        return data

    def fileno(self):
        return self.f.fileno()

    def close(self):
        self.f.close()


def test_a_file_that_grew_after_a_read_reached_its_size_says_so(files):
    """No read is made to meet the end of a file read to its scanned
    size: the fstat at the end sees that it grew."""
    path, st = files.make('grows', b'exactly')
    f = GrowsAfterReading(path)
    chunks = backup_reading.LiveChunks(f, st, CHUNK)
    assert list(chunks) == [b'exactly']
    assert chunks.changed()
    f.close()


def test_no_more_than_the_budget_is_read_ahead(files):
    """The main thread takes slowly: what the worker holds never grows
    past the budget and one chunk."""
    data = os.urandom(20 * CHUNK)
    path, st = files.make('big', data)
    reader = reader_for(files, budget=2 * CHUNK)
    seen = []
    try:
        reader.submit(path, st)
        got = []
        for chunk, _ in reader.take(path):
            seen.append(reader.ahead)
            got.append(chunk)
    finally:
        reader.close()
    assert b''.join(got) == data
    assert max(seen) <= 2 * CHUNK


def test_after_an_error_that_ends_the_run_no_more_files_are_opened(files):
    made = [files.make('f%d' % i, b'%d' % i) for i in range(4)]
    files.fail_open[made[1][0]] = FatalTestError()
    reader = reader_for(files)
    try:
        for path, st in made:
            reader.submit(path, st)
        assert [c for c, _ in reader.take(made[0][0])] == [b'0']
        for path, _ in made[1:]:
            with pytest.raises(FatalTestError):
                list(reader.take(path))
    finally:
        reader.close()
    assert files.opened == [made[0][0], made[1][0]]


def test_close_stops_the_worker_with_files_not_taken(files):
    made = [files.make('f%d' % i, os.urandom(3 * CHUNK)) for i in range(3)]
    reader = reader_for(files, budget=CHUNK)
    for path, st in made:
        reader.submit(path, st)
    thread = reader.thread
    reader.close()
    assert not thread.is_alive()
    assert reader.ahead == 0


def test_close_after_an_interrupted_start_does_not_fail(files, monkeypatch):
    """Ctrl-C can come while the worker is being started; the clean-up
    that follows must not fail on a thread that never ran."""
    path, st = files.make('f', b'x' * CHUNK)
    reader = reader_for(files)

    def interrupted(thread):
        raise KeyboardInterrupt()

    monkeypatch.setattr(backup_reading.threading.Thread, 'start',
                        interrupted)
    with pytest.raises(KeyboardInterrupt):
        reader.submit(path, st)
    reader.close()
    assert reader.thread is None


def test_close_after_ctrl_c_left_the_lock_held_does_not_hang(
        files, monkeypatch):
    """A Ctrl-C between taking the lock and entering `with` leaves the
    lock held by the main thread: the worker, wanting it to hand over a
    chunk, can never stop; close() leaves it behind."""
    monkeypatch.setattr(backup_reading, 'STOP_WAIT', 0.2)
    path, st = files.make('f', os.urandom(3 * CHUNK))
    reader = reader_for(files, budget=CHUNK)
    reader.cond.acquire()           # what the interrupted `with` left
    reader.submit(path, st)         # the main thread may take it again
    thread = reader.thread
    reader.close()
    assert thread.is_alive()        # waiting for the lock, for good
    reader.cond.release()           # (not in a real run: it ends now)
    thread.join()


class RecordedWhole(backup_reading.WholeFileDigest):
    """WholeFileDigest noting which thread added each chunk; `fail_at`
    (an add's number) raises there."""

    adders = []
    added = None          # threading.Condition, set by the fixture
    fail_at = None
    failure = None        # the exception class raised there

    def add(self, chunk, digest):
        with RecordedWhole.added:
            if len(RecordedWhole.adders) == RecordedWhole.fail_at:
                raise RecordedWhole.failure()
            RecordedWhole.adders.append(threading.current_thread().name)
            RecordedWhole.added.notify_all()
        super().add(chunk, digest)

    @classmethod
    def wait_for(cls, count):
        """Until count adds were made (a hang fails after 10 s)."""
        with cls.added:
            assert cls.added.wait_for(
                lambda: len(cls.adders) >= count, timeout=10)


class WholeFailed(Exception):
    pass


@pytest.fixture
def recorded(monkeypatch):
    monkeypatch.setattr(RecordedWhole, 'adders', [])
    monkeypatch.setattr(RecordedWhole, 'added', threading.Condition())
    monkeypatch.setattr(RecordedWhole, 'failure', WholeFailed)
    monkeypatch.setattr(backup_reading, 'WholeFileDigest', RecordedWhole)
    return RecordedWhole


def test_the_main_thread_hashes_the_whole_file_while_it_waits(
        files, recorded):
    """The worker's third chunk waits until two chunks are in the whole
    file's MD5: only the main thread, waiting for that chunk, can put
    them there."""
    data = os.urandom(3 * CHUNK)
    path, st = files.make('big', data)

    def digest(chunk):
        if chunk == data[2 * CHUNK:]:
            recorded.wait_for(2)
        return md5(chunk)

    reader = reader_for(files, digest=digest)
    try:
        reader.submit(path, st)
        taken = reader.take(path)
        assert b''.join(c for c, _ in taken) == data
        assert taken.whole_digest() == md5(data)
    finally:
        reader.close()
    assert recorded.adders[:2] == ['MainThread', 'MainThread']


def test_the_worker_hashes_the_whole_file_while_its_budget_is_full(
        files, recorded):
    made = [files.make(name, os.urandom(3 * CHUNK)) for name in 'ab']
    reader = reader_for(files, budget=CHUNK)
    try:
        for path, st in made:
            reader.submit(path, st)
        recorded.wait_for(1)
        assert recorded.adders == ['backup-reader']
        for path, _ in made:
            taken = reader.take(path)
            data = b''.join(c for c, _ in taken)
            assert taken.whole_digest() == md5(data)
            assert data == open(path, 'rb').read()
    finally:
        reader.close()
    assert reader.ahead == 0


def test_a_failure_to_hash_the_whole_file_is_raised_for_it(
        files, recorded, monkeypatch):
    data = os.urandom(3 * CHUNK)
    path, st = files.make('big', data)
    monkeypatch.setattr(recorded, 'fail_at', 1)
    reader = reader_for(files)
    try:
        reader.submit(path, st)
        taken = reader.take(path)
        assert b''.join(c for c, _ in taken) == data
        with pytest.raises(WholeFailed):
            taken.whole_digest()
    finally:
        reader.close()


def test_ctrl_c_while_the_main_thread_hashes_is_not_held_back(
        files, recorded, monkeypatch):
    """A KeyboardInterrupt met while the main thread adds chunks to the
    whole-file MD5 (waiting for the worker) stops the file at once, not
    after its last chunk."""
    data = os.urandom(3 * CHUNK)
    path, st = files.make('big', data)
    gate = threading.Event()
    monkeypatch.setattr(recorded, 'fail_at', 1)
    monkeypatch.setattr(recorded, 'failure', KeyboardInterrupt)

    def digest(chunk):
        if chunk == data[2 * CHUNK:]:
            assert gate.wait(timeout=10)
        return md5(chunk)

    reader = reader_for(files, digest=digest)
    try:
        reader.submit(path, st)
        with pytest.raises(KeyboardInterrupt):
            list(reader.take(path))
    finally:
        gate.set()
        reader.close()
    assert recorded.adders == ['MainThread']
