"""Range queries over one tree: list, iterate, count, test for emptiness.

Stored node ids are untrusted: a walk keeps the ids it met (a node met
twice in one tree is a loop) and turns a too-deep recursion into the same
error, `TreeLoops`.
"""

from bisect import bisect_left, bisect_right

from . import errors
from .nodes import MAX_DEPTH


class RangeReader:
    """Range queries of one tree (whose root it is given each time)."""

    def __init__(self, store, dirname, key_size, checked_key):
        """checked_key(key): key as bytes, or the error a bad key is."""
        self._store = store
        self._dirname = dirname
        self._ks = key_size
        self._checked_key = checked_key

    def _start(self, root_id, lo, hi):
        """(node, lo, hi): the deepest node whose subtree holds all of
        lo..hi (None: nothing in range), and the keys checked.

        Descending while the range stays within one child makes the
        common small range as cheap as a lookup.
        """
        if type(lo) is not bytes or len(lo) != self._ks:
            lo = self._checked_key(lo)
        if type(hi) is not bytes or len(hi) != self._ks:
            hi = self._checked_key(hi)
        if lo > hi:
            return None, lo, hi
        store = self._store
        node = store.get(root_id)
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

    # Each query below is one call into this class: a range lookup is
    # often as small as a key lookup, and every call costs.

    def pairs(self, root_id, minkey, maxkey):
        """Sorted list of (key, value) with minkey <= key <= maxkey."""
        node, lo, hi = self._start(root_id, minkey, maxkey)
        result = []
        if node is not None:
            try:
                self._walk_range(node, lo, hi, result.extend, set())
            except RecursionError:
                raise errors.TreeLoops(self._dirname, node.id) from None
        return result

    def iterate(self, tree, minkey, maxkey):
        """The same pairs, lazily, from tree's root as it is at the first
        step; one generator, not one here and one in the tree, as every
        pair passes through each."""
        node, lo, hi = self._start(tree.root_id, minkey, maxkey)
        if node is None:
            return
        try:
            yield from self._iter(node, lo, hi, set())
        except RecursionError:
            raise errors.TreeLoops(self._dirname, node.id) from None

    def count(self, root_id, minkey, maxkey):
        node, lo, hi = self._start(root_id, minkey, maxkey)
        if node is None:
            return 0
        try:
            return self._count(node, lo, hi, set())
        except RecursionError:
            raise errors.TreeLoops(self._dirname, node.id) from None

    def any(self, root_id, minkey, maxkey):
        node, lo, hi = self._start(root_id, minkey, maxkey)
        if node is None:
            return False
        try:
            return self._any(node, lo, hi, set())
        except RecursionError:
            raise errors.TreeLoops(self._dirname, node.id) from None

    def _met(self, node, seen):
        """Note a node the walk entered; meeting one twice is a loop."""
        if node.id in seen:
            raise errors.TreeLoops(self._dirname, node.id)
        seen.add(node.id)

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
