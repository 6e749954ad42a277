"""Reading and writing files with many READs or WRITEs in flight: whole
files in a few round trips, open files as pipelined streams."""

import errno
import os
from collections import deque

from obnamlib.vfs.sftp import codec
from obnamlib.vfs.sftp.codec import int64
from obnamlib.vfs.sftp.errors import stream_errors
from obnamlib.vfs.sftp.limits import CHUNK, READ_AHEAD, WRITES_IN_FLIGHT


def data_or_eof(fs, num, path):
    """A READ's data; b'' at the end of the file."""
    try:
        _, msg = fs._wait(num, path)
    except EOFError:
        return b''
    return msg.get_string()


def send_reads(fs, handle, start, size):
    """READs for [start, size) in flight: [(offset, request number)]."""
    return [(offset, fs._send(codec.CMD_READ, handle, int64(offset),
                              min(CHUNK, size - offset)))
            for offset in range(start, size, CHUNK)]


class Pieces:
    """A file's content as the READ replies brought it, joined once at
    the end (no copy at all when one reply held the whole file)."""

    __slots__ = ('pieces', 'size')

    def __init__(self):
        self.pieces = []
        self.size = 0

    def __len__(self):
        return self.size

    def __iadd__(self, piece):
        self.pieces.append(piece)
        self.size += len(piece)
        return self

    def __bytes__(self):
        return b''.join(self.pieces)


def collect_reads(fs, reads, data, path):
    """Append the replies that continue `data` (Pieces); after a short
    or empty one the rest are out of step and only drained."""
    in_step = True
    for offset, num in reads:
        piece = data_or_eof(fs, num, path)
        if in_step and offset == len(data) and piece:
            data += piece
            in_step = len(piece) == CHUNK
        else:
            in_step = False
    return data


def read_more(fs, handle, path, data, size):
    """Complete `data` up to `size` bytes (a server sending less per READ
    than asked, or a file that grew): round after round until EOF."""
    while len(data) < size:
        before = len(data)
        collect_reads(fs, send_reads(fs, handle, before, size), data, path)
        if len(data) == before:
            break
    return data


class PipelinedReader:
    """A read-only file that keeps up to READ_AHEAD requests in flight.

    The window starts at two requests (a small file's data and its EOF in
    one round trip) and doubles with every full reply, like TCP slow start.
    """

    def __init__(self, fs, handle, path):
        self.fs = fs
        self.handle = handle
        self.path = path
        self.pos = 0            # offset of the first byte not yet received
        self.next_offset = 0    # offset of the next READ to send
        self.pending = deque()
        self.buffer = bytearray()
        self.eof = False
        self.window = 2

    def _fill(self):
        while len(self.pending) < self.window and not self.eof:
            num = self.fs._send(codec.CMD_READ, self.handle,
                                int64(self.next_offset), CHUNK)
            self.pending.append((self.next_offset, num))
            self.next_offset += CHUNK

    def _receive_one(self):
        offset, num = self.pending.popleft()
        piece = data_or_eof(self.fs, num, self.path)
        if offset != self.pos:
            return      # after a short read: this one is out of step
        if not piece:
            self.eof = True
            return
        self.buffer += piece
        self.pos += len(piece)
        if len(piece) < CHUNK:
            self._after_short_read()
        else:
            self.window = min(READ_AHEAD, self.window * 2)

    def _after_short_read(self):
        """A short reply is the end of the file if the request after it
        got EOF (a small file: one round trip); otherwise the server sends
        less per READ, so drop the requests in flight and ask again from
        here."""
        following = []
        while self.pending:
            _, num = self.pending.popleft()
            following.append(data_or_eof(self.fs, num, self.path))
        if following and not following[0]:
            self.eof = True
        self.next_offset = self.pos

    @stream_errors
    def read(self, size=-1):
        while (size < 0 or len(self.buffer) < size) and not self.eof:
            self._fill()
            self._receive_one()
        if size < 0:
            size = len(self.buffer)
        result = bytes(self.buffer[:size])
        del self.buffer[:size]
        return result

    def close(self):
        if self.handle is None:
            return
        while self.pending:
            _, num = self.pending.popleft()
            try:
                data_or_eof(self.fs, num, self.path)
            except OSError:
                pass
        self.fs._close_handle(self.handle)
        self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class PipelinedWriter:
    """A write-only file with up to WRITES_IN_FLIGHT requests in flight."""

    def __init__(self, fs, handle, path, full):
        self.fs = fs
        self.handle = handle
        self.path = path
        self.full = full        # the path on the server
        self.offset = 0         # where the buffer starts in the file
        self.buffer = bytearray()
        self.pending = deque()

    @stream_errors
    def write(self, data):
        self.buffer += data
        while len(self.buffer) >= CHUNK:
            self._send(bytes(self.buffer[:CHUNK]))
            del self.buffer[:CHUNK]
        return len(data)

    @stream_errors
    def seek(self, pos, whence=os.SEEK_SET):
        """Move to `pos` (leaving a hole, for sparse files)."""
        self._flush()
        if whence == os.SEEK_CUR:
            pos += self.offset
        elif whence != os.SEEK_SET:
            raise OSError(errno.EINVAL, 'only SEEK_SET and SEEK_CUR')
        self.offset = pos
        return pos

    def tell(self):
        return self.offset + len(self.buffer)

    @stream_errors
    def truncate(self, size=None):
        """Set the file's size (in order with the writes before it)."""
        self._flush()
        size = self.offset if size is None else size
        self.pending.append(self.fs._send(codec.CMD_FSETSTAT, self.handle,
                                          codec.attrs(st_size=size)))
        return size

    def _flush(self):
        if self.buffer:
            self._send(bytes(self.buffer))
            self.buffer.clear()

    def _send(self, piece):
        num = self.fs._send(codec.CMD_WRITE, self.handle, int64(self.offset),
                            payload=piece)
        self.pending.append(num)
        self.offset += len(piece)
        if len(self.pending) > WRITES_IN_FLIGHT:
            self.fs._wait_writes([self.pending.popleft()], self.full,
                                 self.path)

    @stream_errors
    def close(self):
        if self.handle is None:
            return
        try:
            self._flush()
            nums = list(self.pending)
            self.pending.clear()
        finally:
            close = self.fs._close_handle(self.handle, wait=True)
            self.handle = None
        self.fs._wait_writes(nums + [close], self.full, self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
