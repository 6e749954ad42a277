"""Opening the larch forests of a repository with the right key sizes."""

from obnamlib import larch
from obnamlib.vfs import base as vfs_base

DEFAULT_NODE_SIZE = 262144
# Nodes kept decoded in memory (a decoded 256 KiB node takes about twice
# that).  Our client trees are walked in file-id order (ids count up
# within a run), so a writer needs few nodes.  Readers may meet Obnam 1.x
# trees with random file ids, where a restore's lookups scatter: they
# start with READER_START_NODES and grow towards READER_CACHE_NODES only
# when a node is read again after the cache dropped it
# (larch.nodestore.NodeStore.grow_on_demand), so that a walk in key order
# (fsck, restore, verify of our own trees) stays small.  Dedup looks up
# random checksums, so the chunk indexes keep up to larch's default; a
# reader of them (fsck, which reads them through, and looks up each chunk
# in batches) starts with INDEX_READER_START_NODES and grows on demand.
# A cache only fills as far as the tree is big.
CLIENT_CACHE_NODES = 128
READER_CACHE_NODES = 512
READER_START_NODES = 32
INDEX_CACHE_NODES = 1024
INDEX_READER_START_NODES = 8


def open_forest(fs, dirname, key_size, node_size, allow_writes,
                cache_nodes=CLIENT_CACHE_NODES, start_nodes=None):
    """A forest in `dirname` of the repository storage `fs` (a
    RepositoryFS; tests may give any StorageFS).  start_nodes: keep that
    many nodes at first, growing to cache_nodes on demand."""
    if allow_writes:
        fs = SyncBeforeCommit(vfs_base.as_storage(fs), dirname)
    forest = larch.open_forest(dirname=dirname, key_size=key_size,
                               node_size=node_size or DEFAULT_NODE_SIZE,
                               allow_writes=allow_writes, vfs=fs,
                               cache_size=cache_nodes)
    if start_nodes is not None:
        forest.node_store.grow_on_demand(start_nodes)
    return forest


class SyncBeforeCommit(vfs_base.BasicStorage):
    """The storage as a writing forest sees it: everything written before
    the commit flag (`new/metadata`, format-6.md §5.5) is made durable
    first.  Then a power loss can cost the commit but never leave a
    committed tree naming a node, or a chunk file written before the
    commit began, that did not reach the disk.  One sync per commit
    (where the storage syncs: a local disk).  Everything else larch asks
    for (larch.StorageFS) goes to `fs`, a vfs.base.Storage, unchanged."""

    def __init__(self, fs, dirname):
        super().__init__(fs)
        self.flag = dirname + '/new/metadata'

    def write_file(self, path, data):
        if path == self.flag:
            self.table.sync()
        self.table.write_file(path, data)

    @property
    def capabilities(self):
        return self.table.capabilities

    def read_files(self, paths):
        return self.table.read_files(paths)

    def read_ahead(self, paths):
        self.table.read_ahead(paths)


def keep_only_newest_tree(forest):
    """Obnam keeps one tree in the shared forests: drop all but the last."""
    for tree in forest.trees[:-1]:
        forest.remove_tree(tree)


def start_changes(forest):
    """Clone the newest tree (or make the first) for one change session."""
    old = forest.trees[-1] if forest.trees else None
    return forest.new_tree(old)


def newest_tree(forest):
    return forest.trees[-1] if forest.trees else None
