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
indexes, and the whole file.  With more than one core, a worker thread
shares the hashing of big chunks (hashlib lets go of the GIL for big
buffers): their part of the whole-file MD5 always, and their own MD5
while it is not behind (else the check hashes them itself).  The check
goes on meanwhile: a file's verdict waits until its last chunk, and the
chunks of such files are spread among those of the small files, which
cost the check's own thread (reading, hashing small chunks, walking
metadata), so that both threads work at once (_interleaved).  Problem
lines come in the order the walk gave the files (_InOrder), and name
the same chunks as when every chunk is checked in turn: a file's first
damaged chunk.

Where the repository allows it, a second obnam process checks some of
the batches (obnamlib.engine.fsck_side) while this one walks the
generations and checks the others; its findings are merged when they
come.  The report is the one a single process makes: lines wait for
those of the files walked before them, however the files were batched
and wherever they were checked.
"""

import collections
import dataclasses
import hashlib
import struct

from obnamlib import errors
from obnamlib.engine import background_md5

# Files whose chunks are read together, in chunk file name order: a bound
# on the chunk ids queued, and on the bytes of shared chunks kept in memory.
BATCH_CHUNK_IDS = 8192
SHARED_CHUNK_BYTES = 8 * 1024 * 1024

# fsck's second process (obnamlib.engine.fsck_side) is started once this
# many chunk ids were queued (a small check is over before it would boot),
# and then batches are this big: smaller ones share the work between the
# two processes more evenly, and the last batch sent is done sooner.
SIDE_AFTER_CHUNK_IDS = BATCH_CHUNK_IDS
SIDE_BATCH_CHUNK_IDS = 4096

# One read-ahead hint to the repository (prefetch_chunks) names at most
# this many chunks and about this much data (estimated from file sizes).
# The next hint goes out when half of one is read, so that reading ahead
# never stops: one and a half hints fit in what format 6 keeps of a
# prefetch (256 chunks, 32 MiB).
READ_AHEAD_CHUNKS = 128
READ_AHEAD_BYTES = 16 * 1024 * 1024


@dataclasses.dataclass
class BatchFindings:
    """What checking a batch in fsck's second process found, for the
    first one to merge (ContentCheck.check_batch, _merge)."""
    lines: dict = dataclasses.field(default_factory=dict)  # at -> lines
    verified_chunks: list = dataclasses.field(default_factory=list)
    verified_files: list = dataclasses.field(default_factory=list)
    bad_chunks: dict = dataclasses.field(default_factory=dict)
    chunk_reads: int = 0
    chunk_bytes: int = 0


@dataclasses.dataclass(slots=True)
class _QueuedFile:
    """A regular file whose chunks wait to be read in the next batch
    (only what the check needs: a batch holds thousands)."""
    shown: str
    size: object        # st_size, or None
    md5: object         # whole-file MD5 (bytes), or None
    chunk_ids: list
    digest: bytes
    at: int             # its number in the walk (_InOrder)


class ContentCheck:
    """The content half of fsck's walk (see the module docstring).

    report(text): a problem line; checking(text): what is being checked
    now; counted(): the counters in stats changed."""

    def __init__(self, repo, checker, stats, report, checking, counted,
                 side=None):
        """side: a fsck_side.SideCheck that batches may be sent to."""
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
        self.side = side
        self.ids_queued = 0         # in the whole run
        self.batch_ids = BATCH_CHUNK_IDS
        self.epoch = 0              # generations begun (next_generation)
        self.in_order = _InOrder(report)    # lines in the walk's order
        self.walked = 0             # files given to check_* so far
        self.journal = None         # what a batch verified (check_batch)

    def close(self):
        """Stop the worker thread and the second process, if started."""
        if self.side is not None:
            self.side.close()
        if self.hasher is not None:
            self.hasher.shutdown()
            self.hasher = None

    def _whole_file_hasher(self):
        """The worker for whole-file MD5s, or None on one core."""
        if self.hasher is None:
            self.hasher = background_md5.new_hasher()
        return self.hasher

    def next_generation(self):
        """Files verified in the generation just checked count as verified
        in the next one too, but no longer after it."""
        self.previous_lists = self.verified_lists
        self.verified_lists = set()
        self.epoch += 1

    def chunk_ids_on_disk(self):
        """The checker's set, asked for once (every file needs it, and the
        walk removes no chunk)."""
        if self.on_disk is None:
            self.on_disk = self.checker.chunk_ids_on_disk()
            self.stats.chunks_total = len(self.on_disk)
        return self.on_disk

    def _next_in_walk(self):
        """The number that orders a file's problem lines (_InOrder)."""
        self.walked += 1
        return self.walked - 1

    def check_in_tree(self, shown, metadata, data):
        """A file whose content is stored in its generation's tree."""
        self.in_order.done(self._next_in_walk(), self._whole_file_problems(
            shown, metadata.st_size, metadata.md5, _WholeFile(data)))

    def check_chunks(self, shown, metadata, chunk_ids, skip_checksums):
        """A file's chunks exist; unless skip_checksums, queue it for
        reading (at once when the batch is full)."""
        at = self._next_in_walk()
        on_disk = self.chunk_ids_on_disk()
        missing = ['%s: chunk %x does not exist' % (shown, chunk_id)
                   for chunk_id in chunk_ids if chunk_id not in on_disk]
        if missing or skip_checksums:
            self.in_order.done(at, missing)
            return
        digest = hashlib.md5(struct.pack('!%dQ' % len(chunk_ids), *chunk_ids)
                             + (metadata.md5 or b'')).digest()
        if self._verified(digest):
            self.in_order.done(at)
            return
        self.queued.append(_QueuedFile(shown, metadata.st_size, metadata.md5,
                                       chunk_ids, digest, at))
        self.queued_ids += len(chunk_ids)
        if self.queued_ids >= self.batch_ids:
            self.flush()

    def _verified(self, digest):
        if digest in self.verified_lists:
            return True
        if digest in self.previous_lists:
            self.verified_lists.add(digest)
            return True
        return False

    def flush(self):
        """Check the queued files, here or in the second process (the walk
        goes on meanwhile)."""
        queued = self._take_queued()
        if not queued:
            return
        self._take_side_findings(wait=False)
        if self._side_takes_batches():
            if self.side.submit(queued, self.epoch) is not None:
                return
        self._check_batch(queued, self.in_order.done)

    def finish(self):
        """After the walk: check what is queued (shared with the second
        process, which would wait otherwise), and wait for its findings.
        Every problem line has then been reported."""
        queued = self._take_queued()
        self._take_side_findings(wait=False)
        if queued and self._side_takes_batches():
            half = _first_half(queued)
            if self.side.submit(queued[:half], self.epoch) is not None:
                queued = queued[half:]
        if queued:
            self._check_batch(queued, self.in_order.done)
        self._take_side_findings(wait=True)

    def _take_queued(self):
        queued, self.queued = self.queued, []
        self.ids_queued += self.queued_ids
        self.queued_ids = 0
        return queued

    def _side_takes_batches(self):
        """Whether the next batch goes to the second process (started
        here when the run has proved big enough)."""
        if self.side is None or self.ids_queued < SIDE_AFTER_CHUNK_IDS:
            return False
        usable = self.side.usable()
        self.batch_ids = (BATCH_CHUNK_IDS if self.side.failed is not None
                          else SIDE_BATCH_CHUNK_IDS)
        return usable

    def _take_side_findings(self, wait):
        """Merge what the second process found (wait: all of it)."""
        if self.side is None:
            return
        for _, findings, files in self.side.done(wait):
            if findings is None:        # it failed: check the batch here
                self._check_batch(files, self.in_order.done)
            else:
                self._merge(findings, files)

    def _merge(self, findings, files):
        """A batch checked by the second process, as if checked here."""
        for chunk_id in findings.verified_chunks:
            if chunk_id not in self.verified_chunks:
                self.verified_chunks.add(chunk_id)
                self.stats.chunks += 1
        self.verified_lists.update(findings.verified_files)
        for chunk_id, text in findings.bad_chunks.items():
            self.bad_chunks.setdefault(chunk_id, text)
        self.stats.chunk_reads += findings.chunk_reads
        self.stats.chunk_bytes += findings.chunk_bytes
        for item in files:
            self.in_order.done(item.at, findings.lines.get(item.at, ()))
        self.counted()

    def check_batch(self, files):
        """In fsck's second process: check a batch the first one sent;
        what it found (BatchFindings)."""
        bad_before = set(self.bad_chunks)
        reads, size = self.stats.chunk_reads, self.stats.chunk_bytes
        self.journal = BatchFindings()
        try:
            self._check_batch(files, self._journal_lines)
            found = self.journal
        finally:
            self.journal = None
        found.bad_chunks = {chunk_id: text for chunk_id, text
                            in self.bad_chunks.items()
                            if chunk_id not in bad_before}
        found.chunk_reads = self.stats.chunk_reads - reads
        found.chunk_bytes = self.stats.chunk_bytes - size
        return found

    def _journal_lines(self, at, problems=()):
        if problems:
            self.journal.lines[at] = list(problems)

    def _check_batch(self, queued, resolve):
        """Read a batch's chunks, in chunk file name order, with the
        chunks of big files spread among the small ones (_interleaved);
        resolve(file's number in the walk, its problem lines) for each."""
        walking = self.stats.phase
        self.checking('the chunks of %d file(s)' % len(queued))
        queued.sort(key=self._read_order)
        steps = _interleaved(queued)
        shared = _SharedChunks(
            collections.Counter(c for f in queued for c in f.chunk_ids))
        ahead = _ReadAhead(queued, steps)
        checks = {}     # queued index -> _UnderWay: a file being checked
        finishing = collections.deque()  # those read, the worker not done
        for at, pos in steps:
            item = queued[at]
            if pos == 0:
                if self._verified(item.digest):
                    shared.forget(item.chunk_ids)
                    resolve(item.at)
                    continue
                checks[at] = _UnderWay(_WholeFile(hasher=(
                    self._whole_file_hasher() if len(item.chunk_ids) > 1
                    else None)))
            under_way = checks.get(at)
            if under_way is None:
                continue        # skipped, or a chunk was damaged
            problem = None
            if pos < len(item.chunk_ids):
                problem = self._add_chunk(item, pos, under_way, shared, ahead)
            if problem is not None:
                del checks[at]
                resolve(item.at, ['%s: %s' % (item.shown, problem)])
            elif pos >= len(item.chunk_ids) - 1:
                finishing.append(at)
            while finishing and checks[finishing[0]].whole.done():
                self._finish(queued, finishing.popleft(), checks, resolve)
        while finishing:
            self._finish(queued, finishing.popleft(), checks, resolve)
        self.checking(walking)

    def _read_order(self, item):
        """Files are taken in the order of their first chunks' files."""
        return self.checker.chunk_sort_key(
            item.chunk_ids[0] if item.chunk_ids else 0)

    def _finish(self, queued, at, checks, resolve):
        """A file all of whose chunks were read: its verdict."""
        item, under_way = queued[at], checks.pop(at)
        problem = self._settle(under_way)
        if problem is not None:
            resolve(item.at, ['%s: %s' % (item.shown, problem)])
            return
        problems = self._whole_file_problems(
            item.shown, item.size, item.md5, under_way.whole)
        if not problems:
            self.verified_lists.add(item.digest)
            if self.journal is not None:
                self.journal.verified_files.append(item.digest)
        resolve(item.at, problems)

    def _add_chunk(self, item, pos, under_way, shared, ahead):
        """Add a file's chunk at pos to its _WholeFile; the problem if
        the chunk (or one before it whose verdict was pending) is damaged:
        the file's later chunks are then not read (a big file is
        streamed, never in memory)."""
        chunk_id = item.chunk_ids[pos]
        whole = under_way.whole
        data = shared.take(chunk_id)
        if data is None and under_way.last_read[0] == chunk_id:
            data = under_way.last_read[1]   # a run of equal chunks (zeros)
            shared.forget([chunk_id])
        if data is not None:
            whole.update(data)
            return None
        self._read_ahead(ahead, chunk_id)
        was_known = chunk_id in self.bad_chunks
        data, problem = self._fetch_chunk(chunk_id)
        md5 = None
        if problem is None and chunk_id not in self.verified_chunks:
            if whole.has_room_for(data):
                under_way.pending.append((chunk_id, whole.digest_later(data)))
            else:
                md5 = hashlib.md5(data)
                digest = md5.digest()
                if under_way.pending:       # its verdict comes in turn
                    under_way.pending.append((chunk_id, _Known(digest)))
                else:
                    problem = self._verdict(chunk_id, digest)
        if problem is not None:
            earlier = self._settle(under_way)
            if earlier is not None:     # this chunk would not have been read
                if not was_known:
                    self.bad_chunks.pop(chunk_id, None)
                problem = earlier
            shared.forget(item.chunk_ids[pos:])
            return problem
        if under_way.pending:
            shared.forget([chunk_id])   # kept for other files once verified
        else:
            shared.keep(chunk_id, data)
        under_way.last_read = (chunk_id, data)
        whole.update(data, md5)
        self.counted()
        return None

    def _settle(self, under_way):
        """The verdicts the worker's MD5s of a file's chunks were waited
        for, in order: the problem of the first damaged chunk, or None."""
        pending, under_way.pending = under_way.pending, []
        for chunk_id, later in pending:
            problem = self._verdict(chunk_id, later.result())
            if problem is not None:
                return problem
        return None

    def _read_ahead(self, ahead, chunk_id):
        """Before reading the first chunk of a window, tell the repository
        the window (SFTP then reads it in a few round trips)."""
        window = ahead.window_from(chunk_id, skip=self.bad_chunks)
        if window:
            self.repo.prefetch_chunks(window)

    def _fetch_chunk(self, chunk_id):
        """(content, None) or (None, problem)."""
        known = self.bad_chunks.get(chunk_id)
        if known is not None:
            return None, known
        try:
            data = self.repo.get_chunk_content(chunk_id)
        except errors.RepositoryChunkDoesNotExist:
            return None, self._chunk_problem(chunk_id,
                                             'chunk %x does not exist')
        except (errors.ObnamError, ValueError, OSError) as e:
            return None, self._chunk_problem(
                chunk_id,
                'chunk %x is corrupted: ' + error_line(e).replace('%', '%%'))
        self.stats.chunk_reads += 1
        self.stats.chunk_bytes += len(data)
        return data, None

    def _verdict(self, chunk_id, digest):
        """Whether a chunk's content matches the checksum the indexes
        record: None, or the problem (then remembered)."""
        if chunk_id in self.verified_chunks:
            return None
        expected = self.checker.expected_checksum(chunk_id)
        if expected is not None and expected != digest.hex().encode('ascii'):
            return self._chunk_problem(chunk_id, 'chunk %x is corrupted')
        self.verified_chunks.add(chunk_id)
        self.stats.chunks += 1
        if self.journal is not None:
            self.journal.verified_chunks.append(chunk_id)
        return None

    def _chunk_problem(self, chunk_id, template):
        text = template % chunk_id
        self.bad_chunks[chunk_id] = text
        return text

    def _whole_file_problems(self, shown, st_size, md5, whole):
        problems = []
        if st_size is not None and whole.size != st_size:
            problems.append('%s: content is %d bytes, metadata says %d'
                            % (shown, whole.size, st_size))
        if md5 is not None and whole.digest() != md5:
            problems.append('%s: whole-file checksum mismatch' % shown)
        return problems


class _WholeFile(background_md5.BackgroundMD5):
    """Size and MD5 of a file's content, fed one chunk at a time.

    hasher: background_md5.new_hasher()'s executor, whose thread adds big
    chunks to the MD5 (see the module docstring), in the order given;
    None: all are added here."""

    def __init__(self, data=b'', hasher=None):
        super().__init__(data, hasher)
        self.size = len(data)

    def update(self, data, md5=None):
        """md5: that of data alone, if known; for the first piece it is
        the whole file's so far, and data need not be hashed again."""
        if self.size == 0 and md5 is not None:
            self.md5 = md5.copy()
        else:
            super().update(data)
        self.size += len(data)

    def has_room_for(self, data):
        """Whether handing data's own MD5 to the worker would pay: it is
        big, and the worker is not behind (else it is hashed in line: the
        two threads share the hashing)."""
        if self.hasher is None or \
                len(data) < background_md5.BACKGROUND_HASH_BYTES:
            return False
        self.drop_done()
        return self.pending_bytes + len(data) <= \
            background_md5.WORKER_AHEAD_BYTES // 2

    def digest_later(self, data):
        """A future of data's own MD5 digest, computed by the worker in
        its turn (a chunk's, to check against the indexes)."""
        return self.submit(_md5_digest, data)


def _md5_digest(data):
    return hashlib.md5(data).digest()


@dataclasses.dataclass(slots=True)
class _UnderWay:
    """A file of a batch being checked: its content's size and MD5 so far,
    [(chunk id, future of its MD5 digest)] of the chunks whose verdicts
    wait for the worker (_settle), and the last chunk read (id, content):
    a run of equal chunks is read and hashed once, as when it is kept in
    _SharedChunks."""
    whole: object
    pending: list = dataclasses.field(default_factory=list)
    last_read: tuple = (None, None)


class _Known:
    """A digest already known, where a future of one is expected."""

    __slots__ = ('digest',)

    def __init__(self, digest):
        self.digest = digest

    def result(self):
        return self.digest


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

    def __init__(self, queued, steps=None):
        """steps: (index in queued, chunk position) in the order the
        chunks are taken; default: each file's in turn."""
        if steps is None:
            steps = [(at, pos) for at, item in enumerate(queued)
                     for pos in range(len(item.chunk_ids))]
        sizes = {}
        for at, pos in steps:
            item = queued[at]
            if pos < len(item.chunk_ids):
                sizes.setdefault(item.chunk_ids[pos], (item.size or 0)
                                 // len(item.chunk_ids))
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


# What checking a file costs besides hashing it, in bytes hashed.
_FILE_WORK_BYTES = 32 * 1024


def _first_half(queued):
    """How many of the files come first in half of the work of checking
    them (their bytes, hashed twice in a file of several chunks, and a
    share for each file): fsck's two processes split the last batch."""
    def work(item):
        size = item.size or 0
        return (size * (2 if len(item.chunk_ids) > 1 else 1) +
                _FILE_WORK_BYTES)
    total = sum(work(item) for item in queued)
    done = 0
    for count, item in enumerate(queued):
        if done * 2 >= total:
            return count
        done += work(item)
    return len(queued)


def _interleaved(queued):
    """(index in queued, chunk position) of every chunk of a batch, in
    the order the check takes them: the files of one chunk (or none) in
    turn, with the chunks of bigger files spread evenly among them, each
    file's in order.  Checking a small file costs this thread's time; a
    big file's chunks cost little here but much in the threads and the
    process that hash them (and read them ahead): spread, both go on at
    once.  (Problem lines still come in the files' order: _InOrder.)"""
    small = [(at, 0) for at, item in enumerate(queued)
             if len(item.chunk_ids) <= 1]
    big = [(at, pos) for at, item in enumerate(queued)
           if len(item.chunk_ids) > 1 for pos in range(len(item.chunk_ids))]
    if not small or not big:
        return sorted(small + big)
    steps, taken = [], 0
    for n, step in enumerate(small, 1):
        steps.append(step)
        due = n * len(big) // len(small)
        steps.extend(big[taken:due])
        taken = due
    return steps


class _InOrder:
    """The problem lines of the files, reported in the order the walk gave
    the files (each has its number in it, from 0), though they are
    checked out of it: in batches, in chunk file order, big files spread
    among small ones (_interleaved), some by fsck's second process.  So
    the report does not depend on how the files were batched."""

    def __init__(self, report):
        self.report = report
        self.next = 0           # number of the next file to report
        self.finished = {}      # number -> its lines, not reported yet

    def done(self, at, problems=()):
        self.finished[at] = problems
        while self.next in self.finished:
            for problem in self.finished.pop(self.next):
                self.report(problem)
            self.next += 1


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
