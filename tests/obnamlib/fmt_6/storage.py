"""A local StorageFS with lock files, for fmt_6 tests (until RepositoryFS)."""

import os

import larch.vfs

from obnamlib import errors


class LockingLocalFS(larch.vfs.LocalFS):

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
