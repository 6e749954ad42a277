"""The VFS on the local filesystem."""

import array
import concurrent.futures
import errno
import itertools
import os
import stat
import struct
import sys
import threading

import obnamlib.errors
import obnamlib.vfs.base
from obnamlib.vfs import mounts


def _clean(path):
    """A relative str path without empty or '.' components (the usual
    repository path has none: returned without a split)."""
    if ('.' not in path and '//' not in path and path[:1] != '/' and
            path[-1:] != '/'):
        return path
    return '/'.join(p for p in path.split('/') if p not in ('', '.'))


def _system_error(path, exc):
    return obnamlib.errors.ObnamSystemError(
        filename=os.fsdecode(path), errno=exc.errno, strerror=exc.strerror)


def _io_error(path, exc):
    return obnamlib.errors.ObnamIOError(
        filename=os.fsdecode(path), errno=exc.errno, strerror=exc.strerror)


def _live(func):
    """Decorator: OSError from a live-data operation -> ObnamSystemError."""
    def wrapper(self, path, *args, **kwargs):
        try:
            return func(self, path, *args, **kwargs)
        except OSError as e:
            raise _system_error(path, e) from e
    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


_XATTR_UNSUPPORTED = (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS)
_NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK,
                  errno.ENOSYS)
_NOATIME = getattr(os, 'O_NOATIME', 0)

# Temporary files are named tmp...: larch's node listing, its journal and
# the chunk enumeration skip such names (format-6.md §2), so one left
# behind by a crash is never taken for a node or a chunk.
TEMP_PREFIX = 'tmp'
_temp_counter = itertools.count()


def temp_name(dirname):
    """A fresh temporary name in dirname (unique within this host's
    processes; the O_EXCL create catches anything else)."""
    return os.path.join(dirname, '%s%x.%x' % (
        TEMP_PREFIX, os.getpid(), next(_temp_counter)))


class LocalFile:
    """An open live file; OS errors become ObnamIOError naming the file."""

    def __init__(self, path, fd, reading=False):
        self.path = path
        self.fd = fd
        self.reading = reading
        self.bytes_read = 0

    def _fail(self, exc):
        raise _io_error(self.path, exc) from exc

    def read(self, size=-1):
        try:
            if size is None or size < 0:
                parts = []
                while True:
                    part = os.read(self.fd, 1024 * 1024)
                    self.bytes_read += len(part)
                    if not part:
                        return b''.join(parts)
                    parts.append(part)
            data = os.read(self.fd, size)
            self.bytes_read += len(data)
            return data
        except OSError as e:
            self._fail(e)

    def write(self, data):
        try:
            view = memoryview(data)
            while view:
                done = os.write(self.fd, view)
                view = view[done:]
            return len(data)
        except OSError as e:
            self._fail(e)

    def seek(self, offset, whence=os.SEEK_SET):
        try:
            return os.lseek(self.fd, offset, whence)
        except OSError as e:
            self._fail(e)

    def truncate(self, size):
        try:
            os.ftruncate(self.fd, size)
        except OSError as e:
            self._fail(e)

    def fileno(self):
        return self.fd

    def set_attributes(self, owner=None, mode=None, times=None):
        """LocalFS.set_attributes of this file through its descriptor
        (SETS_ATTRIBUTES_OF_OPEN_FILES), after the last write: the same
        steps in the same order, and the same failures."""
        return obnamlib.vfs.base.set_attributes_in_steps(
            self._through_fd(os.fchown), self._through_fd(os.fchmod),
            self._through_fd(_set_times_of_fd), owner, mode, times)

    def _through_fd(self, func):
        """func(fd, *args) as a setter of this file: OSError ->
        ObnamSystemError naming its path, as LocalFS's by path."""
        def setter(*args):
            try:
                func(self.fd, *args)
            except OSError as e:
                raise _system_error(self.path, e) from e
        return setter

    def close(self):
        if self.fd is not None:
            fd, self.fd = self.fd, None
            if self.reading and self.bytes_read >= DROP_FROM_CACHE_AT:
                _drop_from_page_cache(fd)
            try:
                os.close(fd)
            except OSError as e:
                self._fail(e)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# Reads in flight at once on a network or FUSE filesystem (read_files).
# Measured on a replica-3 GlusterFS volume on 127.0.0.1 (8 KiB files):
# 1 -> 4 -> 16 threads, 646 -> 1136 -> 777 files/s.
IN_FLIGHT = 8
# Chunk files created at once there (fmt_6.chunk_writer, or the cipher
# helper for an encrypted repository): creates in 64 directories went 75
# -> 158 files/s with 16 threads (200 with 64).
CREATES_IN_FLIGHT = 16

# Files advise_reads keeps open for the read_file calls that follow: a
# hint and a half of fsck's (128 chunks each), within the usual limit of
# 1024 open files.
ADVISED_FILES = 256

# What a network or FUSE filesystem adds to LocalFS.capabilities.
_ROUND_TRIP_CAPABILITIES = frozenset({obnamlib.vfs.base.READS_IN_BATCHES,
                                      obnamlib.vfs.base.CREATES_IN_PARALLEL})

# Filesystems in memory: every file is in the page cache, so advise_reads
# never hints (and cannot tell: a read that must not wait is refused).
_IN_MEMORY_TYPES = frozenset({'tmpfs', 'ramfs'})


class LocalFS(obnamlib.vfs.base.VirtualFileSystem):
    """VFS on the local disk; str paths are relative to `root`."""

    # create_file may run in a second thread while this one goes on using
    # the object: chunk files are then written behind the backup's reading
    # (fmt_6.chunk_writer).  A file creation costs the kernel 0.1-1 ms.
    # The files are under `root`, where the cipher helper process of an
    # encrypted repository reads and creates them too.
    capabilities = frozenset({
        obnamlib.vfs.base.CREATES_IN_BACKGROUND,
        obnamlib.vfs.base.LOCAL_FILES,
        obnamlib.vfs.base.LIVE_READS_IN_BACKGROUND,
        obnamlib.vfs.base.SETS_ATTRIBUTES_OF_OPEN_FILES})

    def __init__(self, root, settings=None, mountinfo=mounts.MOUNTINFO):
        root = os.path.abspath(os.fsdecode(root))
        super().__init__(root)
        self.root = root
        self.prefix = root if root.endswith('/') else root + '/'
        self.known_dirs = set()       # directories we know exist
        self.counter_lock = threading.Lock()
        if os.path.exists(root) and not os.path.isdir(root):
            raise obnamlib.errors.RootIsNotADirectory(baseurl=root)
        self.readers = None     # threads of read_files, where round trips
        self.advised = {}       # full path -> fd, opened by advise_reads
        if mounts.has_round_trips(root, mountinfo):
            self.capabilities = self.capabilities | _ROUND_TRIP_CAPABILITIES
        if mounts.filesystem_type(root, mountinfo) not in _IN_MEMORY_TYPES:
            self.capabilities = self.capabilities | {
                obnamlib.vfs.base.ADVISES_READS}
            self.prefetch_size = PREFETCH_LIVE_BYTES

    def __repr__(self):
        return 'LocalFS(%r)' % self.root

    def reopening(self):
        return self.root, {}

    def _full(self, path):
        """Absolute path for a str (relative) or bytes (absolute) path."""
        if isinstance(path, bytes):
            return path
        rel = _clean(path)
        return self.prefix + rel if rel else self.root

    # --- StorageFS ----------------------------------------------------------

    def read_file(self, path):
        full = self._full(path)
        fd = self.advised.pop(full, None)
        data = _read_whole(full) if fd is None else _read_opened(full, fd)
        self.bytes_read += len(data)
        return data

    def prefetch(self, paths):
        """Live files read next (each at most prefetch_size): if the
        first one's start is not in the page cache, ask the kernel to
        read them all now (POSIX_FADV_WILLNEED), so that the disk has many
        reads queued instead of one at a time (the backup reads small
        files in turn).  With a warm cache nothing is done after that one
        probe."""
        _advise_unless_cached(self._opened_for_prefetch(paths))

    def _opened_for_prefetch(self, paths):
        """Each file opened in turn, closed when the next is asked for."""
        for path in paths:
            try:    # the probe reads: no atime; a FIFO now: no waiting
                fd = _open_noatime(self._full(path),
                                   os.O_CLOEXEC | os.O_NONBLOCK)
            except OSError:
                continue        # reported when it is read
            try:
                yield fd
            finally:
                os.close(fd)

    def advise_reads(self, paths):
        """Open each file and ask the kernel to read it into the page
        cache now (POSIX_FADV_WILLNEED), keeping it open for its
        read_file: with a cold cache the disk then has many reads queued
        instead of one at a time.  Only if the first file's start is not
        in the page cache (a read that must not wait says so): with a
        warm cache the hint would cost a system call per file for
        nothing.  A file that cannot be opened is left to read_file,
        which reports it."""
        _advise_unless_cached(self._opened_to_keep(paths))

    def _opened_to_keep(self, paths):
        """Each file not already kept opened in turn, and kept open."""
        for path in paths:
            full = self._full(path)
            if full in self.advised:
                continue
            try:
                fd = os.open(full, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            self._keep_advised(full, fd)
            yield fd

    def _keep_advised(self, full, fd):
        self.advised[full] = fd
        while len(self.advised) > ADVISED_FILES:
            os.close(self.advised.pop(next(iter(self.advised))))

    def _forget_advised(self, full):
        """A file opened for reading ahead is being removed or replaced:
        read_file must see what the name holds then."""
        fd = self.advised.pop(full, None)
        if fd is not None:
            os.close(fd)

    def read_files(self, paths):
        """read_file of each path; on a network or FUSE filesystem
        (READS_IN_BATCHES) IN_FLIGHT of them at once, each in a thread of
        a pool, whose waits for the server then overlap.  Raises like
        read_file for the first path that fails."""
        if obnamlib.vfs.base.READS_IN_BATCHES not in self.capabilities:
            return super().read_files(paths)
        if self.readers is None:
            self.readers = concurrent.futures.ThreadPoolExecutor(
                IN_FLIGHT, thread_name_prefix='obnam-reads')
        contents = list(self.readers.map(_read_whole, map(self._full, paths)))
        self.bytes_read += sum(len(data) for data in contents)
        return contents

    def close(self):
        if self.readers is not None:
            self.readers.shutdown()
            self.readers = None
        while self.advised:
            os.close(self.advised.popitem()[1])
        super().close()

    def write_file(self, path, data):
        full = self._full(path)
        self._forget_advised(full)
        tmp = self._write_temp(full, data)
        try:
            os.replace(tmp, full)
        except BaseException:
            _remove_quietly(tmp)
            raise
        self._count_written(len(data))

    def create_file(self, path, data):
        """Exclusive create (FileExistsError if the name is taken), written
        in place: chunk files, which nothing names until a commit after
        they are complete.  A failed write removes the part written; a
        crash may leave one, which only fsck sees (an unused chunk).  One
        file creation, where a temporary file and a link cost two
        directory changes more.  Safe to call from a second thread
        (CREATES_IN_BACKGROUND)."""
        full = self._full(path)
        self._in_parent(full, lambda: _write_new(full, data))
        self._count_written(len(data))

    def _count_written(self, size):
        with self.counter_lock:
            self.bytes_written += size

    def listdir(self, path):
        return sorted(os.listdir(self._full(path)))

    def file_sizes(self, dirnames):
        """One scandir per directory (its entries' stat)."""
        return [_file_sizes(self._full(dirname)) for dirname in dirnames]

    def rename(self, old, new):
        full_old, full_new = self._full(old), self._full(new)
        self._forget_advised(full_old)
        self._forget_advised(full_new)
        self._in_parent(full_new, lambda: os.replace(full_old, full_new),
                        retry_if=lambda: os.path.lexists(full_old))

    def lock(self, path, content=b''):
        try:
            self._create_exclusive(self._full(path), content)
        except FileExistsError:
            raise obnamlib.errors.LockFail(
                lock_name=path, reason='lock file already exists')
        self._count_written(len(content))

    def _create_exclusive(self, full, data):
        """Write a temporary file, then hard link it to the final name
        (atomic and exclusive); O_EXCL on the final name where the
        filesystem has no hard links."""
        tmp = self._write_temp(full, data)
        try:
            os.link(tmp, full)
        except OSError as e:
            if e.errno not in _NO_HARD_LINKS:
                raise
            _write_new(full, data)
        finally:
            _remove_quietly(tmp)

    def _write_temp(self, full, data):
        """A new temporary file holding data, next to full."""
        dirname = os.path.dirname(full)

        def write():
            while True:
                tmp = temp_name(dirname)
                try:
                    _write_new(tmp, data)
                    return tmp
                except FileExistsError:
                    continue
        return self._in_parent(full, write)

    def _in_parent(self, full, action, retry_if=lambda: True):
        """action() once full's directory exists; if it then finds the
        directory gone (FileNotFoundError, and retry_if()), the directory
        vanished behind our back: make it again and try once more."""
        self._make_parent(full)
        try:
            return action()
        except FileNotFoundError:
            if not retry_if():
                raise
            self._forget_dir(os.path.dirname(full))
            self._make_parent(full)
            return action()

    def _make_parent(self, full):
        """Create full's directory unless we know it exists (one stat per
        directory, not per file: chunk directories hold thousands)."""
        dirname = os.path.dirname(full)
        if dirname not in self.known_dirs:
            _makedirs_private(dirname)
            self.known_dirs.add(dirname)

    def _forget_dir(self, dirname):
        """dirname vanished behind our back (e.g. fsck removed it)."""
        self.known_dirs.discard(dirname)

    def spread_subdirectories(self, path):
        """Make directory path (if needed) and mark it as the top of
        directory hierarchies, so that ext2/3/4 place each directory made
        in it in a block group of its own choosing (the Orlov allocator's
        rule for home directories) instead of next to path.

        For chunks/: each run's chunk files then land away from the
        repository's churn and from files deleted nearby.  On ext4
        without a journal every new inode otherwise scans past the
        recently deleted inodes of its group (kernel recently_deleted()),
        which took half a first backup's CPU time after a deletion.
        Best effort: False where the filesystem has no such flag."""
        full = self._full(path)
        self._make_parent(os.path.join(full, 'x'))
        return _set_top_directory_flag(full)

    def sync(self):
        """Make everything written so far durable (syncfs of the
        repository's filesystem: one call, not one fsync per file)."""
        fd = os.open(self.root, os.O_RDONLY)
        try:
            _syncfs(fd)
        finally:
            os.close(fd)

    # --- shared -------------------------------------------------------------

    def exists(self, path):
        return os.path.lexists(self._full(path))

    def isdir(self, path):
        return os.path.isdir(self._full(path))

    def makedirs(self, path):
        self._shared(path, _makedirs_private)

    def mkdir(self, path, mode=0o777):
        if isinstance(path, str):
            mode = 0o700
        self._shared(path, os.mkdir, mode)

    def remove(self, path):
        self._forget_advised(self._full(path))
        self._shared(path, os.remove)

    def rmdir(self, path):
        self._shared(path, os.rmdir)
        self.known_dirs.discard(self._full(path))

    def _shared(self, path, func, *args, **kwargs):
        """Run func on the full path; wrap OSError only for live (bytes) paths."""
        full = self._full(path)
        if isinstance(path, str):
            return func(full, *args, **kwargs)
        try:
            return func(full, *args, **kwargs)
        except OSError as e:
            raise _system_error(full, e) from e

    # --- live data ----------------------------------------------------------

    @_live
    def lstat(self, path):
        return os.lstat(path)

    @_live
    def scandir(self, path):
        with os.scandir(path) as it:
            pairs = [(e.name, e.stat(follow_symlinks=False)) for e in it]
        pairs.sort()
        return pairs

    def spread_directories_below(self, path, on):
        """FS_TOPDIR_FL on the live directory path, set or cleared (see
        VirtualFileSystem); whether it was set before, None where the
        filesystem has no such flag."""
        return _switch_top_directory_flag(path, on)

    @_live
    def readlink(self, path):
        return os.readlink(path)

    def open_read(self, path):
        try:
            fd = _open_noatime(path)
        except OSError as e:
            raise _io_error(path, e) from e
        return LocalFile(path, fd, reading=True)

    def open_write(self, path):
        try:
            fd = _create(path)
        except OSError as e:
            raise _io_error(path, e) from e
        return LocalFile(path, fd)

    @_live
    def llistxattr(self, path):
        try:
            names = os.listxattr(path, follow_symlinks=False)
        except OSError as e:
            if e.errno in _XATTR_UNSUPPORTED:
                return []
            raise
        return [os.fsencode(n) for n in names]

    @_live
    def lgetxattr(self, path, name):
        return os.getxattr(path, name, follow_symlinks=False)

    @_live
    def lsetxattr(self, path, name, value):
        os.setxattr(path, name, value, follow_symlinks=False)

    @_live
    def lchown(self, path, uid, gid):
        os.chown(path, uid, gid, follow_symlinks=False)

    @_live
    def chmod(self, path, mode):
        os.chmod(path, mode)

    @_live
    def lutimes(self, path, atime_ns, mtime_ns):
        os.utime(path, ns=(atime_ns, mtime_ns), follow_symlinks=False)

    def symlink(self, target, path):
        try:
            os.symlink(target, path)
        except OSError as e:
            raise _system_error(path, e) from e

    def link(self, existing, new):
        try:
            os.link(existing, new, follow_symlinks=False)
        except OSError as e:
            raise _system_error(new, e) from e

    @_live
    def mknod(self, path, mode, device=0):
        if stat.S_ISSOCK(mode):
            _make_socket(path)
        else:
            os.mknod(path, mode, device)


def _set_times_of_fd(fd, atime_ns, mtime_ns):
    os.utime(fd, ns=(atime_ns, mtime_ns))


def _file_sizes(full):
    """{name: st_size} of the files in a directory, or the OSError."""
    try:
        with os.scandir(full) as entries:
            return {entry.name: entry.stat(follow_symlinks=False).st_size
                    for entry in entries
                    if not entry.is_dir(follow_symlinks=False)}
    except OSError as e:
        return e


def _open_noatime(path, flags=0):
    """Open for reading without updating atime where we are allowed to
    (flags: more of them)."""
    flags |= os.O_RDONLY | os.O_NOFOLLOW
    if _NOATIME:
        try:
            return os.open(path, flags | _NOATIME)
        except PermissionError:
            pass
    return os.open(path, flags)


# Live files up to this size are worth a prefetch() where the disk may
# have to be read: the backup reads them in its own thread, one after the
# other (bigger ones are read ahead in a worker, backup_reading.MIN_SIZE).
PREFETCH_LIVE_BYTES = 256 * 1024

# A live file read this far is dropped from the page cache when closed;
# for a smaller one the system call costs more than the cache it saves
# (as the chunker's own hints: backup_reading.ADVISE_SIZE).
DROP_FROM_CACHE_AT = 256 * 1024


def _drop_from_page_cache(fd):
    """Backups read everything once: do not evict everyone else's cache."""
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except (OSError, AttributeError):
        pass


def _create(path):
    """A new file, or an existing one truncated.  Exclusive creation first:
    restores write into empty directories, and O_TRUNC on a file that does
    not exist yet made creation ten times slower on ext4 here."""
    base = os.O_WRONLY | os.O_NOFOLLOW
    try:
        return os.open(path, base | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        return os.open(path, base | os.O_TRUNC)


def _make_socket(path):
    """A Unix socket node: mknod(S_IFSOCK), or bind a socket if refused."""
    try:
        os.mknod(path, stat.S_IFSOCK | 0o600)
        return
    except PermissionError:
        pass
    import socket
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
    finally:
        sock.close()


def _makedirs_private(path):
    """Like os.makedirs(exist_ok=True), but every new directory gets 0700
    (iterative: any depth)."""
    missing = []
    while path and not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise


_FS_TOPDIR_FL = 0x00020000


def _ioctl_number(direction, number):
    """Linux _IOC('f', number, long) (FS_IOC_GETFLAGS / SETFLAGS)."""
    return ((direction << 30) | (struct.calcsize('l') << 16) |
            (ord('f') << 8) | number)


_FS_IOC_GETFLAGS = _ioctl_number(2, 1)
_FS_IOC_SETFLAGS = _ioctl_number(1, 2)


def _set_top_directory_flag(path):
    """Set FS_TOPDIR_FL on a directory; True if it is set."""
    return _switch_top_directory_flag(path, True) is not None


def _switch_top_directory_flag(path, on):
    """Set (on) or clear FS_TOPDIR_FL on a directory; whether it was set
    before, or None where it cannot be had."""
    if not sys.platform.startswith('linux'):
        return None
    import fcntl
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        flags = array.array('i', [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        was = bool(flags[0] & _FS_TOPDIR_FL)
        if was != on:
            flags[0] ^= _FS_TOPDIR_FL
            fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags, True)
        return was
    except OSError:
        return None
    finally:
        os.close(fd)


def _syncfs(fd):
    """syncfs(2) where libc has it, else sync(2)."""
    global _libc_syncfs
    if _libc_syncfs is None:
        try:
            import ctypes
            _libc_syncfs = ctypes.CDLL(None, use_errno=True).syncfs
        except (OSError, AttributeError):
            _libc_syncfs = False
    if not _libc_syncfs:
        os.sync()
        return
    if _libc_syncfs(fd) != 0:
        import ctypes
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


_libc_syncfs = None


def _write_new(path, data):
    """Create path exclusively (0600) and write all of data to it; a
    partly written file is removed again."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        _remove_quietly(path)
        raise
    os.close(fd)


def _read_whole(full):
    return _read_opened(full, os.open(full, os.O_RDONLY | os.O_CLOEXEC))


def _read_opened(full, fd):
    """The whole file open as fd, which is closed."""
    try:
        return _read_to_end(fd)
    except OSError as e:    # e.g. a directory: name it, as open() does
        e.filename = e.filename or full
        raise
    finally:
        os.close(fd)


def _read_to_end(fd):
    """A file's whole content with as few system calls as may be: one
    read of its size and one byte more (which shows that the end was
    reached) for a file that does not grow meanwhile.  (A repository
    reads thousands of small files; open().read() costs twice the
    calls and a buffered reader.)"""
    size = os.fstat(fd).st_size
    data = os.read(fd, size + 1)
    if len(data) == size:
        return data         # the byte more was not there: the end
    pieces = [data]         # it grew, shrank, or read short: to the end
    while True:
        more = os.read(fd, 1 << 20)
        if not more:
            return b''.join(pieces)
        pieces.append(more)


def _must_wait_for_disk(fd):
    """Whether reading the file's first byte would wait for the disk (it
    is not in the page cache).  False where the filesystem cannot tell
    (tmpfs: always in memory) or the file is empty."""
    try:
        os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def _advise_unless_cached(opened):
    """POSIX_FADV_WILLNEED for each file descriptor the generator
    `opened` gives, unless the first one's start is in the page cache:
    then no more are opened (a warm cache costs one probe)."""
    try:
        for i, fd in enumerate(opened):
            if i == 0 and not _must_wait_for_disk(fd):
                return
            _advise_willneed(fd)
    finally:
        opened.close()      # the last file given is closed now, not later


def _advise_willneed(fd):
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass        # a hint: a filesystem may not take it


def _remove_quietly(path):
    try:
        os.remove(path)
    except OSError:
        pass
