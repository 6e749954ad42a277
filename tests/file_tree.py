"""What a directory tree holds, for tests that must show a command changed
nothing (byte-exact snapshot) or freed space (total file size)."""

import os
import stat


def _files(root):
    for dirpath, _, names in os.walk(root):
        for name in names:
            yield os.path.join(dirpath, name)


def snapshot(root):
    """Every file's bytes, by path relative to root."""
    result = {}
    for path in _files(root):
        with open(path, 'rb') as f:
            result[os.path.relpath(path, root)] = f.read()
    return result


def disk_usage(root):
    """Sum of the sizes of the files below root."""
    return sum(os.path.getsize(path) for path in _files(root))


def facts(root):
    """What a restore must bring back of each object below root, by path
    relative to root: a file's bytes, permission bits and mtime; a
    symlink's target; a directory's permission bits."""
    result = {}
    for dirpath, dirnames, names in os.walk(root):
        for name in names + dirnames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, 'rb') as f:
                    fact = (f.read(), stat.S_IMODE(st.st_mode),
                            st.st_mtime_ns)
            elif stat.S_ISLNK(st.st_mode):
                fact = ('link', os.readlink(path))
            else:
                fact = ('dir', stat.S_IMODE(st.st_mode))
            result[os.path.relpath(path, root)] = fact
    return result
