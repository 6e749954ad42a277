"""Chunking: fixed-size pieces, whole content, holes read as zeros."""

import io
import os

import pytest

from obnamlib.engine import chunker


def test_splits_into_fixed_size_pieces_with_short_tail():
    data = bytes(range(256)) * 40          # 10240 bytes
    chunks = list(chunker.iter_chunks(io.BytesIO(data), 4096))
    assert [len(c) for c in chunks] == [4096, 4096, 2048]
    assert b''.join(chunks) == data


def test_empty_file_has_no_chunks():
    assert list(chunker.iter_chunks(io.BytesIO(b''), 4096)) == []


def test_exact_multiple_has_no_empty_tail():
    data = b'a' * 8192
    assert [len(c) for c in chunker.iter_chunks(io.BytesIO(data), 4096)] == \
        [4096, 4096]


class Dribble:
    """A file object that returns at most 1000 bytes per read (like SFTP)."""

    def __init__(self, data):
        self.f = io.BytesIO(data)

    def read(self, n):
        return self.f.read(min(n, 1000))


def test_short_reads_still_give_full_chunks():
    data = os.urandom(10000)
    chunks = list(chunker.iter_chunks(Dribble(data), 4096))
    assert [len(c) for c in chunks] == [4096, 4096, 1808]
    assert b''.join(chunks) == data


def test_sparse_file_holes_come_back_as_zero_chunks(tmp_path):
    path = tmp_path / 'sparse'
    size = 64 * 1024
    with open(path, 'wb') as f:
        f.seek(3 * size)
        f.write(b'data' * 100)
        f.truncate(8 * size)
    with open(path, 'rb') as f:
        chunks = list(chunker.iter_chunks(f, size))
    content = path.read_bytes()
    assert b''.join(chunks) == content
    assert [len(c) for c in chunks] == [size] * 8
    # ext4/tmpfs report the holes: those chunks are not read at all.
    assert chunks[0] is chunker.zeros(size)
    assert chunks[7] is chunker.zeros(size)
    assert chunks[3].startswith(b'datadata')


def test_file_ending_inside_hole_has_exact_length(tmp_path):
    path = tmp_path / 'tail'
    with open(path, 'wb') as f:
        f.write(b'x' * 10)
        f.truncate(5000)
    with open(path, 'rb') as f:
        chunks = list(chunker.iter_chunks(f, 4096))
    assert b''.join(chunks) == b'x' * 10 + bytes(4990)


@pytest.mark.parametrize('data,expected', [
    (b'', True), (bytes(10), True), (bytes(100000), True),
    (bytes(99999) + b'\1', False), (b'\1' + bytes(10), False)])
def test_is_all_zero(data, expected):
    assert chunker.is_all_zero(data) is expected


class CountingFile:
    """A real local file that counts its read calls."""

    def __init__(self, path):
        self.f = open(path, 'rb', buffering=0)
        self.reads = 0

    def read(self, n):
        self.reads += 1
        return self.f.read(n)

    def fileno(self):
        return self.f.fileno()

    def close(self):
        self.f.close()


def counting_lseek(monkeypatch):
    calls = []
    real = os.lseek

    def lseek(fd, pos, how):
        calls.append(how)
        return real(fd, pos, how)
    monkeypatch.setattr(os, 'lseek', lseek)
    return calls


def test_small_file_takes_two_reads_and_no_seeks(tmp_path, monkeypatch):
    """The short read that ends the chunk already met the end of the file;
    a file with all its blocks has no holes to look for."""
    path = tmp_path / 'small'
    path.write_bytes(b'hello')
    seeks = counting_lseek(monkeypatch)
    f = CountingFile(path)
    assert list(chunker.iter_chunks(f, 4096)) == [b'hello']
    f.close()
    assert f.reads == 2
    assert seeks == []


def test_a_small_file_read_to_its_scanned_size_takes_one_read(tmp_path):
    """size_ends: the read that would only meet the end is not made (the
    caller's fstat sees a file that grew)."""
    path = tmp_path / 'small'
    path.write_bytes(b'hello')
    f = CountingFile(path)
    assert list(chunker.iter_chunks(f, 4096, st=os.lstat(path),
                                    size_ends=True)) == [b'hello']
    f.close()
    assert f.reads == 1


def test_a_small_file_longer_than_scanned_is_read_to_its_end(tmp_path):
    path = tmp_path / 'grew'
    path.write_bytes(b'hello')
    st = os.lstat(path)
    path.write_bytes(b'hello, world')
    f = CountingFile(path)
    assert b''.join(chunker.iter_chunks(f, 4096, st=st, size_ends=True)) \
        == b'hello, world'
    f.close()


def test_dense_file_is_read_without_hole_questions(tmp_path, monkeypatch):
    path = tmp_path / 'dense'
    data = os.urandom(3 * 4096)
    path.write_bytes(data)
    seeks = counting_lseek(monkeypatch)
    f = CountingFile(path)
    assert b''.join(chunker.iter_chunks(f, 4096)) == data
    f.close()
    assert f.reads == 4
    assert seeks == []


def test_sparse_file_asks_where_the_data_is(tmp_path, monkeypatch):
    path = tmp_path / 'sparse'
    with open(path, 'wb') as f:
        f.truncate(1024 * 1024)
        f.write(b'head')
    seeks = counting_lseek(monkeypatch)
    with open(path, 'rb') as f:
        chunks = list(chunker.iter_chunks(f, 64 * 1024))
    assert b''.join(chunks) == b'head' + bytes(1024 * 1024 - 4)
    assert os.SEEK_DATA in seeks
    assert chunks[-1] is chunker.zeros(64 * 1024)


class SizeRecordingFile(CountingFile):
    """CountingFile that also records how much each read asked for."""

    def __init__(self, path):
        super().__init__(path)
        self.asked = []

    def read(self, n):
        self.asked.append(n)
        return super().read(n)


def test_small_file_with_its_stat_is_read_with_a_buffer_of_its_size(
        tmp_path, monkeypatch):
    """Not a chunk-sized one (os.read allocates what is asked for); the
    scan's stat also answers whether there are holes: no fstat."""
    path = tmp_path / 'small'
    path.write_bytes(b'hello')
    fstats = []
    real_fstat = os.fstat
    monkeypatch.setattr(os, 'fstat',
                        lambda fd: fstats.append(fd) or real_fstat(fd))
    f = SizeRecordingFile(path)
    assert list(chunker.iter_chunks(f, 4096, st=os.stat(path))) == [b'hello']
    f.close()
    assert f.asked[0] == 6
    assert max(f.asked) < 4096
    assert fstats == []


def test_file_grown_since_its_stat_still_gives_full_chunks(tmp_path):
    path = tmp_path / 'grows'
    path.write_bytes(b'x' * 10)
    st = os.stat(path)
    data = os.urandom(5000)
    path.write_bytes(data)
    f = SizeRecordingFile(path)
    chunks = list(chunker.iter_chunks(f, 4096, st=st))
    f.close()
    assert [len(c) for c in chunks] == [4096, 904]
    assert b''.join(chunks) == data


def test_sparse_file_with_its_stat_still_skips_holes(tmp_path):
    path = tmp_path / 'sparse'
    with open(path, 'wb') as f:
        f.truncate(1024 * 1024)
        f.write(b'head')
    with open(path, 'rb') as f:
        chunks = list(chunker.iter_chunks(f, 64 * 1024, st=os.stat(path)))
    assert b''.join(chunks) == b'head' + bytes(1024 * 1024 - 4)
    assert chunks[-1] is chunker.zeros(64 * 1024)
