"""Copy-on-write changes to a forest's nodes, with their refcounts.

Nodes whose refcount is 1 (or 0: created by the change in progress) are
changed in place; shared nodes are shadowed (copied under a new id) first.
The insert and remove algorithms of a tree change nodes only through this.
"""

from .nodes import LeafNode, IndexNode, HEADER_SIZE


class NodeEditor:

    def __init__(self, forest):
        self._forest = forest
        self.store = forest.node_store
        self.refcounts = self.store.refcounts
        self.pair_overhead = forest.key_size + 4
        self.node_size = forest.node_size
        self.max_index_pairs = forest.max_index_pairs

    def new_leaf(self, keys, values):
        size = (HEADER_SIZE + len(keys) * self.pair_overhead
                + sum(map(len, values)))
        return LeafNode(self._forest.new_id(), keys, values, size)

    def new_index(self, keys, children):
        return IndexNode(self._forest.new_id(), keys, children)

    def shadow(self, node):
        """node itself if only we use it, else a fresh copy of it."""
        if self.refcounts.get(node.id) <= 1:
            return node
        if node.is_leaf:
            return LeafNode(self._forest.new_id(), list(node.keys),
                            list(node.values), node.size)
        for child_id in node.children:
            self.refcounts.incr(child_id)
        return IndexNode(self._forest.new_id(), list(node.keys),
                         list(node.children))

    def set_root(self, old_root_id, new_root):
        """Make new_root a tree's root instead of old_root_id; its id."""
        if new_root.id != old_root_id:
            self.decrement(old_root_id)
        self.refcounts.set(new_root.id, 1)
        self.store.put(new_root)
        return new_root.id

    def forget(self, node_id):
        """Delete one node without touching its children's counts."""
        self.refcounts.set(node_id, 0)
        self.store.remove(node_id)

    def decrement(self, node_id):
        """Drop one reference; delete nodes (recursively) that reach 0."""
        decrement_node(self.store, node_id)


class TreeChange:
    """Base of the general insert and remove: the editor, and the
    forest's limits at hand."""

    def __init__(self, editor):
        self._edit = editor
        self._store = editor.store
        self._rc = editor.refcounts
        self._ns = editor.node_size
        self._max_pairs = editor.max_index_pairs
        self._pair_overhead = editor.pair_overhead


def decrement_node(store, node_id):
    counts = store.refcounts
    stack = [node_id]
    while stack:
        node_id = stack.pop()
        count = counts.get(node_id)
        if count > 1:
            counts.set(node_id, count - 1)
            continue
        if not store.is_leaf(node_id):
            stack.extend(store.get(node_id).children)
        counts.set(node_id, 0)
        store.remove(node_id)
