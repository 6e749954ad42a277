"""fsck's reading of file contents: each chunk a file uses exists, its
content matches the checksum the indexes record, and the whole file
matches its size and MD5.

Files are queued and their chunks read in batches (which may span
generations and clients), in the checker's order (format 6: chunk file
names, so that a disk reads them nearly sequentially), each at most once
per batch: a chunk several files of a batch use stays in memory until its
last use (within a byte limit).  The repository is told each window of
chunks a batch reads next (prefetch_chunks), so that SFTP reads hundreds
of chunk files in a few round trips.  A file whose chunk list and
checksum were verified in this or the previous generation (an unchanged
file, a copy) is not read again.  What is kept for the whole run are
sets of ids, not per-file data.

A file of several chunks is hashed twice: each chunk against the
indexes, and the whole file.  With more than one core, the whole-file
MD5 of a big chunk is computed in a worker thread while the main thread
reads and hashes the next one (hashlib lets go of the GIL for big
buffers); a file's chunks go to the worker in order, one at a time.
"""

import collections
import concurrent.futures
import dataclasses
import hashlib
import os
import struct

from obnamlib import errors

# Files whose chunks are read together, in chunk file name order: a bound
# on the chunk ids queued, and on the bytes of shared chunks kept in memory.
BATCH_CHUNK_IDS = 8192
SHARED_CHUNK_BYTES = 8 * 1024 * 1024

# One read-ahead hint to the repository (prefetch_chunks) names at most
# this many chunks and about this much data (estimated from file sizes).
# The next hint goes out when half of one is read, so that reading ahead
# never stops: one and a half hints fit in what format 6 keeps of a
# prefetch (256 chunks, 32 MiB).
READ_AHEAD_CHUNKS = 128
READ_AHEAD_BYTES = 16 * 1024 * 1024

# Chunks at least this big are added to their file's MD5 in the worker
# thread (smaller ones cost more in thread switches than they save).
BACKGROUND_HASH_BYTES = 256 * 1024


@dataclasses.dataclass(slots=True)
class _QueuedFile:
    """A regular file whose chunks wait to be read in the next batch
    (only what the check needs: a batch holds thousands)."""
    shown: str
    size: object        # st_size, or None
    md5: object         # whole-file MD5 (bytes), or None
    chunk_ids: list
    digest: bytes


class ContentCheck:
    """The content half of fsck's walk (see the module docstring).

    report(text): a problem line; checking(text): what is being checked
    now; counted(): the counters in stats changed."""

    def __init__(self, repo, checker, stats, report, checking, counted):
        self.repo = repo
        self.checker = checker
        self.stats = stats
        self.report = report
        self.checking = checking
        self.counted = counted
        self.verified_chunks = set()  # ids whose content matched its checksum
        self.bad_chunks = {}        # chunk id -> problem text
        self.verified_lists = set()  # digests of files verified, this gen
        self.previous_lists = set()  # ... and in the generation before
        self.queued = []            # _QueuedFile, read at the next flush
        self.queued_ids = 0
        self.hasher = None          # the whole-file MD5 worker, once needed
        self.on_disk = None         # chunk ids of the chunk files

    def close(self):
        """Stop the worker thread, if one was started."""
        if self.hasher is not None:
            self.hasher.shutdown()
            self.hasher = None

    def _whole_file_hasher(self):
        """The worker for whole-file MD5s, or None on one core."""
        if self.hasher is None and len(os.sched_getaffinity(0)) > 1:
            self.hasher = concurrent.futures.ThreadPoolExecutor(
                1, thread_name_prefix='obnam-fsck-md5')
        return self.hasher

    def next_generation(self):
        """Files verified in the generation just checked count as verified
        in the next one too, but no longer after it."""
        self.previous_lists = self.verified_lists
        self.verified_lists = set()

    def chunk_ids_on_disk(self):
        """The checker's set, asked for once (every file needs it, and the
        walk removes no chunk)."""
        if self.on_disk is None:
            self.on_disk = self.checker.chunk_ids_on_disk()
            self.stats.chunks_total = len(self.on_disk)
        return self.on_disk

    def check_in_tree(self, shown, metadata, data):
        """A file whose content is stored in its generation's tree."""
        self._check_whole_file(shown, metadata.st_size, metadata.md5,
                               _WholeFile(data))

    def check_chunks(self, shown, metadata, chunk_ids, skip_checksums):
        """A file's chunks exist; unless skip_checksums, queue it for
        reading (at once when the batch is full)."""
        on_disk = self.chunk_ids_on_disk()
        missing = [c for c in chunk_ids if c not in on_disk]
        for chunk_id in missing:
            self.report('%s: chunk %x does not exist' % (shown, chunk_id))
        if missing or skip_checksums:
            return
        digest = hashlib.md5(struct.pack('!%dQ' % len(chunk_ids), *chunk_ids)
                             + (metadata.md5 or b'')).digest()
        if self._verified(digest):
            return
        self.queued.append(_QueuedFile(shown, metadata.st_size, metadata.md5,
                                       chunk_ids, digest))
        self.queued_ids += len(chunk_ids)
        if self.queued_ids >= BATCH_CHUNK_IDS:
            self.flush()

    def _verified(self, digest):
        if digest in self.verified_lists:
            return True
        if digest in self.previous_lists:
            self.verified_lists.add(digest)
            return True
        return False

    def flush(self):
        """Read the queued files' chunks, in chunk file name order."""
        queued, self.queued, self.queued_ids = self.queued, [], 0
        if not queued:
            return
        walking = self.stats.phase
        self.checking('the chunks of %d file(s)' % len(queued))
        order = self.checker.chunk_sort_key
        queued.sort(key=lambda f: order(f.chunk_ids[0]) if f.chunk_ids
                    else order(0))
        shared = _SharedChunks(
            collections.Counter(c for f in queued for c in f.chunk_ids))
        ahead = _ReadAhead(queued)
        for item in queued:
            if self._verified(item.digest):
                shared.forget(item.chunk_ids)
                continue
            whole = self._chunk_contents(item, shared, ahead)
            if whole is not None and self._check_whole_file(
                    item.shown, item.size, item.md5, whole):
                self.verified_lists.add(item.digest)
        self.checking(walking)

    def _chunk_contents(self, item, shared, ahead):
        """A _WholeFile of the chunks' contents in order (streamed, so a
        big file is never in memory), or None if a chunk is damaged."""
        whole = _WholeFile(hasher=(self._whole_file_hasher()
                                   if len(item.chunk_ids) > 1 else None))
        for i, chunk_id in enumerate(item.chunk_ids):
            data, md5 = shared.take(chunk_id), None
            if data is None:
                self._read_ahead(ahead, chunk_id)
                data, problem, md5 = self._read_chunk(chunk_id)
                if problem is not None:
                    self.report('%s: %s' % (item.shown, problem))
                    shared.forget(item.chunk_ids[i + 1:])
                    return None
                shared.keep(chunk_id, data)
            whole.update(data, md5)
        return whole

    def _read_ahead(self, ahead, chunk_id):
        """Before reading the first chunk of a window, tell the repository
        the window (SFTP then reads it in a few round trips)."""
        window = ahead.window_from(chunk_id, skip=self.bad_chunks)
        if window:
            self.repo.prefetch_chunks(window)

    def _read_chunk(self, chunk_id):
        """(content, problem, MD5 object of the content if computed)."""
        known = self.bad_chunks.get(chunk_id)
        if known is not None:
            return None, known, None
        try:
            data = self.repo.get_chunk_content(chunk_id)
        except errors.RepositoryChunkDoesNotExist:
            return self._chunk_problem(chunk_id, 'chunk %x does not exist')
        except (errors.ObnamError, ValueError, OSError) as e:
            return self._chunk_problem(
                chunk_id,
                'chunk %x is corrupted: ' + error_line(e).replace('%', '%%'))
        self.stats.chunk_reads += 1
        self.stats.chunk_bytes += len(data)
        md5 = None
        if chunk_id not in self.verified_chunks:
            expected = self.checker.expected_checksum(chunk_id)
            md5 = hashlib.md5(data)
            actual = md5.hexdigest().encode('ascii')
            if expected is not None and expected != actual:
                return self._chunk_problem(chunk_id, 'chunk %x is corrupted')
            self.verified_chunks.add(chunk_id)
            self.stats.chunks += 1
        self.counted()
        return data, None, md5

    def _chunk_problem(self, chunk_id, template):
        text = template % chunk_id
        self.bad_chunks[chunk_id] = text
        return None, text, None

    def _check_whole_file(self, shown, st_size, md5, whole):
        ok = True
        if st_size is not None and whole.size != st_size:
            self.report('%s: content is %d bytes, metadata says %d'
                         % (shown, whole.size, st_size))
            ok = False
        if md5 is not None and whole.digest() != md5:
            self.report('%s: whole-file checksum mismatch' % shown)
            ok = False
        return ok


class _WholeFile:
    """Size and MD5 of a file's content, fed one chunk at a time.

    hasher: an executor whose one thread adds big chunks to the MD5 (see
    the module docstring); None: all are added here."""

    def __init__(self, data=b'', hasher=None):
        self.md5 = hashlib.md5(data)
        self.size = len(data)
        self.hasher = hasher
        self.pending = None     # the worker's update, not waited for yet

    def update(self, data, md5=None):
        """md5: that of data alone, if known; for the first piece it is
        the whole file's so far, and data need not be hashed again."""
        if self.size == 0 and md5 is not None:
            self.md5 = md5.copy()
        else:
            self._wait()
            if self.hasher is not None and \
                    len(data) >= BACKGROUND_HASH_BYTES:
                self.pending = self.hasher.submit(self.md5.update, data)
            else:
                self.md5.update(data)
        self.size += len(data)

    def digest(self):
        self._wait()
        return self.md5.digest()

    def _wait(self):
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()


class _ReadAhead:
    """The distinct chunks of a batch in the order they are first read,
    cut into windows for prefetch hints.

    A window starts at the first chunk not hinted yet, when the reads
    reach it or the middle of the window before, and takes the chunks
    that follow, up to READ_AHEAD_CHUNKS and about READ_AHEAD_BYTES (a
    file's size shared out over its chunks).  Each chunk is in one window
    only: a read that the repository could not serve from a hint (a
    failed batch, a chunk pushed out of its cache) reads that chunk
    alone."""

    def __init__(self, queued):
        sizes = {}
        for item in queued:
            each = (item.size or 0) // max(1, len(item.chunk_ids))
            for chunk_id in item.chunk_ids:
                sizes.setdefault(chunk_id, each)
        self.order = list(sizes.items())
        self.index = {chunk_id: i for i, (chunk_id, _) in
                      enumerate(self.order)}
        self.hinted = 0     # order[:hinted] were named in a hint
        self.refill = 0     # reading order[refill] hints the next window

    def window_from(self, chunk_id, skip=()):
        """Chunk ids of the next window if reading chunk_id calls for one,
        else [].  skip: chunks known damaged (they would fail the whole
        batch)."""
        at = self.index.get(chunk_id)
        if at is None or at < min(self.refill, self.hinted):
            return []
        start = max(at, self.hinted)
        window, size, end = [], 0, start
        while end < len(self.order) and len(window) < READ_AHEAD_CHUNKS:
            next_id, next_size = self.order[end]
            if window and size + next_size > READ_AHEAD_BYTES:
                break
            end += 1
            if next_id not in skip:
                window.append(next_id)
                size += next_size
        self.hinted = end
        self.refill = start + (end - start) // 2
        return window


class _SharedChunks:
    """Contents of chunks that files later in a batch use again.

    uses: chunk id -> how many more times the batch needs it.  A chunk is
    kept while it is still needed and the byte limit allows; so each chunk
    is read once per batch unless many big shared chunks are in flight."""

    def __init__(self, uses, limit=None):
        self.uses = uses
        self.limit = SHARED_CHUNK_BYTES if limit is None else limit
        self.kept = {}
        self.size = 0

    def take(self, chunk_id):
        """The kept content of a chunk (this use counted), or None."""
        data = self.kept.get(chunk_id)
        if data is not None:
            self._used(chunk_id)
        return data

    def keep(self, chunk_id, data):
        """A chunk just read: remember it if it is needed again."""
        self.uses[chunk_id] -= 1
        if self.uses[chunk_id] > 0 and self.size + len(data) <= self.limit:
            self.kept[chunk_id] = data
            self.size += len(data)

    def forget(self, chunk_ids):
        """Uses that will not happen (a file skipped or damaged)."""
        for chunk_id in chunk_ids:
            if chunk_id in self.kept:
                self._used(chunk_id)
            else:
                self.uses[chunk_id] -= 1

    def _used(self, chunk_id):
        self.uses[chunk_id] -= 1
        if self.uses[chunk_id] <= 0:
            self.size -= len(self.kept.pop(chunk_id))


def error_line(error):
    """An error as fsck's problem lines show it: its first line."""
    if isinstance(error, errors.ObnamError):
        return error.first_line()
    return str(error).splitlines()[0] if str(error) else type(error).__name__
