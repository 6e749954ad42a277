"""Storage for a forest: the StorageFS protocol and two implementations.

Every file access of larch goes through a StorageFS, so that the caller
can put compression, encryption or a network underneath.  Paths are
`str`, relative to the storage's root, with `/` separators.  StorageFS
below lists every method and attribute larch uses; the reading hints
have defaults that storage without such abilities keeps.
"""

import abc
import errno
import os
import tempfile


class StorageFS(abc.ABC):
    """What larch needs from its storage (all of it; nothing else is used).

    Subclass it, or provide the same names: larch calls them without
    asking whether they exist.
    """

    # Whether read_files is faster than reading one file after another
    # (storage with a round trip per read).  Then larch reads the nodes
    # it knows it will need together; otherwise it hints them (read_ahead).
    reads_in_batches = False

    @abc.abstractmethod
    def read_file(self, path):
        """The file's bytes; FileNotFoundError if absent."""

    @abc.abstractmethod
    def write_file(self, path, data):
        """Atomic create-or-replace; makes missing parent directories."""

    @abc.abstractmethod
    def exists(self, path):
        """Whether a file or directory is there."""

    @abc.abstractmethod
    def isdir(self, path):
        """Whether path is a directory."""

    @abc.abstractmethod
    def listdir(self, path):
        """Names in a directory; FileNotFoundError if absent."""

    @abc.abstractmethod
    def makedirs(self, path):
        """Make a directory and its parents; no error if it exists."""

    @abc.abstractmethod
    def remove(self, path):
        """Delete a file; FileNotFoundError if absent."""

    @abc.abstractmethod
    def rename(self, old, new):
        """Atomic; replaces new; makes new's parent directories."""

    def read_files(self, paths):
        """read_file of each path, in order; raises like read_file for the
        first that fails.  Storage that reads in batches overrides it."""
        return [self.read_file(path) for path in paths]

    def read_ahead(self, paths):
        """A hint: these files will be read soon, in this order (storage
        that can prepare them meanwhile may).  By default nothing."""


def _clean(path):
    """Normalise a relative path: no empty or '.' components."""
    parts = [p for p in path.split('/') if p not in ('', '.')]
    return '/'.join(parts)


class LocalFS(StorageFS):
    """StorageFS on the local disk, below directory `root`."""

    def __init__(self, root):
        self.root = os.path.abspath(os.fsdecode(root))

    def __repr__(self):
        return 'LocalFS(%r)' % self.root

    def _full(self, path):
        rel = _clean(path)
        return os.path.join(self.root, rel) if rel else self.root

    def read_file(self, path):
        with open(self._full(path), 'rb') as f:
            return f.read()

    def write_file(self, path, data):
        full = self._full(path)
        dirname = os.path.dirname(full)
        os.makedirs(dirname, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=dirname, prefix='tmp')
        try:
            with os.fdopen(fd, 'wb') as f:
                f.write(data)
            os.replace(tmp, full)
        except BaseException:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise

    def exists(self, path):
        return os.path.exists(self._full(path))

    def isdir(self, path):
        return os.path.isdir(self._full(path))

    def listdir(self, path):
        return os.listdir(self._full(path))

    def makedirs(self, path):
        os.makedirs(self._full(path), exist_ok=True)

    def remove(self, path):
        os.remove(self._full(path))

    def rmdir(self, path):
        os.rmdir(self._full(path))

    def rename(self, old, new):
        full_new = self._full(new)
        os.makedirs(os.path.dirname(full_new), exist_ok=True)
        os.replace(self._full(old), full_new)


class MemoryFS(StorageFS):
    """StorageFS kept in a dict; for tests and throwaway forests."""

    def __init__(self):
        self.files = {}
        self.dirs = {''}

    def __repr__(self):
        return 'MemoryFS(%d files)' % len(self.files)

    def _add_parents(self, path):
        parts = path.split('/')
        for i in range(1, len(parts)):
            self.dirs.add('/'.join(parts[:i]))

    def read_file(self, path):
        try:
            return self.files[_clean(path)]
        except KeyError:
            raise FileNotFoundError(errno.ENOENT, 'No such file', path)

    def write_file(self, path, data):
        path = _clean(path)
        if path in self.dirs:
            raise IsADirectoryError(errno.EISDIR, 'Is a directory', path)
        self._add_parents(path)
        self.files[path] = bytes(data)

    def exists(self, path):
        path = _clean(path)
        return path in self.files or path in self.dirs

    def isdir(self, path):
        return _clean(path) in self.dirs

    def listdir(self, path):
        path = _clean(path)
        if path not in self.dirs:
            raise FileNotFoundError(errno.ENOENT, 'No such directory', path)
        prefix = path + '/' if path else ''
        names = set()
        for name in list(self.files) + list(self.dirs):
            if name and name.startswith(prefix):
                rest = name[len(prefix):]
                if rest:
                    names.add(rest.split('/', 1)[0])
        return sorted(names)

    def makedirs(self, path):
        path = _clean(path)
        if path in self.files:
            raise FileExistsError(errno.EEXIST, 'File exists', path)
        self._add_parents(path)
        self.dirs.add(path)

    def remove(self, path):
        try:
            del self.files[_clean(path)]
        except KeyError:
            raise FileNotFoundError(errno.ENOENT, 'No such file', path)

    def rmdir(self, path):
        path = _clean(path)
        if path not in self.dirs or not path:
            raise FileNotFoundError(errno.ENOENT, 'No such directory', path)
        if self.listdir(path):
            raise OSError(errno.ENOTEMPTY, 'Directory not empty', path)
        self.dirs.discard(path)

    def rename(self, old, new):
        old, new = _clean(old), _clean(new)
        if old not in self.files:
            raise FileNotFoundError(errno.ENOENT, 'No such file', old)
        self._add_parents(new)
        self.files[new] = self.files.pop(old)
