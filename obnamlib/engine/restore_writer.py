"""Restore's writing side: files' content and every object's metadata,
written behind the restore walk by a thread of its own where the target
allows it, so that a restore uses two cores: the walk reads the
repository (B-trees, chunk files) while the thread creates the files,
hashes their content and sets their metadata (system calls and MD5, which
run without the GIL).

The walk hands over work in its order; the writer does it in that order,
and what each piece of work would have reported is kept in an Outcome,
which the walk replays, in order, when it takes it back.  So a restore
says the same lines in the same order whether its files are written
behind it (ThreadWriter) or at once (InlineWriter: a target without
LIVE_WRITES_IN_BACKGROUND, such as SFTP, one core, or --pretend).
"""

import collections
import hashlib
import os
import threading

import obnamlib.errors
import obnamlib.vfs.base

# Data handed to the writer and not yet written, at most (the walk waits),
# and pieces of work queued, at most: enough to keep the writer busy
# while the walk looks up the next files, little for the peak RSS.
WRITE_BEHIND_BYTES = 4 * 1024 * 1024
WRITE_BEHIND_ITEMS = 256
# A file's content goes to the writer in parts of about this size.
PART_BYTES = 1024 * 1024


class Outcome:
    """What one piece of work reports: calls to make in the walk's thread
    (later(func, *args)), or an exception to raise there."""

    def __init__(self):
        self.calls = []
        self.raised = None

    def later(self, func, *args):
        self.calls.append((func, args))

    def replay(self):
        for func, args in self.calls:
            func(*args)
        if self.raised is not None:
            raise self.raised


def make_writer(fs, inline=False):
    """A ThreadWriter if fs can be written from a second thread and there
    are two cores to use, else (or if inline) an InlineWriter."""
    if (inline or
            obnamlib.vfs.base.LIVE_WRITES_IN_BACKGROUND not in fs.capabilities
            or _cores() < 2):
        return InlineWriter()
    return ThreadWriter()


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class InlineWriter:
    """Does each piece of work at once, in the caller's thread."""

    def __init__(self):
        self.done = collections.deque()

    def put(self, work, size=0):
        """work(outcome) records what it reports in outcome; size: the
        bytes of data it holds."""
        self.done.append(_run(work))

    def take_done(self):
        """The outcomes of the work done so far, in order, each once."""
        while self.done:
            yield self.done.popleft()

    def wait(self):
        """Until every piece of work put is done."""

    def close(self):
        """Finish the work put (its outcomes are dropped) and stop."""
        self.done.clear()


class ThreadWriter(InlineWriter):
    """Does the work in a thread, in the order it was put; put waits while
    WRITE_BEHIND_BYTES or WRITE_BEHIND_ITEMS are queued."""

    def __init__(self):
        super().__init__()
        self.queue = collections.deque()
        self.cond = threading.Condition()
        self.queued_bytes = 0
        self.pending = 0          # pieces of work put and not done
        self.waiting = False      # the walk waits for the writer
        self.closing = False
        self.thread = threading.Thread(target=self._serve, daemon=True,
                                       name='restore-writer')
        self.thread.start()

    def put(self, work, size=0):
        with self.cond:
            while (self.pending >= WRITE_BEHIND_ITEMS or
                   (self.pending and
                    self.queued_bytes + size > WRITE_BEHIND_BYTES)):
                self._wait()
            self.queued_bytes += size
            self.pending += 1
            self.queue.append((work, size))
            if self.pending == 1:
                self.cond.notify_all()

    def wait(self):
        with self.cond:
            while self.pending:
                self._wait()

    def _wait(self):
        self.waiting = True
        self.cond.wait()
        self.waiting = False

    def close(self):
        with self.cond:
            self.closing = True
            self.cond.notify_all()
        self.thread.join()
        super().close()

    def _serve(self):
        while True:
            with self.cond:
                while not self.queue and not self.closing:
                    self.cond.wait()
                if not self.queue:
                    return
                work, size = self.queue.popleft()
            self.done.append(_run(work))
            with self.cond:
                self.queued_bytes -= size
                self.pending -= 1
                if self.waiting:
                    self.cond.notify_all()


def _run(work):
    outcome = Outcome()
    try:
        work(outcome)
    except BaseException as e:      # raised again in the walk's thread
        outcome.raised = e
    return outcome


class FileContent:
    """One regular file's content, written part by part: all-zero pieces
    are left as holes, and the file gets its full size even when it ends
    in one.  md5() is the digest of everything written."""

    def __init__(self, fs, dest):
        self.fs = fs
        self.dest = dest
        self.f = None
        self.made = False         # the file was created
        self.digest = hashlib.md5()
        self.size = 0
        self.end = 0              # end of the data written so far
        self.failed = False       # a part failed (and was reported)

    def write(self, pieces):
        if self.f is None:
            self._open()
        for data in pieces:
            self.digest.update(data)
            if not _all_zero(data):
                if self.end != self.size:
                    self.f.seek(self.size)
                self.f.write(data)
                self.end = self.size + len(data)
            self.size += len(data)

    def finish(self):
        """Close the file (made now if it is empty); the MD5 digest."""
        if self.f is None:
            self._open()
        f, self.f = self.f, None
        try:
            if self.end != self.size:
                f.truncate(self.size)
        finally:
            f.close()
        return self.digest

    def _open(self):
        self.f = self.fs.open_write(self.dest)
        self.made = True

    def discard(self):
        """Close and remove a file that failed; an error of the removal is
        returned (None if it went well or nothing was made)."""
        if not self.made:
            return None
        if self.f is not None:
            f, self.f = self.f, None
            try:
                f.close()
            except (obnamlib.errors.ObnamError, OSError):
                pass
        try:
            self.fs.remove(self.dest)
        except (obnamlib.errors.ObnamError, OSError) as e:
            return e
        return None


def _all_zero(data):
    """Whether data is all zero bytes (nothing to write: a hole); most
    data is told apart by its first or last byte, without a pass over it
    (bytes.count(0) was 9% of a restore's time)."""
    return not data or (data[:1] == b'\0' and data[-1:] == b'\0' and
                        data == bytes(len(data)))

