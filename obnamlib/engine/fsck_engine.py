"""fsck: find damage in a repository and say exactly what it affects.

The storage checks (format marker, key files, B-tree forests, chunk
indexes) are format-specific and come from a checker object; this module
walks every client's generations through the Repository API: generation
metadata, each file's metadata and directory listing, each chunk a file
uses (it exists, its content matches the checksum the indexes record, the
whole file matches its MD5).  Every problem is one line naming the client,
generation and path it affects.

The first generation checked of a client is walked from `/`; for each
later one the checker names the paths whose entries changed since the
generation before (format 6: the B-tree nodes they do not share), and
only those are checked.  If chunks turn out damaged, a last pass names
the files that use them in every generation, reading no chunk.

Chunks are read in batches (which may span generations and clients), in
the checker's order (format 6: chunk file names, so that a disk reads
them nearly sequentially), each at most once per batch: a chunk several
files of a batch use stays in memory until its last use (within a byte
limit).  The repository is told each window of chunks a batch reads next
(prefetch_chunks), so that SFTP reads hundreds of chunk files in a few
round trips.  A file whose chunk list and checksum were verified in this
or the previous generation (an unchanged file, a copy) is not read again.
What is kept for the whole run are sets of ids, not per-file data.
"""

import collections
import dataclasses
import hashlib
import struct

from obnamlib import larch

from obnamlib import errors
from obnamlib.repo import interface as repo_interface
from obnamlib.engine import stored_names


# What every generation must record (counts only when not a checkpoint).
_GENERATION_FACTS = {
    repo_interface.GEN_STARTED: 'generation start time',
    repo_interface.GEN_ENDED: 'generation end time',
    repo_interface.GEN_FILE_COUNT: 'file count',
    repo_interface.GEN_TOTAL_DATA: 'total data',
}


@dataclasses.dataclass
class FsckOptions:
    fix: bool = False
    rm_unused: bool = False
    ignore_chunks: bool = False
    ignore_clients: tuple = ()
    last_generation_only: bool = False
    skip_generations: bool = False
    skip_dirs: bool = False
    skip_files: bool = False
    skip_per_client_b_trees: bool = False
    skip_shared_b_trees: bool = False
    skip_checksums: bool = False

    @classmethod
    def from_settings(cls, settings):
        return cls(
            fix=settings['fsck-fix'],
            rm_unused=settings['fsck-rm-unused'] or settings['fsck-fix'],
            ignore_chunks=settings['fsck-ignore-chunks'],
            ignore_clients=tuple(settings['fsck-ignore-client'] or ()),
            last_generation_only=settings['fsck-last-generation-only'],
            skip_generations=settings['fsck-skip-generations'],
            skip_dirs=settings['fsck-skip-dirs'],
            skip_files=settings['fsck-skip-files'],
            skip_per_client_b_trees=settings['fsck-skip-per-client-b-trees'],
            skip_shared_b_trees=settings['fsck-skip-shared-b-trees'],
            skip_checksums=settings['fsck-skip-checksums'])

    def checks_everything(self):
        """Only a full walk may call a chunk unused (Obnam's rule)."""
        return not (self.ignore_chunks or self.skip_files or self.skip_dirs
                    or self.skip_generations or self.last_generation_only
                    or self.ignore_clients)


# Files whose chunks are read together, in chunk file name order: a bound
# on the chunk ids queued, and on the bytes of shared chunks kept in memory.
BATCH_CHUNK_IDS = 8192
SHARED_CHUNK_BYTES = 8 * 1024 * 1024

# One read-ahead hint to the repository (prefetch_chunks) names at most
# this many chunks and about this much data (estimated from file sizes).
# The next hint goes out when half of one is read, so that reading ahead
# never stops: one and a half hints fit in what format 6 keeps of a
# prefetch (256 chunks, 64 MiB).
READ_AHEAD_CHUNKS = 128
READ_AHEAD_BYTES = 32 * 1024 * 1024


@dataclasses.dataclass
class FsckStats:
    clients: int = 0
    generations: int = 0
    files: int = 0
    chunks: int = 0             # distinct chunks whose content was verified
    problems: int = 0
    fixed: int = 0
    chunks_total: int = 0       # chunk files in the repository
    chunk_reads: int = 0        # chunk files read (chunks + re-reads)
    chunk_bytes: int = 0        # bytes of chunk content read
    phase: str = ''             # what is being checked now


class SilentReporter:
    """What fsck tells as it goes; the plugin passes one that prints."""

    def problem(self, text):
        pass

    def checking(self, text):
        pass

    def counted(self, stats):
        """The counters in stats changed (called often; throttle here)."""


@dataclasses.dataclass(slots=True)
class _QueuedFile:
    """A regular file whose chunks wait to be read in the next batch
    (only what the check needs: a batch holds thousands)."""
    shown: str
    size: object        # st_size, or None
    md5: object         # whole-file MD5 (bytes), or None
    chunk_ids: list
    digest: bytes


def storage_checker_for(repo, fix):
    """The format's own checker (the walk below is format-neutral)."""
    if repo.format_name == '6':
        from obnamlib.repo.fmt_6.fsck_checks import Fmt6Checker
        return Fmt6Checker(repo, fix=fix)
    raise errors.UnknownRepositoryFormat(format=repo.format_name,
                                         url=getattr(repo, 'location', ''))


class Fsck:

    def __init__(self, repo, options=None, reporter=None, checker=None):
        self.repo = repo
        self.options = options or FsckOptions()
        self.reporter = reporter or SilentReporter()
        self.checker = checker or storage_checker_for(repo, self.options.fix)
        self.stats = FsckStats()
        self.verified_chunks = set()  # ids whose content matched its checksum
        self.bad_chunks = {}        # chunk id -> problem text
        self.verified_lists = set()  # digests of files verified, this gen
        self.previous_lists = set()  # ... and in the generation before
        self.queued = []            # _QueuedFile, read at the next flush
        self.queued_ids = 0
        self.used = {}              # client name -> chunk ids its files use

    def run(self):
        """Check everything; returns the problem lines (also reported)."""
        self.problems = []
        self.reported = set()
        self.partly_checked = []    # (client, gen, where) of _check_changed
        self.walk_problems = 0      # problems that hide which chunks are used
        self.checker.lock()
        try:
            if not self.options.ignore_chunks:
                self.repo.expect_chunk_reads()
            self._storage_checks()
            if not self.options.skip_generations:
                for client_name in self._client_names():
                    self._check_client(client_name)
                self._flush()
                if not self.options.ignore_chunks:
                    self._name_users_of_damaged_chunks()
            complete = self.walk_problems == 0
            if self.options.checks_everything() and not complete:
                self._report('unused chunks were not looked for: the '
                             'problems above hide which chunks are in use')
            self._checking('chunk indexes')
            self._report_all(self.checker.check_chunk_indexes(
                self.used, remove_unused=self.options.rm_unused and complete,
                report_unused=self.options.checks_everything() and complete))
        finally:
            self.checker.unlock()
        return self.problems

    # --- reporting ----------------------------------------------------------

    def _report(self, text):
        self.problems.append(text)
        self.reported.add(text)
        self.stats.problems += 1
        if is_fixed(text):
            self.stats.fixed += 1
        self.reporter.problem(text)

    def _walk_problem(self, text):
        """A problem that hides part of a generation (and its chunks)."""
        self.walk_problems += 1
        self._report(text)

    def _report_all(self, texts):
        for text in texts:
            self._report(text)

    # --- storage -------------------------------------------------------------

    def _checking(self, text):
        self.stats.phase = text
        self.reporter.checking(text)
        self.reporter.counted(self.stats)

    def _storage_checks(self):
        self._checking('repository format and keys')
        self._report_all(self.checker.check_format())
        self._report_all(self.checker.check_keys())
        self._checking('B-trees')
        self._report_all(self.checker.check_forests(
            shared=not self.options.skip_shared_b_trees,
            per_client=not self.options.skip_per_client_b_trees,
            ignore_clients=self.options.ignore_clients))

    def _client_names(self):
        try:
            names = self.repo.get_client_names()
        except (errors.ObnamError, larch.Error) as e:
            self._walk_problem('client list cannot be read: %s' % _text(e))
            return []
        return [n for n in names if n not in self.options.ignore_clients]

    # --- generations --------------------------------------------------------

    def _check_client(self, client_name):
        self.stats.clients += 1
        self.used[client_name] = set()
        try:
            gen_ids = self.repo.get_generation_ids(client_name)
        except (errors.ObnamError, larch.Error) as e:
            self.used[client_name] = None
            self._walk_problem('client %s: generations cannot be listed: %s'
                         % (client_name, _text(e)))
            return
        numbers = [self.repo.make_generation_spec(g) for g in gen_ids]
        for number in sorted(set(n for n in numbers if numbers.count(n) > 1)):
            # only one tree of an id can be read: the others' chunks must
            # not be taken for unused
            self._walk_problem('%s: duplicate generation id %s'
                               % (client_name, number))
        if self.options.last_generation_only:
            gen_ids = gen_ids[-1:]
        for i, gen_id in enumerate(gen_ids):
            self._checking('client %s generation %s (%d/%d)' % (
                client_name, self.repo.make_generation_spec(gen_id), i + 1,
                len(gen_ids)))
            self._check_generation(client_name, gen_id)
            self.checker.release_generation(gen_id)
            self.previous_lists = self.verified_lists
            self.verified_lists = set()

    def _check_generation(self, client_name, gen_id):
        self.stats.generations += 1
        where = '%s:%s' % (client_name, self.repo.make_generation_spec(gen_id))
        try:
            values = {key: self.repo.get_generation_key(gen_id, key)
                      for key in list(_GENERATION_FACTS) + [
                          repo_interface.GEN_IS_CHECKPOINT]}
        except (errors.ObnamError, larch.Error) as e:
            self._walk_problem('%s: generation metadata cannot be read: %s'
                               % (where, _text(e)))
            return
        checkpoint = values[repo_interface.GEN_IS_CHECKPOINT]
        for key, what in _GENERATION_FACTS.items():
            counts = key in (repo_interface.GEN_FILE_COUNT,
                             repo_interface.GEN_TOTAL_DATA)
            if values[key] is None and not (checkpoint and counts):
                self._report('%s: no %s' % (where, what))
        if self.options.skip_dirs:
            return
        changed = self.checker.changed_paths(client_name, gen_id)
        if changed is None:
            self._walk(client_name, gen_id, where)
        else:
            self.partly_checked.append((client_name, gen_id, where))
            self._check_changed(client_name, gen_id, where, changed)

    def _check_changed(self, client_name, gen_id, where, changed):
        """Only what differs from the generations checked before: the
        rest is the very same B-tree nodes, checked already."""
        changed_set = set(changed)
        for path in changed:
            metadata = self._check_path(client_name, gen_id, path, where)
            if metadata is not None and metadata.isdir():
                for name in self._children(gen_id, path, where):
                    child = _join(path, name)
                    if child not in changed_set:
                        self._metadata(gen_id, child, where)

    def _name_users_of_damaged_chunks(self):
        """Files unchanged since an earlier generation were not looked at
        again; when chunks turned out damaged, name their users in every
        generation (reading no chunk)."""
        on_disk = self._chunk_ids_on_disk()
        if not self.bad_chunks and on_disk >= self._chunks_in_use():
            return
        for client_name, gen_id, where in self.partly_checked:
            self._checking('which files of client %s generation %s use '
                           'damaged chunks' % (
                               client_name,
                               self.repo.make_generation_spec(gen_id)))
            for path in self._regular_files(gen_id):
                self._name_if_damaged(gen_id, path, where, on_disk)

    def _chunks_in_use(self):
        used = set()
        for chunk_ids in self.used.values():
            used |= chunk_ids or set()
        return used

    def _regular_files(self, gen_id):
        stack = [b'/']
        while stack:
            path = stack.pop()
            try:
                metadata = self.repo.get_metadata(gen_id, path)
                if metadata.isdir():
                    stack.extend(_join(path, name) for name in reversed(
                        self.repo.get_file_children(gen_id, path))
                        if stored_names.is_safe(name))
                elif metadata.isreg():
                    yield path
            except (errors.ObnamError, larch.Error, ValueError,
                    struct.error):
                continue    # reported when the generation was checked

    def _name_if_damaged(self, gen_id, path, where, on_disk):
        try:
            chunk_ids = self.repo.get_file_chunk_ids(gen_id, path)
        except (errors.ObnamError, larch.Error):
            return
        shown = '%s: %s' % (where, _show(path))
        for chunk_id in chunk_ids:
            if chunk_id not in on_disk:
                problem = 'chunk %x does not exist' % chunk_id
            else:
                problem = self.bad_chunks.get(chunk_id)
            text = '%s: %s' % (shown, problem)
            if problem is not None and text not in self.reported:
                self._report(text)
                return

    def _walk(self, client_name, gen_id, where):
        """Depth-first from /, with an explicit stack (no depth limit)."""
        stack = [b'/']
        while stack:
            path = stack.pop()
            metadata = self._check_path(client_name, gen_id, path, where)
            if metadata is not None and metadata.isdir():
                children = self._children(gen_id, path, where)
                stack.extend(_join(path, name) for name in reversed(children))

    def _check_path(self, client_name, gen_id, path, where):
        """Count and check one object (a file's chunks too); its metadata,
        or None if that is unreadable."""
        metadata = self._metadata(gen_id, path, where)
        if metadata is None:
            return None
        self.stats.files += 1
        self.reporter.counted(self.stats)
        if metadata.isreg() and not self.options.skip_files:
            self._check_file(client_name, gen_id, path, metadata, where)
        return metadata

    def _metadata(self, gen_id, path, where):
        try:
            return self.repo.get_metadata(gen_id, path)
        except errors.RepositoryFileDoesNotExistInGeneration:
            self._walk_problem('%s: %s: listed in its directory but has no '
                         'entry' % (where, _show(path)))
        except (errors.ObnamError, larch.Error, ValueError,
                struct.error) as e:
            self._walk_problem('%s: %s: metadata cannot be read: %s'
                         % (where, _show(path), _text(e)))
        return None

    def _children(self, gen_id, path, where):
        """The directory's names; an unsafe one (stored_names) is damage,
        reported and not walked into (restore refuses it too)."""
        try:
            names = self.repo.get_file_children(gen_id, path)
        except (errors.ObnamError, larch.Error) as e:
            self._walk_problem('%s: %s: directory cannot be listed: %s'
                         % (where, _show(path), _text(e)))
            return []
        safe, unsafe = stored_names.partition(names)
        for name in unsafe:
            self._walk_problem(
                '%s: %s: unsafe name stored (empty, ".", ".." or '
                'containing "/" or NUL)'
                % (where, stored_names.shown_path(path, name)))
        return safe

    # --- files and chunks -------------------------------------------------

    def _check_file(self, client_name, gen_id, path, metadata, where):
        shown = '%s: %s' % (where, _show(path))
        try:
            chunk_ids = self.repo.get_file_chunk_ids(gen_id, path)
            data = (None if chunk_ids else
                    self.repo.get_file_data(gen_id, path))
        except (errors.ObnamError, larch.Error) as e:
            self._walk_problem('%s: chunk list cannot be read: %s'
                               % (shown, _text(e)))
            return
        self.used[client_name].update(chunk_ids)
        if self.options.ignore_chunks:
            return
        if data is not None:
            self._check_whole_file(shown, metadata.st_size, metadata.md5,
                                   _WholeFile(data))
            return
        on_disk = self._chunk_ids_on_disk()
        missing = [c for c in chunk_ids if c not in on_disk]
        for chunk_id in missing:
            self._report('%s: chunk %x does not exist' % (shown, chunk_id))
        if missing or self.options.skip_checksums:
            return
        digest = hashlib.md5(struct.pack('!%dQ' % len(chunk_ids), *chunk_ids)
                             + (metadata.md5 or b'')).digest()
        if self._verified(digest):
            return
        self.queued.append(_QueuedFile(shown, metadata.st_size, metadata.md5,
                                       chunk_ids, digest))
        self.queued_ids += len(chunk_ids)
        if self.queued_ids >= BATCH_CHUNK_IDS:
            self._flush()

    def _chunk_ids_on_disk(self):
        on_disk = self.checker.chunk_ids_on_disk()
        self.stats.chunks_total = len(on_disk)
        return on_disk

    def _verified(self, digest):
        if digest in self.verified_lists:
            return True
        if digest in self.previous_lists:
            self.verified_lists.add(digest)
            return True
        return False

    def _flush(self):
        """Read the queued files' chunks, in chunk file name order."""
        queued, self.queued, self.queued_ids = self.queued, [], 0
        if not queued:
            return
        walking = self.stats.phase
        self._checking('the chunks of %d file(s)' % len(queued))
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
        self._checking(walking)

    def _chunk_contents(self, item, shared, ahead):
        """A _WholeFile of the chunks' contents in order (streamed, so a
        big file is never in memory), or None if a chunk is damaged."""
        whole = _WholeFile()
        for i, chunk_id in enumerate(item.chunk_ids):
            data, md5 = shared.take(chunk_id), None
            if data is None:
                self._read_ahead(ahead, chunk_id)
                data, problem, md5 = self._read_chunk(chunk_id)
                if problem is not None:
                    self._report('%s: %s' % (item.shown, problem))
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
                'chunk %x is corrupted: ' + _text(e).replace('%', '%%'))
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
        self.reporter.counted(self.stats)
        return data, None, md5

    def _chunk_problem(self, chunk_id, template):
        text = template % chunk_id
        self.bad_chunks[chunk_id] = text
        return None, text, None

    def _check_whole_file(self, shown, st_size, md5, whole):
        ok = True
        if st_size is not None and whole.size != st_size:
            self._report('%s: content is %d bytes, metadata says %d'
                         % (shown, whole.size, st_size))
            ok = False
        if md5 is not None and whole.md5.digest() != md5:
            self._report('%s: whole-file checksum mismatch' % shown)
            ok = False
        return ok


class _WholeFile:
    """Size and MD5 of a file's content, fed one chunk at a time."""

    def __init__(self, data=b''):
        self.md5 = hashlib.md5(data)
        self.size = len(data)

    def update(self, data, md5=None):
        """md5: that of data alone, if known; for the first piece it is
        the whole file's so far, and data need not be hashed again."""
        if self.size == 0 and md5 is not None:
            self.md5 = md5.copy()
        else:
            self.md5.update(data)
        self.size += len(data)


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


def is_fixed(text):
    """Whether a problem line says the problem was repaired."""
    return text.endswith('[fixed]') or text.endswith('; deleting')


def _join(dirname, basename):
    return (dirname.rstrip(b'/') + b'/' + basename) if dirname != b'/' \
        else b'/' + basename


def _show(path):
    return path.decode('utf-8', 'backslashreplace')


def _text(error):
    if isinstance(error, errors.ObnamError):
        return error.first_line()
    return str(error).splitlines()[0] if str(error) else type(error).__name__
