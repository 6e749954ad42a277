"""What `obnam mount` shows: the backups as a read-only directory tree.

This is the filesystem logic of the mount (cli.md §5.13), kept apart from
any FUSE binding so that it can be tested without mounting anything.
Paths are bytes relative to the mount point ("/" is the mount root):

    /                       one directory per non-checkpoint generation,
    /GENID/...              the generation's files, GENID/x being x in it,
    /latest                 a symlink to the newest generation's id,
    /.pid                   the serving process's PID, as text.

Missing names raise `FuseFileNotFound`; other refusals raise `OSError`
with the errno the kernel should see.  File contents are read chunk by
chunk: a read finds the chunk covering its offset directly (fixed chunk
length, or cumulative lengths learnt once per file), never by walking the
chunk list from the start (the 1.x mount did, §16 item 14).
"""

import bisect
import collections
import dataclasses
import errno
import os
import stat

from obnamlib import errors
from obnamlib.repo import metadata, interface as repo_interface
from obnamlib.engine import stored_names

PID_NAME = b'.pid'
LATEST_NAME = b'latest'
BLOCK_SIZE = 4096
CHUNK_CACHE_SIZE = 16


class FuseFileNotFound(errors.ObnamError):
    """A path that the mounted view does not have (the kernel sees ENOENT)."""
    code = 'R7B8D0X'
    msg = 'FUSE: File not found: {filename}'
    errno = errno.ENOENT


@dataclasses.dataclass
class Attributes:
    """The stat fields the mount reports for one path; times in ns."""
    st_mode: int
    st_nlink: int = 1
    st_uid: int = 0
    st_gid: int = 0
    st_size: int = 0
    st_blocks: int = 0
    st_atime_ns: int = 0
    st_mtime_ns: int = 0
    st_ctime_ns: int = 0
    st_rdev: int = 0


def decode_xattr_blob(blob):
    """The stored xattr blob -> [(name, value)]; damage is EIO to readers."""
    try:
        return metadata.decode_xattrs(blob)
    except errors.RepositoryCorrupt:
        raise OSError(errno.EIO, 'corrupt xattr blob')


def time_ns(seconds, nanoseconds):
    """Stored time -> nanoseconds; negative (or absent) shown as 0."""
    value = (seconds or 0) * 1000000000 + (nanoseconds or 0)
    return max(value, 0)


def attributes_from_metadata(md):
    """The stat the mount shows for a backed-up object."""
    mode = md.st_mode if md.st_mode is not None else stat.S_IFDIR | 0o755
    size = md.st_size or 0
    if md.islink() and md.target is not None:
        size = len(md.target)
    mtime = time_ns(md.st_mtime_sec, md.st_mtime_nsec)
    return Attributes(
        st_mode=mode, st_nlink=md.st_nlink or 1, st_uid=md.st_uid or 0,
        st_gid=md.st_gid or 0, st_size=size,
        st_blocks=md.st_blocks if md.st_blocks is not None
        else (size + 511) // 512,
        st_atime_ns=time_ns(md.st_atime_sec, md.st_atime_nsec),
        st_mtime_ns=mtime, st_ctime_ns=mtime)


class ChunkCache:
    """The few most recently read chunks (sequential reads of one chunk
    come in many small requests), plus every chunk length seen."""

    def __init__(self, repo, size=CHUNK_CACHE_SIZE):
        self.repo = repo
        self.size = size
        self.chunks = collections.OrderedDict()
        self.lengths = {}
        self.fetches = 0

    def get(self, chunk_id):
        if chunk_id in self.chunks:
            self.chunks.move_to_end(chunk_id)
            return self.chunks[chunk_id]
        data = self.repo.get_chunk_content(chunk_id)
        self.fetches += 1
        self.lengths[chunk_id] = len(data)
        self.chunks[chunk_id] = data
        while len(self.chunks) > self.size:
            self.chunks.popitem(last=False)
        return data

    def length(self, chunk_id):
        if chunk_id not in self.lengths:
            self.get(chunk_id)
        return self.lengths[chunk_id]


class ChunkedContent:
    """One regular file's content as a list of chunks, readable at any
    offset.  Backups cut files into equal chunks (the last one shorter), so
    the first chunk's length usually locates every offset; when a chunk
    turns out to break that pattern, the cumulative lengths are learnt once
    and searched by bisection from then on."""

    def __init__(self, chunk_ids, size, cache):
        self.chunk_ids = list(chunk_ids)
        self.size = size
        self.cache = cache
        self.fixed = None
        self.starts = []
        self.end = 0
        if self.chunk_ids:
            self._guess_fixed_length()

    def _guess_fixed_length(self):
        first = self.cache.length(self.chunk_ids[0])
        count = len(self.chunk_ids)
        if count == 1 or (first > 0 and
                          (count - 1) * first < self.size <= count * first):
            self.fixed = first
        else:
            self._learn_starts()

    def _learn_starts(self):
        self.fixed = None
        self.starts = []
        pos = 0
        for chunk_id in self.chunk_ids:
            self.starts.append(pos)
            pos += self.cache.length(chunk_id)
        self.end = pos

    def _locate(self, offset):
        """(index, start offset) of the chunk holding offset, or None."""
        if self.fixed is not None:
            index = offset // self.fixed if self.fixed else 0
            if index >= len(self.chunk_ids):
                return None
            return index, index * self.fixed
        if offset >= self.end:
            return None
        index = bisect.bisect_right(self.starts, offset) - 1
        return index, self.starts[index]

    def _chunk(self, index):
        data = self.cache.get(self.chunk_ids[index])
        is_last = index == len(self.chunk_ids) - 1
        if self.fixed is not None and not is_last and len(data) != self.fixed:
            self._learn_starts()
            return None
        return data

    def read(self, offset, length):
        pieces = []
        while length > 0:
            where = self._locate(offset)
            if where is None:
                break
            index, start = where
            data = self._chunk(index)
            if data is None:
                continue
            piece = data[offset - start:offset - start + length]
            if not piece:
                if index == len(self.chunk_ids) - 1:
                    break
                offset = start + len(data)
                continue
            pieces.append(piece)
            offset += len(piece)
            length -= len(piece)
        return b''.join(pieces)


class InTreeContent:
    """Content stored inside the metadata tree (1.x small files)."""

    def __init__(self, data):
        self.data = data

    def read(self, offset, length):
        return self.data[offset:offset + length]


class BackupView:
    """The mount's tree for one client.  `open_repository()` returns a
    Repository (no locks are taken); `refresh()` re-opens it and re-reads
    the generation list, which is otherwise frozen."""

    def __init__(self, open_repository, client_name, pid=None, uid=None,
                 gid=None):
        self.open_repository = open_repository
        self.client_name = client_name
        self.pid = pid if pid is not None else os.getpid()
        self.uid = os.getuid() if uid is None else uid
        self.gid = os.getgid() if gid is None else gid
        self.repo = None
        self.refresh()

    # --- generations -------------------------------------------------------

    def refresh(self):
        """Re-open the repository and re-read the client's generations."""
        old = self.repo
        self.repo = self.open_repository()
        if old is not None:
            old.close()
        self.cache = ChunkCache(self.repo)
        self.generations = {}
        for gen in self.repo.get_generation_ids(self.client_name):
            if not self.repo.get_generation_key(
                    gen, repo_interface.GEN_IS_CHECKPOINT):
                name = self.repo.make_generation_spec(gen).encode('ascii')
                self.generations[name] = gen
        self.latest = list(self.generations)[-1] if self.generations else None

    def close(self):
        if self.repo is not None:
            self.repo.close()
            self.repo = None

    def pid_text(self):
        return b'%d\n' % self.pid

    # --- paths -------------------------------------------------------------

    def _split(self, path):
        """Mount path -> (kind, generation, path inside the generation)."""
        parts = [p for p in path.split(b'/') if p]
        if not parts:
            return 'root', None, None
        first = parts[0]
        if len(parts) == 1 and first == PID_NAME:
            return 'pid', None, None
        if len(parts) == 1 and first == LATEST_NAME and self.latest:
            return 'latest', None, None
        gen = self.generations.get(first)
        if gen is None:
            raise FuseFileNotFound(filename=path)
        return 'gen', gen, b'/' + b'/'.join(parts[1:])

    def _metadata(self, gen, inner, path):
        try:
            return self.repo.get_metadata(gen, inner)
        except errors.ObnamError:
            raise FuseFileNotFound(filename=path)

    def getattr(self, path):
        kind, gen, inner = self._split(path)
        if kind == 'root':
            return self._root_attributes()
        if kind == 'pid':
            return self._own(stat.S_IFREG | 0o444, len(self.pid_text()))
        if kind == 'latest':
            return self._own(stat.S_IFLNK | 0o777, len(self.latest))
        attrs = attributes_from_metadata(self._metadata(gen, inner, path))
        if inner == b'/':
            ended = self._gen_ended_ns(gen)
            attrs.st_mtime_ns = attrs.st_ctime_ns = ended
        return attrs

    def _gen_ended_ns(self, gen):
        ended = self.repo.get_generation_key(gen, repo_interface.GEN_ENDED)
        return time_ns(ended, 0)

    def _newest_ns(self):
        if not self.latest:
            return 0
        return self._gen_ended_ns(self.generations[self.latest])

    def _own(self, mode, size):
        """Attributes of the mount's own entries: the mounting user's,
        dated by the newest generation."""
        newest = self._newest_ns()
        return Attributes(st_mode=mode, st_uid=self.uid, st_gid=self.gid,
                          st_size=size, st_mtime_ns=newest,
                          st_ctime_ns=newest, st_atime_ns=newest)

    def _root_attributes(self):
        attrs = self._own(stat.S_IFDIR | 0o555, 0)
        attrs.st_nlink = 2 + len(self.generations)
        return attrs

    def listdir(self, path):
        """Names in a directory (without . and ..)."""
        kind, gen, inner = self._split(path)
        if kind == 'root':
            names = list(self.generations)
            if self.latest:
                names.append(LATEST_NAME)
            return names + [PID_NAME]
        if kind != 'gen':
            raise OSError(errno.ENOTDIR, 'not a directory')
        if not self._is_dir(gen, inner, path):
            raise OSError(errno.ENOTDIR, 'not a directory')
        names, unsafe = stored_names.partition(
            list(self.repo.get_file_children(gen, inner)))
        if unsafe:
            raise stored_names.unsafe_name_error(
                self.repo, gen, inner, unsafe[0], self.client_name)
        return names

    def _is_dir(self, gen, inner, path):
        md = self._metadata(gen, inner, path)
        return md.st_mode is None or md.isdir()

    def readlink(self, path):
        kind, gen, inner = self._split(path)
        if kind == 'latest':
            return self.latest
        if kind == 'gen':
            md = self._metadata(gen, inner, path)
            if md.islink():
                return md.target or b''
        raise OSError(errno.EINVAL, 'not a symlink')

    def open(self, path):
        """A reader (with read(offset, length)) of a file's content."""
        kind, gen, inner = self._split(path)
        if kind == 'pid':
            return InTreeContent(self.pid_text())
        if kind != 'gen':
            raise OSError(errno.EISDIR, 'not a regular file')
        md = self._metadata(gen, inner, path)
        if not md.isreg():
            raise OSError(errno.EISDIR if md.isdir() else errno.EINVAL,
                          'not a regular file')
        data = self.repo.get_file_data(gen, inner)
        if data is not None:
            return InTreeContent(data)
        return ChunkedContent(self.repo.get_file_chunk_ids(gen, inner),
                              md.st_size or 0, self.cache)

    def read(self, path, offset, length):
        """Convenience for one-off reads (the mount keeps open readers)."""
        return self.open(path).read(offset, length)

    # --- extended attributes --------------------------------------------

    def _xattrs(self, path):
        kind, gen, inner = self._split(path)
        if kind != 'gen':
            return []
        return decode_xattr_blob(self._metadata(gen, inner, path).xattr)

    def listxattr(self, path):
        return [name for name, _ in self._xattrs(path)]

    def getxattr(self, path, name):
        for xname, value in self._xattrs(path):
            if xname == name:
                return value
        raise OSError(errno.ENODATA, 'no such attribute')

    # --- the filesystem as a whole ---------------------------------------

    def statfs(self):
        """statvfs fields: the newest generation's size, nothing free."""
        total = files = 0
        if self.latest:
            gen = self.generations[self.latest]
            total = self.repo.get_generation_key(
                gen, repo_interface.GEN_TOTAL_DATA) or 0
            files = self.repo.get_generation_key(
                gen, repo_interface.GEN_FILE_COUNT) or 0
        return {
            'f_bsize': BLOCK_SIZE, 'f_frsize': BLOCK_SIZE,
            'f_blocks': (total + BLOCK_SIZE - 1) // BLOCK_SIZE,
            'f_bfree': 0, 'f_bavail': 0,
            'f_files': files, 'f_ffree': 0, 'f_favail': 0,
            'f_namemax': 255,
        }
