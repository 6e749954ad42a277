"""One backup run: live file system in, one new generation out.

The run sequence is cli.md §6.1 and format-6.md §10: add the client if
new, lock it, start a generation cloned from the newest one, drop paths
that are no longer backed up, scan each root (obnamlib.engine.walker) storing
what changed (§6.3), record the roots' ancestors, then commit the client
before the chunk indexes (§10.2) so a crash at any point leaves at worst
unreferenced chunks.  Checkpoints (§6.7) commit the work so far every
`checkpoint` bytes written, so an interrupted run's successor skips it.

Here: the run and the walk.  Beside it: backup_commits (the generation
from start to commit, checkpoints), backup_content and backup_chunks (a
file's content into deduplicated chunks), backup_compare (§6.3's test)
and backup_pretend (--pretend).

The engine never prints: it reports through a BackupProgress.
"""

import dataclasses
import functools
import logging
import os
import re
import stat as stat_module
import time
import typing

import obnamlib.errors
import obnamlib.engine.live_metadata
import obnamlib.repo.metadata
import obnamlib.engine.walker as walker
from obnamlib.engine import (
    backup_chunks, backup_commits, backup_content, backup_pretend)
from obnamlib.engine.backup_compare import is_unchanged, unchanged
from obnamlib.engine.backup_content import as_obnam_error


class BackupRootDoesNotExist(obnamlib.errors.ObnamError):
    code = 'R79ED6X'
    msg = 'Backup root does not exist or is not a directory: {root}'


class BackupRootMissingError(obnamlib.errors.ObnamError):
    code = 'R338F2X'
    msg = 'No backup roots specified'


class BackupErrors(obnamlib.errors.ObnamError):
    code = 'R4C3BCX'
    msg = 'There were errors during the backup'


class RepositoryWriteError(obnamlib.errors.ObnamError):
    """Writing to the repository failed (e.g. ENOSPC): the run stops;
    what was committed before (generations, checkpoints) stays valid."""
    code = 'R5EE7DX'
    msg = ('Backup stopped: cannot write to the repository: {filename}: '
           '{errno}: {strerror}')


DEDUP_MODES = ('fatalist', 'verify', 'never')

# A remote VFS's small files are fetched in batches of this many (or bytes).
FILE_BATCH = 64
FILE_BATCH_BYTES = 8 * 1024 * 1024

_S_ISREG = stat_module.S_ISREG
_S_ISCHR = stat_module.S_ISCHR
_S_ISBLK = stat_module.S_ISBLK
_S_ISDIR = stat_module.S_ISDIR
_NO_SIZE = float('inf')        # no file is this big
_PLACEHOLDER_DIR = obnamlib.repo.metadata.Metadata(
    st_mode=stat_module.S_IFDIR | 0o777)

# Format 6 keeps no st_rdev: Obnam 1.x restored device nodes as 0:0
# without a word.
DEVICE_NUMBER_LOST = ('a device node: repository format 6 keeps no device '
                      'number, so it is restored as 0:0 (make it again '
                      'with mknod)')


def _now():
    return int(time.time())


@dataclasses.dataclass(frozen=True)
class BackupOptions:
    """The settings a backup run uses (the command fills these in)."""

    client_name: str
    chunk_size: int = 1024 * 1024
    checkpoint: int = 1024 ** 3
    deduplicate: str = 'fatalist'
    leave_checkpoints: bool = False
    pretend: bool = False
    now: typing.Optional[typing.Callable[[], int]] = _now
    exclusions: typing.Optional[walker.Exclusions] = None
    # --testing-fail-matching: compiled regexps; reading a matching
    # file fails with ENOENT (for tests of per-file errors as root).
    fail_matching: typing.Sequence[re.Pattern] = ()
    repository_url: str = ''
    # --encrypt-with: recorded in the client list for client-keys.
    key_id: str = ''

    def __post_init__(self):
        """Normalise what the command or a test passed (frozen, so
        through object.__setattr__, as the dataclasses documentation says)."""
        normalise = functools.partial(object.__setattr__, self)
        normalise('chunk_size', max(1, int(self.chunk_size)))
        normalise('checkpoint', int(self.checkpoint))
        normalise('deduplicate', _known_dedup_mode(self.deduplicate))
        normalise('now', self.now or _now)
        normalise('exclusions', self.exclusions or walker.Exclusions())
        normalise('fail_matching', tuple(self.fail_matching))
        normalise('key_id', self.key_id or '')


def _known_dedup_mode(deduplicate):
    if deduplicate in DEDUP_MODES:
        return deduplicate
    # Only a config file can say this (the option is a choice).
    logging.error('Unknown --deduplicate value %r: using "never"',
                  deduplicate)
    return 'never'


class _FileBatch:
    """Consecutive FILE events collected for a VFS that can prefetch
    (SFTP), or for reading ahead (a local disk): up to FILE_BATCH files,
    or FILE_BATCH_BYTES of small ones."""

    def __init__(self, fs, reads_ahead):
        self.small = fs.prefetch_size
        self.on = bool(self.small) or reads_ahead
        self.files = []
        self.small_bytes = 0

    def add(self, path, st):
        """Keep the event; False if batching is off (handle it now)."""
        if not self.on:
            return False
        self.files.append((path, st))
        if _S_ISREG(st.st_mode) and st.st_size <= self.small:
            self.small_bytes += st.st_size
        return True

    def full(self):
        return (len(self.files) >= FILE_BATCH or
                self.small_bytes >= FILE_BATCH_BYTES)

    def take(self):
        files, self.files, self.small_bytes = self.files, [], 0
        return files


def ancestors(path):
    """Proper ancestors of an absolute path, nearest first, ending in /."""
    result = []
    while path != b'/':
        path = os.path.dirname(path) or b'/'
        result.append(path)
    return result


class BackupEngine:
    """Back up roots from `fs` (live VFS) into `repo` (a Repository).

    `repo_io`, if given, has `bytes_written` and `bytes_read` counters of
    the repository's storage; checkpoints and the summary use them.
    """

    def __init__(self, repo, fs, options, progress, repo_io=None):
        self.repo = repo
        self.fs = fs
        self.options = options
        self.progress = progress
        self.chunks = backup_chunks.RunChunks(repo, options, progress)
        self.commits = backup_commits.GenerationCommits(
            repo, options, progress, self.chunks, repo_io)
        self.content = backup_content.FileContent(
            fs, options, self.chunks, self.commits.maybe_checkpoint)
        self.dir_state = {}           # path -> old Metadata or None
        # Per directory the walk is in, innermost last: is it new in the
        # generation (so nothing below it can have been stored)?
        self.new_dirs = []
        self.metadata_reader = obnamlib.engine.live_metadata.MetadataReader(fs)

    # --- the run -------------------------------------------------------

    def run(self, roots):
        """Back up the roots (absolute bytes paths).  Returns the progress;
        per-file errors are in progress.errors (the caller raises
        BackupErrors)."""
        root_stats = check_roots(self.fs, roots)
        if self.options.pretend:
            return backup_pretend.PretendRun(
                self.repo, self.fs, self.options, self.progress,
                self.metadata_reader).run(roots, root_stats)
        try:
            self.commits.begin()
            self._drop_unwanted(roots)
            for root, st in zip(roots, root_stats):
                self._backup_root(root, st)
            self.commits.finish()
        except OSError as e:
            self.commits.abandon()
            raise RepositoryWriteError(
                filename=e.filename or self.options.repository_url,
                errno=e.errno, strerror=e.strerror) from e
        except BaseException:
            self.commits.abandon()
            raise
        finally:
            self.content.close()
        if (self.commits.checkpoints and not self.progress.errors and
                not self.options.leave_checkpoints):
            self.commits.remove_checkpoints()
        self.commits.report_io()
        self.progress.finish()
        return self.progress

    # --- dropping what is no longer backed up (§6.1 step 5) -------------

    def _drop_unwanted(self, roots):
        gen = self.commits.gen
        keep_whole = set(roots)
        keep_dir = set()
        for root in roots:
            keep_dir.update(ancestors(root))
        if b'/' in keep_whole or not self.repo.file_exists(gen, b'/'):
            return
        pending = [b'/']
        while pending:
            dirname = pending.pop()
            for name in self.repo.get_file_children(gen, dirname):
                path = walker.join(dirname, name)
                if path in keep_whole:
                    continue
                if path in keep_dir:
                    pending.append(path)
                else:
                    self.repo.remove_file(gen, path)

    # --- one root ----------------------------------------------------------

    def _backup_root(self, root, root_st):
        self.progress.what('')
        self._ensure_ancestors(root)
        seen_root = False
        fake = self.content.fake_failure if self.options.fail_matching \
            else None
        batch = _FileBatch(self.fs, self.content.reads_ahead)
        maybe_checkpoint = self.commits.maybe_checkpoint
        for kind, path, value, names in walker.walk(
                self.fs, root, root_st, self.options.exclusions, fake):
            seen_root = True
            if kind is walker.FILE and batch.add(path, value):
                if batch.full():
                    self._backup_files(batch.take())
                continue
            self._backup_files(batch.take())
            if kind is walker.FILE:
                self._backup_nondir(path, value)
                maybe_checkpoint()
            elif kind is walker.ENTER:
                self._enter_dir(path, value)
            elif kind is walker.EXIT:
                self._exit_dir(path, value, names)
                maybe_checkpoint()
            else:
                self.progress.error(path, value)
        self._backup_files(batch.take())
        if not seen_root and self.repo.file_exists(self.commits.gen, root):
            self.repo.remove_file(self.commits.gen, root)
        self._record_ancestors(root)

    def _ensure_ancestors(self, root):
        """Make sure every ancestor exists, so children can be linked."""
        gen = self.commits.gen
        for path in reversed(ancestors(root)):
            if not self.repo.file_exists(gen, path):
                self.repo.set_metadata(gen, path,
                                       self._ancestor_metadata(path))

    def _record_ancestors(self, root):
        gen = self.commits.gen
        for path in ancestors(root):
            md = self._ancestor_metadata(path)
            try:
                old = self.repo.get_metadata(gen, path)
            except obnamlib.errors.RepositoryFileDoesNotExistInGeneration:
                old = None
            if old != md:
                self.repo.set_metadata(gen, path, md)

    def _ancestor_metadata(self, path):
        """Live metadata of an ancestor directory; the placeholder if it
        cannot be read or is not a directory (a symlink on the way to a
        root must still hold the root as a directory would)."""
        try:
            st = self.fs.lstat(path)
            if _S_ISDIR(st.st_mode):
                return self.metadata_reader.read(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            obnamlib.errors.reraise_fatal(e)
        return _PLACEHOLDER_DIR.copy()

    # --- directories -------------------------------------------------------

    def _enter_dir(self, path, st):
        old = self._old_metadata(path)
        if old is not None and not old.isdir():
            self.repo.remove_file(self.commits.gen, path)
            old = None
        if old is None:
            # Children need a parent; the real metadata follows at exit.
            self.repo.set_metadata(self.commits.gen, path,
                                   _PLACEHOLDER_DIR.copy())
        self.dir_state[path] = old
        self.new_dirs.append(old is None)

    def _exit_dir(self, path, st, names):
        gen = self.commits.gen
        old = self.dir_state.pop(path, None)
        is_new = self.new_dirs.pop() if self.new_dirs else False
        self.progress.found(path, 0)
        if not is_new:
            # A directory new in the generation holds only what the walk
            # stored in it (3% of a first backup's main thread asked).
            for name in self.repo.get_file_children(gen, path):
                if name not in names:
                    self.repo.remove_file(gen, walker.join(path, name))
        try:
            md = self.metadata_reader.read(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            self.progress.error(path, as_obnam_error(e, path), scanning=True)
            md = obnamlib.engine.live_metadata.metadata_from_stat(st)
        if old is None or not unchanged(old, md):
            self.repo.set_metadata(gen, path, md)
            self.progress.backed_up(path)

    # --- non-directories ---------------------------------------------------

    def _backup_files(self, files):
        """Back up consecutive non-directories of one directory (a batch:
        a remote VFS's small changed files are fetched together first; on
        a local disk the big changed files are read ahead in a worker, and
        the small ones' reads are started together if the disk must be
        read)."""
        if not files:
            return
        examined = {}
        changed = []
        reads_ahead = self.content.reads_ahead
        # Only the files that may be fetched or read ahead are examined
        # now (the rest as they are stored).
        small = self.fs.prefetch_size
        big = backup_content.READ_AHEAD_SIZE if reads_ahead else _NO_SIZE
        for path, st in files:
            if (0 < st.st_size <= small or st.st_size >= big) and \
                    _S_ISREG(st.st_mode):
                examined[path] = found = self._examine(path, st)
                if _is_changed(found):
                    changed.append((path, st))
        if reads_ahead:
            self.content.read_ahead(changed)
        prefetched = [path for path, st in changed if st.st_size <= small]
        if prefetched:
            self.fs.prefetch(prefetched)
        get = examined.get
        maybe_checkpoint = self.commits.maybe_checkpoint
        for path, st in files:
            self._backup_nondir(path, st, get(path))
            maybe_checkpoint()
        if changed:
            self.content.read_ahead_done()

    def _examine(self, path, st):
        """(live Metadata, stored Metadata), or (None, the error) if the
        live object cannot be read."""
        try:
            md = self.metadata_reader.read(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            obnamlib.errors.reraise_fatal(e)
            return None, e
        return md, self._old_metadata(path)

    def _backup_nondir(self, path, st, examined=None):
        is_reg = _S_ISREG(st.st_mode)
        self.progress.found(path, backup_content.scanned_size(st))
        md, old = examined or self._examine(path, st)
        if md is None:
            self.progress.error(path, as_obnam_error(old, path),
                                scanning=True)
            return
        if is_unchanged(old, md):
            return
        if _S_ISCHR(st.st_mode) or _S_ISBLK(st.st_mode):
            self.progress.notice(path, DEVICE_NUMBER_LOST)
        if is_reg:
            self.chunks.file_started()
            try:
                chunk_ids, md5 = self.content.store(path, st)
            except backup_content.LiveFileError as e:
                self.chunks.file_rejected()
                self.progress.error(path, e.error)
                return
            md.md5 = md5
        gen = self.commits.gen
        if old is not None and old.isdir():
            self.repo.remove_file(gen, path)
            old = None
        self.repo.set_metadata(gen, path, md)
        if is_reg:
            self.repo.set_file_chunk_ids(gen, path, chunk_ids)
            self.chunks.file_stored()
        elif old is not None and old.isreg():
            self.repo.set_file_chunk_ids(gen, path, [])
        self.progress.backed_up(path)

    def _old_metadata(self, path):
        """The stored metadata of a path in the directory the walk is in
        (or a root); None if there is none.  In a directory new in this
        generation there is none to look for: a first backup asked, and
        built a RepositoryFileDoesNotExistInGeneration, for every file."""
        if self.new_dirs and self.new_dirs[-1]:
            return None
        try:
            return self.repo.get_metadata(self.commits.gen, path)
        except obnamlib.errors.RepositoryFileDoesNotExistInGeneration:
            return None


def _is_changed(examined):
    """Whether an examined file (see _examine) is to be stored."""
    md, old = examined
    return md is not None and not is_unchanged(old, md)


def check_roots(fs, roots):
    """lstat of each root; R79ED6X if one is missing or is a symlink to a
    directory (storing just the link is never what was meant).  The
    command checks before it opens (maybe creates) the repository, so a
    mistyped root leaves no new repository behind."""
    stats = []
    for root in roots:
        try:
            st = fs.lstat(root)
        except (OSError, obnamlib.errors.ObnamError) as e:
            obnamlib.errors.reraise_fatal(e)
            raise BackupRootDoesNotExist(root=root)
        if stat_module.S_ISLNK(st.st_mode) and _lists(fs, root):
            raise BackupRootDoesNotExist(root=root)
        stats.append(st)
    return stats


def _lists(fs, path):
    try:
        fs.scandir(path)
    except (OSError, obnamlib.errors.ObnamError) as e:
        obnamlib.errors.reraise_fatal(e)
        return False
    return True
