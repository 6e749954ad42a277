"""Shared memory for the read replies of obnamlib.crypto.cipher_helper: the
decrypted contents of files read ahead are put in a ring buffer that
obnam and its helper both map, and only a short message naming where
goes through the pipe.

Why: through the pipe, each byte was copied into the pipe, out of it,
into the reader's buffer and out again, and a pipe of 1 MiB holds only
about fifty small chunks, so the two processes kept stopping and waking
each other.  Through the ring each side copies once, and up to
RING_BYTES of replies can wait for obnam without stopping the helper.

The protocol: the helper puts a reply of at most a quarter of the ring
at the next free place, going back to the start when it does not fit
before the end, and names it (start, end, mark); mark counts every byte
of the ring used so far, skipped ones included.  Obnam copies the reply
out, and whenever it has taken an eighth of the ring since it last said
so, it sends ('release', mark): the helper may reuse everything before
mark.  This cannot deadlock: when obnam waits for a reply, it has taken
every reply sent, so less than an eighth of the ring is held, and a
reply (a quarter at most, plus at most as much skipped) fits.  And the
helper always reads the releases: obnam takes every reply due before it
sends data to be encrypted (CipherProcess.create), so the helper's
inbox is never full of such data while a reply waits for room.
"""

import mmap
import os
import threading

RING_BYTES = 5 << 20
_MFD_CLOEXEC = getattr(os, 'MFD_CLOEXEC', 1)
# Linux 6.3 and later warn about (or refuse) a memfd that could be run.
_MFD_NOEXEC_SEAL = 8


def new_ring(size=None):
    """(fd, shared map) of a new ring, or None where the system cannot
    make one (no memfd): replies then go through the pipe."""
    size = RING_BYTES if size is None else size
    create = getattr(os, 'memfd_create', None)
    if create is None:
        return None
    fd = None
    for flags in (_MFD_CLOEXEC | _MFD_NOEXEC_SEAL, _MFD_CLOEXEC):
        try:
            fd = create('obnam-replies', flags)
            break
        except OSError:     # EINVAL: a kernel before 6.3 (no NOEXEC_SEAL)
            continue
    if fd is None:
        return None
    try:
        os.ftruncate(fd, size)
        return fd, mmap.mmap(fd, size)
    except (OSError, ValueError):
        os.close(fd)
        return None


class RingReader:
    """Obnam's end: replies taken in the order they were put."""

    def __init__(self, shared):
        self.shared = shared
        self.size = len(shared)
        self.taken = 0          # mark of the last reply taken
        self.released = 0       # mark last sent to the helper

    def take(self, start, end, mark):
        """(the reply's bytes, the mark to release now or None)."""
        data = self.shared[start:end]
        self.taken = mark
        if self.taken - self.released < self.size // 8:
            return data, None
        self.released = self.taken
        return data, self.released

    def close(self):
        self.shared.close()


class RingWriter:
    """The helper's end.  put() is called by the working thread; release()
    and stop() by the thread reading obnam's requests."""

    def __init__(self, shared):
        self.shared = shared
        self.size = len(shared)
        self.mark = 0           # bytes of the ring used so far
        self.released = 0       # obnam is done with what is before this
        self.stopping = False
        self.changed = threading.Condition()

    def fits(self, size):
        return size <= self.size // 4

    def put(self, data):
        """(start, end, mark) of data put in the ring, once there is room;
        BrokenPipeError if obnam stops first (it wants no more replies)."""
        size = len(data)
        start = self.mark % self.size
        mark = self.mark
        if start + size > self.size:
            mark += self.size - start
            start = 0
        if mark + size - self.released > self.size:
            self._wait_for_room(mark + size - self.size)
        self.shared[start:start + size] = data
        self.mark = mark + size
        return start, start + size, self.mark

    def _wait_for_room(self, needed):
        with self.changed:
            while self.released < needed:
                if self.stopping:
                    raise BrokenPipeError('obnam stopped taking replies')
                self.changed.wait()

    def release(self, mark):
        with self.changed:
            self.released = mark
            self.changed.notify_all()

    def stop(self):
        with self.changed:
            self.stopping = True
            self.changed.notify_all()
