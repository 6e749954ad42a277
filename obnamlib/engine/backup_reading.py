"""Live files read and hashed ahead of the backup, in a worker thread.

A first backup's main thread spent about half its time in system calls
(open, read, fstat, posix_fadvise, close) and in MD5, all of which
release the GIL, while the walk, the chunk decisions and the B-trees,
which hold it, waited.  So the engine names the files of a batch (one
directory's changed regular files of at least MIN_SIZE bytes) that it
will store, in the order it will store them, and ReadAhead reads them in
one worker thread: it cuts
each into chunks (LiveChunks), hashes each chunk and checks at the end
that the file did not change, keeping at most `budget` bytes of chunks
that the main thread has not taken yet.  The main thread takes each
file's chunks in turn (`take`) and stores them as before: deduplication,
chunk ids and the B-trees stay in one thread.  Meanwhile the main thread
reads the small files itself.

A big file's MD5 as a whole (the file's checksum) is a second pass over
its bytes, in order.  Whichever thread would otherwise wait does it: the
worker while its budget is full (the main thread is busy with the small
files before it), the main thread while it waits for the worker's next
chunk (a directory of big files: the worker hashing every chunk twice
had kept the main thread waiting for 2.3 s of a 9.9 s first backup).

Small files are not handed over: a handover costs two thread switches,
which on a busy machine each wait for a core, and reading and hashing a
small file costs less (measured at load 4 on two cores, every file read
ahead made a first backup of 56,000 files 10-25% slower in wall time).

Errors travel with the file's chunks and are raised where serial reading
raised them: an open error before any chunk, a read error after the
chunks read before it.
"""

import collections
import hashlib
import itertools
import logging
import os
import threading

import obnamlib.engine.chunker
import obnamlib.errors

# Chunk bytes read ahead of the main thread, at most (plus one chunk).
READ_AHEAD_BYTES = 4 * 1024 * 1024
# Bytes of a taken file's chunks not yet in its whole-file MD5 that the
# main thread lets wait for the worker's spare time, at most.
WHOLE_BACKLOG_BYTES = 1024 * 1024
# Below this size posix_fadvise costs more than the page cache it saves.
ADVISE_SIZE = 256 * 1024
# Files smaller than this are read in the main thread (see above).
MIN_SIZE = 256 * 1024
# Seconds close() waits for the worker to stop (see close).
STOP_WAIT = 10

EMPTY_MD5 = hashlib.md5(b'').digest()


class WholeFileDigest:
    """MD5 of a whole file from its chunks.  Most files are one chunk, and
    then the chunk's digest is the file's: the content is hashed once."""

    def __init__(self):
        self.first = None         # (chunk, digest) while only one is known
        self.md5 = None

    def add(self, chunk, digest):
        if self.md5 is None and self.first is None:
            self.first = (chunk, digest)
            return
        if self.md5 is None:
            self.md5 = hashlib.md5(self.first[0])
            self.first = None
        self.md5.update(chunk)

    def digest(self):
        if self.md5 is not None:
            return self.md5.digest()
        if self.first is not None:
            return self.first[1]
        return EMPTY_MD5


class LiveChunks:
    """The chunks of one open live file, then whether it changed while
    read (its size or mtime moved since `st`, the walk's lstat).  That
    fstat also sees a local file that grew after a read that reached
    its scanned size, so no read is made to meet its end."""

    def __init__(self, f, st, chunk_size):
        self.f = f
        self.st = st
        self.total = 0
        self.chunks = obnamlib.engine.chunker.iter_chunks(
            f, chunk_size, advise=st.st_size >= ADVISE_SIZE,
            st=st, size_ends=True)

    def __iter__(self):
        for chunk in self.chunks:
            self.total += len(chunk)
            yield chunk

    def changed(self):
        return self.total != self.st.st_size or _mtime_moved(self.f, self.st)


def _mtime_moved(f, st):
    try:
        now = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError):
        return False
    return (now.st_mtime_ns != st.st_mtime_ns or
            now.st_size != st.st_size)


class _File:
    """One file handed to the worker: its chunks as read, then the end."""

    __slots__ = ('path', 'st', 'items', 'done', 'error', 'changed',
                 'cancelled', 'whole', 'unhashed', 'unhashed_bytes',
                 'hashing', 'hash_error')

    def __init__(self, path, st):
        self.path = path
        self.st = st
        self.items = collections.deque()    # (chunk, digest) not taken
        self.done = False
        self.error = None         # what opening or reading raised
        self.changed = False
        self.cancelled = False
        self.whole = WholeFileDigest()
        self.unhashed = collections.deque()  # (chunk, digest) not in whole
        self.unhashed_bytes = 0
        self.hashing = False      # a thread is adding chunks to whole
        self.hash_error = None


class ReadAhead:
    """Reads files in a worker thread, in the order given (`submit`).

    open_file(path) opens a live file for reading (the fs's open_read,
    after --testing-fail-matching's check); digest(chunk) is the chunk's
    MD5 digest (RunChunks.digest)."""

    def __init__(self, open_file, digest, chunk_size,
                 budget=READ_AHEAD_BYTES):
        self.open_file = open_file
        self.digest = digest
        self.chunk_size = chunk_size
        self.budget = budget
        self.cond = threading.Condition()
        self.todo = collections.deque()     # for the worker, in order
        self.queued = collections.deque()   # not yet taken, in order
        self.ahead = 0            # bytes of chunks not yet taken
        self.stopping = False
        self.thread = None
        self.fatal = None         # an error no later file can escape
        self.current = None       # the file the main thread took last

    def submit(self, path, st):
        """Read this file next (after those submitted before it)."""
        job = _File(path, st)
        with self.cond:
            if self.thread is None:
                self.stopping = False
                thread = threading.Thread(
                    target=self._work, name='backup-reader', daemon=True)
                thread.start()
                # Kept only once started: a Ctrl-C inside start() must
                # leave close() nothing it cannot join.
                self.thread = thread
            self.todo.append(job)
            self.queued.append(job)
            self.cond.notify_all()

    def take(self, path):
        """The chunks of path (a FileChunks), if it was submitted; None
        if not (a small file: the queue stays as it is).  Files
        submitted before it and not taken are dropped."""
        with self.cond:
            if not any(job.path == path for job in self.queued):
                return None
            while self.queued[0].path != path:
                self._cancel(self.queued.popleft())
            self.current = self.queued.popleft()
            return FileChunks(self, self.current)

    def cancel_all(self):
        """Drop every file not yet taken (the end of a batch)."""
        with self.cond:
            while self.queued:
                self._cancel(self.queued.popleft())

    def close(self):
        """Drop what is not taken and stop the worker.  A Ctrl-C that came
        just as the main thread took the lock (its `with` not yet begun)
        leaves the lock held by the main thread for good, and the worker
        waiting for it: after STOP_WAIT it is left behind (a daemon: it
        ends with the process, which is ending)."""
        with self.cond:
            self.stopping = True
            while self.queued:
                self._cancel(self.queued.popleft())
            self.todo.clear()
            self.cond.notify_all()
            thread, self.thread = self.thread, None
        if thread is not None:
            thread.join(STOP_WAIT)
            if thread.is_alive():
                logging.warning('The backup\'s reading thread did not stop '
                                'in %d s: left behind', STOP_WAIT)

    def _cancel(self, job):
        job.cancelled = True
        self._taken(sum(len(chunk) for chunk, _ in job.items))
        job.items.clear()
        job.unhashed.clear()

    def _taken(self, size):
        self.ahead -= size
        self.cond.notify_all()

    def _hash_whole(self, job, limit):
        """Add up to limit of job's chunks, in order, to its whole-file
        MD5, unless another thread is at it; False if there was nothing
        to do.  Called with cond held, which is let go while hashing."""
        if not _has_whole_work(job):
            return False
        batch = [job.unhashed.popleft()
                 for _ in range(min(limit, len(job.unhashed)))]
        job.hashing = True
        self.cond.release()
        try:
            for chunk, digest in batch:
                job.whole.add(chunk, digest)
        except BaseException as e:
            job.hash_error = e      # the digest is incomplete: never used
            if not isinstance(e, Exception):
                raise               # Ctrl-C in the main thread: now
        finally:
            self.cond.acquire()
            job.hashing = False
            job.unhashed_bytes -= sum(len(chunk) for chunk, _ in batch)
            self.cond.notify_all()
        return True

    def _hash_for_main(self):
        """The worker's spare time: one chunk of the whole-file MD5 of
        the file the main thread has, or of the first one queued that
        needs it; False if none does.  Called with cond held (the file is
        chosen before _hash_whole lets it go: the main thread may then
        take or drop queued files)."""
        jobs = self.queued if self.current is None \
            else itertools.chain((self.current,), self.queued)
        job = next((job for job in jobs if _has_whole_work(job)), None)
        return job is not None and self._hash_whole(job, 1)

    # --- the worker --------------------------------------------------------

    def _work(self):
        while True:
            with self.cond:
                while not self.todo and not self.stopping:
                    self.cond.wait()
                if self.stopping:
                    return
                job = self.todo.popleft()
            if job.cancelled:
                continue
            if self.fatal is not None:
                self._finish(job, error=self.fatal)
            else:
                self._read(job)

    def _read(self, job):
        try:
            f = self.open_file(job.path)
        except BaseException as e:
            self._finish(job, error=e)
            return
        error = None
        changed = False
        try:
            chunks = LiveChunks(f, job.st, self.chunk_size)
            for chunk in chunks:
                digest = self.digest(chunk)
                if not self._put(job, chunk, digest):
                    return
            changed = chunks.changed()
        except BaseException as e:
            error = e
        finally:
            _close_quietly(f)
        self._finish(job, error=error, changed=changed)

    def _finish(self, job, error=None, changed=False):
        """The file is read (or failed).  After an error that ends the run
        (a lost connection: errors.reraise_fatal) no more files are
        opened: the files after it fail with it."""
        if error is not None and _ends_the_run(error):
            self.fatal = error
        with self.cond:
            job.error = error
            job.changed = changed
            job.done = True
            self.cond.notify_all()

    def _put(self, job, chunk, digest):
        """Hand one chunk over when the budget has room; False if the
        file is no longer wanted."""
        with self.cond:
            while (self.ahead >= self.budget and not job.cancelled and
                   not self.stopping):
                if not self._hash_for_main():
                    self.cond.wait()
            if job.cancelled or self.stopping:
                return False
            job.items.append((chunk, digest))
            job.unhashed.append((chunk, digest))
            job.unhashed_bytes += len(chunk)
            self.ahead += len(chunk)
            self.cond.notify_all()
            return True


def _has_whole_work(job):
    """Whether a thread may add chunks to job's whole-file MD5 now."""
    return bool(job.unhashed) and not job.hashing and not job.cancelled


def _ends_the_run(error):
    try:
        obnamlib.errors.reraise_fatal(error)
    except BaseException:
        return True
    return False


def _close_quietly(f):
    try:
        f.close()
    except OSError:
        pass


class FileChunks:
    """One file's (chunk, digest) pairs from the worker, in order; after
    the last, `changed()` says whether the file moved while read.  A read
    error is raised where the serial reading raised it."""

    def __init__(self, reader, job):
        self.reader = reader
        self.job = job

    def __iter__(self):
        reader, job = self.reader, self.job
        while True:
            with reader.cond:
                while not job.items and not job.done:
                    if not reader._hash_whole(job, len(job.unhashed)):
                        reader.cond.wait()
                if not job.items:
                    break
                chunk, digest = job.items.popleft()
                reader._taken(len(chunk))
                if job.unhashed_bytes > WHOLE_BACKLOG_BYTES:
                    reader._hash_whole(job, len(job.unhashed))
            yield chunk, digest
        if job.error is not None:
            raise job.error

    def changed(self):
        return self.job.changed

    def whole_digest(self):
        """The file's MD5, once every chunk is taken."""
        reader, job = self.reader, self.job
        with reader.cond:
            while job.unhashed or job.hashing:
                if not reader._hash_whole(job, len(job.unhashed)):
                    reader.cond.wait()
        if job.hash_error is not None:
            raise job.hash_error
        return job.whole.digest()
