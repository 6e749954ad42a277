import struct

from obnamlib import larch
from obnamlib.larch import codec
from obnamlib.larch.fsck import check_forest, check_open_forest
from obnamlib.larch.idpath import node_path
from obnamlib.larch.nodes import LeafNode, IndexNode


def key(n):
    return struct.pack('!I', n)


def two_trees():
    vfs = larch.MemoryFS()
    forest = larch.open_forest(dirname='f', key_size=4, node_size=128,
                               allow_writes=True, vfs=vfs)
    tree = forest.new_tree()
    for n in range(100):
        tree.insert(key(n), b'%d' % n)
    clone = forest.new_tree(tree)
    clone.insert(key(1000), b'new')
    forest.commit()
    return vfs, forest, tree, clone


def check(vfs, fix=False):
    return check_forest('f', vfs, 4, fix=fix, node_size=128)


def leaf_shared_by_both(forest, tree):
    """The leftmost leaf; the clone only changed the right edge."""
    node = forest.node_store.get(tree.root_id)
    while not node.is_leaf:
        node = forest.node_store.get(node.children[0])
    return node.id


def test_clean_forest_has_no_problems():
    vfs, forest, _, _ = two_trees()
    assert check(vfs) == []
    assert check_open_forest(forest) == []


def test_wrong_refcount_is_found_and_fixed():
    vfs, forest, tree, clone = two_trees()
    victim = leaf_shared_by_both(forest, tree)
    forest.node_store.refcounts.set(victim, 7)
    forest.commit()
    problems = check(vfs)
    assert problems == [
        'forest f: node %d (trees %d,%d): refcount is 7, should be 1'
        % (victim, tree.root_id, clone.root_id)]
    assert check(vfs, fix=True) == [problems[0] + ' [fixed]']
    assert check(vfs) == []


def test_unreachable_node_is_found_and_deleted():
    vfs, forest, _, _ = two_trees()
    orphan = forest.new_id()
    forest.commit()
    vfs.write_file('f/' + node_path(orphan),
                   codec.encode(LeafNode(orphan, [key(1)], [b'x'], 0)))
    assert check(vfs) == [
        'forest f: node %d is not reachable from any root' % orphan]
    assert check(vfs, fix=True)[0].endswith('[fixed]')
    assert not vfs.exists('f/' + node_path(orphan))
    assert check(vfs) == []


def test_missing_node_names_the_trees_and_is_not_fixed():
    vfs, forest, tree, clone = two_trees()
    victim = leaf_shared_by_both(forest, tree)
    vfs.remove('f/' + node_path(victim))
    problems = check(vfs)
    assert problems == ['forest f: node %d (trees %d,%d): node %d is missing'
                        % (victim, tree.root_id, clone.root_id, victim)]
    fixed = check(vfs, fix=True)
    assert fixed == [problems[0] + ' [not fixed]']


def test_corrupt_node_is_reported():
    vfs, forest, tree, _ = two_trees()
    victim = leaf_shared_by_both(forest, tree)
    vfs.write_file('f/' + node_path(victim), b'ORBL')
    (problem,) = check(vfs)
    assert problem.startswith('forest f: node %d (trees ' % victim)
    assert 'shorter than a node header' in problem


def write_node(vfs, node):
    vfs.write_file('f/' + node_path(node.id), codec.encode(node))


def test_unsorted_keys_and_wrong_index_key_are_reported():
    vfs, forest, tree, clone = two_trees()
    victim = leaf_shared_by_both(forest, tree)
    leaf = forest.node_store.get(victim)
    write_node(vfs, LeafNode(victim, list(reversed(leaf.keys)),
                             leaf.values, 0))
    problems = check(vfs)
    assert any('node %d' % victim in p and 'not strictly increasing' in p
               for p in problems)
    assert any('differs from the child' in p for p in problems)


def test_root_leaf_and_oversized_node_are_reported():
    vfs = larch.MemoryFS()
    write_node(vfs, LeafNode(1, [key(1)], [b'x' * 200], 0))
    vfs.write_file('f/metadata', b'[metadata]\nformat = 1/1\nlast_id = 1\n'
                   b'root_ids = 1\nkey_size = 4\nnode_size = 128\n\n')
    vfs.write_file('f/refcounts/refcounts-0',
                   struct.pack('!QH', 0, 32768) + struct.pack('!HH', 0, 1)
                   + bytes(2 * 32766))
    problems = check(vfs)
    assert 'forest f: node 1 (trees 1): encoded size 224 exceeds node ' \
        'size 128' in problems
    assert 'forest f: node 1 (trees 1): root is a leaf node, not an index ' \
        'node' in problems


def test_journal_leftovers_are_reported_and_cleaned():
    vfs, forest, _, _ = two_trees()
    vfs.write_file('f/new/nodes/0/0/0/ff', b'junk')
    (problem,) = check(vfs)
    assert 'journal leftovers' in problem
    assert check(vfs, fix=True) == [problem + ' [fixed]']
    assert check(vfs) == []


def test_bad_metadata_is_a_problem_not_a_crash():
    vfs = larch.MemoryFS()
    vfs.write_file('f/metadata', b'nonsense')
    (problem,) = check(vfs)
    assert problem.startswith('forest f: bad metadata')


def test_node_above_last_id_is_reported():
    vfs, forest, tree, _ = two_trees()
    big = forest.last_id + 10
    write_node(vfs, IndexNode(big, [], []))
    problems = check(vfs)
    assert 'forest f: node %d (trees none): id is above last_id %d' % (
        big, forest.last_id) in problems


def test_local_forest_problems_name_the_directory(tmp_path):
    path = str(tmp_path / 'forest')
    forest = larch.open_forest(dirname=path, key_size=4, node_size=128,
                               allow_writes=True)
    tree = forest.new_tree()
    tree.insert(key(1), b'x')
    forest.commit()
    leaf_id = forest.node_store.get(tree.root_id).children[0]
    forest.node_store.refcounts.set(leaf_id, 3)
    forest.commit()
    assert check_forest(path, key_size=4) == [
        'forest %s: node %d (trees %d): refcount is 3, should be 1'
        % (path, leaf_id, tree.root_id)]


def open_reader(vfs):
    return larch.open_forest(dirname='f', key_size=4, node_size=128,
                             vfs=vfs, cache_size=1000)


def test_checking_through_a_reader_leaves_every_node_in_its_cache():
    vfs, forest, tree, clone = two_trees()
    reader = open_reader(vfs)
    reads = []
    read_file = vfs.read_file
    vfs.read_file = lambda path: reads.append(path) or read_file(path)
    assert check_forest('f', vfs, 4, node_size=128, reader=reader) == []
    checked = [r for r in reads if '/nodes/' in r]
    assert checked and len(checked) == len(set(checked))
    del reads[:]
    for t in reader.trees:
        assert len(list(t.lookup_range(key(0), key(2000)))) in (100, 101)
    assert [r for r in reads if '/nodes/' in r] == []


def test_a_reader_finds_what_an_own_forest_finds():
    vfs, forest, tree, clone = two_trees()
    victim = leaf_shared_by_both(forest, tree)
    vfs.remove('f/' + node_path(victim))
    assert check_forest('f', vfs, 4, node_size=128,
                        reader=open_reader(vfs)) == check(vfs)
    assert check(vfs)
