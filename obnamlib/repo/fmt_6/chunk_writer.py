"""Chunk files written behind the caller: one worker thread creates them
while the backup goes on reading, hashing and filling the B-tree (several
on a network or FUSE filesystem, where each create waits for a server).

On a local disk the kernel may spend 0.1-1 ms creating each file, which
was most of a first backup's time; where it is quicker than handing the
file over, the caller creates it (`in_line_while_fast`, SLOW_CREATE
below).  Nothing refers to a new chunk until a
commit, so the repository waits for this writer (`flush`) before each
commit: a committed tree never names a chunk file that was not written.

The storage (RepositoryFS) hands each create to `submit` after filtering
and counting it, so byte counts and checkpoints do not depend on timing.
A failed create is reported by the next `submit` or `flush`.  Chunk names
are chosen free (chunk_store lists each directory first), so
`FileExistsError` here means another process took the name at the same
moment: that path is remembered (`has_failed`) so that cleaning up never
deletes the other process's file.
"""

import collections
import logging
import threading
import time

from obnamlib import errors

# Files submitted and not yet written, at most (memory: this many chunks).
QUEUE_DEPTH = 16
# The worker is woken when this many files wait (or someone waits for
# it): a wakeup per file cost the caller a futex call and the worker a
# round of the GIL for each of a first backup's 56,000 chunk files.
WAKE_AT = 4

# Where creates are fast, the caller makes the files itself: a 20 KB
# chunk file costs 15 us on tmpfs and 30 us on ext4 with a journal, less
# than handing it to the worker (GIL hand-offs and wake-ups; a first
# backup of 1.1 GiB took 7.5-7.7 s so in memory against 8.9-9.3 s, and
# 9.5-9.7 s against 11.0-11.2 s on ext4; leaving only files of 64 KiB
# and more to the worker, 8.3-8.5 s and 9.7-10.5 s).  Files smaller than
# TIMED_BELOW are timed (a bigger one's time is its size's); once the
# median of a block of TIMED_CREATES is more than SLOW_CREATE (an aged ext4
# without a journal: 650 us, where the worker on the second core wins),
# the worker takes every file for the rest of the run.
TIMED_BELOW = 64 * 1024
SLOW_CREATE = 200e-6
TIMED_CREATES = 64


class ChunkFileTaken(errors.ObnamError):
    """Another process created the chunk file we were writing, between our
    directory listing and our exclusive create (chance about 2**-50 per
    pair of concurrent runs).  Nothing uncommitted is kept."""
    code = 'RC7F48X'
    msg = ('Chunk file {filename} was created by another program at the '
           'same time; the backup stopped without committing the files it '
           'was storing: run it again')


class ChunkWriter:
    """Exclusive creates in worker threads.

    submit(path, data, create): create(path, data) runs in a worker; it
    must be safe there while the caller's thread uses the same storage.
    One worker takes the files in groups of `wake_at` (all that wait when
    someone waits for it), writing them in the order submitted.  Several
    workers (for storage whose creates are round trips to a server,
    CREATES_IN_PARALLEL) take one file each, as it comes."""

    def __init__(self, depth=QUEUE_DEPTH, wake_at=WAKE_AT, workers=1,
                 in_line_while_fast=False, clock=time.perf_counter):
        self.workers = max(1, workers)
        self.timer = _CreateTimer(clock) if in_line_while_fast else None
        self.depth = depth
        self.wake_at = max(1, min(wake_at, depth))
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.items = collections.deque()    # (path, data, create) to take
        self.pending = set()      # paths submitted and not yet finished
        self.failed = set()       # paths whose create failed
        self.errors = []          # exceptions not yet raised to the caller
        self.waiters = 0          # callers blocked until the worker writes
        self.sleeping = 0         # workers waiting for files
        self.stopping = False
        self.threads = []

    def submit(self, path, data, create):
        """Queue one exclusive create; raises an earlier failure first."""
        self._raise_error()
        if self.timer is not None:
            self._create_in_line(path, data, create)
            return
        if not self.threads:
            self._start()
        with self.cond:
            self._wait_until(lambda: len(self.pending) < self.depth)
            self.pending.add(path)
            self.items.append((path, data, create))
            # (A busy worker takes this file when it is done.)
            if self.sleeping and self.workers > 1:
                self.cond.notify()      # one idle worker for this file
            elif self.sleeping and len(self.items) >= self.wake_at:
                self.cond.notify_all()

    def _create_in_line(self, path, data, create):
        """Create the file now, timed; ChunkFileTaken (the path kept as
        failed) if another process took the name."""
        start = self.timer.clock()
        try:
            create(path, data)
        except FileExistsError as e:
            if not _names_file(e, path):
                raise
            with self.lock:
                self.failed.add(path)
            raise ChunkFileTaken(filename=path)
        if len(data) < TIMED_BELOW and \
                self.timer.slow(self.timer.clock() - start):
            logging.debug('Chunk files are slow to create: a thread '
                          'creates them from now on')
            self.timer = None       # the worker from now on

    def _start(self):
        for _ in range(self.workers):
            thread = threading.Thread(
                target=self._work, name='chunk-writer', daemon=True)
            thread.start()
            self.threads.append(thread)

    def _wait_until(self, ready):
        """Block (the lock held) until ready(), the worker woken to write
        whatever waits."""
        if ready():
            return
        self.waiters += 1
        try:
            while not ready():
                self.cond.notify_all()
                self.cond.wait()
        finally:
            self.waiters -= 1

    def is_pending(self, path):
        with self.lock:
            return path in self.pending

    def has_failed(self, path):
        with self.lock:
            return path in self.failed

    def wait(self):
        """Wait until every submitted file is written (or failed)."""
        if self.threads:
            with self.cond:
                self._wait_until(lambda: not self.pending)

    def flush(self):
        """wait(), then raise the first failure (later ones are dropped:
        the run stops anyway)."""
        self.wait()
        self._raise_error()

    def drop_errors(self):
        with self.lock:
            self.errors = []

    def close(self):
        """Finish what was queued and stop the worker; failures are
        dropped (nothing committed refers to those files)."""
        if self.threads:
            with self.cond:
                self.stopping = True
                self.cond.notify_all()
            for thread in self.threads:
                thread.join()
            self.threads = []
            self.stopping = False
        self.drop_errors()

    def _raise_error(self):
        if not self.errors:     # the usual case, without the lock
            return
        with self.lock:
            if not self.errors:
                return
            error = self.errors[0]
            self.errors = []
        raise error

    def _work(self):
        while True:
            with self.cond:
                while not self._worth_waking():
                    self.sleeping += 1
                    try:
                        self.cond.wait()
                    finally:
                        self.sleeping -= 1
                if not self.items:
                    return          # stopping, and everything written
                batch = self._take()
            for item in batch:
                self._create(*item)

    def _take(self):
        """What a worker writes next (the lock held): everything waiting
        if it is the only one, else the oldest file."""
        if self.workers == 1:
            batch = list(self.items)
            self.items.clear()
            return batch
        return [self.items.popleft()]

    def _worth_waking(self):
        return (self.stopping or len(self.items) >= self.wake_at or
                (self.waiters and self.items))

    def _create(self, path, data, create):
        try:
            create(path, data)
        except BaseException as e:
            self._failed(path, ChunkFileTaken(filename=path)
                         if _names_file(e, path) else e)
        finally:
            with self.lock:
                self.pending.discard(path)
                if self.waiters:
                    self.cond.notify_all()

    def _failed(self, path, error):
        with self.lock:
            self.failed.add(path)
            self.errors.append(error)


class _CreateTimer:
    """Whether creates are slow: the median of each block of
    TIMED_CREATES (a few stalls, of the machine or of the GIL that the
    other threads hold, leave it alone)."""

    def __init__(self, clock):
        self.clock = clock
        self.times = []

    def slow(self, seconds):
        self.times.append(seconds)
        if len(self.times) < TIMED_CREATES:
            return False
        times, self.times = sorted(self.times), []
        return times[len(times) // 2] > SLOW_CREATE


# A batch of chunk files created together over SFTP, at most.
BATCH_FILES = 64
BATCH_BYTES = 16 * 1024 * 1024


def _names_file(error, path):
    """Whether error is FileExistsError for path (not for a directory on
    the way to it: a file there is a damaged repository)."""
    if not isinstance(error, FileExistsError):
        return False
    name = error.filename
    if isinstance(name, bytes):
        name = name.decode('utf-8', 'surrogateescape')
    return name is None or name == path or name.endswith('/' + path)


class _FailuresKept:
    """What BatchChunkWriter and ProcessChunkWriter share: failures are
    kept until flush (or the next submit) raises the first."""

    def __init__(self):
        self.failed = set()       # paths whose create failed
        self.errors = []          # exceptions not yet raised to the caller

    def has_failed(self, path):
        return path in self.failed

    def _failed(self, path, error):
        """A create that failed: FileExistsError for the file itself
        means another process took the name."""
        self.failed.add(path)
        if _names_file(error, path):
            error = ChunkFileTaken(filename=path)
        self.errors.append(error)

    def flush(self):
        self.wait()
        self._raise_error()

    def drop_errors(self):
        self.errors = []

    def close(self):
        self.wait()
        self.drop_errors()

    def _raise_error(self):
        if self.errors:
            error = self.errors[0]
            self.errors = []
            raise error


class BatchChunkWriter(_FailuresKept):
    """Exclusive creates collected and made together, in the caller's
    thread (SFTP: one connection, not thread-safe; a batch of creates
    costs two round trips instead of two per file).

    create_many(items) takes [(path, data)] and returns, per item, None or
    FileExistsError (RepositoryFS.create_many_in_base).  The interface is
    ChunkWriter's; submit's `create` is not used (the batch goes to
    create_many).  A batch is written when it is full, at wait/flush
    (before every commit) and before a pending chunk is read."""

    def __init__(self, create_many, max_files=BATCH_FILES,
                 max_bytes=BATCH_BYTES):
        super().__init__()
        self.create_many = create_many
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.batch = []           # [(path, data)] not yet created
        self.batch_bytes = 0

    def submit(self, path, data, create=None):
        """Add one exclusive create; a full batch is written first.
        Raises an earlier failure, or that batch's (this file is then
        not created)."""
        self._raise_error()
        if self.batch and (len(self.batch) >= self.max_files or
                           self.batch_bytes + len(data) > self.max_bytes):
            self.wait()
            self._raise_error()
        self.batch.append((path, data))
        self.batch_bytes += len(data)

    def is_pending(self, path):
        return any(p == path for p, _ in self.batch)

    def wait(self):
        """Create the files collected so far (failures kept for flush)."""
        batch, self.batch, self.batch_bytes = self.batch, [], 0
        if not batch:
            return
        try:
            results = self.create_many(batch)
        except BaseException as e:
            self.errors.append(e)
            return
        for (path, _), result in zip(batch, results):
            if result is not None:
                self._failed(path, result)


# Files sealed in the caller's thread before the helper process starts: a
# backup that stores only a few chunks does not pay for starting it.
INLINE_SEALS = 16
# Files sent to the process and not yet waited for, at most: then the
# writer waits for it (each pending path is about 100 bytes of memory;
# without a bound a first backup held 49,000 of them, 6 MB, until its
# checkpoint).  A wait costs the time the process is behind, a few tens
# of milliseconds.
PENDING_MAX = 16384


class ProcessChunkWriter(_FailuresKept):
    """Exclusive creates made by a cipher_process.CipherProcess, which
    also seals (encrypts) them: RepositoryFS hands the unencrypted parts
    to submit_sealed.  The first few are sealed and created in the
    caller's thread by seal_inline(path, parts, passphrase) while the
    process starts (and all of them if it cannot start).  A failed create
    is reported by a later submit (the process says so once it has the
    create: small ones reach it a few together) or by flush; a file is
    pending from its submit to the next wait."""

    def __init__(self, process, seal_inline, inline=INLINE_SEALS):
        super().__init__()
        self.process = process
        self.seal_inline = seal_inline
        self.inline_left = inline
        self.pending = set()

    def submit(self, path, data, create):
        """An already filtered file (not one to seal)."""
        self._check()
        if self.inline_left > 0 or self.process.could_not_start:
            self._inline(create, path, data)
            return
        self._send(path, (data,), None)

    def submit_sealed(self, path, parts, passphrase):
        self._check()
        if self.inline_left > 0 or self.process.could_not_start:
            self.process.start()        # it boots meanwhile
            self.inline_left -= 1
            self._inline(self.seal_inline, path, parts, passphrase)
            return
        self._send(path, parts, passphrase)

    def _inline(self, create, path, *args):
        try:
            create(path, *args)
        except FileExistsError as e:
            self._failed(path, e)
            self._raise_error()

    def _send(self, path, parts, passphrase):
        self.pending.add(path)
        self.process.create(path, parts, passphrase)
        if len(self.pending) >= PENDING_MAX:
            self.wait()

    def _check(self):
        if self.process.failure_reported():
            self.wait()
        self._raise_error()

    def is_pending(self, path):
        return path in self.pending

    def wait(self):
        """Until the process has made every file sent to it."""
        if not self.pending:
            return
        pending, self.pending = self.pending, set()
        try:
            failures = self.process.sync()
        except errors.ObnamError as e:
            self.errors.append(e)
            return
        for path, error in failures:
            if path in pending:
                self._failed(path, error)
