"""Cutting a file's content into fixed-size chunks.

Format 6 stores a regular file as consecutive pieces of `chunk-size` bytes
(format-6.md §8); the last piece may be shorter.  Reading is the hot path of
a first backup, so the file is read in whole chunks, the kernel is told we
read sequentially and will not need the pages again, and holes of sparse
files are not read at all where the OS tells us where they are (SEEK_DATA):
a chunk that lies wholly in a hole is produced as zeros without a read.
"""

import errno
import os


_zero_cache = {}


def zeros(size):
    """A shared all-zero bytes object of `size` bytes (hole chunks)."""
    data = _zero_cache.get(size)
    if data is None:
        if len(_zero_cache) > 4:
            _zero_cache.clear()
        data = _zero_cache[size] = bytes(size)
    return data


def is_all_zero(data):
    """True if data holds only NUL bytes (a hole); most data is told apart
    by its first or last byte, without a pass over it (bytes.count(0) was
    9% of a restore's time), and there is no allocation per call."""
    if not data:
        return True
    if data[:1] != b'\0' or data[-1:] != b'\0':
        return False
    return not data.strip(b'\0') if len(data) <= 4096 else (
        data == zeros(len(data)))


class ChunkReader:
    """Iterate over the chunks of an open file object.

    `fileobj` needs `read(n)`; if it also has `fileno()` (a local file) the
    reader advises the kernel and skips holes.  Reading goes on to EOF,
    whatever size the file had when it was scanned.

    `st`, the file's stat when it was scanned, if known, saves asking: a
    file whose blocks cover its size has no holes to look for (an fstat
    less), and a file smaller than a chunk is read with a buffer of its
    size, not of a chunk's (os.read allocates the whole buffer, and a
    megabyte allocated and shrunk per small file fragmented the heap: 60
    MB more peak RSS when files were read in a second thread).
    """

    def __init__(self, fileobj, chunk_size, advise=True, st=None,
                 size_ends=False):
        self.fileobj = fileobj
        self.chunk_size = chunk_size
        self.first_read = chunk_size if st is None else \
            max(1, min(chunk_size, st.st_size + 1))
        self.fd = _fileno(fileobj)
        # A first read that stops at the scanned size ends the file
        # without a read that meets EOF (size_ends: the caller asks
        # fstat afterwards whether it grew): a syscall less per small file.
        self.end_at = st.st_size if size_ends and st is not None and \
            self.fd is not None else None
        self.advise = advise and self.fd is not None
        # None: ask fstat first (most files have all their blocks, and
        # then two lseeks per chunk and an fstat at the end buy nothing)
        self.seek_holes = None if self.fd is not None else False
        if self.fd is not None and st is not None:
            self.seek_holes = _stat_may_be_sparse(st)
        self.offset = 0
        self.dense_until = 0      # [offset, dense_until) is known data
        self.hole_until = 0       # [offset, hole_until) is known hole
        self.eof = False          # a read came back empty

    def __iter__(self):
        self._advise(os.POSIX_FADV_SEQUENTIAL)
        try:
            while True:
                chunk = self._next_chunk()
                if not chunk:
                    return
                yield chunk
        finally:
            self._advise(os.POSIX_FADV_DONTNEED)

    def _next_chunk(self):
        if self.eof:
            return b''
        if self._in_hole():
            self.offset += self.chunk_size
            os.lseek(self.fd, self.offset, os.SEEK_SET)
            return zeros(self.chunk_size)
        if self.offset == 0 and self.first_read < self.chunk_size:
            data = self._read_full(self.first_read, self.end_at)
            if len(data) == self.first_read:    # it grew: a whole chunk
                data += self._read_full(self.chunk_size - len(data))
        else:
            data = self._read_full(self.chunk_size)
        self.offset += len(data)
        return data

    def _read_full(self, size, end_at=None):
        """size bytes, or fewer at the end of the file (then self.eof: a
        small file costs one read less); a short read of end_at bytes is
        taken for the end."""
        data = self.fileobj.read(size)
        if len(data) == size:
            return data
        if not data or len(data) == end_at:
            self.eof = True
            return data
        parts = [data]
        got = len(data)
        while got < size:
            more = self.fileobj.read(size - got)
            if not more:
                self.eof = True
                break
            parts.append(more)
            got += len(more)
        return b''.join(parts)

    def _in_hole(self):
        """Does the whole next chunk lie in a hole (ask the OS if unsure)?"""
        if self.seek_holes is None:
            self.seek_holes = _may_be_sparse(self.fd)
        if not self.seek_holes:
            return False
        end = self.offset + self.chunk_size
        if end <= self.hole_until:
            return True
        if end <= self.dense_until:
            return False
        try:
            data_at = os.lseek(self.fd, self.offset, os.SEEK_DATA)
            hole_at = os.lseek(self.fd, data_at, os.SEEK_HOLE)
        except OSError as e:
            if e.errno != errno.ENXIO:      # no hole support here
                self.seek_holes = False
                os.lseek(self.fd, self.offset, os.SEEK_SET)
                return False
            data_at = hole_at = os.fstat(self.fd).st_size    # trailing hole
        os.lseek(self.fd, self.offset, os.SEEK_SET)
        self.hole_until = data_at
        self.dense_until = hole_at
        return end <= self.hole_until and end <= _file_size(self.fd)

    def _advise(self, advice):
        if not self.advise:
            return
        try:
            os.posix_fadvise(self.fd, 0, 0, advice)
        except OSError:
            pass


def _file_size(fd):
    return os.fstat(fd).st_size


def _may_be_sparse(fd):
    """False if the file has as many blocks as bytes (no holes now)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return _stat_may_be_sparse(st)


def _stat_may_be_sparse(st):
    blocks = getattr(st, 'st_blocks', None)
    return blocks is None or blocks * 512 < st.st_size


def _fileno(fileobj):
    try:
        return fileobj.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def iter_chunks(fileobj, chunk_size, advise=True, st=None, size_ends=False):
    """The chunks of fileobj, each `chunk_size` bytes except the last.
    advise=False skips posix_fadvise (not worth a syscall for small files);
    st: the file's stat when it was scanned, if known; size_ends: a file
    with a file descriptor ends at st.st_size, if a read stops there
    (ChunkReader)."""
    return iter(ChunkReader(fileobj, chunk_size, advise, st, size_ends))
