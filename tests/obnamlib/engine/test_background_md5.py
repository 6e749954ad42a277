"""An MD5 whose big pieces a worker thread hashes: the same digest as
hashing in line, small pieces kept in line when nothing waits, failures
raised where the digest is asked for."""

import concurrent.futures
import hashlib
import random
import threading

import pytest

from obnamlib.engine import background_md5


def pieces_of(sizes, seed=1):
    rng = random.Random(seed)
    return [rng.randbytes(size) for size in sizes]


class RecordingHasher:
    """An executor running each task at once, noting it (and its thread)."""

    def __init__(self):
        self.sizes = []
        self.real = concurrent.futures.ThreadPoolExecutor(1)

    def submit(self, work, data):
        self.sizes.append(len(data))
        return self.real.submit(work, data)

    def shutdown(self):
        self.real.shutdown()


def test_the_worker_gives_the_digest_of_hashing_in_line(monkeypatch):
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 100)
    pieces = pieces_of([300, 50, 1000, 100, 99, 400, 7])
    hasher = RecordingHasher()
    try:
        md5 = background_md5.BackgroundMD5(b'head', hasher)
        for data in pieces:
            md5.update(data)
        expected = hashlib.md5(b'head' + b''.join(pieces))
        assert md5.digest() == expected.digest()
        assert md5.hexdigest() == expected.hexdigest()
    finally:
        hasher.shutdown()
    assert 300 in hasher.sizes and 1000 in hasher.sizes


def test_small_pieces_stay_in_line_when_nothing_waits(monkeypatch):
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 100)
    hasher = RecordingHasher()
    try:
        md5 = background_md5.BackgroundMD5(hasher=hasher)
        for data in pieces_of([10, 20, 99]):
            md5.update(data)
        assert md5.done()
    finally:
        hasher.shutdown()
    assert hasher.sizes == []


def test_no_more_than_the_limit_waits_for_the_worker(monkeypatch):
    """The worker is held until the test lets it go: each update that
    would pass the limit waits, so at most the limit is ever pending."""
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 0)
    monkeypatch.setattr(background_md5, 'WORKER_AHEAD_BYTES', 250)
    gate = threading.Event()
    seen = []
    with concurrent.futures.ThreadPoolExecutor(1) as hasher:
        hasher.submit(lambda: gate.wait(timeout=10))
        md5 = background_md5.BackgroundMD5(hasher=hasher)
        md5.update(b'a' * 100)
        md5.update(b'b' * 100)
        seen.append(md5.pending_bytes)
        gate.set()
        md5.update(b'c' * 100)      # waits for the first to be done
        seen.append(md5.pending_bytes)
        assert md5.digest() == hashlib.md5(
            b'a' * 100 + b'b' * 100 + b'c' * 100).digest()
    assert seen[0] == 200 and seen[1] <= 250


def test_a_failure_in_the_worker_is_raised_by_digest(monkeypatch):
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 0)

    class Broken:
        def update(self, data):
            raise MemoryError('no room')

    with concurrent.futures.ThreadPoolExecutor(1) as hasher:
        md5 = background_md5.BackgroundMD5(hasher=hasher)
        md5.md5 = Broken()
        md5.update(b'x' * 10)
        with pytest.raises(MemoryError):
            md5.digest()


def test_on_one_core_there_is_no_worker(monkeypatch):
    monkeypatch.setattr(background_md5.os, 'sched_getaffinity',
                        lambda pid: {0})
    assert background_md5.new_hasher() is None


def test_with_two_cores_there_is_one_worker(monkeypatch):
    monkeypatch.setattr(background_md5.os, 'sched_getaffinity',
                        lambda pid: {0, 1})
    hasher = background_md5.new_hasher()
    try:
        assert hasher.submit(lambda data: threading.current_thread().name,
                             b'').result().startswith('obnam-md5')
    finally:
        hasher.shutdown()
