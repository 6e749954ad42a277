"""B-tree nodes held in memory as parallel sorted lists.

Keys live in one list, values (leaves) or child ids (index nodes) in
another, so lookups are a `bisect` and updates are list operations. A leaf
tracks its encoded size so that no re-encoding is needed to know whether it
still fits in a node.
"""

HEADER_SIZE = 16
LEAF_PAIR_OVERHEAD = 4
INDEX_PAIR_EXTRA = 8

# No B-tree is deeper: each level at least doubles the leaves, and node
# ids are 64 bits.  A descent that goes on is a loop in a damaged forest.
MAX_DEPTH = 64


class LeafNode:
    __slots__ = ('id', 'keys', 'values', 'size')
    is_leaf = True

    def __init__(self, node_id, keys, values, size):
        self.id = node_id
        self.keys = keys
        self.values = values
        self.size = size

    def first_key(self):
        return self.keys[0]

    def __repr__(self):
        return 'LeafNode(%d, %d pairs)' % (self.id, len(self.keys))


class IndexNode:
    __slots__ = ('id', 'keys', 'children')
    is_leaf = False

    def __init__(self, node_id, keys, children):
        self.id = node_id
        self.keys = keys
        self.children = children

    def first_key(self):
        return self.keys[0]

    def __repr__(self):
        return 'IndexNode(%d, %d children)' % (self.id, len(self.keys))


def leaf_size(key_size, values):
    """Encoded size of a leaf with these values."""
    return (HEADER_SIZE + len(values) * (key_size + LEAF_PAIR_OVERHEAD)
            + sum(map(len, values)))


def index_size(key_size, count):
    """Encoded size of an index node with `count` children."""
    return HEADER_SIZE + count * (key_size + INDEX_PAIR_EXTRA)
