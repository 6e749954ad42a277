"""Restore's writing side: files' content and every object's metadata.

The walk hands over work in its order; what each piece of work would
have reported is kept in an Outcome, which the walk replays, in order,
when it takes it back.  (A writer thread behind the walk measured slower
on a quiet 2-core machine, the two threads taking turns at the GIL per
small file; the work is done at once, in the walk's thread.)
"""

import collections
import hashlib

import obnamlib.errors
from obnamlib.engine import chunker

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
        """Drop the outcomes not taken."""
        self.done.clear()


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
            if not chunker.is_all_zero(data):
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
