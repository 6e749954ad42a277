import pytest

from obnamlib import larch
from obnamlib.larch import codec, errors
from obnamlib.larch.journal import Journal
from obnamlib.larch.nodes import LeafNode, IndexNode
from obnamlib.larch.nodestore import NodeStore


def make_store(vfs=None, cache_size=8, committed_last_id=0):
    vfs = vfs or larch.MemoryFS()
    journal = Journal(vfs, 'f', True)
    return NodeStore(journal, 'f', 2, cache_size, committed_last_id), vfs


def leaf(node_id):
    return LeafNode(node_id, [b'%02d' % (node_id % 100)], [b'v'], 23)


def test_put_keeps_node_in_memory_until_flush():
    store, vfs = make_store()
    store.put(leaf(1))
    assert vfs.files == {}
    assert store.get(1).keys == [b'01']
    store.flush()
    assert vfs.read_file('f/new/nodes/0/0/0/1') == codec.encode(leaf(1))


def test_eviction_writes_dirty_nodes_into_journal_and_reloads_them():
    store, vfs = make_store(cache_size=8)
    for i in range(1, 21):
        store.put(leaf(i))
    assert len(store.cache) == 8
    assert 'f/new/nodes/0/0/0/1' in vfs.files
    assert store.get(1).keys == [b'01']
    assert store.get(1) is store.get(1)


def test_remove_of_committed_node_leaves_delete_marker():
    vfs = larch.MemoryFS()
    vfs.write_file('f/nodes/0/0/0/5', codec.encode(leaf(5)))
    store, _ = make_store(vfs, committed_last_id=5)
    store.remove(5)
    assert vfs.files['f/delete/nodes/0/0/0/5'] == b''
    with pytest.raises(errors.NodeMissing):
        store.get(5)


def test_remove_of_new_node_just_forgets_it():
    store, vfs = make_store(cache_size=8)
    for i in range(1, 21):
        store.put(leaf(i))
    store.remove(1)
    store.remove(20)
    assert vfs.files.keys().isdisjoint({'f/new/nodes/0/0/0/1',
                                        'f/delete/nodes/0/0/0/1'})
    store.flush()
    assert 'f/new/nodes/0/0/0/14' not in vfs.files


def test_is_leaf_reads_only_the_magic():
    vfs = larch.MemoryFS()
    vfs.write_file('f/nodes/0/0/0/3',
                   codec.encode(IndexNode(3, [b'aa'], [4])))
    vfs.write_file('f/nodes/0/0/0/4', codec.encode(leaf(4)))
    store, _ = make_store(vfs)
    assert store.is_leaf(3) is False
    assert store.is_leaf(4) is True
    assert len(store.cache) == 0


def test_node_ids_on_disk_include_journal():
    vfs = larch.MemoryFS()
    vfs.write_file('f/nodes/0/0/0/3', b'')
    vfs.write_file('f/nodes/1/0/0/2000', b'')
    vfs.write_file('f/nodes/0/0/0/tmpxyz', b'')
    store, _ = make_store(vfs)
    store.put(leaf(9))
    store.flush()
    assert store.node_ids_on_disk() == [3, 9, 8192]


def committed_store(count, cache_size, start):
    """A store over `count` committed leaves (ids 1..count) whose cache
    starts at `start` nodes and may grow to `cache_size`."""
    vfs = larch.MemoryFS()
    for node_id in range(1, count + 1):
        vfs.write_file(node_path_of(node_id), codec.encode(leaf(node_id)))
    store, _ = make_store(vfs, cache_size=cache_size, committed_last_id=count)
    store.grow_on_demand(start)
    return store


def node_path_of(node_id):
    from obnamlib.larch.idpath import node_path
    return 'f/' + node_path(node_id)


def test_a_cache_read_in_order_stays_at_its_start_size():
    store = committed_store(200, cache_size=64, start=8)
    for _ in range(3):
        for node_id in range(1, 201):
            assert store.get(node_id).id == node_id
    assert store.cache_size == 8
    assert len(store.cache) == 8


def test_a_cache_whose_reads_scatter_grows_to_its_size():
    import random
    store = committed_store(100, cache_size=64, start=8)
    rng = random.Random(1)
    for _ in range(2000):
        store.get(rng.randint(1, 100))
    assert store.cache_size == 64
    assert len(store.cache) == 64


def test_nodes_read_by_a_scan_or_remembered_do_not_make_the_cache_grow():
    store = committed_store(100, cache_size=64, start=8)
    for node_id in range(1, 51):
        store.peek(node_id)
    for node_id in range(51, 101):
        store.remember(node_id, codec.decode(
            store.read_raw(node_id), 2, 'f', node_id))
    for node_id in range(1, 101):
        store.get(node_id)
    assert store.cache_size == 8


def test_a_store_without_grow_on_demand_keeps_its_size():
    store = committed_store(100, cache_size=16, start=16)
    for node_id in list(range(1, 101)) * 3:
        store.get(node_id)
    assert store.cache_size == 16 and store.dropped is None
