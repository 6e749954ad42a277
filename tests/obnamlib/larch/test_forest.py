import os
import struct

import pytest

from obnamlib import larch
from obnamlib.larch import errors
from obnamlib.larch.idpath import node_path


def key(n):
    return struct.pack('!I', n)


LOW, HIGH = key(0), key(2 ** 32 - 1)


def open_f(vfs, writes=True, **kwargs):
    kwargs.setdefault('node_size', 128)
    return larch.open_forest(dirname='f', key_size=4, allow_writes=writes,
                             vfs=vfs, **kwargs)


def filled(vfs, count=200):
    forest = open_f(vfs)
    tree = forest.new_tree()
    for n in range(count):
        tree.insert(key(n), b'%d' % n)
    forest.commit()
    return forest, tree


def thinned_clone(vfs, step):
    """A forest of 100 keys whose only tree, a clone of the committed
    one, lost every step-th key (uncommitted): shared and changed nodes
    for a commit to write and delete."""
    forest, tree = filled(vfs, 100)
    clone = forest.new_tree(tree)
    for n in range(0, 100, step):
        clone.remove(key(n))
    forest.remove_tree(tree)
    return forest


def test_missing_directory_read_only_is_empty(tmp_path):
    path = str(tmp_path / 'absent')
    forest = larch.open_forest(dirname=path, key_size=4)
    assert forest.trees == []
    assert not os.path.exists(path)


def test_missing_directory_is_created_at_first_commit(tmp_path):
    path = str(tmp_path / 'new-forest')
    forest = larch.open_forest(dirname=path, key_size=4, allow_writes=True)
    assert not os.path.exists(path)
    tree = forest.new_tree()
    tree.insert(key(1), b'one')
    forest.commit()
    assert os.path.exists(os.path.join(path, 'metadata'))
    again = larch.open_forest(dirname=path, key_size=4)
    assert again.trees[0].lookup(key(1)) == b'one'


def test_trees_keep_their_order_and_last_id_persists():
    vfs = larch.MemoryFS()
    forest = open_f(vfs)
    a = forest.new_tree()
    b = forest.new_tree(a)
    c = forest.new_tree()
    generation = forest.new_id()
    forest.commit()
    again = open_f(vfs)
    assert [t.root_id for t in again.trees] == [a.root_id, b.root_id,
                                                c.root_id]
    assert again.last_id == generation
    assert again.new_id() == generation + 1


def test_new_id_counts_up_from_last_id():
    vfs = larch.MemoryFS()
    forest = open_f(vfs)
    forest.new_tree()
    assert forest.new_id() == 2
    assert forest.new_id() == 3


def test_key_size_mismatch():
    vfs = larch.MemoryFS()
    filled(vfs, 3)
    with pytest.raises(errors.KeySizeMismatch) as e:
        larch.open_forest(dirname='f', key_size=8, vfs=vfs)
    assert 'forest f' in str(e.value)
    assert 'key_size 4' in str(e.value)


def test_node_size_must_hold_two_index_pairs():
    with pytest.raises(errors.BadNodeSize):
        larch.open_forest(dirname='f', key_size=32, node_size=64,
                          vfs=larch.MemoryFS())


def test_missing_node_names_forest_and_node():
    vfs = larch.MemoryFS()
    forest, tree = filled(vfs)
    victim = forest.node_store.get(tree.root_id).children[0]
    vfs.remove('f/' + node_path(victim))
    again = open_f(vfs, writes=False)
    with pytest.raises(errors.NodeMissing) as e:
        again.trees[0].lookup_range(LOW, HIGH)
    assert str(e.value) == 'forest f: node %d is missing' % victim


@pytest.mark.parametrize('damage', [
    lambda data: data[:len(data) // 2],
    lambda data: b'JUNK' + data[4:],
    lambda data: data[:4] + struct.pack('!Q', 99999) + data[12:],
    lambda data: b'',
])
def test_garbled_node_names_forest_and_node(damage):
    vfs = larch.MemoryFS()
    forest, tree = filled(vfs)
    victim = forest.node_store.get(tree.root_id).children[0]
    path = 'f/' + node_path(victim)
    vfs.write_file(path, damage(vfs.read_file(path)))
    again = open_f(vfs, writes=False)
    with pytest.raises(errors.NodeCorrupt) as e:
        again.trees[0].lookup_range(LOW, HIGH)
    assert str(e.value).startswith('forest f: node %d is corrupt' % victim)


def test_failed_change_keeps_committed_state_and_refuses_commit():
    vfs = larch.MemoryFS()
    forest, tree = filled(vfs, 300)
    committed = dict(vfs.files)
    root = forest.node_store.get(tree.root_id)
    victim = root.children[-1]
    vfs.remove('f/' + node_path(victim))
    again = open_f(vfs)
    with pytest.raises(errors.NodeMissing):
        for n in range(300, 400):
            again.trees[0].insert(key(n), b'x')
    with pytest.raises(errors.ForestBroken) as e:
        again.commit()
    assert 'forest f' in str(e.value)
    with pytest.raises(errors.ForestBroken):
        again.trees[0].insert(key(1), b'x')
    committed.pop('f/' + node_path(victim))
    assert {p: d for p, d in vfs.files.items()
            if not p.startswith(('f/new/', 'f/delete/'))} == committed


def test_read_only_forest_refuses_changes():
    vfs = larch.MemoryFS()
    filled(vfs, 3)
    forest = open_f(vfs, writes=False)
    for change in (lambda: forest.trees[0].insert(key(9), b''),
                   lambda: forest.trees[0].remove(key(1)),
                   lambda: forest.trees[0].remove_range(LOW, HIGH),
                   lambda: forest.new_tree(),
                   lambda: forest.remove_tree(forest.trees[0]),
                   forest.commit):
        with pytest.raises(errors.ReadOnlyForest):
            change()


def test_tree_from_other_forest_is_rejected():
    forest = open_f(larch.MemoryFS())
    other = open_f(larch.MemoryFS())
    tree = other.new_tree()
    with pytest.raises(errors.TreeNotInForest):
        forest.new_tree(tree)
    with pytest.raises(errors.TreeNotInForest):
        forest.remove_tree(tree)


class Interrupt(Exception):
    pass


class StopBeforeFinish(larch.MemoryFS):
    """Raises once the commit flag (new/metadata) has been written."""

    armed = False

    def write_file(self, path, data):
        super().write_file(path, data)
        if self.armed and path.endswith('new/metadata'):
            raise Interrupt()


def test_interrupted_commit_is_overlaid_read_only_and_finished_on_write():
    vfs = StopBeforeFinish()
    forest = thinned_clone(vfs, 3)
    vfs.armed = True
    with pytest.raises(Interrupt):
        forest.commit()
    vfs.armed = False
    expected = [(key(n), b'%d' % n) for n in range(100) if n % 3]
    before = dict(vfs.files)
    reader = open_f(vfs, writes=False)
    assert reader.overlay
    assert [t.lookup_range(LOW, HIGH) for t in reader.trees] == [expected]
    assert vfs.files == before
    writer = open_f(vfs)
    assert not vfs.exists('f/new/metadata')
    assert [t.lookup_range(LOW, HIGH) for t in writer.trees] == [expected]


def test_uncommitted_changes_are_rolled_back_on_next_write_open():
    vfs = larch.MemoryFS()
    forest, tree = filled(vfs, 100)
    for n in range(100, 300):
        tree.insert(key(n), b'x')
    forest.node_store.flush()   # journal has data but no commit flag
    assert any(p.startswith('f/new/nodes') for p in vfs.files)
    reader = open_f(vfs, writes=False)
    assert reader.trees[0].count_range(LOW, HIGH) == 100
    writer = open_f(vfs)
    assert writer.trees[0].count_range(LOW, HIGH) == 100
    assert not any(p.startswith(('f/new/', 'f/delete/')) for p in vfs.files)


def test_too_many_clones_is_a_clear_error():
    vfs = larch.MemoryFS()
    forest, tree = filled(vfs, 50)
    child = forest.node_store.get(tree.root_id).children[0]
    forest.node_store.refcounts.set(child, 65535)
    with pytest.raises(errors.RefcountOverflow) as e:
        forest.new_tree(tree)
    assert str(e.value) == ('forest f: node %d would be shared more than '
                            '65535 times' % child)
    with pytest.raises(errors.ForestBroken):
        forest.commit()


def test_refcount_can_reach_65535():
    vfs = larch.MemoryFS()
    forest, tree = filled(vfs, 50)
    child = forest.node_store.get(tree.root_id).children[0]
    forest.node_store.refcounts.set(child, 65534)
    forest.new_tree(tree)
    forest.commit()
    again = open_f(vfs)
    assert again.node_store.refcounts.get(child) == 65535


class FlakyFS(larch.MemoryFS):
    """Raises OSError on the n-th call of one method, once."""

    def __init__(self):
        super().__init__()
        self.fail = None   # (method name, countdown)

    def _maybe_fail(self, name):
        if self.fail and self.fail[0] == name:
            self.fail = (name, self.fail[1] - 1)
            if self.fail[1] == 0:
                self.fail = None
                raise OSError('storage hiccup in %s' % name)

    def rename(self, old, new):
        self._maybe_fail('rename')
        super().rename(old, new)

    def read_file(self, path):
        self._maybe_fail('read_file')
        return super().read_file(path)

    def write_file(self, path, data):
        self._maybe_fail('write_file')
        super().write_file(path, data)


@pytest.mark.parametrize('method,countdown', [
    ('rename', 1), ('rename', 3), ('write_file', 2), ('write_file', 5)])
def test_commit_can_be_retried_after_storage_error(method, countdown):
    vfs = FlakyFS()
    forest = thinned_clone(vfs, 2)
    vfs.fail = (method, countdown)
    with pytest.raises(OSError):
        forest.commit()
    forest.commit()
    again = open_f(vfs, writes=False)
    assert [t.lookup_range(LOW, HIGH) for t in again.trees] == [
        [(key(n), b'%d' % n) for n in range(1, 100, 2)]]
    from tests.obnamlib.larch import specdecoder
    assert specdecoder.from_vfs(vfs, 'f').consistency_problems(128) == []


def test_storage_error_in_the_middle_of_a_change_poisons_the_forest():
    vfs = FlakyFS()
    filled(vfs, 300)
    committed = dict(vfs.files)
    forest = open_f(vfs, cache_size=8)
    tree = forest.trees[0]
    tree.lookup(key(0))
    vfs.fail = ('read_file', 5)
    with pytest.raises(OSError):
        forest.remove_tree(tree)
    assert any(p.startswith('f/delete/') for p in vfs.files)
    with pytest.raises(errors.ForestBroken) as e:
        forest.commit()
    assert 'storage hiccup' in str(e.value)
    assert open_f(vfs, writes=False).trees[0].count_range(LOW, HIGH) == 300
    assert {p: d for p, d in vfs.files.items()
            if not p.startswith(('f/new/', 'f/delete/'))} == committed


def test_node_size_defaults_to_the_stored_one():
    vfs = larch.MemoryFS()
    filled(vfs, 10)
    forest = larch.open_forest(dirname='f', key_size=4, vfs=vfs)
    assert forest.node_size == 128
    new = larch.open_forest(dirname='g', key_size=4, vfs=vfs)
    assert new.node_size == 262144


def test_close_releases_nodes_and_refuses_further_changes():
    vfs = larch.MemoryFS()
    forest, tree = filled(vfs, 100)
    tree.insert(key(500), b'uncommitted')
    forest.close()
    assert len(forest.node_store.cache) == 0
    assert forest.trees == []
    with pytest.raises(errors.ReadOnlyForest):
        forest.commit()
    again = open_f(vfs, writes=False)
    assert again.trees[0].count_range(LOW, HIGH) == 100
