"""One copy-on-write B-tree of a forest (format-6.md section 6).

Nodes whose refcount is 1 (or 0: created by the change in progress) are
changed in place; shared nodes are shadowed (copied under a new id) first.

Stored node ids are untrusted: a node that points to itself or to an
ancestor must not make a reader spin.  A descent along one path counts
its levels (MAX_DEPTH); a walk over a range keeps the ids it met (a node
met twice in one tree is a loop) and turns a too-deep recursion into the
same error, `TreeLoops`.
`insert` and `remove` have a fast path for the common case of a key that
lands in an unshared leaf and changes nothing above it.
"""

from bisect import bisect_left, bisect_right

from . import errors
from .nodes import LeafNode, IndexNode, HEADER_SIZE
from .refcounts import GROUP_BITS

GROUP_MASK = (1 << GROUP_BITS) - 1

# No B-tree is deeper: each level at least doubles the leaves, and node
# ids are 64 bits.  A descent that goes on is a loop in a damaged forest.
MAX_DEPTH = 64


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
        self._max_pairs = forest.max_index_pairs
        self._pair_overhead = self._ks + 4

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

    def _descend(self, node, key, groups=None):
        """The leaf below node where key belongs, through cached or loaded
        nodes; None if key sorts before the first key, or (with the
        refcount groups) where a child is shared.  The hot loop of
        lookup, insert and remove; over MAX_DEPTH levels is TreeLoops."""
        store = self._store
        cache = store.cache
        depth = 0
        while not node.is_leaf:
            if depth == MAX_DEPTH:
                raise errors.TreeLoops(self._dirname, node.id)
            depth += 1
            i = bisect_right(node.keys, key) - 1
            if i < 0:
                return None
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

    def _range_start(self, lo, hi):
        """The deepest node whose subtree holds all of lo..hi, or None.

        Descending while the range stays within one child makes the
        common small range as cheap as a lookup. None: nothing in range.
        """
        if type(lo) is not bytes or len(lo) != self._ks:
            lo = self._key(lo)
        if type(hi) is not bytes or len(hi) != self._ks:
            hi = self._key(hi)
        if lo > hi:
            return None, lo, hi
        store = self._store
        node = store.get(self._root_id)
        for _ in range(MAX_DEPTH + 1):
            if node.is_leaf:
                break
            keys = node.keys
            last = bisect_right(keys, hi) - 1
            if last < 0:
                return None, lo, hi
            first = bisect_right(keys, lo) - 1
            if first != last and not (first < 0 and last == 0):
                break
            node = store.get(node.children[last])
        else:
            raise errors.TreeLoops(self._dirname, node.id)
        return node, lo, hi

    def lookup_range(self, minkey, maxkey):
        """Sorted list of (key, value) with minkey <= key <= maxkey."""
        node, lo, hi = self._range_start(minkey, maxkey)
        result = []
        if node is not None:
            self._bounded(self._walk_range, node, lo, hi, result.extend,
                          set())
        return result

    def _bounded(self, walk, node, *args):
        """walk(node, *args), a recursion that loops or is absurdly deep
        (more than Python's stack) reported as the loop it is."""
        try:
            return walk(node, *args)
        except RecursionError:
            raise errors.TreeLoops(self._dirname, node.id) from None

    def _met(self, node, seen):
        """Note a node the walk entered; meeting one twice is a loop."""
        if node.id in seen:
            raise errors.TreeLoops(self._dirname, node.id)
        seen.add(node.id)

    def iter_range(self, minkey, maxkey):
        """Like lookup_range, but lazily: for long scans of big trees.

        The tree must not be changed until the iteration is finished.
        """
        node, lo, hi = self._range_start(minkey, maxkey)
        if node is not None:
            try:
                yield from self._iter(node, lo, hi, set())
            except RecursionError:
                raise errors.TreeLoops(self._dirname, node.id) from None

    def _iter(self, node, lo, hi, seen):
        self._met(node, seen)
        keys = node.keys
        if node.is_leaf:
            a = bisect_left(keys, lo)
            b = bisect_right(keys, hi)
            yield from zip(keys[a:b], node.values[a:b])
            return
        a = max(bisect_right(keys, lo) - 1, 0)
        b = bisect_right(keys, hi)
        get = self._store.get
        for child_id in node.children[a:b]:
            yield from self._iter(get(child_id), lo, hi, seen)

    def _walk_range(self, node, lo, hi, emit, seen):
        if node.id in seen:
            raise errors.TreeLoops(self._dirname, node.id)
        seen.add(node.id)
        keys = node.keys
        if node.is_leaf:
            a = bisect_left(keys, lo)
            b = bisect_right(keys, hi)
            if a < b:
                emit(zip(keys[a:b], node.values[a:b]))
            return
        a = max(bisect_right(keys, lo) - 1, 0)
        b = bisect_right(keys, hi)
        get = self._store.get
        for child_id in node.children[a:b]:
            self._walk_range(get(child_id), lo, hi, emit, seen)

    def count_range(self, minkey, maxkey):
        """Number of keys with minkey <= key <= maxkey."""
        node, lo, hi = self._range_start(minkey, maxkey)
        if node is None:
            return 0
        return self._bounded(self._count, node, lo, hi, set())

    def _count(self, node, lo, hi, seen):
        self._met(node, seen)
        keys = node.keys
        if node.is_leaf:
            return max(0, bisect_right(keys, hi) - bisect_left(keys, lo))
        a = max(bisect_right(keys, lo) - 1, 0)
        b = bisect_right(keys, hi)
        get = self._store.get
        return sum(self._count(get(c), lo, hi, seen)
                   for c in node.children[a:b])

    def range_is_empty(self, minkey, maxkey):
        """Whether no key k has minkey <= k <= maxkey."""
        node, lo, hi = self._range_start(minkey, maxkey)
        return node is None or not self._bounded(self._any, node, lo, hi,
                                                 set())

    def _any(self, node, lo, hi, seen):
        self._met(node, seen)
        keys = node.keys
        if node.is_leaf:
            return bisect_right(keys, hi) > bisect_left(keys, lo)
        a = max(bisect_right(keys, lo) - 1, 0)
        b = bisect_right(keys, hi)
        get = self._store.get
        return any(self._any(get(c), lo, hi, seen)
                   for c in node.children[a:b])

    # --- insert --------------------------------------------------------

    def insert(self, key, value):
        """Set key to value, replacing any earlier value."""
        if type(key) is not bytes or len(key) != self._ks:
            key = self._key(key)
        if type(value) is not bytes:
            if not isinstance(value, (bytearray, memoryview)):
                raise errors.KeyNotBytes(self._dirname, value)
            value = bytes(value)
        if len(value) > self._max_value:
            raise errors.ValueTooLarge(self._dirname, len(value),
                                       self._max_value)
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
        store = self._store
        root = store.get(self._root_id)
        if not root.keys:
            leaf = self._new_leaf([key], [value])
            store.put(leaf)
            new_root = self._shadow(root)
            new_root.keys.append(key)
            new_root.children.append(leaf.id)
            self._rc.incr(leaf.id)
        else:
            kids = self._insert_into_index(root, key, value)
            new_root = self._grow(kids)
        self._set_root(new_root)

    def _grow(self, kids):
        """One node that holds all of kids, adding levels as needed."""
        while len(kids) > 1:
            level = []
            for i in range(0, len(kids), self._max_pairs):
                group = kids[i:i + self._max_pairs]
                parent = self._new_index([k.keys[0] for k in group],
                                         [k.id for k in group])
                for k in group:
                    self._rc.incr(k.id)
                self._store.put(parent)
                level.append(parent)
            kids = level
        return kids[0]

    def _insert_into_index(self, node, key, value):
        new = self._shadow(node)
        i = max(bisect_right(new.keys, key) - 1, 0)
        child_id = new.children[i]
        child = self._store.get(child_id)
        if child.is_leaf:
            reps = self._insert_into_leaf(child, key, value)
        else:
            reps = self._insert_into_index(child, key, value)
        new.keys[i:i + 1] = [r.keys[0] for r in reps]
        new.children[i:i + 1] = [r.id for r in reps]
        kept = False
        for r in reps:
            if r.id == child_id:
                kept = True
            else:
                self._rc.incr(r.id)
        if not kept:
            self._decrement(child_id)
        return self._split_index(new)

    def _insert_into_leaf(self, leaf, key, value):
        new = self._shadow(leaf)
        keys, values = new.keys, new.values
        j = bisect_left(keys, key)
        if j < len(keys) and keys[j] == key:
            new.size += len(value) - len(values[j])
            values[j] = value
        else:
            keys.insert(j, key)
            values.insert(j, value)
            new.size += self._pair_overhead + len(value)
        return self._split_leaf(new)

    def _split_leaf(self, node):
        """node, or several leaves holding its pairs that each fit."""
        n = len(node.keys)
        if node.size <= self._ns or n < 2:
            self._store.put(node)
            return [node]
        half = (node.size - HEADER_SIZE) / 2
        overhead = self._pair_overhead
        acc = 0
        cut = n - 1
        for m, v in enumerate(node.values):
            step = overhead + len(v)
            if acc + step >= half:
                cut = m + 1 if (acc + step - half) <= (half - acc) else m
                break
            acc += step
        cut = min(max(cut, 1), n - 1)
        right = self._new_leaf(node.keys[cut:], node.values[cut:])
        del node.keys[cut:]
        del node.values[cut:]
        node.size -= right.size - HEADER_SIZE
        return self._split_leaf(node) + self._split_leaf(right)

    def _split_index(self, node):
        n = len(node.keys)
        if n <= self._max_pairs:
            self._store.put(node)
            return [node]
        cut = n // 2
        right = self._new_index(node.keys[cut:], node.children[cut:])
        del node.keys[cut:]
        del node.children[cut:]
        return self._split_index(node) + self._split_index(right)

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
        root = self._store.get(self._root_id)
        self._set_root(self._remove_from_index(root, key))
        self._reduce_height()

    def _remove_from_index(self, node, key):
        new = self._shadow(node)
        i = bisect_right(new.keys, key) - 1
        child_id = new.children[i]
        child = self._store.get(child_id)
        if child.is_leaf:
            kid = self._shadow(child)
            j = bisect_left(kid.keys, key)
            del kid.keys[j]
            value = kid.values.pop(j)
            kid.size -= self._pair_overhead + len(value)
        else:
            kid = self._remove_from_index(child, key)
        del new.keys[i]
        del new.children[i]
        if kid.keys:
            self._add_or_merge(new, kid)
        elif kid.id != child_id:
            self._store.put(kid)
            self._decrement(kid.id)
        self._decrement(child_id)
        self._store.put(new)
        return new

    def _add_or_merge(self, parent, node):
        """Put node back into parent, merged with a sibling if both fit."""
        i = bisect_left(parent.keys, node.keys[0])
        if i > 0 and self._merge(parent, i - 1, node, True):
            pass
        elif i < len(parent.keys):
            self._merge(parent, i, node, False)
        i = bisect_left(parent.keys, node.keys[0])
        parent.keys.insert(i, node.keys[0])
        parent.children.insert(i, node.id)
        self._rc.incr(node.id)
        self._store.put(node)

    def _merge(self, parent, pos, node, sibling_is_left):
        sib_id = parent.children[pos]
        sib = self._store.get(sib_id)
        if sib.is_leaf != node.is_leaf:
            return False
        if node.is_leaf:
            if sib.size + node.size - HEADER_SIZE > self._ns:
                return False
            self._absorb(node, sib, node.values, sib.values, sibling_is_left)
            node.size += sib.size - HEADER_SIZE
            self._decrement(sib_id)
        else:
            if len(sib.keys) + len(node.keys) > self._max_pairs:
                return False
            self._absorb(node, sib, node.children, sib.children,
                         sibling_is_left)
            if self._rc.get(sib_id) <= 1:
                self._forget(sib_id)
            else:
                for child_id in sib.children:
                    self._rc.incr(child_id)
                self._rc.set(sib_id, self._rc.get(sib_id) - 1)
        del parent.keys[pos]
        del parent.children[pos]
        return True

    @staticmethod
    def _absorb(node, sib, mine, theirs, sibling_is_left):
        if sibling_is_left:
            node.keys[0:0] = sib.keys
            mine[0:0] = theirs
        else:
            node.keys.extend(sib.keys)
            mine.extend(theirs)

    def _reduce_height(self):
        store = self._store
        while True:
            root = store.get(self._root_id)
            if len(root.keys) != 1:
                return
            child_id = root.children[0]
            if self._rc.get(child_id) != 1 or store.is_leaf(child_id):
                return
            self._forget(root.id)
            self._root_id = child_id

    # --- node bookkeeping ----------------------------------------------

    def _new_leaf(self, keys, values):
        size = (HEADER_SIZE + len(keys) * self._pair_overhead
                + sum(map(len, values)))
        return LeafNode(self._forest.new_id(), keys, values, size)

    def _new_index(self, keys, children):
        return IndexNode(self._forest.new_id(), keys, children)

    def _shadow(self, node):
        """node itself if only we use it, else a fresh copy of it."""
        if self._rc.get(node.id) <= 1:
            return node
        if node.is_leaf:
            return LeafNode(self._forest.new_id(), list(node.keys),
                            list(node.values), node.size)
        for child_id in node.children:
            self._rc.incr(child_id)
        return IndexNode(self._forest.new_id(), list(node.keys),
                         list(node.children))

    def _set_root(self, new_root):
        if new_root.id != self._root_id:
            self._decrement(self._root_id)
        self._rc.set(new_root.id, 1)
        self._store.put(new_root)
        self._root_id = new_root.id

    def _forget(self, node_id):
        """Delete one node without touching its children's counts."""
        self._rc.set(node_id, 0)
        self._store.remove(node_id)

    def _decrement(self, node_id):
        """Drop one reference; delete nodes (recursively) that reach 0."""
        decrement_node(self._store, node_id)


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
