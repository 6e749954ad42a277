"""One backup run: live file system in, one new generation out.

The run sequence is cli.md §6.1 and format-6.md §10: add the client if
new, lock it, start a generation cloned from the newest one, drop paths
that are no longer backed up, scan each root (obnamlib.engine.walker) storing
what changed (§6.3), record the roots' ancestors, then commit the client
before the chunk indexes (§10.2) so a crash at any point leaves at worst
unreferenced chunks.  Checkpoints (§6.7) commit the work so far every
`checkpoint` bytes written, so an interrupted run's successor skips it.

The engine never prints: it reports through a BackupProgress.
"""

import dataclasses
import errno
import functools
import hashlib
import logging
import os
import re
import stat as stat_module
import time
import typing

import obnamlib.engine.chunker
import obnamlib.errors
import obnamlib.engine.live_metadata
import obnamlib.repo.metadata
import obnamlib.repo.interface as ri
import obnamlib.engine.walker as walker


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


class FileChangedDuringBackup(obnamlib.errors.ObnamError):
    """The file's size or mtime moved while we read it (new here)."""
    code = 'R0A128X'
    msg = '{filename}: file changed while it was being backed up'


class PretendNeedsGeneration(obnamlib.errors.ObnamError):
    """--pretend compares with the newest generation, so one must exist."""
    code = 'R3D10AX'
    msg = ('--pretend needs an existing repository with a generation of '
           'client {client_name}')


DEDUP_MODES = ('fatalist', 'verify', 'never')
_EMPTY_MD5 = hashlib.md5(b'').digest()
# Below this size posix_fadvise costs more than the page cache it saves.
_ADVISE_SIZE = 256 * 1024

# A remote VFS's small files are fetched in batches of this many (or bytes).
FILE_BATCH = 64
FILE_BATCH_BYTES = 8 * 1024 * 1024

_S_ISREG = stat_module.S_ISREG
_S_ISDIR = stat_module.S_ISDIR
_PLACEHOLDER_DIR = obnamlib.repo.metadata.Metadata(
    st_mode=stat_module.S_IFDIR | 0o777)


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


class _LiveError(Exception):
    """Carries a per-file ObnamError out of the content loop."""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error


def unchanged(old, new):
    """§6.3: is the stored entry still right for the live object?"""
    return (old.st_mtime_sec == new.st_mtime_sec and
            old.st_mtime_nsec == new.st_mtime_nsec and
            old.st_mode == new.st_mode and
            old.st_nlink == new.st_nlink and
            old.st_size == new.st_size and
            old.st_uid == new.st_uid and
            old.st_gid == new.st_gid and
            (old.xattr or b'') == (new.xattr or b''))


def _is_unchanged(old, md):
    return old is not None and unchanged(old, md)


class _FileBatch:
    """Consecutive FILE events collected for a VFS that can prefetch
    (SFTP): up to FILE_BATCH files, or FILE_BATCH_BYTES of small ones."""

    def __init__(self, fs):
        self.small = getattr(fs, 'prefetch_size', 0)
        self.files = []
        self.small_bytes = 0

    def add(self, path, st):
        """Keep the event; False if batching is off (handle it now)."""
        if not self.small:
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


class _WholeFileDigest:
    """MD5 of a whole file from its chunks.  Most files are one chunk, and
    then the chunk's digest is the file's: the content is hashed once."""

    def __init__(self):
        self.first = None         # (chunk, digest) while only one is known
        self.md5 = None

    def add(self, chunk, digest):
        if self.md5 is None and self.first is None:
            self.first = (chunk, digest)
            return
        if self.md5 is None:
            self.md5 = hashlib.md5(self.first[0])
            self.first = None
        self.md5.update(chunk)

    def digest(self):
        if self.md5 is not None:
            return self.md5.digest()
        if self.first is not None:
            return self.first[1]
        return _EMPTY_MD5


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
        self.repo_io = repo_io
        self.client = options.client_name
        self.gen = None
        self.checkpoints = []
        self.new_chunks = []          # (chunk id, md5 digest) not indexed
        self.run_chunks = {}          # md5 digest -> chunk id, this run
        self.chunk_bytes_written = 0
        self.last_checkpoint_at = 0
        self.dir_state = {}           # path -> old Metadata or None
        self.hard_links = {}          # (dev, ino) -> (mtime, size), result
        self.metadata_reader = obnamlib.engine.live_metadata.MetadataReader(fs)
        self.io_base = self._io_counters()
        self.find_by_md5 = True
        self.zero_digest = hashlib.md5(
            obnamlib.engine.chunker.zeros(self.options.chunk_size)).digest()

    # --- the run -------------------------------------------------------

    def run(self, roots):
        """Back up the roots (absolute bytes paths).  Returns the progress;
        per-file errors are in progress.errors (the caller raises
        BackupErrors)."""
        root_stats = self._check_roots(roots)
        if self.options.pretend:
            return self._run_pretend(roots, root_stats)
        try:
            self._add_client()
            self._lock_client()
            self._start_generation()
            self._drop_unwanted(roots)
            for root, st in zip(roots, root_stats):
                self._backup_root(root, st)
            self._finish()
        except OSError as e:
            self._clean_up_after_failure()
            raise RepositoryWriteError(
                filename=e.filename or self.options.repository_url,
                errno=e.errno, strerror=e.strerror) from e
        except BaseException:
            self._clean_up_after_failure()
            raise
        if (self.checkpoints and not self.progress.errors and
                not self.options.leave_checkpoints):
            self._remove_checkpoints()
        self._update_io()
        self.progress.finish()
        return self.progress

    def _check_roots(self, roots):
        """lstat of each root; R79ED6X if one is missing or is a symlink
        to a directory (storing just the link is never what was meant)."""
        stats = []
        for root in roots:
            try:
                st = self.fs.lstat(root)
            except (OSError, obnamlib.errors.ObnamError) as e:
                obnamlib.errors.reraise_fatal(e)
                raise BackupRootDoesNotExist(root=root)
            if stat_module.S_ISLNK(st.st_mode) and self._lists(root):
                raise BackupRootDoesNotExist(root=root)
            stats.append(st)
        return stats

    def _lists(self, path):
        try:
            self.fs.scandir(path)
        except (OSError, obnamlib.errors.ObnamError) as e:
            obnamlib.errors.reraise_fatal(e)
            return False
        return True

    def _add_client(self):
        self.progress.what('adding client')
        if self.client in self.repo.get_client_names():
            return
        self.repo.lock_client_list()
        try:
            if self.client not in self.repo.get_client_names():
                self.repo.add_client(self.client, self.options.key_id)
            self.repo.commit_client_list()
        except BaseException:
            self.repo.unlock_client_list()
            raise

    def _lock_client(self):
        self.progress.what('locking client')
        self.repo.lock_client(self.client)
        self.repo.lock_chunk_indexes()
        self.repo.unlock_chunk_indexes()

    def _start_generation(self):
        self.gen = self.repo.create_generation(
            self.client, now=self.options.now())

    def _clean_up_after_failure(self):
        """Release locks, then delete the chunk files written since the
        last commit: no committed generation or index refers to them, and
        after ENOSPC the space is what the next run needs."""
        self._unlock_after_failure()
        for chunk_id, _ in self.new_chunks:
            try:
                self.repo.remove_chunk(chunk_id)
            except Exception:
                logging.warning('could not remove unused chunk %x', chunk_id)
                break
        self.new_chunks = []

    def _unlock_after_failure(self):
        try:
            self.repo.unlock_everything()
        except Exception:
            logging.exception('releasing locks after a failed backup')

    # --- dropping what is no longer backed up (§6.1 step 5) -------------

    def _drop_unwanted(self, roots):
        keep_whole = set(roots)
        keep_dir = set()
        for root in roots:
            keep_dir.update(ancestors(root))
        if b'/' in keep_whole or not self.repo.file_exists(self.gen, b'/'):
            return
        pending = [b'/']
        while pending:
            dirname = pending.pop()
            for name in self.repo.get_file_children(self.gen, dirname):
                path = walker.join(dirname, name)
                if path in keep_whole:
                    continue
                if path in keep_dir:
                    pending.append(path)
                else:
                    self.repo.remove_file(self.gen, path)

    # --- one root ----------------------------------------------------------

    def _backup_root(self, root, root_st):
        self.progress.what('')
        self._ensure_ancestors(root)
        seen_root = False
        fake = self._fake_failure if self.options.fail_matching else None
        batch = _FileBatch(self.fs)
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
                self._maybe_checkpoint()
            elif kind is walker.ENTER:
                self._enter_dir(path, value)
            elif kind is walker.EXIT:
                self._exit_dir(path, value, names)
                self._maybe_checkpoint()
            else:
                self.progress.error(path, value)
        self._backup_files(batch.take())
        if not seen_root and self.repo.file_exists(self.gen, root):
            self.repo.remove_file(self.gen, root)
        self._record_ancestors(root)

    def _ensure_ancestors(self, root):
        """Make sure every ancestor exists, so children can be linked."""
        for path in reversed(ancestors(root)):
            if not self.repo.file_exists(self.gen, path):
                self.repo.set_metadata(self.gen, path,
                                       self._ancestor_metadata(path))

    def _record_ancestors(self, root):
        for path in ancestors(root):
            md = self._ancestor_metadata(path)
            try:
                old = self.repo.get_metadata(self.gen, path)
            except obnamlib.errors.RepositoryFileDoesNotExistInGeneration:
                old = None
            if old != md:
                self.repo.set_metadata(self.gen, path, md)

    def _ancestor_metadata(self, path):
        """Live metadata of an ancestor directory; the placeholder if it
        cannot be read or is not a directory (a symlink on the way to a
        root must still hold the root as a directory would)."""
        try:
            st = self.fs.lstat(path)
            if _S_ISDIR(st.st_mode):
                return self._live_metadata(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            obnamlib.errors.reraise_fatal(e)
        return _PLACEHOLDER_DIR.copy()

    # --- directories -------------------------------------------------------

    def _enter_dir(self, path, st):
        old = self._old_metadata(path)
        if old is not None and not old.isdir():
            self.repo.remove_file(self.gen, path)
            old = None
        if old is None:
            # Children need a parent; the real metadata follows at exit.
            self.repo.set_metadata(self.gen, path, _PLACEHOLDER_DIR.copy())
        self.dir_state[path] = old

    def _exit_dir(self, path, st, names):
        old = self.dir_state.pop(path, None)
        self.progress.found(path, 0)
        for name in self.repo.get_file_children(self.gen, path):
            if name not in names:
                self.repo.remove_file(self.gen, walker.join(path, name))
        try:
            md = self._live_metadata(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            self.progress.error(path, _as_obnam_error(e, path), scanning=True)
            md = self._metadata_from_stat(path, st)
        if old is None or not unchanged(old, md):
            self.repo.set_metadata(self.gen, path, md)
            self.progress.backed_up(path)

    # --- non-directories ---------------------------------------------------

    def _backup_files(self, files):
        """Back up consecutive non-directories of one directory (a remote
        VFS's batch: the small changed files are fetched together first)."""
        if not files:
            return
        examined = {}
        for path, st in files:
            if _S_ISREG(st.st_mode) and 0 < st.st_size <= \
                    self.fs.prefetch_size:
                examined[path] = self._examine(path, st)
        self.fs.prefetch([path for path, (md, old) in examined.items()
                          if md is not None and not _is_unchanged(old, md)])
        for path, st in files:
            self._backup_nondir(path, st, examined.get(path))
            self._maybe_checkpoint()

    def _examine(self, path, st):
        """(live Metadata, stored Metadata), or (None, the error) if the
        live object cannot be read."""
        try:
            md = self._live_metadata(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            obnamlib.errors.reraise_fatal(e)
            return None, e
        return md, self._old_metadata(path)

    def _backup_nondir(self, path, st, examined=None):
        is_reg = _S_ISREG(st.st_mode)
        self.progress.found(path, st.st_size if is_reg else 0)
        md, old = examined or self._examine(path, st)
        if md is None:
            self.progress.error(path, _as_obnam_error(old, path),
                                scanning=True)
            return
        if _is_unchanged(old, md):
            return
        if is_reg:
            try:
                chunk_ids, md5 = self._store_content(path, st)
            except _LiveError as e:
                self.progress.error(path, e.error)
                return
            md.md5 = md5
        if old is not None and old.isdir():
            self.repo.remove_file(self.gen, path)
            old = None
        self.repo.set_metadata(self.gen, path, md)
        if is_reg:
            self.repo.set_file_chunk_ids(self.gen, path, chunk_ids)
        elif old is not None and old.isreg():
            self.repo.set_file_chunk_ids(self.gen, path, [])
        self.progress.backed_up(path)

    def _old_metadata(self, path):
        try:
            return self.repo.get_metadata(self.gen, path)
        except obnamlib.errors.RepositoryFileDoesNotExistInGeneration:
            return None

    def _live_metadata(self, path, st):
        return self.metadata_reader.read(path, st)

    def _metadata_from_stat(self, path, st):
        return obnamlib.engine.live_metadata.metadata_from_stat(st)

    # --- file content ------------------------------------------------------

    def _store_content(self, path, st):
        """Store the file's chunks; (chunk ids, whole-file MD5 digest)."""
        link_key = (st.st_dev, st.st_ino) if st.st_nlink > 1 else None
        if link_key is not None:
            known = self.hard_links.get(link_key)
            if known is not None and known[0] == (st.st_mtime_ns, st.st_size):
                return known[1]
        result = self._read_content(path, st)
        if link_key is not None:
            self.hard_links[link_key] = ((st.st_mtime_ns, st.st_size), result)
        return result

    def _read_content(self, path, st):
        if st.st_size == 0:
            # Nothing to read: an empty file has no chunks (format-6 §7.2.2).
            try:
                self._fake_failure(path)
            except OSError as e:
                raise _LiveError(_as_obnam_error(e, path, io=True))
            return [], _EMPTY_MD5
        try:
            self._fake_failure(path)
            f = self.fs.open_read(path)
        except (OSError, obnamlib.errors.ObnamError) as e:
            raise _LiveError(_as_obnam_error(e, path, io=True))
        try:
            return self._store_chunks(path, st, f)
        finally:
            try:
                f.close()
            except OSError:
                pass

    def _fake_failure(self, path):
        for pattern in self.options.fail_matching:
            if pattern.search(path):
                raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), path)

    def _store_chunks(self, path, st, f):
        whole = _WholeFileDigest()
        chunk_ids = []
        total = 0
        chunks = obnamlib.engine.chunker.iter_chunks(
            f, self.options.chunk_size, advise=st.st_size >= _ADVISE_SIZE)
        while True:
            try:
                chunk = next(chunks, None)
            except (OSError, obnamlib.errors.ObnamError) as e:
                raise _LiveError(_as_obnam_error(e, path, io=True))
            if chunk is None:
                break
            total += len(chunk)
            chunk_id, digest = self._store_chunk(chunk)
            chunk_ids.append(chunk_id)
            whole.add(chunk, digest)
            self._maybe_checkpoint()
        if total != st.st_size or self._mtime_moved(f, st):
            raise _LiveError(FileChangedDuringBackup(filename=path))
        return chunk_ids, whole.digest()

    def _mtime_moved(self, f, st):
        try:
            now = os.fstat(f.fileno())
        except (AttributeError, OSError, ValueError):
            return False
        return (now.st_mtime_ns != st.st_mtime_ns or
                now.st_size != st.st_size)

    def _store_chunk(self, data):
        """(chunk id, MD5 digest) for data: an existing chunk if dedup
        allows, else a new one."""
        mode = self.options.deduplicate
        if data is obnamlib.engine.chunker.zeros(len(data)) and \
                len(data) == self.options.chunk_size:
            digest = self.zero_digest
        else:
            digest = hashlib.md5(data).digest()
        if mode != 'never':
            chunk_id = self._reuse(digest, data, mode)
            if chunk_id is not None:
                return chunk_id, digest
        chunk_id = self.repo.put_chunk_content(data, md5_digest=digest)
        self.new_chunks.append((chunk_id, digest))
        self.run_chunks[digest] = chunk_id
        self.chunk_bytes_written += len(data)
        self.progress.uploaded(len(data))
        return chunk_id, digest

    def _reuse(self, digest, data, mode):
        chunk_id = self.run_chunks.get(digest)
        if chunk_id is not None:
            if mode == 'fatalist' or self._same(chunk_id, data):
                return chunk_id
        for chunk_id in self._find_in_indexes(digest, data):
            if mode == 'fatalist' or self._same(chunk_id, data):
                return chunk_id
        return None

    def _find_in_indexes(self, digest, data):
        if self.find_by_md5:
            try:
                return self.repo.find_chunk_ids_by_md5(digest)
            except NotImplementedError:
                self.find_by_md5 = False
        return self.repo.find_chunk_ids_by_content(data)

    def _same(self, chunk_id, data):
        try:
            return self.repo.get_chunk_content(chunk_id) == data
        except obnamlib.errors.RepositoryChunkDoesNotExist:
            return False

    # --- indexes, checkpoints, commit ------------------------------------

    def _index_new_chunks(self):
        for chunk_id, digest in self.new_chunks:
            self.repo.put_chunk_md5_into_indexes(chunk_id, digest, self.client)
        self.new_chunks = []

    def _io_counters(self):
        if self.repo_io is None:
            return (0, 0)
        return (self.repo_io.bytes_written,
                getattr(self.repo_io, 'bytes_read', 0))

    def _bytes_written(self):
        if self.repo_io is not None:
            return self.repo_io.bytes_written - self.io_base[0]
        return self.chunk_bytes_written

    def _maybe_checkpoint(self):
        if self.options.checkpoint <= 0:
            return
        if self._bytes_written() - self.last_checkpoint_at < \
                self.options.checkpoint:
            return
        self._checkpoint()

    def _checkpoint(self):
        self.progress.what('making checkpoint')
        logging.info('Making checkpoint')
        self.repo.lock_chunk_indexes()
        self._index_new_chunks()
        self._set_counts(is_checkpoint=1)
        self.repo.set_generation_key(self.gen, ri.GEN_ENDED,
                                     self.options.now())
        self.repo.commit_client(self.client)
        self.repo.commit_chunk_indexes()
        # The indexes now find this run's chunks: the in-run map need only
        # cover one checkpoint interval (memory for a million files).
        self.run_chunks.clear()
        self.checkpoints.append(self.gen)
        self.repo.lock_client(self.client)
        self._start_generation()
        self.last_checkpoint_at = self._bytes_written()
        self.progress.what('')

    def _set_counts(self, is_checkpoint):
        self.repo.set_generation_key(self.gen, ri.GEN_FILE_COUNT,
                                     self.progress.file_count)
        self.repo.set_generation_key(self.gen, ri.GEN_TOTAL_DATA,
                                     self.progress.scanned_bytes)
        self.repo.set_generation_key(self.gen, ri.GEN_IS_CHECKPOINT,
                                     is_checkpoint)

    def _finish(self):
        """format-6.md §10 step 5: client first, then chunk indexes."""
        self.progress.what('committing changes to repository')
        self.repo.lock_chunk_indexes()
        self._index_new_chunks()
        self._set_counts(is_checkpoint=0)
        self.repo.set_generation_key(self.gen, ri.GEN_ENDED,
                                     self.options.now())
        self.repo.commit_client(self.client)
        self.repo.commit_chunk_indexes()

    def _remove_checkpoints(self):
        self.progress.what('removing checkpoints')
        try:
            self.repo.lock_everything()
        except obnamlib.errors.ObnamError as e:
            logging.warning('Could not remove checkpoints: %s', e)
            return
        try:
            for gen_id in self.checkpoints:
                candidates = self.repo.get_generation_chunk_ids(gen_id)
                self.repo.remove_generation(gen_id)
                self.repo.remove_unused_chunks(self.client, candidates)
            self.repo.commit_everything()
        except BaseException:
            self._unlock_after_failure()
            raise

    def _update_io(self):
        if self.repo_io is not None:
            written, read = self._io_counters()
            self.progress.set_io(written - self.io_base[0],
                                 read - self.io_base[1])
        else:
            self.progress.set_io(self.chunk_bytes_written, 0)

    # --- pretend -------------------------------------------------------

    def _run_pretend(self, roots, root_stats):
        """Walk and compare with the newest generation; write nothing."""
        try:
            gen_ids = self.repo.get_generation_ids(self.client)
        except obnamlib.errors.RepositoryClientDoesNotExist:
            gen_ids = []
        if not gen_ids:
            raise PretendNeedsGeneration(client_name=self.client)
        gen = gen_ids[-1]
        for root, root_st in zip(roots, root_stats):
            for kind, path, value, names in walker.walk(
                    self.fs, root, root_st, self.options.exclusions):
                if kind is walker.ERROR:
                    self.progress.error(path, value)
                elif kind is walker.FILE or kind is walker.EXIT:
                    self._pretend_one(gen, path, value)
        self.progress.finish()
        return self.progress

    def _pretend_one(self, gen, path, st):
        is_reg = _S_ISREG(st.st_mode)
        self.progress.found(path, st.st_size if is_reg else 0)
        try:
            md = self._live_metadata(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            self.progress.error(path, _as_obnam_error(e, path), scanning=True)
            return
        try:
            old = self.repo.get_metadata(gen, path)
        except obnamlib.errors.RepositoryFileDoesNotExistInGeneration:
            old = None
        if old is not None and unchanged(old, md):
            return
        if is_reg:
            self.progress.uploaded(st.st_size)
        self.progress.backed_up(path)


def _as_obnam_error(error, path, io=False):
    """An OSError from the live file system as RCE08AX/RD5FA4X.

    Every per-file handler goes through here, so an error that ends the
    run (obnamlib.errors.reraise_fatal) is raised again instead of counted."""
    obnamlib.errors.reraise_fatal(error)
    if isinstance(error, obnamlib.errors.ObnamError):
        return error
    cls = obnamlib.errors.ObnamIOError if io else \
        obnamlib.errors.ObnamSystemError
    return cls(filename=path, errno=error.errno, strerror=error.strerror)
