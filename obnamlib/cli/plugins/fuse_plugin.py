"""mount: a read-only FUSE view of the generations (§5.13).

What the mount shows lives in obnamlib.engine.fuse_view; here we parse
`--fuse-opt`, bind the view to the kernel through pyfuse3 (libfuse 3, Debian
package python3-pyfuse3; the FUSE 2 binding python3-fuse cannot report
nanosecond times), and either serve in the foreground (`-f`) or in a child
process that the command waits for until the mount is in place.
"""

import errno
import logging
import os
import signal

from obnamlib import errors
from obnamlib.engine import fuse_view
from obnamlib.cli import plugin

GROUP = 'Mounting with FUSE'
DEBIAN_PACKAGE = 'python3-pyfuse3'
ROOT_TIMEOUT = 0        # root entries change when .pid is read
TREE_TIMEOUT = 60       # a generation's files never change


class FuseModuleNotFoundError(errors.ObnamError):
    code = 'RABC26X'
    msg = 'Failed to load module "{module}", try installing {package}'


class NoMountPointError(errors.ObnamError):
    code = 'R6A2EFX'
    msg = 'The mount command wants an existing directory set with --to'


class MountFailedError(errors.ObnamError):
    code = 'RFB792X'
    msg = 'Could not mount on {mountpoint}: {reason}'


def load_binding():
    """The pyfuse3 and trio modules, or RABC26X naming the package."""
    try:
        import pyfuse3
        import trio
    except ImportError as e:
        raise FuseModuleNotFoundError(module=e.name or 'pyfuse3',
                                      package=DEBIAN_PACKAGE)
    return pyfuse3, trio


def parse_fuse_options(values):
    """--fuse-opt values -> (set of mount options, foreground?, debug?).
    A value is `-f`, `-d`, `-o OPTS`, `-oOPTS` or plain `OPTS`, where OPTS
    is comma-separated; `ro` is always added (and `rw` dropped)."""
    options = {'ro', 'fsname=obnam', 'subtype=obnam'}
    foreground = debug = False
    for value in values:
        for word in value.split():
            if word == '-f':
                foreground = True
            elif word == '-d':
                foreground = debug = True
            elif word == '-o':
                continue
            else:
                if word.startswith('-o'):
                    word = word[2:]
                options.update(o for o in word.split(',') if o)
    options.discard('rw')
    if 'debug' in options:
        options.discard('debug')
        foreground = debug = True
    return options, foreground, debug


class FusePlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.string_list(
            ['fuse-opt'], 'options to pass directly to FUSE', metavar='FUSE',
            group=GROUP)
        self.app.add_subcommand('mount', self.mount, arg_synopsis='[ROOT]')

    def mount(self, args):
        """Mount backup repository as a user-space filesystem"""
        pyfuse3, trio = load_binding()
        settings = self.app.settings
        mountpoint = settings['to']
        if not mountpoint or not os.path.isdir(mountpoint):
            raise NoMountPointError()
        options, foreground, _ = parse_fuse_options(settings['fuse-opt'])
        client_name = settings['client-name']
        from obnamlib.repo import factory as repo_factory
        view = fuse_view.BackupView(
            lambda: repo_factory.open_repository(settings), client_name)
        logging.info('Mounting %s generations of %s on %s',
                     len(view.generations), client_name, mountpoint)
        if foreground:
            serve(pyfuse3, trio, view, mountpoint, options)
        else:
            serve_in_background(pyfuse3, trio, view, mountpoint, options)


def serve(pyfuse3, trio, view, mountpoint, options):
    """Mount, answer requests until unmounted (or SIGINT/SIGTERM)."""
    operations = make_operations(pyfuse3)(view)
    try:
        pyfuse3.init(operations, mountpoint, options)
    except RuntimeError as e:
        raise MountFailedError(mountpoint=mountpoint, reason=str(e))
    _serve_mounted(pyfuse3, trio, view)


def _serve_mounted(pyfuse3, trio, view):
    signal.signal(signal.SIGTERM, lambda *_: pyfuse3.terminate())
    try:
        trio.run(pyfuse3.main)
    except KeyboardInterrupt:
        pass
    finally:
        pyfuse3.close(unmount=True)
        view.close()


def serve_in_background(pyfuse3, trio, view, mountpoint, options):
    """Fork; the child mounts, tells the parent how it went, detaches and
    serves.  The parent returns once the mount is there (or fails)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        with os.fdopen(read_end, 'rb') as report:
            outcome = report.read().decode('utf-8', 'replace')
        if outcome != 'ok':
            os.waitpid(pid, 0)
            raise MountFailedError(mountpoint=mountpoint,
                                   reason=outcome or 'server died')
        return
    os.close(read_end)
    status = 0
    try:
        os.setsid()
        view.pid = os.getpid()
        operations = make_operations(pyfuse3)(view)
        try:
            pyfuse3.init(operations, mountpoint, options)
        except RuntimeError as e:
            os.write(write_end, str(e).encode('utf-8') or b'mount failed')
            os._exit(1)
        os.write(write_end, b'ok')
        os.close(write_end)
        _detach_stdio()
        _serve_mounted(pyfuse3, trio, view)
    except BaseException:
        logging.exception('FUSE server failed')
        status = 1
    finally:
        logging.shutdown()
        os._exit(status)


def _detach_stdio():
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def make_operations(pyfuse3):
    """The pyfuse3.Operations subclass serving a BackupView (a class built
    here so that importing this module does not need pyfuse3)."""
    FUSEError = pyfuse3.FUSEError

    def fail(e):
        """View exceptions -> the errno the kernel sees."""
        if isinstance(e, fuse_view.FuseFileNotFound):
            return FUSEError(errno.ENOENT)
        if isinstance(e, OSError) and e.errno:
            return FUSEError(e.errno)
        logging.error('FUSE request failed', exc_info=True)
        return FUSEError(errno.EIO)

    def read_only(*args, **kwargs):
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
                raise fail(e)
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
                raise fail(e)

        async def opendir(self, inode, ctx=None):
            path = self._path(inode)
            try:
                names = self.view.listdir(path)
            except Exception as e:
                raise fail(e)
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
                raise fail(e)
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
                raise fail(e)
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
                raise fail(e)
            except Exception as e:
                raise fail(e)

        async def listxattr(self, inode, ctx=None):
            try:
                return self.view.listxattr(self._path(inode))
            except Exception as e:
                raise fail(e)

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
            fsyncdir = _async(read_only)

    return Operations


def _child(parent, name):
    """The mount path of a name in a directory ('..' of the root is it)."""
    if name == b'.':
        return parent
    if name == b'..':
        return os.path.dirname(parent.rstrip(b'/')) or b'/'
    return os.path.join(parent, name)


def _async(function):
    async def wrapper(*args, **kwargs):
        return function(*args, **kwargs)
    return wrapper
