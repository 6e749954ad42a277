"""Chunk files: file content stored outside the B-trees (format-6.md §8).

A run's first chunk gets a random id and each next one the following id, so
one run's chunks sit close together on disk; a name already taken makes us
draw a new random start.

Where the storage allows it (a local disk), files are created by a
ChunkWriter thread behind the caller.  Free names are then found by listing
each chunk directory once when the ids reach it, instead of by the
exclusive create itself; the create stays exclusive, and a name another
process takes in between stops the run (`chunk_writer.ChunkFileTaken`)
rather than being shared.  Over SFTP the creates are collected and made
in batches (`chunk_writer.BatchChunkWriter`) in the caller's thread.

Reading: `prefetch(ids)` reads chunk files together when the storage reads
in batches (SFTP) into a bounded cache that `get` looks in first.
"""

import bisect
import collections
import random

from obnamlib import errors
from obnamlib.vfs import local as vfs_local
from obnamlib.repo.fmt_6.chunk_writer import (
    BatchChunkWriter, ChunkWriter, ProcessChunkWriter)
from obnamlib.repo.fmt_6.keys import MAX_ID

TOPLEVEL = 'chunks'
IDPATH_DEPTH = 3
IDPATH_BITS = 12
IDPATH_SKIP = 13
_MASK = (1 << IDPATH_BITS) - 1
_NOT_CHUNKS = ('lock', 'key', 'userkeys')

# A wider range of ids is looked for by a walk of every chunk directory.
RANGE_LISTINGS = 256

# Chunk directories listed together for their files' sizes, at most (an
# SFTP server holds a handle for each).
SIZE_LISTINGS = 64

# Chunks read ahead (prefetch) and kept for get, at most: a hint and a
# half of restore's and fsck's (16 MiB each: engine.read_ahead,
# engine.fsck_content), which keeps an SFTP restore's memory near borg's.
CACHE_BYTES = 32 * 1024 * 1024
CACHE_CHUNKS = 256


def idpath(chunk_id):
    """Relative path of a chunk: lowest 12-bit group above bit 13 first
    (IDPATH_DEPTH levels: one format string, 1.3 us instead of 3.0 us a
    path; a restore asks for each chunk's path twice)."""
    block = chunk_id >> IDPATH_SKIP
    return _IDPATH % (block & _MASK, (block >> IDPATH_BITS) & _MASK,
                      (block >> 2 * IDPATH_BITS) & _MASK, chunk_id)


_IDPATH = TOPLEVEL + '/%d' * IDPATH_DEPTH + '/%x'
assert IDPATH_DEPTH == 3    # idpath names three levels


def parse_chunk_name(name):
    """Chunk id for a file name under chunks/, or None."""
    if name in _NOT_CHUNKS or name.startswith('tmp'):
        return None
    try:
        chunk_id = int(name, 16)
    except ValueError:
        return None
    return chunk_id if '%x' % chunk_id == name else None


# A network or FUSE filesystem (CREATES_IN_PARALLEL): threads creating
# chunk files at once, and files waiting for them at most.
PARALLEL_CREATES = vfs_local.CREATES_IN_FLIGHT
PARALLEL_DEPTH = 4 * PARALLEL_CREATES


def _background_writer(fs):
    """(writer, the fs method that hands it over): a ProcessChunkWriter
    if fs can leave its encrypted creates to a second process; a
    ChunkWriter with several threads if its creates are round trips to a
    server; with one if it can leave its creates to a thread (used
    once creates turn out slow: chunk_writer.SLOW_CREATE); a
    BatchChunkWriter if it can create many files at once; else (None,
    None)."""
    if fs.can_seal_behind:
        return (ProcessChunkWriter(fs.seal_helper(), fs.seal_inline),
                fs.seal_behind)
    if fs.can_create_in_parallel:
        return (ChunkWriter(depth=PARALLEL_DEPTH, wake_at=1,
                            workers=PARALLEL_CREATES), fs.write_behind)
    if fs.can_write_behind:
        return ChunkWriter(in_line_while_fast=True), fs.write_behind
    if fs.can_create_in_batches:
        return BatchChunkWriter(fs.create_many_in_base), fs.write_behind
    return None, None


class FetchedChunks:
    """Chunk contents read ahead, oldest first, within max_bytes and
    max_chunks.  A new batch pushes out older entries, never its own
    (what does not fit is dropped: get reads it then).  A chunk taken is
    no longer kept (a hint names each chunk once), except the last one,
    for a run of equal chunks (a sparse file's zeros)."""

    def __init__(self, max_bytes, max_chunks):
        self.max_bytes = max_bytes
        self.max_chunks = max_chunks
        self.data = collections.OrderedDict()
        self.bytes = 0
        self.last = None          # (chunk id, data) taken last

    def __len__(self):
        return len(self.data)

    def __contains__(self, chunk_id):
        return chunk_id in self.data

    def get(self, chunk_id):
        return self.data.get(chunk_id)

    def take(self, chunk_id):
        """The chunk's data, or None; from now on only as the last taken."""
        data = self.data.pop(chunk_id, None)
        if data is not None:
            self.bytes -= len(data)
            self.last = (chunk_id, data)
            return data
        if self.last is not None and self.last[0] == chunk_id:
            return self.last[1]
        return None

    def discard(self, chunk_id):
        data = self.data.pop(chunk_id, None)
        if data is not None:
            self.bytes -= len(data)
        if self.last is not None and self.last[0] == chunk_id:
            self.last = None

    def keep(self, fetched):
        """Add (chunk id, data) pairs in order."""
        batch = set()
        for chunk_id, data in fetched:
            self.discard(chunk_id)
            while self.data and not self._fits(len(data)) and \
                    next(iter(self.data)) not in batch:
                self.discard(next(iter(self.data)))
            if not self._fits(len(data)):
                return
            self.data[chunk_id] = data
            self.bytes += len(data)
            batch.add(chunk_id)

    def _fits(self, size):
        return (len(self.data) < self.max_chunks and
                self.bytes + size <= self.max_bytes)


class ChunkStore:
    """Chunk files in a repo_fs.RepositoryFS (which applies the filters).

    After write_behind(True), put() leaves the writing to a thread if the
    fs `can_write_behind` (RepositoryFS on a local disk); flush() before
    any commit then."""

    def __init__(self, fs, rng=None):
        self.fs = fs
        self.rng = rng or random.SystemRandom()
        self.next_id = None
        self.by_basename = None   # fallback map for non-default idpaths
        self.written = []         # [first, last] id ranges this object wrote
        self.since_commit = []    # ids handed to storage since a commit
        self.background, self._hand_over = _background_writer(fs)
        self.writer = None        # self.background while writing behind
        self.spread_asked = False
        self.listed_dir = None    # the chunk directory last listed, and
        self.listed_names = set()  # the names it held then
        self.fetched = FetchedChunks(CACHE_BYTES, CACHE_CHUNKS)
        self.journal = None       # the locked client's ChunkJournal

    def put(self, data):
        """Write a new chunk file (maybe still in progress: see flush);
        returns its id."""
        while True:
            if self.next_id is None:
                self.next_id = self.rng.randint(0, MAX_ID - 1)
            chunk_id = self.next_id
            self.next_id = (chunk_id + 1) % MAX_ID
            path = idpath(chunk_id)
            self._record(chunk_id)
            if self.writer is not None:
                if self._is_free(chunk_id, path):
                    # Noted first: an interruption inside create_file must
                    # not leave a file nobody knows of.
                    self.since_commit.append(chunk_id)
                    self.fs.create_file(path, data)    # into the writer
                    self._note_written(chunk_id)
                    return chunk_id
            elif self._create_exclusive(path, data):
                self._note_written(chunk_id)
                self.since_commit.append(chunk_id)
                return chunk_id
            # Another run's chunk: our record must not name it.
            if self.journal is not None:
                self.journal.cut_before(chunk_id)
            self.next_id = None

    def _record(self, chunk_id):
        """The id is in the client's journal before any file may get it,
        so a killed run's successor finds the file (chunk_journal)."""
        if self.journal is not None and not self.journal.covers(chunk_id):
            self.journal.reserve(chunk_id)

    def ids_in_ranges(self, ranges):
        """Per (first, last) of ranges, the ids first..last that have a
        chunk file at the default idpath: one listing per chunk directory
        a range touches, or for a range wider than RANGE_LISTINGS blocks
        (a damaged journal may name any range: listing 2^51 directories
        would never end) the ids of one walk of them all, made once."""
        walked = None
        found = []
        for first, last in ranges:
            if (last >> IDPATH_SKIP) - (first >> IDPATH_SKIP) < \
                    RANGE_LISTINGS:
                found.append(self._listed_range(first, last))
                continue
            if walked is None:
                walked = sorted(self.ids())
            found.append(walked[bisect.bisect_left(walked, first):
                                bisect.bisect_right(walked, last)])
        return found

    def _listed_range(self, first, last):
        found = []
        block = first
        while block <= last:
            dirname = idpath(block).rsplit('/', 1)[0]
            try:
                names = self.fs.listdir(dirname)
            except FileNotFoundError:
                names = []
            for name in names:
                chunk_id = parse_chunk_name(name)
                if chunk_id is not None and first <= chunk_id <= last:
                    found.append(chunk_id)
            block = ((block >> IDPATH_SKIP) + 1) << IDPATH_SKIP
        return sorted(set(found))

    def _is_free(self, chunk_id, path):
        """No chunk file has this name (per one listing per directory) and
        we have not used the id already."""
        dirname, name = path.rsplit('/', 1)
        if dirname != self.listed_dir:
            try:
                self.listed_names = set(self.fs.listdir(dirname))
            except FileNotFoundError:
                self.listed_names = set()
            self.listed_dir = dirname
        return name not in self.listed_names and not self.wrote(chunk_id)

    def flush(self):
        """Wait for the chunk files being written; raise a failure."""
        if self.writer is not None:
            self.writer.flush()

    def write_behind(self, on):
        """Start or stop writing chunk files in the background.  Stopping
        waits for the files queued and drops their failures (a commit
        has flushed them already; after a discard nothing uses them)."""
        if on:
            if self.background is not None and self.writer is None:
                self.listed_dir = None      # list afresh: others write too
                self._spread_chunk_directories()
                self._hand_over(self.background)
                self.writer = self.background
        elif self.writer is not None:
            self.fs.write_behind(None)
            self.writer.wait()
            self.writer.drop_errors()
            self.writer = None

    def _spread_chunk_directories(self):
        """Ask the local filesystem to place each run's chunk directories
        where it has room (vfs_local.LocalFS.spread_subdirectories)."""
        if not self.spread_asked:
            self.spread_asked = True
            self.fs.spread_subdirectories(TOPLEVEL)

    def close(self):
        """Finish writing and stop the writer thread (failures dropped)."""
        self.write_behind(False)
        if self.background is not None:
            self.background.close()

    def committed(self):
        """A commit (of a client or the indexes) refers to every chunk
        written so far, or may: none of them may be removed as unused."""
        self.since_commit = []

    def remove_uncommitted(self):
        """Remove the chunk files written since the last commit, which
        nothing committed refers to (after a failed or interrupted run);
        returns how many were removed."""
        doomed, self.since_commit = self.since_commit, []
        self.flush_quietly()
        for chunk_id in doomed:
            self.remove(chunk_id)
        return len(doomed)

    def flush_quietly(self):
        """Wait for the files being written; their failures are dropped
        (a failed create made no file of ours)."""
        if self.writer is not None:
            self.writer.wait()
            self.writer.drop_errors()

    def _wait_for(self, path):
        if self._is_pending(path):
            self.background.wait()

    def _note_written(self, chunk_id):
        if self.written and self.written[-1][1] + 1 == chunk_id:
            self.written[-1][1] = chunk_id
        else:
            self.written.append([chunk_id, chunk_id])

    def wrote(self, chunk_id):
        """Whether this object stored the chunk (ids come in a few runs)."""
        return any(first <= chunk_id <= last for first, last in self.written)

    def _create_exclusive(self, path, data):
        try:
            self.fs.create_file(path, data)
        except FileExistsError:
            return False
        return True

    @property
    def prefetches(self):
        """Whether prefetch does anything: the storage reads in batches
        (SFTP, a network mount) or reads ahead (a local disk that may
        have to wait for it, the cipher helper)."""
        return self.fs.reads_in_batches or self.fs.can_read_ahead

    def prefetch(self, chunk_ids):
        """Read these chunks together, for the get calls that follow, if
        the storage reads in batches (SFTP).  If the batch fails (a chunk
        missing or damaged), each get reads its own chunk and reports."""
        wanted, paths = [], []
        for chunk_id in dict.fromkeys(chunk_ids):
            if len(wanted) == self.fetched.max_chunks:
                break
            path = idpath(chunk_id)
            if chunk_id not in self.fetched and not self._is_pending(path):
                wanted.append(chunk_id)
                paths.append(path)
        if not self.fs.reads_in_batches:
            if wanted:
                self.fs.read_ahead(paths)
            return
        if not wanted:
            return
        try:
            contents = self.fs.read_files(paths)
        except (OSError, errors.ObnamError) as e:
            errors.reraise_fatal(e)
            return
        self.fetched.keep(zip(wanted, contents))

    def _is_pending(self, path):
        """Files are pending only while writing behind (write_behind(False)
        waits for them all): no lock is taken for each chunk read."""
        return self.writer is not None and self.writer.is_pending(path)

    def get(self, chunk_id):
        data = self.fetched.take(chunk_id)
        if data is not None:
            return data
        path = idpath(chunk_id)
        self._wait_for(path)
        try:
            return self.fs.read_file(path)
        except FileNotFoundError:
            other = self._find_elsewhere(chunk_id)
            if other is None:
                raise errors.RepositoryChunkDoesNotExist(
                    chunk_id='%x' % chunk_id, filename=path)
            return self.fs.read_file(other)

    def has(self, chunk_id):
        self._wait_for(idpath(chunk_id))
        return (self.fs.exists(idpath(chunk_id)) or
                self._find_elsewhere(chunk_id) is not None)

    def remove(self, chunk_id):
        """Remove a chunk file; never one whose create failed here (its
        name may belong to another process)."""
        self._wait_for(idpath(chunk_id))
        self.fetched.discard(chunk_id)
        if self.background is not None and \
                self.background.has_failed(idpath(chunk_id)):
            return
        path = idpath(chunk_id)
        try:
            self.fs.remove(path)
        except FileNotFoundError:
            if self.wrote(chunk_id):
                return      # ours are at the default idpath: never created
            other = self._find_elsewhere(chunk_id)
            if other is not None:
                self.fs.remove(other)

    def _find_elsewhere(self, chunk_id):
        """Path of a chunk stored under a non-default idpath, if any.

        Obnam's idpath settings could be changed, so a chunk may live at
        any chunks/…/<hex>; we list the tree once and remember it."""
        if self.by_basename is None:
            self.by_basename = {cid: path for cid, path in self._walk()}
        return self.by_basename.get(chunk_id)

    def sizes(self, chunk_ids=None):
        """{chunk id: size of its file as stored} of the given chunks (or
        of every chunk), those without a file left out: one listing with
        sizes per chunk directory, all of them together where the
        storage can (SFTP)."""
        if self.background is not None:
            self.background.wait()
        if chunk_ids is None:
            return self._all_sizes()
        paths = {chunk_id: idpath(chunk_id) for chunk_id in chunk_ids}
        found = self._sizes_at(paths)
        elsewhere = {chunk_id: self._find_elsewhere(chunk_id)
                     for chunk_id in set(paths) - set(found)}
        found.update(self._sizes_at(
            {c: p for c, p in elsewhere.items() if p is not None}))
        return found

    def _all_sizes(self):
        """sizes() of every chunk: the walk stops above the bottom
        directories, which are then listed once each, with sizes."""
        bottom, strays = [], {}
        for chunk_id, path in self._walk(bottom):
            strays[chunk_id] = path
        found = {}
        for start in range(0, len(bottom), SIZE_LISTINGS):
            batch = bottom[start:start + SIZE_LISTINGS]
            for listing in self.fs.file_sizes(batch):
                if isinstance(listing, FileNotFoundError):
                    continue
                if isinstance(listing, Exception):
                    raise listing
                for name, size in listing.items():
                    chunk_id = parse_chunk_name(name)
                    if chunk_id is not None:
                        found[chunk_id] = size
        found.update(self._sizes_at(strays))
        return found

    def _sizes_at(self, paths):
        """{chunk id: size} of the files at paths ({chunk id: path})."""
        by_dir = {}
        for chunk_id, path in paths.items():
            dirname, name = path.rsplit('/', 1)
            by_dir.setdefault(dirname, []).append((chunk_id, name))
        dirnames = sorted(by_dir)
        listings = []
        for start in range(0, len(dirnames), SIZE_LISTINGS):
            listings += self.fs.file_sizes(
                dirnames[start:start + SIZE_LISTINGS])
        found = {}
        for dirname, listing in zip(dirnames, listings):
            if isinstance(listing, FileNotFoundError):
                continue
            if isinstance(listing, Exception):
                raise listing
            for chunk_id, name in by_dir[dirname]:
                if name in listing:
                    found[chunk_id] = listing[name]
        return found

    def ids(self):
        """Every chunk id that has a chunk file, in no particular order."""
        if self.background is not None:
            self.background.wait()
        return [chunk_id for chunk_id, _ in self._walk()]

    def _walk(self, bottom=None):
        """(id, path) of every chunk file.  At the default depth we trust the
        layout and ask isdir only elsewhere (a round trip on SFTP).  If
        `bottom` is a list, the directories at the default depth are put
        in it instead of being listed."""
        if not self.fs.isdir(TOPLEVEL):
            return
        pending = [(TOPLEVEL, 0)]
        while pending:
            dirname, depth = pending.pop()
            if depth == IDPATH_DEPTH and bottom is not None:
                bottom.append(dirname)
                continue
            for name in self.fs.listdir(dirname):
                path = dirname + '/' + name
                chunk_id = parse_chunk_name(name)
                if depth == IDPATH_DEPTH and chunk_id is not None:
                    yield chunk_id, path
                elif self.fs.isdir(path):
                    pending.append((path, depth + 1))
                elif chunk_id is not None and depth > 0:
                    yield chunk_id, path
