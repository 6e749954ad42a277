"""Making and removing directories over SFTP: a missing chain of
directories made with every MKDIR in flight."""

import errno
import os
import stat

from obnamlib.errors import ObnamSystemError
from obnamlib.vfs.sftp import codec
from obnamlib.vfs.sftp.errors import exists_error, live_errors
from obnamlib.vfs.sftp.limits import DIR_MODE
from obnamlib.vfs.sftp.url import fs_path


class DirsMixin:
    """SftpFS's makedirs, mkdir, remove, rmdir and rename."""

    def _init_dirs(self):
        self._known_dirs = set()

    @live_errors(ObnamSystemError)
    def makedirs(self, path):
        self._makedirs_abs(self._abs(path), path)

    def _makedirs_abs(self, full, path):
        """Make `full` and its missing parents: all MKDIRs in flight."""
        chain = self._missing_chain(full)
        if chain:
            self._wait_mkdirs(self._send_mkdirs(chain), full, path)

    def _missing_chain(self, full):
        """`full` and its ancestors not known to exist, top down."""
        chain = []
        while full not in self._known_dirs and full not in (b'', b'/'):
            chain.append(full)
            full = os.path.dirname(full)
        return chain[::-1]

    def _send_mkdirs(self, chain):
        attrs = codec.attrs(st_mode=DIR_MODE)
        return [(d, self._send(codec.CMD_MKDIR, d, attrs)) for d in chain]

    def _wait_mkdirs(self, sent, full, path):
        """Existing directories fail harmlessly; only `full` must be one."""
        first_error = last_error = None
        for dirname, num in sent:
            try:
                self._wait(num, path)
                last_error = None
            except OSError as e:
                last_error = e
                if e.errno != errno.EIO and first_error is None:
                    first_error = e
        if last_error is not None:
            if last_error.errno != errno.EIO:
                raise first_error or last_error
            attrs = self._attrs(codec.CMD_STAT, full, path)
            if not stat.S_ISDIR(attrs.st_mode or 0):
                raise exists_error(fs_path(path))
        self._known_dirs.update(dirname for dirname, _ in sent)

    @live_errors(ObnamSystemError)
    def mkdir(self, path, mode=0o777):
        full = self._abs(path)
        try:
            self._call(codec.CMD_MKDIR, full, codec.attrs(st_mode=mode),
                       path=path)
        except OSError as e:
            if e.errno == errno.EIO and self._exists_abs(full):
                raise exists_error(fs_path(path))
            raise
        self._known_dirs.add(full)

    @live_errors(ObnamSystemError)
    def remove(self, path):
        self._call(codec.CMD_REMOVE, self._abs(path), path=path)

    @live_errors(ObnamSystemError)
    def rmdir(self, path):
        full = self._abs(path)
        try:
            self._call(codec.CMD_RMDIR, full, path=path)
        except OSError as e:
            if e.errno == errno.EIO and self._read_dir(full, path):
                raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY),
                              fs_path(path))
            raise
        self._known_dirs.discard(full)

    def rename(self, old, new):
        full_old, full_new = self._abs(old), self._abs(new)
        try:
            self._replace(full_old, full_new, old)
        except FileNotFoundError:
            self._makedirs_abs(os.path.dirname(full_new), new)
            self._replace(full_old, full_new, old)
