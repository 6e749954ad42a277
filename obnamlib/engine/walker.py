"""The order in which a backup visits the live file system.

Depth first without recursion (an explicit stack, so tree depth is limited
only by memory); inside a directory the subdirectories come first, then
the other entries, each group in inode order (cheap on spinning disks);
a directory is reported again after its contents, so its own metadata is
stored last (cli.md §6.2).  Exclusion (§7) is decided here: an excluded
directory is pruned with everything below it, and never reported.

The walk yields plain tuples, because a backup of a million files spends
a noticeable part of its time on per-entry overhead:

    (ENTER, path, stat, None)    a directory is about to be scanned
    (FILE, path, stat, None)     a non-directory
    (EXIT, path, stat, names)    a directory's contents are done; names is
                                 the set of child names that were kept
    (ERROR, path, error, None)   the path could not be listed (ObnamError);
                                 its ENTER/EXIT still follow, with no names
"""

import stat as stat_module

import obnamlib.errors
import obnamlib.vfs.base
import obnamlib.engine.pathname_excluder

ENTER = 'enter'
FILE = 'file'
EXIT = 'exit'
ERROR = 'error'

CACHEDIR_TAG = obnamlib.engine.pathname_excluder.CACHEDIR_TAG
# Directories listed together on a VFS that prefetches listings.
LISTING_BATCH = 32

_S_ISDIR = stat_module.S_ISDIR



def join(dirname, basename):
    """Child path below dirname (bytes), without doubling the root slash."""
    if dirname == b'/':
        return b'/' + basename
    return dirname + b'/' + basename


class Exclusions:
    """What to leave out (§7).  `exclude_path(path) -> reason or None` is
    the pattern excluder (include/exclude regexps); `log` is a callable
    taking one message string (DEBUG log)."""

    def __init__(self, exclude_path=None, exclude_caches=False,
                 one_file_system=False, log=None):
        self.exclude_path = exclude_path
        self.exclude_caches = exclude_caches
        self.one_file_system = one_file_system
        self.log = log or (lambda msg: None)

    def excluded(self, path, st, root_dev):
        """Is path excluded by patterns or device (not cache tags)?"""
        if self.one_file_system and st.st_dev != root_dev:
            self.log('Excluding (one-file-system): %s' % _show(path))
            return True
        if self.exclude_path is not None:
            reason = self.exclude_path(path)
            if reason:
                self.log('Exclude (%s): %s' % (reason, _show(path)))
                return True
        return False


class _Frame:
    """A directory being scanned: entries still to visit, names kept."""

    __slots__ = ('path', 'st', 'pending', 'names')

    def __init__(self, path, st, pending, names):
        self.path = path
        self.st = st
        self.pending = pending
        self.names = names


def walk(vfs, root, root_st, exclusions=None, fake_failure=None):
    """Yield the walk events for one backup root (see the module doc).

    root_st is the root's lstat result; the caller checked it exists.
    fake_failure(path), if given, may raise OSError to make listing the
    directory fail (--testing-fail-matching).
    """
    exclusions = exclusions or Exclusions()
    lister = _Lister(vfs, fake_failure)
    root_dev = root_st.st_dev
    if exclusions.excluded(root, root_st, root_dev):
        return
    if not _S_ISDIR(root_st.st_mode):
        yield (FILE, root, root_st, None)
        return
    frame, error = _open_dir(vfs, lister, root, root_st, exclusions, root_dev)
    if frame is None:
        return
    if error is not None:
        yield (ERROR, root, error, None)
    yield (ENTER, root, root_st, None)
    stack = [frame]
    while stack:
        frame = stack[-1]
        if not frame.pending:
            stack.pop()
            yield (EXIT, frame.path, frame.st, frame.names)
            continue
        name, st = frame.pending.pop()
        path = join(frame.path, name)
        if not _S_ISDIR(st.st_mode):
            yield (FILE, path, st, None)
            continue
        if lister.prefetch:
            lister.next_dirs = _next_dirs(frame)
        child, error = _open_dir(vfs, lister, path, st, exclusions, root_dev)
        if child is None:
            frame.names.discard(name)
            continue
        if error is not None:
            yield (ERROR, path, error, None)
        stack.append(child)
        yield (ENTER, path, st, None)


def _next_dirs(frame):
    """Paths of the directories the frame visits next (its stack's end)."""
    found = []
    for name, st in reversed(frame.pending):
        if len(found) == LISTING_BATCH - 1 or not _S_ISDIR(st.st_mode):
            break
        found.append(join(frame.path, name))
    return found


class _Lister:
    """Lists directories for the walk.  On a VFS that can prefetch
    listings (SFTP), a directory is listed together with up to
    LISTING_BATCH - 1 of the directories visited after it (`next_dirs`,
    set before each call): one round trip for the lot."""

    def __init__(self, vfs, fake_failure):
        self.vfs = vfs
        self.fake_failure = fake_failure
        self.prefetch = (obnamlib.vfs.base.PREFETCHES_LISTINGS in
                         vfs.capabilities)
        self.fetched = set()
        self.next_dirs = []

    def __call__(self, path):
        if self.fake_failure is not None:
            self.fake_failure(path)
        if self.prefetch and path not in self.fetched:
            batch = [path] + self.next_dirs
            self.vfs.prefetch_listings(batch)
            self.fetched.update(batch)
        self.fetched.discard(path)
        return self.vfs.scandir(path)


def _open_dir(vfs, lister, path, st, exclusions, root_dev):
    """List a directory into a frame; (None, None) if it is a cache dir."""
    try:
        entries = lister(path)
    except OSError as e:
        error = obnamlib.errors.ObnamSystemError(
            filename=path, errno=e.errno, strerror=e.strerror)
        return _Frame(path, st, [], set()), error
    except obnamlib.errors.ObnamError as e:
        obnamlib.errors.reraise_fatal(e)
        return _Frame(path, st, [], set()), e
    if exclusions.exclude_caches and _is_cache_dir(vfs, path, entries):
        exclusions.log('Excluding (cache dir): %s' % _show(path))
        return None, None
    dirs = []
    others = []
    names = set()
    for name, entry_st in entries:
        if exclusions.excluded(join(path, name), entry_st, root_dev):
            continue
        names.add(name)
        if _S_ISDIR(entry_st.st_mode):
            dirs.append((name, entry_st))
        else:
            others.append((name, entry_st))
    by_inode = _by_inode
    dirs.sort(key=by_inode)
    others.sort(key=by_inode)
    # A stack: popped from the end, so the first to visit goes last.
    pending = others[::-1] + dirs[::-1]
    return _Frame(path, st, pending, names), None


def _by_inode(entry):
    return entry[1].st_ino


def _is_cache_dir(vfs, path, entries):
    """Does the directory hold a valid CACHEDIR.TAG (first 43 bytes)?"""
    for name, st in entries:
        if name == CACHEDIR_TAG and stat_module.S_ISREG(st.st_mode):
            return _tag_is_valid(vfs, join(path, name))
    return False


def _tag_is_valid(vfs, path):
    try:
        f = vfs.open_read(path)
    except (OSError, obnamlib.errors.ObnamError) as e:
        obnamlib.errors.reraise_fatal(e)
        return False
    try:
        head = f.read(len(obnamlib.engine.pathname_excluder.CACHEDIR_SIGNATURE))
    except (OSError, obnamlib.errors.ObnamError) as e:
        obnamlib.errors.reraise_fatal(e)
        return False
    finally:
        f.close()
    return obnamlib.engine.pathname_excluder.has_cachedir_signature(head)


def _show(path):
    return path.decode('utf-8', 'backslashreplace')
