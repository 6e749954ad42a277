"""The virtual filesystem: one interface for live data and repository storage.

A VFS has a root (a directory, local or on an SFTP server).  It offers two
kinds of methods:

* storage (`Storage`, the StorageFS protocol of doc/architecture.md): `str`
  paths relative to the root, raising plain `OSError`s (larch and fmt_6
  rely on `FileNotFoundError`), plus `lock`/`unlock` and transfer counters;
* live-data methods: `bytes` paths (absolute on the VFS's host), raising
  `ObnamIOError` (reading/writing file content) or `ObnamSystemError`
  (everything else), both carrying `filename`, `errno` and `strerror`.

`exists`, `isdir`, `makedirs`, `remove`, `rmdir` and `mkdir` serve both:
the type of the path (str or bytes) decides.

Capabilities, not probes.  Every method a caller may use is defined here,
the optional ones with a plain default that does the same thing with the
required methods (`read_files` reads one file after another, `create_file`
is an exclusive `lock`, `sync` and the prefetches do nothing,
`set_attributes` calls the single setters).  So nobody asks whether a
storage has a method.  Where a caller picks a different strategy because
the storage does something well (reads many files in one round trip,
creates files from a second thread), the storage says so in its
`capabilities`, a frozenset of the constants below that an implementation
sets as a class attribute; the default is none.  Callers test membership
(`READS_IN_BATCHES in fs.capabilities`).

`BasicStorage(obj)` gives the same interface to an object that has only
the StorageFS table (larch's LocalFS and MemoryFS in tests).

Which implementation serves a URL is decided above this module, by
`obnamlib.vfs.factory.open_vfs`.
"""

import abc

import obnamlib.errors

# read_files(paths) has every read in flight together (SFTP): batch reads
# save round trips, where elsewhere one read after another is as fast.
READS_IN_BATCHES = 'reads-in-batches'
# create_files(items) has every create in flight together (SFTP).
CREATES_IN_BATCHES = 'creates-in-batches'
# create_file may be called from a second thread while this one goes on
# using the object (chunk files written behind a backup's reading).
CREATES_IN_BACKGROUND = 'creates-in-background'
# The files are under the local directory `root`, which a second process
# may read and write too (the cipher helper of an encrypted repository).
LOCAL_FILES = 'local-files'
# prefetch_listings(paths) lists several directories in one round trip.
PREFETCHES_LISTINGS = 'prefetches-listings'
# open_read and the file it returns may be used in a second thread while
# this one goes on using the object (a backup reads and hashes files
# ahead of its main thread).
LIVE_READS_IN_BACKGROUND = 'live-reads-in-background'

# advise_reads(paths) can start reads that read_file would wait for (a
# local disk whose page cache may lack the files; not tmpfs).  Without
# it, read-ahead hints to a local repository do nothing.
ADVISES_READS = 'advises-reads'

# The files open_write returns have set_attributes(owner, mode, times),
# as the VFS's for a path but through the open file (no path walk each:
# fchown, fchmod, futimens), for use after the last write.
SETS_ATTRIBUTES_OF_OPEN_FILES = 'sets-attributes-of-open-files'

# Each operation waits for a server or a daemon (a local path on an NFS,
# SMB or GlusterFS mount): create_file may be called from several threads
# at once, and many creates in flight are faster than one after another.
CREATES_IN_PARALLEL = 'creates-in-parallel'

NO_CAPABILITIES = frozenset()


def set_attributes_in_steps(set_owner, set_mode, set_times,
                            owner=None, mode=None, times=None):
    """set_owner(*owner), set_mode(mode), set_times(*times), in that order
    (the mode after the owner, whose change may clear setuid bits), each
    whose value is not None: the one order of a path's set_attributes and
    an open file's.  A setter raises ObnamError; a failed step does not
    stop the later ones, and a fatal error raises.  Returns
    {'owner'|'mode'|'times': error} for the steps that failed."""
    steps = (('owner', set_owner, owner),
             ('mode', set_mode, None if mode is None else (mode,)),
             ('times', set_times, times))
    failures = {}
    for name, setter, args in steps:
        if args is None:
            continue
        try:
            setter(*args)
        except obnamlib.errors.ObnamError as e:
            obnamlib.errors.reraise_fatal(e)
            failures[name] = e
    return failures


class Storage(abc.ABC):
    """The StorageFS protocol (str paths relative to the root): the table
    of required methods and the optional ones with their defaults."""

    capabilities = NO_CAPABILITIES

    @property
    def reads_in_batches(self):
        """Whether read_files saves round trips (larch's name for it)."""
        return READS_IN_BATCHES in self.capabilities

    def close(self):
        """Release connections; the object is unusable afterwards."""

    def reopening(self):
        """(url, settings) from which a second process may open this
        storage by itself (obnamlib.vfs.factory.open_vfs), without the
        user; or None (wrapped in what it would miss)."""
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @abc.abstractmethod
    def read_file(self, path):
        """Whole content as bytes; FileNotFoundError if absent."""

    @abc.abstractmethod
    def write_file(self, path, data):
        """Atomically create or replace (mode 0600), making parents (0700)."""

    @abc.abstractmethod
    def listdir(self, path):
        """Names (str) in a directory; FileNotFoundError if absent."""

    @abc.abstractmethod
    def rename(self, old, new):
        """Atomic rename replacing `new`."""

    @abc.abstractmethod
    def exists(self, path):
        """True if anything (even a dangling symlink) is at path."""

    @abc.abstractmethod
    def isdir(self, path):
        """True if path is a directory (symlinks followed)."""

    @abc.abstractmethod
    def makedirs(self, path):
        """Create a directory and missing parents; no error if it exists."""

    @abc.abstractmethod
    def remove(self, path):
        """Remove a non-directory."""

    @abc.abstractmethod
    def rmdir(self, path):
        """Remove an empty directory."""

    # --- optional, with defaults -------------------------------------------

    def lock(self, path, content=b''):
        """Create the file exclusively; LockFail if it already exists.
        Default: exclusive only against files already there."""
        if self.exists(path):
            raise obnamlib.errors.LockFail(
                lock_name=path, reason='lock file already exists')
        self.write_file(path, content)

    def unlock(self, path):
        """Remove a lock file made by lock()."""
        self.remove(path)

    def read_raw(self, path):
        """The bytes as stored (a storage that filters content, like
        RepositoryFS, reads lock files and the lock breakers' tokens with
        it); here the same as read_file."""
        return self.read_file(path)

    def create_file(self, path, data):
        """Exclusive create (FileExistsError if the name is taken), never
        seen half-written: chunk files, `metadata/format`."""
        try:
            self.lock(path, data)
        except obnamlib.errors.LockFail:
            raise FileExistsError(path)

    def read_files(self, paths):
        """read_file of each path, in order; raises like read_file for the
        first that fails.  Together where READS_IN_BATCHES."""
        return [self.read_file(path) for path in paths]

    def create_files(self, items):
        """create_file of each (path, data); per item None or the
        FileExistsError it met (other errors raise).  Together where
        CREATES_IN_BATCHES."""
        results = []
        for path, data in items:
            try:
                self.create_file(path, data)
            except FileExistsError as e:
                results.append(e)
            else:
                results.append(None)
        return results

    def file_sizes(self, dirnames):
        """For each directory, {name: size in bytes as stored} of the
        files in it (subdirectories left out), or the OSError its listing
        met (FileNotFoundError if absent).  Together where the storage
        can (SFTP); by default each file is read, which only suits small
        test storages."""
        return [self._sizes_by_reading(dirname) for dirname in dirnames]

    def _sizes_by_reading(self, dirname):
        try:
            names = self.listdir(dirname)
        except OSError as e:
            return e
        paths = [(name, dirname + '/' + name) for name in names]
        return {name: len(self.read_raw(path)) for name, path in paths
                if not self.isdir(path)}

    def read_ahead(self, paths):
        """A hint: these files will be read next, in this order (larch's
        name; RepositoryFS decrypts them ahead in a second process)."""

    def expect_reads(self, in_line=False):
        """A hint: many files will be read (fsck, restore, verify);
        in_line: by this process (see RepositoryFS.expect_reads)."""

    def sync(self):
        """Make everything written so far durable (where the storage can
        be asked to; a remote server decides for itself)."""

    def spread_subdirectories(self, path):
        """A placement hint for directory path (LocalFS: ext4's top
        directory flag); True if it was taken, False by default."""
        return False


class BasicStorage(Storage):
    """The Storage interface, with its defaults, over an object that has
    only the StorageFS table (larch's LocalFS and MemoryFS)."""

    def __init__(self, table):
        self.table = table

    def __repr__(self):
        return repr(self.table)

    def read_file(self, path):
        return self.table.read_file(path)

    def write_file(self, path, data):
        self.table.write_file(path, data)

    def listdir(self, path):
        return self.table.listdir(path)

    def rename(self, old, new):
        self.table.rename(old, new)

    def exists(self, path):
        return self.table.exists(path)

    def isdir(self, path):
        return self.table.isdir(path)

    def makedirs(self, path):
        self.table.makedirs(path)

    def remove(self, path):
        self.table.remove(path)

    def rmdir(self, path):
        self.table.rmdir(path)


def as_storage(obj):
    """obj itself if it is a Storage, else a BasicStorage around it."""
    return obj if isinstance(obj, Storage) else BasicStorage(obj)


class VirtualFileSystem(Storage):
    """Storage plus live data; `LocalFS` and `SftpFS` implement it."""

    # Files up to this size are worth a prefetch() (the backup engine
    # batches them); 0: prefetch is not worth calling.
    prefetch_size = 0

    def __init__(self, baseurl):
        self.baseurl = baseurl
        self.bytes_read = 0       # repository bytes read via read_file
        self.bytes_written = 0    # repository bytes written via write_file

    @abc.abstractmethod
    def lock(self, path, content=b''):
        """Create the file exclusively; LockFail if it already exists.
        (Storage's unlock, remove(path), serves every VFS.)"""

    # --- shared by both kinds (str: relative, bytes: absolute) -------------

    @abc.abstractmethod
    def mkdir(self, path, mode=0o777):
        """Create one directory (the parent must exist)."""

    # --- live data (bytes paths) -------------------------------------------

    @abc.abstractmethod
    def lstat(self, path):
        """os.stat_result-like of path itself (symlinks not followed)."""

    @abc.abstractmethod
    def scandir(self, path):
        """List of (name_bytes, lstat result), sorted by name, in one call."""

    @abc.abstractmethod
    def readlink(self, path):
        """A symlink's target (bytes)."""

    @abc.abstractmethod
    def open_read(self, path):
        """File-like object for reading: read(n), close()."""

    @abc.abstractmethod
    def open_write(self, path):
        """New (truncated) file: write(data), seek(pos), truncate(size), close()."""

    @abc.abstractmethod
    def llistxattr(self, path):
        """Extended attribute names (bytes); [] where unsupported."""

    @abc.abstractmethod
    def lgetxattr(self, path, name):
        """Value (bytes) of one extended attribute."""

    @abc.abstractmethod
    def lsetxattr(self, path, name, value):
        """Set one extended attribute on path itself."""

    @abc.abstractmethod
    def lchown(self, path, uid, gid):
        """Set numeric owner and group of path itself (-1 keeps one)."""

    @abc.abstractmethod
    def chmod(self, path, mode):
        """Set permission bits (follows symlinks; never call on one)."""

    @abc.abstractmethod
    def lutimes(self, path, atime_ns, mtime_ns):
        """Set access and modification times in nanoseconds, on path itself."""

    @abc.abstractmethod
    def symlink(self, target, path):
        """Create symlink `path` pointing at `target`."""

    @abc.abstractmethod
    def link(self, existing, new):
        """Create hard link `new` to `existing`."""

    @abc.abstractmethod
    def mknod(self, path, mode, device=0):
        """Create a FIFO, socket or device node with the given st_mode."""

    # --- live data, optional (defaults) -------------------------------------

    def prefetch_listings(self, paths):
        """A hint: these directories will be listed by scandir next.  A
        VFS with PREFETCHES_LISTINGS lists them together now."""

    def prefetch(self, paths):
        """A hint: these files (each at most prefetch_size) will be read
        by open_read next."""

    def advise_reads(self, paths):
        """A hint: these repository files will be read by read_file soon,
        in this order.  A local disk starts reading them now."""

    def spread_directories_below(self, path, on):
        """A placement hint for the directories a restore makes below the
        live directory path: while on, a filesystem that can places each
        where it has room instead of next to path (LocalFS on ext2/3/4:
        the top directory flag, as spread_subdirectories).  Returns
        whether it was on before; None where there is no such hint."""
        return None

    def set_attributes(self, path, owner=None, mode=None, times=None):
        """lchown(*owner), chmod(mode), lutimes(*times) of one path, in
        that order, each step that is not None; a failed step does not
        stop the later ones.  Returns {'owner'|'mode'|'times': error} for
        the steps that failed (a fatal error raises)."""
        return set_attributes_in_steps(
            lambda uid, gid: self.lchown(path, uid, gid),
            lambda mode: self.chmod(path, mode),
            lambda atime_ns, mtime_ns: self.lutimes(path, atime_ns, mtime_ns),
            owner, mode, times)
