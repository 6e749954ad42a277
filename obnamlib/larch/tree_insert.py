"""Inserting into a tree the general way: shadow the path, split what
overflows, grow new levels above the root (format-6.md section 6).

Tree.insert changes an unshared leaf in place itself (its fast path);
everything else comes here.
"""

from bisect import bisect_left, bisect_right

from .node_editor import TreeChange
from .nodes import HEADER_SIZE


class Inserter(TreeChange):

    def insert(self, root_id, key, value):
        """The new root of the tree rooted at root_id with key set."""
        store = self._store
        root = store.get(root_id)
        if not root.keys:
            leaf = self._edit.new_leaf([key], [value])
            store.put(leaf)
            new_root = self._edit.shadow(root)
            new_root.keys.append(key)
            new_root.children.append(leaf.id)
            self._rc.incr(leaf.id)
            return new_root
        return self._grow(self._insert_into_index(root, key, value))

    def _grow(self, kids):
        """One node that holds all of kids, adding levels as needed."""
        while len(kids) > 1:
            level = []
            for i in range(0, len(kids), self._max_pairs):
                group = kids[i:i + self._max_pairs]
                parent = self._edit.new_index([k.keys[0] for k in group],
                                              [k.id for k in group])
                for k in group:
                    self._rc.incr(k.id)
                self._store.put(parent)
                level.append(parent)
            kids = level
        return kids[0]

    def _insert_into_index(self, node, key, value):
        new = self._edit.shadow(node)
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
            self._edit.decrement(child_id)
        return self._split_index(new)

    def _insert_into_leaf(self, leaf, key, value):
        new = self._edit.shadow(leaf)
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
        right = self._edit.new_leaf(node.keys[cut:], node.values[cut:])
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
        right = self._edit.new_index(node.keys[cut:], node.children[cut:])
        del node.keys[cut:]
        del node.children[cut:]
        return self._split_index(node) + self._split_index(right)
