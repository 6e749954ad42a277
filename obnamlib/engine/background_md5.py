"""An MD5 digest of content fed in order, its big pieces hashed by a
worker thread while the caller goes on reading or writing.

hashlib lets go of the GIL for big buffers, so a second thread hashes
them on the second core.  Small pieces cost more in thread hand-offs than
they save and are hashed in the caller's thread, unless the worker still
has pieces to add before them (the order of the pieces is the digest's).
fsck's whole-file checks and restore's file checksums use it.
"""

import collections
import concurrent.futures
import hashlib
import os

# Pieces at least this big are hashed in the worker thread.
BACKGROUND_HASH_BYTES = 256 * 1024
# Bytes that may wait for the worker, at most (the caller then waits).
WORKER_AHEAD_BYTES = 8 * 1024 * 1024


def new_hasher():
    """An executor with the one worker thread, or None on one core (the
    caller then hashes everything itself).  The caller shuts it down."""
    if len(os.sched_getaffinity(0)) > 1:
        return concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix='obnam-md5')
    return None


class BackgroundMD5:
    """MD5 of the pieces given to update(), in order.

    hasher: new_hasher()'s executor (shared by every digest of a run), or
    None: all pieces are hashed here."""

    def __init__(self, data=b'', hasher=None):
        self.md5 = hashlib.md5(data)
        self.hasher = hasher
        self.pending = collections.deque()  # (the worker's task, bytes)
        self.pending_bytes = 0

    def update(self, data):
        if self.hasher is not None and (
                self.pending or len(data) >= BACKGROUND_HASH_BYTES):
            self.submit(self.md5.update, data)
        else:
            self.md5.update(data)

    def submit(self, work, data):
        """work(data) in the worker, after what was given it before; its
        future.  Waits while too much is waiting already."""
        self.wait(WORKER_AHEAD_BYTES - len(data))
        future = self.hasher.submit(work, data)
        self.pending.append((future, len(data)))
        self.pending_bytes += len(data)
        return future

    def done(self):
        """Whether the worker has nothing of this digest left to do."""
        self.drop_done()
        return not self.pending

    def drop_done(self):
        """Forget the tasks the worker has done (it does them in order)."""
        while self.pending and self.pending[0][0].done():
            self.pending_bytes -= self.pending.popleft()[1]

    def wait(self, room=0):
        """Until at most `room` bytes wait for the worker; a failure of
        its work is raised here."""
        while self.pending and self.pending_bytes > room:
            task, size = self.pending.popleft()
            self.pending_bytes -= size
            task.result()

    def digest(self):
        self.wait()
        return self.md5.digest()

    def hexdigest(self):
        self.wait()
        return self.md5.hexdigest()
