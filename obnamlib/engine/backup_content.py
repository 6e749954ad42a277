"""A live file's content into chunks (format-6.md §7.2.2).

The file is read once, cut by obnamlib.engine.chunker, each chunk stored
through RunChunks; a hard-linked file's chunks are reused when its
mtime and size have not moved; a file that changed while it was read is
refused (FileChangedDuringBackup, new here).  Errors of the live file
system become per-file errors (as_obnam_error), raised as LiveFileError.
"""

import errno
import os
import stat as stat_module

import obnamlib.errors
import obnamlib.vfs.base
from obnamlib.engine import backup_reading


# Files of at least this size are read ahead where the fs allows it.
READ_AHEAD_SIZE = backup_reading.MIN_SIZE


class FileChangedDuringBackup(obnamlib.errors.ObnamError):
    """The file's size or mtime moved while we read it (new here)."""
    code = 'R0A128X'
    msg = '{filename}: file changed while it was being backed up'


class LiveFileError(Exception):
    """Carries a per-file ObnamError out of the content loop."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def scanned_size(st):
    """What a file adds to its generation's byte total (GEN_TOTAL_DATA),
    as Obnam 1.x counted: a regular file's size and a symlink's target
    length; nothing for directories and special files."""
    if stat_module.S_ISREG(st.st_mode) or stat_module.S_ISLNK(st.st_mode):
        return st.st_size
    return 0


def as_obnam_error(error, path, io=False):
    """An OSError from the live file system as RCE08AX/RD5FA4X.

    Every per-file handler goes through here, so an error that ends the
    run (obnamlib.errors.reraise_fatal) is raised again instead of counted."""
    obnamlib.errors.reraise_fatal(error)
    if isinstance(error, obnamlib.errors.ObnamError):
        return error
    cls = obnamlib.errors.ObnamIOError if io else \
        obnamlib.errors.ObnamSystemError
    return cls(filename=path, errno=error.errno, strerror=error.strerror)


class FileContent:
    """Stores regular files' content from `fs` as chunks (`chunks`, a
    RunChunks), calling `after_chunk()` after each one (a checkpoint may
    be due in the middle of a big file).

    Where the fs can be read from a second thread
    (LIVE_READS_IN_BACKGROUND), the files named to `read_ahead` are read
    and hashed by a backup_reading.ReadAhead worker; `close` stops it."""

    def __init__(self, fs, options, chunks, after_chunk):
        self.fs = fs
        self.options = options
        self.chunks = chunks
        self.after_chunk = after_chunk
        self.hard_links = {}          # (dev, ino) -> (mtime, size), result
        self.reader = None
        if obnamlib.vfs.base.LIVE_READS_IN_BACKGROUND in fs.capabilities:
            self.reader = backup_reading.ReadAhead(
                self._open, chunks.digest, options.chunk_size)

    @property
    def reads_ahead(self):
        return self.reader is not None

    def read_ahead(self, files):
        """These (path, st) will be stored next, in this order: read those
        of at least READ_AHEAD_SIZE bytes in the worker meanwhile.
        A hard link already stored, or named twice, is read once (store
        finds it in hard_links)."""
        links = set()
        for path, st in files:
            if st.st_size < READ_AHEAD_SIZE:
                continue
            if st.st_nlink > 1:
                key = (st.st_dev, st.st_ino)
                if key in links or key in self.hard_links:
                    continue
                links.add(key)
            self.reader.submit(path, st)

    def read_ahead_done(self):
        """The batch is stored: what was read for it and not used goes."""
        if self.reader is not None:
            self.reader.cancel_all()

    def close(self):
        if self.reader is not None:
            self.reader.close()

    def store(self, path, st):
        """Store the file's chunks; (chunk ids, whole-file MD5 digest).
        LiveFileError if the file cannot be read whole."""
        link_key = (st.st_dev, st.st_ino) if st.st_nlink > 1 else None
        if link_key is not None:
            known = self.hard_links.get(link_key)
            if known is not None and known[0] == (st.st_mtime_ns, st.st_size):
                return known[1]
        result = self._read(path, st)
        if link_key is not None:
            self.hard_links[link_key] = ((st.st_mtime_ns, st.st_size), result)
        return result

    def _read(self, path, st):
        """Every file is opened, also an empty one: Obnam 1.x reported an
        unreadable empty file, and one that grew since it was listed is
        changed (an empty file has no chunks, format-6 §7.2.2)."""
        ahead = None
        if self.reader is not None and st.st_size >= READ_AHEAD_SIZE:
            ahead = self.reader.take(path)
        if ahead is not None:
            return self._store_chunks(path, ahead, ahead.changed,
                                      ahead.whole_digest)
        try:
            f = self._open(path)
        except (OSError, obnamlib.errors.ObnamError) as e:
            raise LiveFileError(as_obnam_error(e, path, io=True))
        try:
            chunks = backup_reading.LiveChunks(f, st, self.options.chunk_size)
            return self._store_chunks(
                path, _without_digests(chunks), chunks.changed)
        finally:
            try:
                f.close()
            except OSError:
                pass

    def _open(self, path):
        self.fake_failure(path)
        return self.fs.open_read(path)

    def fake_failure(self, path):
        """--testing-fail-matching: ENOENT for a path that matches."""
        for pattern in self.options.fail_matching:
            if pattern.search(path):
                raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)

    def _store_chunks(self, path, pieces, changed, whole_digest=None):
        """Store the (chunk, digest or None) pieces; then changed() says
        whether the file moved while it was read.  whole_digest gives the
        file's MD5 when the pieces' reader computed it; else it is
        computed here."""
        whole = None if whole_digest else backup_reading.WholeFileDigest()
        chunk_ids = []
        pieces = iter(pieces)
        while True:
            try:
                piece = next(pieces, None)
            except (OSError, obnamlib.errors.ObnamError) as e:
                raise LiveFileError(as_obnam_error(e, path, io=True))
            if piece is None:
                break
            chunk_id, digest = self.chunks.store(*piece)
            chunk_ids.append(chunk_id)
            if whole is not None:
                whole.add(piece[0], digest)
            self.after_chunk()
        if changed():
            raise LiveFileError(FileChangedDuringBackup(filename=path))
        return chunk_ids, (whole_digest() if whole is None
                           else whole.digest())


def _without_digests(chunks):
    for chunk in chunks:
        yield chunk, None
