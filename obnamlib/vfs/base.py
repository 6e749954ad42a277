"""The virtual filesystem: one interface for live data and repository storage.

A VFS has a root (a directory, local or on an SFTP server).  It offers two
kinds of methods:

* the StorageFS protocol (doc/architecture.md): `str` paths relative to the
  root, raising plain `OSError`s (larch and fmt_6 rely on
  `FileNotFoundError`), plus `lock`/`unlock` and transfer counters;
* live-data methods: `bytes` paths (absolute on the VFS's host), raising
  `ObnamIOError` (reading/writing file content) or `ObnamSystemError`
  (everything else), both carrying `filename`, `errno` and `strerror`.

`exists`, `isdir`, `makedirs`, `remove`, `rmdir` and `mkdir` serve both:
the type of the path (str or bytes) decides.

`open_vfs(url)` picks the implementation by URL scheme.
"""

import abc
import importlib
import urllib.parse

import obnamlib.errors


class VirtualFileSystem(abc.ABC):
    """Abstract base; `LocalFS` and `SftpFS` implement every method."""

    def __init__(self, baseurl):
        self.baseurl = baseurl
        self.bytes_read = 0       # repository bytes read via read_file
        self.bytes_written = 0    # repository bytes written via write_file

    def close(self):
        """Release connections; the object is unusable afterwards."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- StorageFS protocol (str paths relative to the root) ---------------

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
    def lock(self, path, content=b''):
        """Create the file exclusively; LockFail if it already exists."""

    @abc.abstractmethod
    def unlock(self, path):
        """Remove a lock file made by lock()."""

    # --- shared by both kinds (str: relative, bytes: absolute) -------------

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
    def mkdir(self, path, mode=0o777):
        """Create one directory (the parent must exist)."""

    @abc.abstractmethod
    def remove(self, path):
        """Remove a non-directory."""

    @abc.abstractmethod
    def rmdir(self, path):
        """Remove an empty directory."""

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


def parse_scheme(url):
    """The URL scheme as obnam sees it: '' for a local path."""
    return urllib.parse.urlparse(url).scheme


def open_vfs(url, settings=None):
    """A VirtualFileSystem rooted at url: local path or sftp://; else R826A1X."""
    scheme = parse_scheme(url)
    if scheme == '':
        local = importlib.import_module('obnamlib.vfs.local')
        return local.LocalFS(url)
    if scheme == 'sftp':
        sftp = importlib.import_module('obnamlib.vfs.sftp.fs')
        return sftp.SftpFS(url, settings=settings)
    raise obnamlib.errors.UnknownVFSError(url=url)
