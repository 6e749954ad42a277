"""Damaged node ids: a node that points to itself, a ring of two, a
chain deeper than any B-tree.  Every read (and write) of such a tree
ends at once with TreeLoops instead of spinning."""

import struct

import pytest

from obnamlib import larch
from obnamlib.larch import errors
from obnamlib.larch.nodes import IndexNode, LeafNode
from obnamlib.larch.tree import MAX_DEPTH


def key(n):
    return struct.pack('!I', n)


LOW, HIGH = key(0), key(2 ** 32 - 1)


def three_levels():
    """A tree deep enough to have index nodes below the root."""
    forest = larch.open_forest(dirname='f', key_size=4, node_size=128,
                               allow_writes=True, vfs=larch.MemoryFS())
    tree = forest.new_tree()
    for n in range(400):
        tree.insert(key(n), b'v%d' % n)
    root = forest.node_store.get(tree.root_id)
    child = forest.node_store.get(root.children[0])
    assert not child.is_leaf
    return forest, tree, root, child


def every_read(tree):
    return [lambda: tree.lookup(key(1)),
            lambda: tree.lookup_range(LOW, HIGH),
            lambda: list(tree.iter_range(LOW, HIGH)),
            lambda: tree.count_range(LOW, HIGH),
            lambda: tree.range_is_empty(key(1), key(1)),
            lambda: tree.range_is_empty(LOW, HIGH)]


@pytest.mark.timeout(20)
def test_a_node_pointing_to_itself():
    forest, tree, root, child = three_levels()
    child.children = [child.id] * len(child.children)
    for read in every_read(tree):
        with pytest.raises(errors.TreeLoops):
            read()


@pytest.mark.timeout(20)
def test_a_root_pointing_to_itself_in_its_first_slot_only():
    forest, tree, root, child = three_levels()
    root.children[0] = root.id
    with pytest.raises(errors.TreeLoops):
        tree.lookup(key(1))
    with pytest.raises(errors.TreeLoops):
        tree.lookup_range(LOW, HIGH)
    assert tree.lookup(key(399)) == b'v399'     # other slots still read


@pytest.mark.timeout(20)
def test_a_ring_of_two_nodes():
    forest, tree, root, child = three_levels()
    child.children = [root.id] * len(child.children)
    for read in every_read(tree):
        with pytest.raises(errors.TreeLoops):
            read()


@pytest.mark.timeout(20)
def test_writes_to_a_looping_tree_fail_too():
    forest, tree, root, child = three_levels()
    child.children = [child.id] * len(child.children)
    with pytest.raises(errors.TreeLoops):
        tree.insert(key(1), b'new')
    with pytest.raises(errors.Error):
        tree.remove(key(2))


@pytest.mark.timeout(20)
@pytest.mark.parametrize('depth', [MAX_DEPTH + 1, 5000])
def test_a_chain_deeper_than_any_b_tree(depth):
    """Distinct nodes, one below the other: too deep, not a crash of
    Python's stack."""
    forest = larch.open_forest(dirname='f', key_size=4, node_size=128,
                               allow_writes=True, vfs=larch.MemoryFS())
    tree = forest.new_tree()
    tree.insert(key(1), b'v')
    store = forest.node_store
    below = LeafNode(forest.new_id(), [key(1)], [b'v'], 0)
    store.put(below)
    for _ in range(depth):
        below = IndexNode(forest.new_id(), [key(1)], [below.id])
        store.put(below)
    store.get(tree.root_id).children = [below.id]
    for read in every_read(tree):
        with pytest.raises(errors.TreeLoops):
            read()


def test_an_ordinary_deep_tree_reads():
    forest, tree, root, child = three_levels()
    assert tree.count_range(LOW, HIGH) == 400
    assert len(list(tree.iter_range(LOW, HIGH))) == 400
    assert tree.lookup(key(123)) == b'v123'
