"""A minimal local repository storage, used only while obnamlib.repo_fs is
not available: the tag chain without filters (a NUL before every filtered
file, format-6.md §3.2) plus lock files.  It refuses filtered data it cannot
undo rather than misreading it."""

import os

import larch.vfs

from obnamlib import errors

UNFILTERED = ('metadata/format',)
UNFILTERED_NAMES = ('key', 'userkeys', 'lock')


def is_filtered(path):
    return (path not in UNFILTERED and
            path.rsplit('/', 1)[-1] not in UNFILTERED_NAMES)


class PlainLocalStorage(larch.vfs.LocalFS):

    def __init__(self, root):
        super().__init__(root)
        self.bytes_read = 0
        self.bytes_written = 0

    def read_file(self, path):
        data = super().read_file(path)
        self.bytes_read += len(data)
        if not is_filtered(path):
            return data
        tag, sep, rest = data.partition(b'\0')
        if not sep:
            raise errors.NoFilterTagError()
        if tag:
            raise errors.MissingFilterError(tagname=tag)
        return rest

    def write_file(self, path, data):
        if is_filtered(path):
            data = b'\0' + data
        self.bytes_written += len(data)
        super().write_file(path, data)

    def create_file(self, path, data):
        """Exclusive create (chunk files): FileExistsError if present."""
        full = self._full(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'wb') as f:
            f.write(b'\0' + data if is_filtered(path) else data)
        self.bytes_written += len(data) + 1

    def lock(self, path, content=b''):
        full = self._full(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        try:
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise errors.LockFail(lock_name=path, reason='exists')
        with os.fdopen(fd, 'wb') as f:
            f.write(content)

    def unlock(self, path):
        os.remove(self._full(path))
