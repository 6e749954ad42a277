"""Exceptions raised by larch; all derive from `Error`."""


class Error(Exception):
    """Base class of every larch error."""


class WrongKeySize(Error):
    def __init__(self, dirname, key, key_size):
        super().__init__(
            'forest %s: key %r has %d bytes, the forest uses %d-byte keys'
            % (dirname, key, len(key), key_size))


class KeyNotBytes(Error):
    def __init__(self, dirname, key):
        super().__init__(
            'forest %s: keys and values must be bytes, got %s'
            % (dirname, type(key).__name__))


class ValueTooLarge(Error):
    def __init__(self, dirname, size, max_size):
        super().__init__(
            'forest %s: value of %d bytes is larger than the maximum %d '
            '(node_size // 2 - 16)' % (dirname, size, max_size))


class KeySizeMismatch(Error):
    def __init__(self, dirname, stored, wanted):
        super().__init__(
            'forest %s: metadata says key_size %s, but %d was requested'
            % (dirname, stored, wanted))


class BadMetadata(Error):
    def __init__(self, dirname, reason):
        super().__init__('forest %s: bad metadata: %s' % (dirname, reason))


class BadNodeSize(Error):
    def __init__(self, node_size, key_size):
        super().__init__(
            'node_size %r is too small for %r-byte keys'
            % (node_size, key_size))


class NodeMissing(Error):
    def __init__(self, dirname, node_id):
        self.node_id = node_id
        super().__init__(
            'forest %s: node %d is missing' % (dirname, node_id))


class NodeCorrupt(Error):
    def __init__(self, dirname, node_id, reason):
        self.node_id = node_id
        super().__init__(
            'forest %s: node %d is corrupt: %s' % (dirname, node_id, reason))


class BadRefcounts(Error):
    def __init__(self, dirname, path, reason):
        super().__init__(
            'forest %s: refcount file %s is corrupt: %s'
            % (dirname, path, reason))


class RefcountOverflow(Error):
    def __init__(self, dirname, node_id):
        super().__init__(
            'forest %s: node %d would be shared more than 65535 times'
            % (dirname, node_id))


class ReadOnlyForest(Error):
    def __init__(self, dirname):
        super().__init__(
            'forest %s was opened read-only; it cannot be changed' % dirname)


class ForestBroken(Error):
    def __init__(self, dirname, cause):
        super().__init__(
            'forest %s: an earlier change failed (%s); refusing to commit'
            % (dirname, cause))


class TreeNotInForest(Error):
    def __init__(self, dirname):
        super().__init__(
            'forest %s: tree is not part of this forest' % dirname)


class TreeLoops(Error):
    """A walk met a node again, or went deeper than any B-tree can be: a
    damaged or hostile forest whose nodes point back up (or sideways)."""

    def __init__(self, dirname, node_id):
        self.node_id = node_id
        super().__init__(
            'forest %s: node %d is reached again or too deep down: the '
            'B-tree loops' % (dirname, node_id))
