"""The larch forests of the Obnam 1.x reference repositories, decrypted
into MemoryFS objects (tests/reference_data.py does the unpacking and the
tag chain), for the larch compatibility tests."""

import os

from obnamlib import larch
from tests.reference_data import (Gpg, LARCH_1X, OBNAM_1X, filtered_files,
                                  unpack)

LARCH = LARCH_1X
OBNAM = OBNAM_1X
__all__ = ['Gpg', 'LARCH', 'OBNAM', 'extract', 'decrypted_forests']

FOREST_KEY_SIZES = {'clientlist': 25, 'chunklist': 8, 'chunksums': 48}
CLIENT_KEY_SIZE = 18


def extract(tarball, dest):
    """Unpack a reference repository tarball; returns its repo directory."""
    return os.path.join(unpack(tarball, dest), 'repo')


def decrypted_forests(repo, gpg):
    """{toplevel: (MemoryFS with the plain forest under toplevel, key size)}"""
    result = {}
    for top in sorted(os.listdir(repo)):
        base = os.path.join(repo, top)
        if top in ('chunks', 'metadata') or not os.path.isdir(base):
            continue
        vfs = larch.MemoryFS()
        for dirpath, dirnames, _ in os.walk(base):
            for name in dirnames:
                vfs.makedirs(os.path.relpath(os.path.join(dirpath, name),
                                             repo))
        for path, payload in filtered_files(base, gpg):
            vfs.write_file(os.path.relpath(path, repo), payload)
        result[top] = (vfs, FOREST_KEY_SIZES.get(top, CLIENT_KEY_SIZE))
    return result
