"""The live tree in tests/data/gpg24/repo's one generation: made again
by the test that restores it, to compare byte for byte."""

import hashlib
import os

MTIME_NS = 1765000000123456789


def _bytes(size, seed):
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(b'%s %d' % (seed, counter)).digest()
        counter += 1
    return bytes(out[:size])


FILES = {
    'hello.txt': b'hello from gpg 2.4.7\n',
    'empty': b'',
    'sub/data.bin': _bytes(40 * 1024, b'data'),
    'sub/deeper/small': _bytes(4000, b'small'),
}
LINKS = {'link-to-hello': 'hello.txt'}
MODES = {'hello.txt': 0o644, 'empty': 0o600, 'sub/data.bin': 0o640,
         'sub/deeper/small': 0o755}


def make(root):
    """Write the tree at root (which must not exist)."""
    for name, data in FILES.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as f:
            f.write(data)
        os.chmod(path, MODES[name])
        os.utime(path, ns=(MTIME_NS, MTIME_NS))
    for name, target in LINKS.items():
        os.symlink(target, os.path.join(root, name))
