"""Shared pieces of the backup, verify and crash tests."""

import os

import obnamlib.errors


def live_fs():
    """The live file system as backup and verify see it."""
    import obnamlib.vfs.local
    return obnamlib.vfs.local.LocalFS('/')


def open_repository(path, **settings):
    """(Repository, its storage with bytes_written/bytes_read) for a local
    directory, created if missing (as backup does)."""
    import obnamlib.repo.factory
    repo = obnamlib.repo.factory.open_repository(
        url=str(path), create=True, lock_timeout=0, **settings)
    return repo, repo.fs


# --- manifests: what a tree looks like, live or in a generation ----------

import hashlib
import stat


def live_manifest(root):
    """{path: facts} of a live tree (root included), for comparison with
    generation_manifest.  Directory sizes and nlinks are file-system noise
    and left out."""
    root = os.fsencode(root)
    result = {}
    pending = [root]
    while pending:
        path = pending.pop()
        st = os.lstat(path)
        result[path] = _facts(
            st.st_mode, st.st_mtime_ns, st.st_size, st.st_nlink,
            _live_content(path, st), _live_xattrs(path))
        if stat.S_ISDIR(st.st_mode):
            pending.extend(os.path.join(path, n) for n in os.listdir(path))
    return result


def generation_manifest(repo, gen, root):
    """The same facts, read back through the Repository API."""
    root = os.fsencode(root)
    result = {}
    pending = [root]
    while pending:
        path = pending.pop()
        md = repo.get_metadata(gen, path)
        mtime_ns = md.st_mtime_sec * 10 ** 9 + md.st_mtime_nsec
        if md.isreg():
            content = hashlib.sha1(read_back(repo, gen, path)).hexdigest()
            assert md.md5 == hashlib.md5(read_back(repo, gen, path)).digest()
        elif md.islink():
            content = md.target
        else:
            content = None
        result[path] = _facts(md.st_mode, mtime_ns, md.st_size, md.st_nlink,
                              content, decode_xattrs(md.xattr))
        if md.isdir():
            pending.extend(os.path.join(path, n)
                           for n in repo.get_file_children(gen, path))
    return result


def read_back(repo, gen, path):
    data = repo.get_file_data(gen, path)
    if data is not None:
        return data
    return b''.join(repo.get_chunk_content(c)
                    for c in repo.get_file_chunk_ids(gen, path))


def _facts(mode, mtime_ns, size, nlink, content, xattrs):
    if stat.S_ISDIR(mode):
        return (oct(mode), mtime_ns, None, None, None, xattrs)
    return (oct(mode), mtime_ns, size, nlink, content, xattrs)


def _live_content(path, st):
    if stat.S_ISREG(st.st_mode):
        with open(path, 'rb') as f:
            return hashlib.sha1(f.read()).hexdigest()
    if stat.S_ISLNK(st.st_mode):
        return os.readlink(path)
    return None


def _live_xattrs(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return {}
    return {os.fsencode(n): os.getxattr(path, n, follow_symlinks=False)
            for n in names}


def decode_xattrs(blob):
    """Format-6 xattr blob (§7.5) -> {name: value}."""
    if not blob:
        return {}
    import struct
    (names_len,) = struct.unpack('!Q', blob[:8])
    names = blob[8:8 + names_len].split(b'\0')[:-1]
    pos = 8 + names_len
    lengths = struct.unpack('!%dQ' % len(names), blob[pos:pos + 8 * len(names)])
    pos += 8 * len(names)
    values = {}
    for name, length in zip(names, lengths):
        values[name] = blob[pos:pos + length]
        pos += length
    return values


# --- very deep trees (deeper than Python's recursion limit) ---------------

def make_deep(top, depth, leaf=None):
    """top/d/d/.../d (depth levels), optionally with a file `leaf` at the
    bottom; built through directory fds, so path length does not matter."""
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir('d', dir_fd=fd)
        lower = os.open('d', os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = lower
    if leaf is not None:
        out = os.open('leaf', os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=fd)
        os.write(out, leaf)
        os.close(out)
    os.close(fd)


def remove_deep(top, depth):
    """Undo make_deep without recursion (pytest's cleanup would recurse)."""
    fds = [os.open(top, os.O_RDONLY)]
    for _ in range(depth):
        fds.append(os.open('d', os.O_RDONLY, dir_fd=fds[-1]))
    for name in os.listdir(fds[-1]):
        os.unlink(name, dir_fd=fds[-1])
    os.close(fds.pop())
    while fds:
        fd = fds.pop()
        os.rmdir('d', dir_fd=fd)
        os.close(fd)


class FatalTestError(obnamlib.errors.ObnamError):
    """An error marked fatal, as a lost SSH connection is."""
    code = 'RFFF01X'
    msg = 'fatal test error'
    fatal = True
