"""Range queries over one tree: list, iterate, count, test for emptiness.

Stored node ids are untrusted: a walk keeps the ids it met (a node met
twice in one tree is a loop) and turns a too-deep recursion into the same
error, `TreeLoops`.
"""

from bisect import bisect_left, bisect_right

from . import errors
from .nodes import MAX_DEPTH


class RangeReader:
    """The walks below take keys already checked (bytes of the key size)."""

    def __init__(self, store, dirname):
        self._store = store
        self._dirname = dirname

    def first_node(self, root_id, lo, hi):
        """The deepest node whose subtree holds all of lo..hi, or None.

        Descending while the range stays within one child makes the
        common small range as cheap as a lookup. None: nothing in range.
        """
        if lo > hi:
            return None
        store = self._store
        node = store.get(root_id)
        for _ in range(MAX_DEPTH + 1):
            if node.is_leaf:
                break
            keys = node.keys
            last = bisect_right(keys, hi) - 1
            if last < 0:
                return None
            first = bisect_right(keys, lo) - 1
            if first != last and not (first < 0 and last == 0):
                break
            node = store.get(node.children[last])
        else:
            raise errors.TreeLoops(self._dirname, node.id)
        return node

    def pairs(self, node, lo, hi):
        """Sorted list of (key, value) below node with lo <= key <= hi."""
        result = []
        self._bounded(self._walk_range, node, lo, hi, result.extend, set())
        return result

    def iterate(self, locate, minkey, maxkey):
        """The same pairs, lazily.  locate(minkey, maxkey) -> (node, lo,
        hi) runs at the first step (the tree checks the keys and finds the
        node where the range starts); one generator, not one here and one
        in the tree, as every pair passes through each."""
        node, lo, hi = locate(minkey, maxkey)
        if node is None:
            return
        try:
            yield from self._iter(node, lo, hi, set())
        except RecursionError:
            raise errors.TreeLoops(self._dirname, node.id) from None

    def count(self, node, lo, hi):
        return self._bounded(self._count, node, lo, hi, set())

    def any(self, node, lo, hi):
        return self._bounded(self._any, node, lo, hi, set())

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
