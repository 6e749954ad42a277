"""Chunk files written behind the caller: one worker thread creates them
while the backup goes on reading, hashing and filling the B-tree.

On a local disk the kernel spends 0.1-1 ms creating each file, which was
most of a first backup's time.  Nothing refers to a new chunk until a
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

import queue
import threading

from obnamlib import errors

# Files waiting for the worker, at most (memory: this many chunk sizes).
QUEUE_DEPTH = 16


class ChunkFileTaken(errors.ObnamError):
    """Another process created the chunk file we were writing, between our
    directory listing and our exclusive create (chance about 2**-50 per
    pair of concurrent runs).  Nothing uncommitted is kept."""
    code = errors.legacy_code('ChunkFileTaken',
                              'obnamlib.fmt_6.chunk_writer')
    msg = ('Chunk file {filename} was created by another program at the '
           'same time; the backup stopped without committing the files it '
           'was storing: run it again')


class ChunkWriter:
    """Exclusive creates in one worker thread.

    submit(path, data, create): create(path, data) runs in the worker; it
    must be safe there while the caller's thread uses the same storage."""

    def __init__(self, depth=QUEUE_DEPTH):
        self.queue = queue.Queue(maxsize=depth)
        self.pending = set()      # paths submitted and not yet finished
        self.failed = set()       # paths whose create failed
        self.errors = []          # exceptions not yet raised to the caller
        self.lock = threading.Lock()
        self.thread = None

    def submit(self, path, data, create):
        """Queue one exclusive create; raises an earlier failure first."""
        self._raise_error()
        if self.thread is None:
            self.thread = threading.Thread(
                target=self._work, name='chunk-writer', daemon=True)
            self.thread.start()
        with self.lock:
            self.pending.add(path)
        self.queue.put((path, data, create))

    def is_pending(self, path):
        with self.lock:
            return path in self.pending

    def has_failed(self, path):
        with self.lock:
            return path in self.failed

    def wait(self):
        """Wait until every submitted file is written (or failed)."""
        if self.thread is not None:
            self.queue.join()

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
        if self.thread is not None:
            self.queue.put(None)
            self.thread.join()
            self.thread = None
        self.drop_errors()

    def _raise_error(self):
        with self.lock:
            if not self.errors:
                return
            error = self.errors[0]
            self.errors = []
        raise error

    def _work(self):
        while True:
            item = self.queue.get()
            try:
                if item is None:
                    return
                self._create(*item)
            finally:
                self.queue.task_done()

    def _create(self, path, data, create):
        try:
            create(path, data)
        except FileExistsError:
            self._failed(path, ChunkFileTaken(filename=path))
        except BaseException as e:
            self._failed(path, e)
        finally:
            with self.lock:
                self.pending.discard(path)

    def _failed(self, path, error):
        with self.lock:
            self.failed.add(path)
            self.errors.append(error)


# A batch of chunk files created together over SFTP, at most.
BATCH_FILES = 64
BATCH_BYTES = 16 * 1024 * 1024


class BatchChunkWriter:
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
        self.create_many = create_many
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.batch = []           # [(path, data)] not yet created
        self.batch_bytes = 0
        self.failed = set()
        self.errors = []

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

    def has_failed(self, path):
        return path in self.failed

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
                self.failed.add(path)
                self.errors.append(ChunkFileTaken(filename=path))

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
