import struct

import pytest

from obnamlib import larch
from obnamlib.larch import errors
from tests.obnamlib.larch import specdecoder


def key(n):
    return struct.pack('!I', n)


LOW, HIGH = key(0), key(2 ** 32 - 1)


def new_forest(node_size=128, vfs=None, **kwargs):
    vfs = vfs or larch.MemoryFS()
    forest = larch.open_forest(dirname='f', key_size=4, node_size=node_size,
                               allow_writes=True, vfs=vfs, **kwargs)
    return forest, vfs


def spec_check(vfs, node_size=128):
    spec = specdecoder.from_vfs(vfs, 'f')
    assert spec.consistency_problems(node_size) == []
    return spec


def test_empty_tree():
    forest, _ = new_forest()
    tree = forest.new_tree()
    with pytest.raises(KeyError):
        tree.lookup(key(1))
    assert tree.lookup_range(LOW, HIGH) == []
    assert tree.count_range(LOW, HIGH) == 0
    assert tree.range_is_empty(LOW, HIGH)


def test_insert_lookup_replace():
    forest, _ = new_forest()
    tree = forest.new_tree()
    tree.insert(key(5), b'five')
    tree.insert(key(5), b'FIVE')
    assert tree.lookup(key(5)) == b'FIVE'
    with pytest.raises(KeyError):
        tree.lookup(key(4))


def test_many_inserts_split_into_levels_and_stay_sorted():
    forest, vfs = new_forest()
    tree = forest.new_tree()
    order = [(i * 7919) % 1000 for i in range(1000)]
    for n in order:
        tree.insert(key(n), b'%d' % n)
    assert tree.lookup_range(LOW, HIGH) == [
        (key(n), b'%d' % n) for n in range(1000)]
    forest.commit()
    spec = spec_check(vfs)
    depth, node = 0, tree.root_id
    while spec.node(node)[0] == 'index':
        node = spec.node(node)[2][0]
        depth += 1
    assert depth >= 3


def test_key_smaller_than_all_updates_index_keys():
    forest, vfs = new_forest()
    tree = forest.new_tree()
    for n in range(500, 1000):
        tree.insert(key(n), b'x')
    for n in range(499, -1, -1):
        tree.insert(key(n), b'y')
    assert tree.count_range(LOW, HIGH) == 1000
    forest.commit()
    spec_check(vfs)


def test_ranges_are_inclusive():
    forest, _ = new_forest()
    tree = forest.new_tree()
    for n in range(0, 100, 2):
        tree.insert(key(n), b'%d' % n)
    assert tree.lookup_range(key(10), key(14)) == [
        (key(10), b'10'), (key(12), b'12'), (key(14), b'14')]
    assert tree.count_range(key(11), key(11)) == 0
    assert tree.range_is_empty(key(11), key(11))
    assert not tree.range_is_empty(key(11), key(12))
    assert tree.lookup_range(key(50), key(40)) == []
    assert list(tree.iter_range(key(95), HIGH)) == [
        (key(96), b'96'), (key(98), b'98')]


def test_remove_and_merge_back_to_empty_root():
    forest, vfs = new_forest()
    tree = forest.new_tree()
    for n in range(600):
        tree.insert(key(n), b'v%d' % n)
    forest.commit()
    for n in range(0, 600, 2):
        tree.remove(key(n))
    forest.commit()
    spec_check(vfs)
    assert [k for k, _ in tree.lookup_range(LOW, HIGH)] == [
        key(n) for n in range(1, 600, 2)]
    for n in range(1, 600, 2):
        tree.remove(key(n))
    forest.commit()
    spec = spec_check(vfs)
    assert spec.node_files() == {tree.root_id}
    kind, keys, _, _ = spec.node(tree.root_id)
    assert (kind, keys) == ('index', [])


def test_remove_missing_key_raises_key_error_and_changes_nothing():
    forest, vfs = new_forest()
    tree = forest.new_tree()
    tree.insert(key(1), b'a')
    forest.commit()
    before = dict(vfs.files)
    with pytest.raises(KeyError):
        tree.remove(key(2))
    forest.commit()
    assert vfs.files == before


def test_remove_range():
    forest, vfs = new_forest()
    tree = forest.new_tree()
    for n in range(300):
        tree.insert(key(n), b'v')
    tree.remove_range(key(50), key(249))
    assert [k for k, _ in tree.lookup_range(LOW, HIGH)] == [
        key(n) for n in list(range(50)) + list(range(250, 300))]
    forest.commit()
    spec_check(vfs)


def test_node_sizes_respect_limit_with_big_values():
    forest, vfs = new_forest(node_size=256)
    tree = forest.new_tree()
    biggest = 256 // 2 - 16
    for n in range(200):
        tree.insert(key(n), bytes([n]) * (n * 37 % (biggest + 1)))
    forest.commit()
    spec_check(vfs, 256)


def test_value_limit():
    forest, _ = new_forest(node_size=256)
    tree = forest.new_tree()
    tree.insert(key(1), b'x' * 112)
    with pytest.raises(errors.ValueTooLarge) as e:
        tree.insert(key(2), b'x' * 113)
    assert 'forest f' in str(e.value) and '113' in str(e.value)


def test_wrong_key_size_and_type():
    forest, _ = new_forest()
    tree = forest.new_tree()
    with pytest.raises(errors.WrongKeySize) as e:
        tree.insert(b'abc', b'v')
    assert 'forest f' in str(e.value) and '4-byte' in str(e.value)
    with pytest.raises(errors.WrongKeySize):
        tree.lookup(b'abcde')
    with pytest.raises(errors.WrongKeySize):
        tree.lookup_range(b'a', b'abcd')
    with pytest.raises(errors.KeyNotBytes):
        tree.insert('abcd', b'v')
    with pytest.raises(errors.KeyNotBytes):
        tree.insert(b'abcd', 'v')
    tree.insert(bytearray(b'abcd'), bytearray(b'v'))
    assert tree.lookup(b'abcd') == b'v'


def test_unshared_nodes_change_in_place_shared_nodes_are_copied():
    forest, vfs = new_forest(node_size=4096)
    tree = forest.new_tree()
    for n in range(10):
        tree.insert(key(n), b'v')
    forest.commit()
    ids_before = specdecoder.from_vfs(vfs, 'f').node_files()
    tree.insert(key(20), b'w')
    forest.commit()
    assert specdecoder.from_vfs(vfs, 'f').node_files() == ids_before
    clone = forest.new_tree(tree)
    clone.insert(key(30), b'c')
    forest.commit()
    spec = spec_check(vfs, 4096)
    assert len(spec.node_files()) == len(ids_before) + 2
    assert tree.lookup_range(LOW, HIGH) == [
        (key(n), b'v') for n in range(10)] + [(key(20), b'w')]
    assert clone.lookup(key(30)) == b'c'


def test_clone_shares_and_remove_tree_frees_only_private_nodes():
    forest, vfs = new_forest()
    tree = forest.new_tree()
    for n in range(300):
        tree.insert(key(n), b'v')
    forest.commit()
    shared = specdecoder.from_vfs(vfs, 'f').node_files()
    clone = forest.new_tree(tree)
    for n in range(100, 110):
        clone.remove(key(n))
    forest.commit()
    spec_check(vfs)
    forest.remove_tree(clone)
    forest.commit()
    spec = spec_check(vfs)
    assert spec.node_files() == shared
    forest.remove_tree(tree)
    forest.commit()
    assert spec_check(vfs).node_files() == set()
    assert forest.trees == []


def test_uncommitted_changes_survive_cache_eviction():
    forest, vfs = new_forest(cache_size=8)
    tree = forest.new_tree()
    for n in range(2000):
        tree.insert(key((n * 31) % 2000), b'%d' % n)
    assert tree.count_range(LOW, HIGH) == 2000
    assert len(forest.node_store.cache) <= 8
    forest.commit()
    spec_check(vfs)
    reopened, _ = new_forest(vfs=vfs)
    assert reopened.trees[0].count_range(LOW, HIGH) == 2000


def test_insert_sorted_fills_each_leaf_with_one_descent(monkeypatch):
    forest, vfs = new_forest(node_size=1024)
    tree = forest.new_tree()
    for n in range(0, 2000, 2):
        tree.insert(key(n), b'old')
    descents = []
    real = tree._descend
    monkeypatch.setattr(tree, '_descend',
                        lambda *a: descents.append(1) or real(*a))
    pairs = [(key(n), b'new%d' % n) for n in range(1, 2000, 4)] + \
        [(key(2004), b'end')]
    tree.insert_sorted(pairs)
    assert len(descents) < len(pairs) // 4
    expected = dict((key(n), b'old') for n in range(0, 2000, 2))
    expected.update(pairs)
    assert tree.lookup_range(LOW, HIGH) == sorted(expected.items())
    forest.commit()
    spec_check(vfs, node_size=1024)


def test_insert_sorted_out_of_order_and_repeated_keys():
    forest, vfs = new_forest()
    tree = forest.new_tree()
    pairs = [(key(n), b'%d' % n) for n in (5, 9, 7, 7, 30, 1, 30)]
    tree.insert_sorted(pairs)
    assert tree.lookup_range(LOW, HIGH) == sorted(dict(pairs).items())
    forest.commit()
    spec_check(vfs)


def test_insert_sorted_leaves_a_shared_leaf_alone():
    """After a clone the leaves are shared: the batch goes through the
    copy-on-write path, and the other tree keeps what it had."""
    forest, vfs = new_forest(node_size=1024)
    tree = forest.new_tree()
    tree.insert_sorted([(key(n), b'a') for n in range(0, 100, 2)])
    clone = forest.new_tree(tree)
    clone.insert_sorted([(key(n), b'b') for n in range(1, 100, 2)])
    assert tree.count_range(LOW, HIGH) == 50
    assert clone.count_range(LOW, HIGH) == 100
    forest.commit()
    spec_check(vfs, node_size=1024)


def test_insert_sorted_stops_at_a_value_too_large():
    """As one insert after another would: what came before it is in."""
    forest, _ = new_forest()
    tree = forest.new_tree()
    tree.insert(key(0), b'first')
    with pytest.raises(errors.ValueTooLarge):
        tree.insert_sorted([(key(1), b'x'), (key(2), b'y' * 1000),
                            (key(3), b'z')])
    assert tree.lookup_range(LOW, HIGH) == [(key(0), b'first'),
                                            (key(1), b'x')]
