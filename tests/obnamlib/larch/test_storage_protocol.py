"""larch stands alone: its storage protocol is complete and explicit, and it
knows nothing of the program that uses it."""

import ast
import os
import struct
import sys

from obnamlib import larch
from obnamlib.larch.fsck import check_forest
from obnamlib.larch.journal import Journal

LARCH_DIR = os.path.dirname(larch.__file__)
SOURCES = sorted(os.path.join(LARCH_DIR, name)
                 for name in os.listdir(LARCH_DIR) if name.endswith('.py'))
PROTOCOL = {name for name in dir(larch.StorageFS) if not name.startswith('_')}


def key(n):
    return struct.pack('!I', n)


class Recording:
    """A MemoryFS that notes every name larch asks it for."""

    def __init__(self, reads_in_batches=False):
        self.fs = larch.MemoryFS()
        self.reads_in_batches_answer = reads_in_batches
        self.used = set()

    def __getattr__(self, name):
        self.used.add(name)
        if name == 'reads_in_batches':
            return self.reads_in_batches_answer
        return getattr(self.fs, name)


def exercise(vfs):
    """Write, change, drop and check a forest, reopen it read-only."""
    forest = larch.open_forest(dirname='f', key_size=4, node_size=128,
                               allow_writes=True, vfs=vfs)
    tree = forest.new_tree()
    for n in range(200):
        tree.insert(key(n), b'%d' % n)
    forest.commit()
    clone = forest.new_tree(tree)
    clone.remove_range(key(10), key(150))
    forest.remove_tree(tree)
    forest.commit()
    assert check_forest('f', vfs, 4, node_size=128) == []
    reader = larch.open_forest(dirname='f', key_size=4, node_size=128,
                               vfs=vfs)
    assert reader.trees[-1].lookup(key(199)) == b'199'


def test_larch_uses_only_the_protocol_of_its_storage():
    for batches in (False, True):
        vfs = Recording(reads_in_batches=batches)
        exercise(vfs)
        assert vfs.used <= PROTOCOL
        assert {'read_file', 'write_file', 'rename'} <= vfs.used


def test_the_hints_are_used_as_the_storage_declares():
    plain, batched = Recording(False), Recording(True)
    exercise(plain)
    exercise(batched)
    assert 'read_ahead' in plain.used and 'read_files' not in plain.used
    assert 'read_files' in batched.used and 'read_ahead' not in batched.used


def test_a_storage_without_read_abilities_gets_the_defaults():
    vfs = larch.MemoryFS()
    for name in ('a', 'b'):
        vfs.write_file('f/' + name, name.encode())
    assert vfs.reads_in_batches is False
    assert vfs.read_ahead(['f/a', 'f/b']) is None
    assert vfs.read_files(['f/b', 'f/a']) == [b'b', b'a']
    assert Journal(vfs, 'f', False).read_together(['a', 'b']) == {}


def test_larch_imports_only_itself_and_the_standard_library():
    stdlib = sys.stdlib_module_names
    outside = []
    for path in SOURCES:
        with open(path, 'rb') as f:
            tree = ast.parse(f.read(), filename=path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            outside.extend((os.path.basename(path), name) for name in names
                           if name.split('.')[0] not in stdlib)
    assert outside == []


def test_larch_source_never_names_its_user():
    mentions = []
    for path in SOURCES:
        with open(path, encoding='utf-8') as f:
            for number, line in enumerate(f, 1):
                if 'obnam' in line.lower():
                    mentions.append((os.path.basename(path), number))
    assert mentions == []
