"""The kernel's side of `obnam mount`: pyfuse3 requests answered from a
fuse_view.BackupView, read-only.

This module imports pyfuse3 (libfuse 3, Debian package python3-pyfuse3),
so obnamlib.cli.plugins.fuse_plugin imports it only when mount runs,
after checking that the binding is there.
"""

import errno
import logging
import os

import pyfuse3

from obnamlib.engine import fuse_view

ROOT_TIMEOUT = 0        # root entries change when .pid is read
TREE_TIMEOUT = 60       # a generation's files never change

FUSEError = pyfuse3.FUSEError


def _fail(e):
    """View exceptions -> the errno the kernel sees."""
    if isinstance(e, fuse_view.FuseFileNotFound):
        return FUSEError(errno.ENOENT)
    if isinstance(e, OSError) and e.errno:
        return FUSEError(e.errno)
    logging.error('FUSE request failed', exc_info=True)
    return FUSEError(errno.EIO)


async def _refuse_writing(*args, **kwargs):
    raise FUSEError(errno.EROFS)


class Operations(pyfuse3.Operations):
    """Inodes are handed out per mount path, once, and kept."""

    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, view):
        super().__init__()
        self.view = view
        self.paths = {pyfuse3.ROOT_INODE: b'/'}
        self.inodes = {b'/': pyfuse3.ROOT_INODE}
        self.handles = {}
        self.next_handle = 1

    def _inode(self, path):
        if path not in self.inodes:
            ino = len(self.paths) + 1
            self.paths[ino] = path
            self.inodes[path] = ino
        return self.inodes[path]

    def _path(self, inode):
        try:
            return self.paths[inode]
        except KeyError:
            raise FUSEError(errno.ENOENT)

    def _attributes(self, path):
        try:
            attrs = self.view.getattr(path)
        except Exception as e:
            raise _fail(e)
        entry = pyfuse3.EntryAttributes()
        for name, value in vars(attrs).items():
            setattr(entry, name, value)
        entry.st_ino = self._inode(path)
        entry.st_blksize = fuse_view.BLOCK_SIZE
        timeout = ROOT_TIMEOUT if path.count(b'/') < 2 else TREE_TIMEOUT
        entry.attr_timeout = entry.entry_timeout = timeout
        return entry

    def _handle(self, value):
        fh = self.next_handle
        self.next_handle += 1
        self.handles[fh] = value
        return fh

    async def lookup(self, parent_inode, name, ctx=None):
        parent = self._path(parent_inode)
        return self._attributes(_child(parent, name))

    async def getattr(self, inode, ctx=None):
        return self._attributes(self._path(inode))

    async def readlink(self, inode, ctx=None):
        try:
            return self.view.readlink(self._path(inode))
        except Exception as e:
            raise _fail(e)

    async def opendir(self, inode, ctx=None):
        path = self._path(inode)
        try:
            names = self.view.listdir(path)
        except Exception as e:
            raise _fail(e)
        return self._handle((path, [b'.', b'..'] + names))

    async def readdir(self, fh, start_id, token):
        path, names = self.handles[fh]
        for index in range(start_id, len(names)):
            entry = self._attributes(_child(path, names[index]))
            if not pyfuse3.readdir_reply(token, names[index], entry,
                                         index + 1):
                break

    async def releasedir(self, fh):
        self.handles.pop(fh, None)

    async def open(self, inode, flags, ctx=None):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND):
            raise FUSEError(errno.EROFS)
        path = self._path(inode)
        try:
            content = self.view.open(path)
        except Exception as e:
            raise _fail(e)
        is_pid = path == b'/' + fuse_view.PID_NAME
        info = pyfuse3.FileInfo(fh=self._handle([path, content, False]))
        info.direct_io = is_pid
        info.keep_cache = not is_pid
        return info

    async def read(self, fh, off, size):
        handle = self.handles[fh]
        try:
            data = handle[1].read(off, size)
        except Exception as e:
            raise _fail(e)
        if off == 0 and len(data) < size:
            handle[2] = True     # read whole from the start
        return data

    async def release(self, fh):
        path, _, read_whole = self.handles.pop(fh, (None, None, False))
        if path == b'/' + fuse_view.PID_NAME and read_whole:
            try:
                self.view.refresh()
            except Exception:
                logging.error('Could not refresh generations',
                              exc_info=True)

    async def getxattr(self, inode, name, ctx=None):
        try:
            return self.view.getxattr(self._path(inode), name)
        except OSError as e:
            if e.errno == errno.ENODATA:
                raise FUSEError(pyfuse3.ENOATTR)
            raise _fail(e)
        except Exception as e:
            raise _fail(e)

    async def listxattr(self, inode, ctx=None):
        try:
            return self.view.listxattr(self._path(inode))
        except Exception as e:
            raise _fail(e)

    async def statfs(self, ctx=None):
        data = pyfuse3.StatvfsData()
        for name, value in self.view.statfs().items():
            setattr(data, name, value)
        return data

    async def access(self, inode, mode, ctx=None):
        if mode & os.W_OK:
            raise FUSEError(errno.EROFS)
        return True

    async def forget(self, inode_list):
        pass

    async def flush(self, fh):
        pass

    setattr = mknod = mkdir = unlink = rmdir = symlink = rename = \
        link = write = create = setxattr = removexattr = fsync = \
        fsyncdir = _refuse_writing


def _child(parent, name):
    """The mount path of a name in a directory ('..' of the root is it)."""
    if name == b'.':
        return parent
    if name == b'..':
        return os.path.dirname(parent.rstrip(b'/')) or b'/'
    return os.path.join(parent, name)
