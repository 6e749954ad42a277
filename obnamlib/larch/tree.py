"""One copy-on-write B-tree of a forest (format-6.md section 6).

Tree is the public face: key checks, lookups and the fast paths of insert
and remove (a key that lands in an unshared leaf and changes nothing
above it), which stay inline here because they are the hot spot of every
backup.  Its collaborators do the rest: tree_ranges (range queries),
tree_insert and tree_remove (the general changes: shadowing, splits and
merges), node_editor (copy-on-write node bookkeeping, refcounts).

Stored node ids are untrusted: a node that points to itself or to an
ancestor must not make a reader spin.  A descent along one path counts
its levels (MAX_DEPTH); the range walks turn loops into `TreeLoops` too.
"""

from bisect import bisect_left, bisect_right

from . import errors
from .node_editor import NodeEditor
from .nodes import MAX_DEPTH
from .refcounts import GROUP_BITS
from .tree_insert import Inserter
from .tree_ranges import RangeReader
from .tree_remove import Remover

GROUP_MASK = (1 << GROUP_BITS) - 1


class Tree:

    def __init__(self, forest, root_id):
        self._forest = forest
        self._store = forest.node_store
        self._rc = self._store.refcounts
        self._root_id = root_id
        self._dirname = forest.dirname
        self._ks = forest.key_size
        self._ns = forest.node_size
        self._max_value = forest.max_value_size
        self._pair_overhead = self._ks + 4
        self._ranges = RangeReader(self._store, self._dirname, self._ks,
                                   self._key)
        self._edit = NodeEditor(forest)
        self._inserter = Inserter(self._edit)
        self._remover = Remover(self._edit)

    def __repr__(self):
        return 'Tree(root %d)' % self._root_id

    @property
    def root_id(self):
        return self._root_id

    # --- checks --------------------------------------------------------

    def _bad_key(self, key):
        if type(key) is not bytes:
            if isinstance(key, (bytearray, memoryview)):
                return None
            raise errors.KeyNotBytes(self._dirname, key)
        raise errors.WrongKeySize(self._dirname, key, self._ks)

    def _key(self, key):
        if type(key) is not bytes or len(key) != self._ks:
            self._bad_key(key)
            key = bytes(key)
            if len(key) != self._ks:
                raise errors.WrongKeySize(self._dirname, key, self._ks)
        return key

    def _check_writable(self):
        forest = self._forest
        if not forest.allow_writes:
            raise errors.ReadOnlyForest(self._dirname)
        if forest.broken is not None:
            raise errors.ForestBroken(self._dirname, forest.broken)

    # --- reading -------------------------------------------------------

    def lookup(self, key):
        """The value stored for key; KeyError if there is none."""
        if type(key) is not bytes or len(key) != self._ks:
            key = self._key(key)
        store = self._store
        cache = store.cache
        node = cache.get(self._root_id)
        if node is None:
            node = store.load(self._root_id)
        else:
            cache.move_to_end(self._root_id)
        node = self._descend(node, key)
        if node is not None:
            keys = node.keys
            j = bisect_left(keys, key)
            if j < len(keys) and keys[j] == key:
                return node.values[j]
        raise KeyError(key)

    def _descend(self, node, key, groups=None, bound=None):
        """The leaf below node where key belongs, through cached or loaded
        nodes; None if key sorts before the first key, or (with the
        refcount groups) where a child is shared.  bound, a list, gets
        the least index key above the leaf's (a key below it belongs in
        the same leaf), if there is one.  The hot loop of lookup, insert
        and remove; over MAX_DEPTH levels is TreeLoops."""
        store = self._store
        cache = store.cache
        depth = 0
        while not node.is_leaf:
            if depth == MAX_DEPTH:
                raise errors.TreeLoops(self._dirname, node.id)
            depth += 1
            keys = node.keys
            i = bisect_right(keys, key) - 1
            if i < 0:
                return None
            if bound is not None and i + 1 < len(keys):
                bound[0] = keys[i + 1]
            child_id = node.children[i]
            if groups is not None:
                group = groups.get(child_id >> GROUP_BITS)
                if group is None or group[child_id & GROUP_MASK] != 1:
                    return None
            node = cache.get(child_id)
            if node is None:
                node = store.load(child_id)
            else:
                cache.move_to_end(child_id)
        return node

    def lookup_range(self, minkey, maxkey):
        """Sorted list of (key, value) with minkey <= key <= maxkey."""
        return self._ranges.pairs(self._root_id, minkey, maxkey)

    def iter_range(self, minkey, maxkey):
        """Like lookup_range, but lazily: for long scans of big trees.

        The tree must not be changed until the iteration is finished.
        """
        return self._ranges.iterate(self, minkey, maxkey)

    def count_range(self, minkey, maxkey):
        """Number of keys with minkey <= key <= maxkey."""
        return self._ranges.count(self._root_id, minkey, maxkey)

    def range_is_empty(self, minkey, maxkey):
        """Whether no key k has minkey <= k <= maxkey."""
        return not self._ranges.any(self._root_id, minkey, maxkey)

    # --- insert --------------------------------------------------------

    def insert(self, key, value):
        """Set key to value, replacing any earlier value."""
        if type(key) is not bytes or len(key) != self._ks:
            key = self._key(key)
        if type(value) is not bytes or len(value) > self._max_value:
            value = self._value(value)
        forest = self._forest
        if not forest.allow_writes or forest.broken is not None:
            self._check_writable()
        # Fast path, inline because it is the hot spot of every backup:
        # descend through cached, unshared nodes and change the leaf in
        # place if it still fits and its first key stays the same.
        store = self._store
        cache = store.cache
        node = cache.get(self._root_id)
        if node is not None:
            node = self._descend(node, key, self._rc.groups)
        if node is not None:
            keys = node.keys
            j = bisect_left(keys, key)
            if j < len(keys) and keys[j] == key:
                values = node.values
                size = node.size + len(value) - len(values[j])
                if size <= self._ns:
                    values[j] = value
                    node.size = size
                    store.dirty.add(node.id)
                    return
            else:
                size = node.size + self._pair_overhead + len(value)
                if size <= self._ns and j > 0:
                    keys.insert(j, key)
                    node.values.insert(j, value)
                    node.size = size
                    store.dirty.add(node.id)
                    return
        self._guarded(self._insert_slow, key, value)

    def _value(self, value):
        if type(value) is not bytes:
            if not isinstance(value, (bytearray, memoryview)):
                raise errors.KeyNotBytes(self._dirname, value)
            value = bytes(value)
        if len(value) > self._max_value:
            raise errors.ValueTooLarge(self._dirname, len(value),
                                       self._max_value)
        return value

    def insert_sorted(self, pairs):
        """Set each (key, value) of pairs, which come in increasing key
        order: each run of them that goes in place into one leaf costs
        one descent, not one each (a commit of the chunk indexes puts in
        tens of thousands of sorted keys).  Pairs out of order cost what
        insert does; a key given twice keeps its later value."""
        pairs = list(pairs)
        i = 0
        while i < len(pairs):
            done = self._fill_leaf(pairs, i)
            if not done:
                self.insert(*pairs[i])
                done = 1
            i += done

    def _fill_leaf(self, pairs, i):
        """How many of pairs[i:] went in place into the unshared, cached
        leaf where pairs[i] belongs (the fast path of insert, for as
        many as belong there, in increasing order, and fit without
        changing its first key)."""
        key, value = pairs[i]
        if type(key) is not bytes or len(key) != self._ks:
            return 0                # insert checks or converts it
        forest = self._forest
        if not forest.allow_writes or forest.broken is not None:
            self._check_writable()
        store = self._store
        node = store.cache.get(self._root_id)
        bound = [None]
        if node is not None:
            node = self._descend(node, key, self._rc.groups, bound)
        if node is None:
            return 0
        upper = bound[0]
        keys, values = node.keys, node.values
        start = i
        j = 0
        while True:
            if type(value) is not bytes or len(value) > self._max_value:
                value = self._value(value)
            j = bisect_left(keys, key, j)
            if j < len(keys) and keys[j] == key:
                size = node.size + len(value) - len(values[j])
                if size > self._ns:
                    break
                values[j] = value
            else:
                size = node.size + self._pair_overhead + len(value)
                if size > self._ns or j == 0:
                    break
                keys.insert(j, key)
                values.insert(j, value)
            node.size = size
            store.dirty.add(node.id)
            i += 1
            if i == len(pairs):
                break
            previous = key
            key, value = pairs[i]
            if type(key) is not bytes or not previous < key or \
                    (upper is not None and key >= upper) or \
                    len(key) != self._ks:
                break
        return i - start

    def _guarded(self, change, *args):
        """Run a structural change; any failure midway poisons the forest.

        A half-done change (a missing node, an I/O error of the storage)
        leaves the in-memory trees inconsistent; refusing to commit them
        keeps the committed state intact.
        """
        try:
            change(*args)
        except RecursionError:
            error = errors.TreeLoops(self._dirname, self._root_id)
            self._forest.broken = error
            raise error from None
        except BaseException as e:
            self._forest.broken = e
            raise

    def _insert_slow(self, key, value):
        new_root = self._inserter.insert(self._root_id, key, value)
        self._set_root(new_root)

    # --- remove --------------------------------------------------------

    def remove(self, key):
        """Remove key; KeyError if it is not in the tree."""
        key = self._key(key)
        self._check_writable()
        self.lookup(key)
        if not self._remove_fast(key):
            self._guarded(self._remove_slow, key)

    def remove_range(self, minkey, maxkey):
        """Remove every key k with minkey <= k <= maxkey."""
        self._check_writable()
        for key, _ in self.lookup_range(minkey, maxkey):
            if not self._remove_fast(key):
                self._guarded(self._remove_slow, key)

    def _remove_fast(self, key):
        """Remove from an unshared leaf that stays well filled."""
        store = self._store
        node = self._descend(store.get(self._root_id), key, self._rc.groups)
        if node is None:
            return False
        keys = node.keys
        j = bisect_left(keys, key)
        if j == 0:
            return False
        size = node.size - self._pair_overhead - len(node.values[j])
        if size < self._ns // 4:
            return False
        del keys[j]
        del node.values[j]
        node.size = size
        store.dirty.add(node.id)
        return True

    def _remove_slow(self, key):
        self._set_root(self._remover.remove(self._root_id, key))
        self._reduce_height()

    def _reduce_height(self):
        store = self._store
        while True:
            root = store.get(self._root_id)
            if len(root.keys) != 1:
                return
            child_id = root.children[0]
            if self._rc.get(child_id) != 1 or store.is_leaf(child_id):
                return
            self._edit.forget(root.id)
            self._root_id = child_id

    def _set_root(self, new_root):
        self._root_id = self._edit.set_root(self._root_id, new_root)
