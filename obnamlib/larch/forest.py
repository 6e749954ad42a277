"""A forest: the trees of one directory, sharing nodes, committed together."""

from . import errors
from .journal import Journal
from .metadata import ForestMetadata, format_metadata, parse_metadata
from .node_editor import decrement_node
from .nodes import IndexNode, HEADER_SIZE
from .nodestore import NodeStore
from .tree import Tree
from .vfs import LocalFS

DEFAULT_NODE_SIZE = 262144
DEFAULT_CACHE_BYTES = 256 * 1024 * 1024


def open_forest(dirname=None, key_size=None, node_size=None,
                allow_writes=False, vfs=None, cache_size=None,
                lru_size=None, upload_max=None):
    """Open (or, for writing, prepare to create) the forest in dirname.

    With vfs=None, dirname is a local directory. Otherwise dirname is a
    path inside vfs. node_size=None means the size stored in the forest's
    metadata, or 262144 for a new forest. cache_size is the number of
    nodes kept in memory (changed nodes included: they are written into
    the journal when they fall out of the cache); by default as many as
    fit in 256 MiB of node_size. Keep the whole working set in the cache:
    a node missed in a random-access workload costs a read and a decode
    (and a write if it was changed). lru_size and upload_max are larch
    1.x's names for the same memory limits: their sum is used as
    cache_size if cache_size is None.
    """
    if cache_size is None and (lru_size or upload_max):
        cache_size = (lru_size or 0) + (upload_max or 0)
    if dirname is None:
        raise ValueError('open_forest needs a dirname')
    if key_size is None:
        raise ValueError('open_forest needs a key_size')
    if vfs is None:
        vfs, prefix = LocalFS(dirname), '.'
    else:
        prefix = dirname.rstrip('/') or '.'
    return Forest(vfs, prefix, str(dirname), key_size, node_size,
                  allow_writes, cache_size)


class Forest:

    def __init__(self, vfs, prefix, dirname, key_size, node_size,
                 allow_writes, cache_size=None):
        if not isinstance(key_size, int) or key_size <= 0:
            raise errors.BadNodeSize(node_size, key_size)
        self.vfs = vfs
        self.dirname = dirname
        self.key_size = key_size
        self.allow_writes = bool(allow_writes)
        self.broken = None
        self.journal = Journal(vfs, prefix, self.allow_writes)
        self.overlay = self.journal.recover()
        meta = self._read_metadata()
        self.stored_node_size = meta.node_size
        if node_size is None:
            node_size = meta.node_size or DEFAULT_NODE_SIZE
        if (not isinstance(node_size, int)
                or node_size < HEADER_SIZE + 2 * (key_size + 8)):
            raise errors.BadNodeSize(node_size, key_size)
        self.node_size = node_size
        self.max_value_size = node_size // 2 - 16
        self.max_index_pairs = (node_size - HEADER_SIZE) // (key_size + 8)
        if cache_size is None:
            cache_size = max(64, DEFAULT_CACHE_BYTES // node_size)
        self.last_id = meta.last_id
        self.node_store = NodeStore(self.journal, dirname, key_size,
                                    cache_size, meta.last_id)
        self.trees = [Tree(self, root_id) for root_id in meta.root_ids]

    def __repr__(self):
        return 'Forest(%r)' % self.dirname

    def _read_metadata(self):
        try:
            data = self.journal.read('metadata')
        except FileNotFoundError:
            return ForestMetadata(0, [], self.key_size, None)
        meta = parse_metadata(data, self.dirname)
        if meta.key_size != self.key_size:
            raise errors.KeySizeMismatch(self.dirname, meta.key_size,
                                         self.key_size)
        return meta

    def new_id(self):
        """Allocate a new id from the forest's counter (nodes, generations)."""
        self.last_id += 1
        return self.last_id

    def _check_writable(self):
        if not self.allow_writes:
            raise errors.ReadOnlyForest(self.dirname)
        if self.broken is not None:
            raise errors.ForestBroken(self.dirname, self.broken)

    def new_tree(self, old=None):
        """A new tree at the end of the list: a clone of old, or empty."""
        self._check_writable()
        if old is not None:
            self._check_member(old)
            old_root = self.node_store.get(old.root_id)
            keys, children = list(old_root.keys), list(old_root.children)
        else:
            keys, children = [], []
        root = IndexNode(self.new_id(), keys, children)
        counts = self.node_store.refcounts
        try:
            for child_id in children:
                counts.incr(child_id)
        except BaseException as e:
            self.broken = e
            raise
        counts.set(root.id, 1)
        self.node_store.put(root)
        tree = Tree(self, root.id)
        self.trees.append(tree)
        return tree

    def remove_tree(self, tree):
        """Drop a tree; nodes only it used are deleted."""
        self._check_writable()
        self._check_member(tree)
        try:
            decrement_node(self.node_store, tree.root_id)
        except BaseException as e:
            self.broken = e
            raise
        self.trees = [t for t in self.trees if t is not tree]

    def _check_member(self, tree):
        if not any(t is tree for t in self.trees):
            raise errors.TreeNotInForest(self.dirname)

    def close(self):
        """Drop cached nodes and uncommitted changes; the forest is unusable.

        Trees and forest refer to each other, so an abandoned forest is
        only freed by Python's cycle collector, which may run late; close()
        releases its memory at once.
        """
        store = self.node_store
        store.cache.clear()
        store.dirty = set()
        store.refcounts.groups.clear()
        store.refcounts.dirty = set()
        self.trees = []
        self.broken = errors.ReadOnlyForest(self.dirname)
        self.allow_writes = False

    def commit(self):
        """Make all changes since the last commit durable, atomically."""
        self._check_writable()
        self.node_store.flush()
        meta = ForestMetadata(self.last_id, [t.root_id for t in self.trees],
                              self.key_size, self.node_size)
        self.journal.commit(format_metadata(meta))
        self.node_store.committed_last_id = self.last_id
        self.overlay = False
