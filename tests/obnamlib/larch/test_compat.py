"""Compatibility with larch 1.x and Obnam 1.x forests, both directions."""

import os
import shutil
import struct
import tarfile

import pytest

from obnamlib import larch
import obnamlib.larch.fsck
from tests.obnamlib.larch import obnam_reference, specdecoder
from tests.reference_data import extract_all

LOW4, HIGH4 = b'\0' * 4, b'\xff' * 4


def key4(n):
    return struct.pack('!I', n)


@pytest.fixture(scope='module')
def unpacked_reference(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('larch-reference'))
    with tarfile.open(os.path.join(
            obnam_reference.LARCH,
            'format-nodestore1-codec1.tar.gz')) as tar:
        extract_all(tar, path)
    return path


@pytest.fixture
def reference_forest(unpacked_reference, tmp_path):
    """A private copy of the larch 1.x reference forest."""
    path = str(tmp_path / 'forest')
    shutil.copytree(unpacked_reference, path)
    return path


def expected_reference_trees():
    every = [(key4(i), b'%d' % i) for i in range(1024)]
    even = [(k, v) for k, v in every if struct.unpack('!I', k)[0] % 2 == 0]
    return [every, even, even, []]


def test_reference_forest_reads_exactly(unpacked_reference):
    forest = larch.open_forest(dirname=unpacked_reference, key_size=4,
                               node_size=128)
    assert [t.root_id for t in forest.trees] == [63, 251, 407, 511]
    assert forest.last_id == 526
    expected = expected_reference_trees()
    assert [t.lookup_range(LOW4, HIGH4) for t in forest.trees] == expected
    first = forest.trees[0]
    assert first.lookup(key4(777)) == b'777'
    assert first.lookup_range(key4(100), key4(103)) == expected[0][100:104]
    assert first.count_range(key4(10), key4(19)) == 10
    assert forest.trees[1].count_range(key4(10), key4(19)) == 5
    assert forest.trees[3].range_is_empty(LOW4, HIGH4)
    with pytest.raises(KeyError):
        forest.trees[1].lookup(key4(1))


def test_reference_forest_refcounts_follow_the_spec(unpacked_reference):
    spec = specdecoder.from_vfs(larch.LocalFS(unpacked_reference), '.')
    assert spec.consistency_problems(128) == []
    assert larch.fsck.check_forest(unpacked_reference, key_size=4,
                                   node_size=128) == []


def test_reference_forest_can_be_continued(reference_forest):
    forest = larch.open_forest(dirname=reference_forest, key_size=4,
                               node_size=128, allow_writes=True)
    clone = forest.new_tree(forest.trees[0])
    for i in range(0, 1024, 3):
        clone.remove(key4(i))
    for i in range(1024, 1100):
        clone.insert(key4(i), b'new %d' % i)
    forest.remove_tree(forest.trees[1])
    forest.commit()
    spec = specdecoder.from_vfs(larch.LocalFS(reference_forest), '.')
    assert spec.consistency_problems(128) == []
    expected = expected_reference_trees()
    changed = [(key4(i), b'%d' % i) for i in range(1024) if i % 3] + [
        (key4(i), b'new %d' % i) for i in range(1024, 1100)]
    trees = [spec.tree_items(r) for r in spec.root_ids]
    assert trees == [expected[0], expected[2], expected[3], changed]


def test_reference_forest_refuses_other_key_size(unpacked_reference):
    with pytest.raises(larch.KeySizeMismatch) as e:
        larch.open_forest(dirname=unpacked_reference, key_size=8)
    assert unpacked_reference in str(e.value)


@pytest.fixture(scope='module')
def gpg():
    g = obnam_reference.Gpg()
    yield g
    g.close()


@pytest.mark.parametrize('tarball', [
    'repo-format-6-encrypted-deflated.tar.xz',
    'repo-format-6-in-tree-data.tar.xz',
])
def test_obnam_reference_forests_decode(tarball, gpg, tmp_path):
    repo = obnam_reference.extract(
        os.path.join(obnam_reference.OBNAM, tarball), str(tmp_path))
    forests = obnam_reference.decrypted_forests(repo, gpg)
    client_ids = [top for top in forests if top.isdigit()]
    assert len(client_ids) == 1
    assert sorted(forests) == sorted(client_ids + [
        'chunklist', 'chunksums', 'clientlist'])
    for top, (vfs, key_size) in forests.items():
        spec = specdecoder.from_vfs(vfs, top)
        assert spec.consistency_problems(262144) == [], top
        forest = larch.open_forest(dirname=top, key_size=key_size, vfs=vfs)
        assert [t.root_id for t in forest.trees] == spec.root_ids
        low, high = b'\0' * key_size, b'\xff' * key_size
        for tree in forest.trees:
            items = tree.lookup_range(low, high)
            assert items == spec.tree_items(tree.root_id)
            assert items or top.startswith('chunk')
            for k, v in items:
                assert tree.lookup(k) == v
        assert larch.fsck.check_forest(top, vfs, key_size) == []
    clients = forests['clientlist']
    forest = larch.open_forest(dirname='clientlist', key_size=25,
                               vfs=clients[0])
    names = [v for k, v in forest.trees[-1].lookup_range(
        b'\0' * 25, b'\xff' * 25) if k[-1] == 0]
    assert names == [b'havelock']
    client = larch.open_forest(dirname=client_ids[0], key_size=18,
                               vfs=forests[client_ids[0]][0])
    assert len(client.trees) == 2
    ids = [k for k, v in forest.trees[-1].lookup_range(
        b'\0' * 25, b'\xff' * 25) if k[-1] == 0]
    assert ids == [ids[0][:16] + struct.pack('!Q', int(client_ids[0]))
                   + b'\0']


def test_obnam_reference_forest_can_be_continued(gpg, tmp_path):
    repo = obnam_reference.extract(
        os.path.join(obnam_reference.OBNAM,
                     'repo-format-6-encrypted-deflated.tar.xz'),
        str(tmp_path))
    top = '2467055675223742640'
    vfs, key_size = obnam_reference.decrypted_forests(repo, gpg)[top]
    forest = larch.open_forest(dirname=top, key_size=key_size, vfs=vfs,
                               node_size=512, allow_writes=True)
    old = forest.trees[-1].lookup_range(b'\0' * 18, b'\xff' * 18)
    generation = forest.new_id()
    assert generation == 7
    tree = forest.new_tree(forest.trees[-1])
    for i in range(300):
        tree.insert(struct.pack('!B8sB8s', 0, b'%08d' % i, 1, bytes(8)),
                    b'file %d' % i)
    forest.remove_tree(forest.trees[0])
    forest.commit()
    spec = specdecoder.from_vfs(vfs, top)
    assert spec.consistency_problems() == []
    assert spec.tree_items(spec.root_ids[0]) == old
    assert len(spec.tree_items(spec.root_ids[1])) == len(old) + 300


def test_independent_decoder_reads_what_we_write():
    vfs = larch.MemoryFS()
    forest = larch.open_forest(dirname='w', key_size=4, node_size=160,
                               allow_writes=True, vfs=vfs)
    tree = forest.new_tree()
    model = {}
    for i in range(0, 3000, 7):
        value = b'x' * (i % 50)
        tree.insert(key4(i), value)
        model[key4(i)] = value
    clone = forest.new_tree(tree)
    for i in range(0, 3000, 21):
        clone.remove(key4(i))
    forest.commit()
    spec = specdecoder.from_vfs(vfs, 'w')
    assert spec.consistency_problems(160) == []
    assert spec.tree_items(spec.root_ids[0]) == sorted(model.items())
    assert spec.tree_items(spec.root_ids[1]) == sorted(
        (k, v) for k, v in model.items()
        if struct.unpack('!I', k)[0] % 21)
    depth = 0
    node = spec.root_ids[0]
    while True:
        kind, keys, rest, size = spec.node(node)
        if kind == 'leaf':
            break
        depth += 1
        node = rest[0]
    assert depth >= 3


def test_written_nodes_are_byte_exact():
    vfs = larch.MemoryFS()
    forest = larch.open_forest(dirname='w', key_size=2, node_size=4096,
                               allow_writes=True, vfs=vfs)
    tree = forest.new_tree()
    tree.insert(b'bb', b'second')
    tree.insert(b'aa', b'1')
    forest.commit()
    root_id = tree.root_id
    root = vfs.read_file('w/nodes/0/0/0/%x' % root_id)
    (leaf_id,) = struct.unpack('!Q', root[-8:])
    assert root == b'ORBI' + struct.pack('!QI', root_id, 1) + b'aa' + \
        struct.pack('!Q', leaf_id)
    leaf = vfs.read_file('w/nodes/0/0/0/%x' % leaf_id)
    assert leaf == (b'ORBL' + struct.pack('!QI', leaf_id, 2) + b'aabb'
                    + struct.pack('!II', 1, 6) + b'1second')
    refcounts = vfs.read_file('w/refcounts/refcounts-0')
    assert len(refcounts) == 65546
    assert refcounts[:10] == struct.pack('!QH', 0, 32768)
    assert struct.unpack('!H', refcounts[10 + 2 * root_id:][:2]) == (1,)
    assert struct.unpack('!H', refcounts[10 + 2 * leaf_id:][:2]) == (1,)
    assert vfs.read_file('w/metadata') == (
        b'[metadata]\nformat = 1/1\nlast_id = %d\nroot_ids = %d\n'
        b'key_size = 2\nnode_size = 4096\n\n' % (forest.last_id, root_id))
    assert not vfs.exists('w/new/metadata')
    assert [p for p in vfs.files if p.startswith(('w/new/', 'w/delete/'))] \
        == []


def test_node_paths_use_lowest_group_first():
    vfs = larch.MemoryFS()
    forest = larch.open_forest(dirname='w', key_size=2, node_size=4096,
                               allow_writes=True, vfs=vfs)
    forest.last_id = 8191
    tree = forest.new_tree()
    forest.commit()
    assert tree.root_id == 8192
    assert vfs.exists('w/nodes/1/0/0/2000')


def tree_snapshot(root):
    """Every directory and file (with contents) below root."""
    found = {}
    for dirpath, dirnames, names in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        found[rel] = 'dir'
        for name in names:
            with open(os.path.join(dirpath, name), 'rb') as f:
                found[os.path.join(rel, name)] = f.read()
    return found


def test_readers_change_nothing(reference_forest):
    before = tree_snapshot(reference_forest)
    forest = larch.open_forest(dirname=reference_forest, key_size=4)
    for tree in forest.trees:
        tree.lookup_range(LOW4, HIGH4)
    with pytest.raises(larch.ReadOnlyForest):
        forest.trees[0].insert(key4(1), b'x')
    with pytest.raises(larch.ReadOnlyForest):
        forest.commit()
    assert larch.fsck.check_forest(reference_forest, key_size=4,
                                   node_size=128) == []
    assert tree_snapshot(reference_forest) == before
