"""A least-recently-used map: an OrderedDict whose oldest end is evicted.

Callers touch entries with `move_to_end(key)` (C speed); `overflow(limit)`
yields the entries that no longer fit, oldest first, removing them.
"""

import collections


class LRUCache(collections.OrderedDict):

    def overflow(self, limit):
        while len(self) > limit:
            yield self.popitem(last=False)
