"""What SFTP's answers mean as Python and Obnam errors.

A STATUS reply becomes the OSError a local call would raise; live-data
calls (bytes paths) and open files turn OSErrors into Obnam's errors,
storage calls (str paths) keep plain OSErrors: larch relies on them.
"""

import errno
import functools
import os

from obnamlib.errors import ObnamError, ObnamIOError
from obnamlib.vfs.sftp import codec


class HardlinkError(ObnamError):
    code = 'R02C17X'
    msg = ('Cannot hardlink on SFTP; sorry\n'
           'The SFTP server does not offer the hardlink@openssh.com '
           'extension, so hard links cannot be restored there. Restore to '
           'a local directory instead.')


class SftpConnectionLost(ObnamError):
    """Every later call fails too: callers must not treat it per file."""
    code = 'R305A1X'
    msg = 'Lost the SSH connection to {hostname}: {reason}'
    fatal = True


def status_error(msg, name):
    """The exception an SFTP STATUS reply stands for, or None if OK."""
    code = msg.get_int()
    text = msg.get_string().decode('utf-8', 'replace')
    if code == codec.SFTP_OK:
        return None
    if code == codec.SFTP_EOF:
        return EOFError(text)
    if code == codec.SFTP_NO_SUCH_FILE:
        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    if code == codec.SFTP_PERMISSION_DENIED:
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
    if code == codec.SFTP_OP_UNSUPPORTED:
        return OSError(errno.ENOTSUP, 'Operation not supported by the SFTP '
                       'server', name)
    return OSError(errno.EIO, 'SFTP server failure (%s; the protocol gives '
                   'no reason: a full disk, a quota or an existing file)' %
                   text, name)


def exists_error(name):
    return FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), name)


def live_errors(error_class, arg=0):
    """Live-data calls (bytes paths) raise `error_class` for OSErrors.

    StorageFS calls (str paths) keep plain OSErrors: larch relies on them.
    `arg` is the position of the path the error is about.
    """
    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except OSError as e:
                path = args[arg]
                if isinstance(path, str):
                    raise
                raise error_class(filename=path, errno=e.errno,
                                  strerror=e.strerror) from e
        return wrapper
    return decorate


def stream_errors(method):
    """An open file's OSErrors become ObnamIOError about its path."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except OSError as e:
            raise ObnamIOError(filename=self.path, errno=e.errno,
                               strerror=e.strerror) from e
    return wrapper
