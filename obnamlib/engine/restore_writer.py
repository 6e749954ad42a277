"""Restore's writing side: one regular file's content, part by part.

The restorer writes in its walk's own thread (a writer thread behind the
walk measured slower on a quiet 2-core machine, the two threads taking
turns at the GIL per small file).  The checksum of what is written is
another matter: a big file's MD5 is computed on the second core while
its next parts are fetched and written (background_md5).
"""

import obnamlib.errors
from obnamlib.engine import background_md5, chunker

# A file's content is written in parts of about this size.
PART_BYTES = 1024 * 1024


class FileContent:
    """One regular file's content, written part by part: all-zero pieces
    are left as holes, and the file gets its full size even when it ends
    in one.  finish() gives the MD5 of everything written.  hasher:
    background_md5.new_hasher()'s executor, or None (hashed here)."""

    def __init__(self, fs, dest, hasher=None):
        self.fs = fs
        self.dest = dest
        self.f = None
        self.made = False         # the file was created
        self.digest = background_md5.BackgroundMD5(hasher=hasher)
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

    def finish(self, before_close=None):
        """Close the file (made now if it is empty); the MD5 digest (a
        background_md5.BackgroundMD5: digest(), hexdigest()), complete:
        a failure of the worker hashing it is raised here, where the
        caller handles the file's failures.  before_close(file), if
        given, is called with the open file after its last change (its
        metadata set through it)."""
        if self.f is None:
            self._open()
        f, self.f = self.f, None
        try:
            if self.end != self.size:
                f.truncate(self.size)
            if before_close is not None:
                before_close(f)
        finally:
            f.close()
        self.digest.wait()
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
