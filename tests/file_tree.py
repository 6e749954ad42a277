"""What a directory tree holds, for tests that must show a command changed
nothing (byte-exact snapshot) or freed space (total file size)."""

import os


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
