"""The format-6 repositories written by real Obnam 1.x, made readable for
tests that do not exercise encryption: a copy with every filtered file
decrypted (real gpg, the reference keyring) and inflated, stored with the
plain tag chain (one NUL), and without key/userkeys files.

`plain_copies` (session fixture: {name: directory holding repo/ and the
manifests}) and `reference` (each of them in turn) are pytest fixtures;
import them into a test module to use them."""

import os

import pytest

from tests.reference_data import (Gpg, OBNAM_1X, UNFILTERED_NAMES,
                                  filtered_files)
from tests.reference_data import unpack as unpack_tarball

REFERENCE = OBNAM_1X
ENCRYPTED = 'repo-format-6-encrypted-deflated'
IN_TREE = 'repo-format-6-in-tree-data'
__all__ = ['Gpg', 'REFERENCE', 'ENCRYPTED', 'IN_TREE', 'unpack',
           'make_plain_copy', 'parse_manifest', 'plain_copies', 'reference']


def unpack(name, dest):
    """Unpack a reference tarball by name into dest; returns dest."""
    return unpack_tarball(os.path.join(REFERENCE, name + '.tar.xz'), dest)


def make_plain_copy(repo_dir, gpg):
    """Rewrite repo_dir in place as an unencrypted, uncompressed repo."""
    for toplevel in os.listdir(repo_dir):
        top = os.path.join(repo_dir, toplevel)
        if toplevel == 'metadata' or not os.path.isdir(top):
            continue
        plain = list(filtered_files(top, gpg))
        for path, payload in plain:
            with open(path, 'wb') as f:
                f.write(b'\0' + payload)
        for dirpath, _, names in os.walk(top):
            for name in set(names) & set(UNFILTERED_NAMES):
                os.remove(os.path.join(dirpath, name))


@pytest.fixture(scope='session')
def plain_copies(tmp_path_factory):
    """Both reference repositories, decrypted once per test run.  Tests
    must not change them (copy one first)."""
    gpg = Gpg()
    try:
        copies = {}
        for name in (IN_TREE, ENCRYPTED):
            dest = str(tmp_path_factory.mktemp(name))
            unpack(name, dest)
            make_plain_copy(os.path.join(dest, 'repo'), gpg)
            copies[name] = dest
        return copies
    finally:
        gpg.close()


@pytest.fixture(params=[IN_TREE, ENCRYPTED])
def reference(request, plain_copies):
    return plain_copies[request.param]


def parse_manifest(path):
    """summain output -> {name: {field: value}}."""
    entries = {}
    with open(path, encoding='utf-8') as f:
        blocks = f.read().split('\n\n')
    for block in blocks:
        fields = {}
        current = None
        for line in block.splitlines():
            if line.startswith('  ') and current:
                fields[current] += line.strip() + '\n'
            elif ':' in line:
                current, _, value = line.partition(':')
                fields[current] = value.strip()
        if 'Name' in fields:
            entries[fields['Name']] = fields
    return entries
