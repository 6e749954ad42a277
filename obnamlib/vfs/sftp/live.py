"""Live data over SFTP (pull backups, restores to the server): reading
and writing open files, links, owners, modes and times."""

import errno
import io
import stat

from obnamlib.errors import ObnamIOError, ObnamSystemError
from obnamlib.vfs.sftp import codec
from obnamlib.vfs.sftp.codec import int64
from obnamlib.vfs.sftp.errors import HardlinkError, live_errors
from obnamlib.vfs.sftp.limits import CHUNK, FILE_MODE
from obnamlib.vfs.sftp.streams import (PipelinedReader, PipelinedWriter,
                                       data_or_eof)
from obnamlib.vfs.sftp.url import fs_path

LSETSTAT = 'lsetstat@openssh.com'


class LiveDataMixin:
    """SftpFS's live-data methods other than listing and stats."""

    def _init_live(self):
        self._prefetched = {}         # path -> content or error (prefetch)
        self._has_lsetstat = True

    @live_errors(ObnamSystemError)
    def readlink(self, path):
        _, msg = self._call(codec.CMD_READLINK, self._abs(path), path=path)
        msg.get_int()
        return msg.get_string()

    @live_errors(ObnamIOError)
    def open_read(self, path):
        prefetched = self._prefetched.pop(path, None)
        if isinstance(prefetched, Exception):
            raise prefetched
        if prefetched is not None:
            return io.BytesIO(prefetched)
        full = self._abs(path)
        handle = self._open(full, codec.SFTP_FLAG_READ, path)
        return PipelinedReader(self, handle, path)

    def prefetch(self, paths):
        """Read these files now, for the open_read calls that follow: every
        OPEN in flight, then two READs each (data and EOF), in two round
        trips for all.  For small files (up to PREFETCH_SIZE): a larger or
        growing one is left to open_read's stream; an error is raised by
        its open_read.  Replaces what an earlier call fetched."""
        self._prefetched = {}
        handles = []
        for path, result in zip(paths, self._open_for_reading(paths)):
            if isinstance(result, bytes):
                handles.append((path, result))
            else:
                self._prefetched[path] = result
        reads = [(path, handle,
                  self._send(codec.CMD_READ, handle, int64(0), CHUNK),
                  self._send(codec.CMD_READ, handle, int64(CHUNK), CHUNK))
                 for path, handle in handles]
        results = [(path, [self._data_or_error(num, path)
                           for num in (first, second)])
                   for path, _, first, second in reads]
        for _, handle in handles:
            self._close_handle(handle)
        for path, (data, more) in results:
            for result in (data, more):
                if isinstance(result, OSError):
                    self._prefetched[path] = result
            if path not in self._prefetched and len(data) < CHUNK and \
                    not more:
                self._prefetched[path] = data

    def _data_or_error(self, num, path):
        try:
            return data_or_eof(self, num, path)
        except OSError as e:
            return e

    @live_errors(ObnamIOError)
    def open_write(self, path, mode=FILE_MODE):
        full = self._abs(path)
        flags = codec.TRUNCATE
        return PipelinedWriter(self, self._open(full, flags, path, mode),
                               path, full)

    def llistxattr(self, path):
        """SFTP (OpenSSH) has no extended attributes: there are none."""
        return []

    @live_errors(ObnamSystemError)
    def lgetxattr(self, path, name):
        raise OSError(errno.ENOTSUP, 'SFTP has no extended attributes',
                      fs_path(path))

    @live_errors(ObnamSystemError)
    def lsetxattr(self, path, name, value):
        raise OSError(errno.ENOTSUP, 'SFTP has no extended attributes',
                      fs_path(path))

    def _setstat(self, path, attrs, follow):
        full = self._abs(path)
        if not follow and self._has_lsetstat:
            try:
                self._call(codec.CMD_EXTENDED, LSETSTAT, full, attrs,
                           path=path)
                return
            except OSError as e:
                if e.errno != errno.ENOTSUP:
                    raise
                self._has_lsetstat = False
        if not follow and stat.S_ISLNK(
                self._attrs(codec.CMD_LSTAT, full, path).st_mode or 0):
            return      # the server can only change the link's target
        self._call(codec.CMD_SETSTAT, full, attrs, path=path)

    @live_errors(ObnamSystemError)
    def lchown(self, path, uid, gid):
        self._setstat(path, self._owner_attrs(path, uid, gid), follow=False)

    def _owner_attrs(self, path, uid, gid):
        """SFTP sets both ids or neither: -1 means the current one."""
        if uid == -1 or gid == -1:
            st = self._attrs(codec.CMD_LSTAT, self._abs(path), path)
            uid = st.st_uid if uid == -1 else uid
            gid = st.st_gid if gid == -1 else gid
        return codec.attrs(st_uid=uid, st_gid=gid)

    @live_errors(ObnamSystemError)
    def chmod(self, path, mode):
        self._setstat(path, codec.attrs(st_mode=mode), follow=True)

    @live_errors(ObnamSystemError)
    def lutimes(self, path, atime_ns, mtime_ns):
        self._setstat(path, _times_attrs(atime_ns, mtime_ns), follow=False)

    def set_attributes(self, path, owner=None, mode=None, times=None):
        """lchown(*owner), chmod(mode) and lutimes(*times) of one path, in
        that order (the server keeps it), with the requests in flight
        together: restoring a file's metadata in one round trip.  Returns
        {'owner'|'mode'|'times': ObnamSystemError} for those that failed."""
        steps = [(name, args) for name, args in
                 (('owner', owner), ('mode', mode), ('times', times))
                 if args is not None]
        if self._has_lsetstat:
            failures = self._set_pipelined(path, steps)
            if not any(e.errno == errno.ENOTSUP for e in failures.values()):
                return failures
            self._has_lsetstat = False      # not OpenSSH: one at a time
        return self._set_one_by_one(path, steps)

    def _set_pipelined(self, path, steps):
        full = self._abs(path)
        failures, sent = {}, []
        for name, args in steps:
            try:
                attrs, follow = self._step_attrs(path, name, args)
            except ObnamSystemError as e:
                failures[name] = e
                continue
            kind = ((codec.CMD_SETSTAT,) if follow else
                    (codec.CMD_EXTENDED, LSETSTAT))
            sent.append((name, self._send(*kind, full, attrs)))
        for name, num in sent:
            try:
                self._wait(num, path)
            except OSError as e:
                failures[name] = ObnamSystemError(
                    filename=path, errno=e.errno, strerror=e.strerror)
        return failures

    def _step_attrs(self, path, name, args):
        if name == 'owner':
            try:
                return self._owner_attrs(path, *args), False
            except OSError as e:
                raise ObnamSystemError(filename=path, errno=e.errno,
                                       strerror=e.strerror)
        if name == 'mode':
            return codec.attrs(st_mode=args), True
        return _times_attrs(*args), False

    def _set_one_by_one(self, path, steps):
        calls = {'owner': self.lchown, 'mode': self.chmod,
                 'times': self.lutimes}
        failures = {}
        for name, args in steps:
            try:
                calls[name](path, *(args if name != 'mode' else (args,)))
            except ObnamSystemError as e:
                failures[name] = e
        return failures

    @live_errors(ObnamSystemError, arg=1)
    def symlink(self, target, path):
        # OpenSSH's server takes the arguments in the opposite order to the
        # SFTP draft: target first.
        self._call(codec.CMD_SYMLINK, target, self._abs(path), path=path)

    @live_errors(ObnamSystemError, arg=1)
    def link(self, existing, new):
        try:
            self._call(codec.CMD_EXTENDED, 'hardlink@openssh.com',
                       self._abs(existing), self._abs(new), path=new)
        except OSError as e:
            if e.errno == errno.ENOTSUP:
                raise HardlinkError()
            raise

    @live_errors(ObnamSystemError)
    def mknod(self, path, mode, device=0):
        raise OSError(errno.ENOTSUP, 'SFTP cannot create device files or '
                      'FIFOs', fs_path(path))


def _times_attrs(atime_ns, mtime_ns):
    """SFTP v3 times: whole seconds, 32 bits."""
    return codec.attrs(st_atime=(atime_ns // 10**9) & 0xffffffff,
                       st_mtime=(mtime_ns // 10**9) & 0xffffffff)
