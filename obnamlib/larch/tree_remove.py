"""Removing from a tree the general way: shadow the path, and merge a
node that lost a key with a sibling when both fit in one (format-6.md
section 6).

Tree.remove takes a key out of an unshared, well filled leaf itself (its
fast path); everything else comes here.
"""

from bisect import bisect_left, bisect_right

from .node_editor import TreeChange
from .nodes import HEADER_SIZE


class Remover(TreeChange):

    def remove(self, root_id, key):
        """The new root of the tree rooted at root_id without key (which
        is in it)."""
        return self._remove_from_index(self._store.get(root_id), key)

    def _remove_from_index(self, node, key):
        new = self._edit.shadow(node)
        i = bisect_right(new.keys, key) - 1
        child_id = new.children[i]
        child = self._store.get(child_id)
        if child.is_leaf:
            kid = self._edit.shadow(child)
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
            self._edit.decrement(kid.id)
        self._edit.decrement(child_id)
        self._store.put(new)
        return new

    def _add_or_merge(self, parent, node):
        """Put node back into parent, merged with a sibling if both fit."""
        i = bisect_left(parent.keys, node.keys[0])
        merged = i > 0 and self._merge(parent, i - 1, node, True)
        if not merged and i < len(parent.keys):
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
            _absorb(node, sib, node.values, sib.values, sibling_is_left)
            node.size += sib.size - HEADER_SIZE
            self._edit.decrement(sib_id)
        else:
            if len(sib.keys) + len(node.keys) > self._max_pairs:
                return False
            _absorb(node, sib, node.children, sib.children, sibling_is_left)
            if self._rc.get(sib_id) <= 1:
                self._edit.forget(sib_id)
            else:
                for child_id in sib.children:
                    self._rc.incr(child_id)
                self._rc.set(sib_id, self._rc.get(sib_id) - 1)
        del parent.keys[pos]
        del parent.children[pos]
        return True


def _absorb(node, sib, mine, theirs, sibling_is_left):
    """Move sib's keys, and its values or children (theirs) into node's
    (mine), to the side where the sibling stood."""
    if sibling_is_left:
        node.keys[0:0] = sib.keys
        mine[0:0] = theirs
    else:
        node.keys.extend(sib.keys)
        mine.extend(theirs)
