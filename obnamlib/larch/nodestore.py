"""Node storage: an LRU cache of decoded nodes over the journal.

Changed nodes stay in the cache marked dirty; when the cache overflows, a
dirty node is written into the journal (new/) before it is dropped, so
memory stays bounded. Everything still dirty is written at commit.

A cache may start small and grow as the reader shows it needs more
(grow_on_demand): nodes read again after the cache dropped them say the
cache is too small for how this tree is read.  A walk in about key order
rarely does that and keeps few nodes; a reader whose lookups scatter over
the tree soon has the whole cache.
"""

from . import codec, errors
from .idpath import node_path, parse_node_name
from .lru import LRUCache
from .refcounts import RefcountStore

MIN_CACHE = 8
# A growing cache doubles when, since it last grew, at least this many
# reads and a quarter of all reads were of nodes it had dropped.
REREADS_TO_GROW = 8


class NodeStore:

    def __init__(self, journal, dirname, key_size, cache_size,
                 committed_last_id):
        self.journal = journal
        self.dirname = dirname
        self.key_size = key_size
        self.cache_size = max(MIN_CACHE, cache_size)
        self.cache_limit = self.cache_size  # what grow_on_demand grows to
        self.cache = LRUCache()
        self.dropped = None     # ids read on demand, then dropped (bounded)
        self.prefilled = set()  # cached by remember, not read on demand
        self.reads = 0          # since the cache last grew: nodes read,
        self.rereads = 0        # ... and of those, ones it had dropped
        self.dirty = set()
        self.refcounts = RefcountStore(journal, dirname)
        self.committed_last_id = committed_last_id

    # --- reading -------------------------------------------------------

    def get(self, node_id):
        node = self.cache.get(node_id)
        if node is None:
            return self.load(node_id)
        self.cache.move_to_end(node_id)
        return node

    def read_raw(self, node_id):
        try:
            return self.journal.read(node_path(node_id))
        except FileNotFoundError:
            raise errors.NodeMissing(self.dirname, node_id)

    def grow_on_demand(self, start):
        """Keep `start` nodes at first; double that whenever nodes the
        cache dropped are read again often (REREADS_TO_GROW), up to the
        cache size given."""
        self.cache_size = max(MIN_CACHE, min(start, self.cache_limit))
        if self.cache_size < self.cache_limit:
            self.dropped = LRUCache()

    def load(self, node_id):
        node = self.cache.get(node_id)
        if node is not None:
            return node
        if self.dropped is not None:
            self._count_read(node_id)
        data = self.read_raw(node_id)
        node = codec.decode(data, self.key_size, self.dirname, node_id)
        self.cache[node_id] = node
        self._evict()
        return node

    def peek(self, node_id):
        """get for a scan that reads each node once: a node it reads is
        cached like one remember()ed, and does not make the cache grow
        when a later reader reads it again."""
        node = self.cache.get(node_id)
        if node is not None:
            return node
        data = self.read_raw(node_id)
        node = codec.decode(data, self.key_size, self.dirname, node_id)
        self.remember(node_id, node)
        return node

    def remember(self, node_id, node):
        """Cache a clean node decoded elsewhere (fsck reads nodes itself),
        so later lookups need not read it again."""
        if node_id not in self.cache:
            self.cache[node_id] = node
            if self.dropped is not None:
                self.prefilled.add(node_id)
            self._evict()

    def is_leaf(self, node_id):
        """Whether a node is a leaf, without decoding it if not cached."""
        node = self.cache.get(node_id)
        if node is not None:
            return node.is_leaf
        data = self.read_raw(node_id)
        kind = codec.peek_kind(data)
        if kind is None:
            codec.decode(data, self.key_size, self.dirname, node_id)
        return kind == 'leaf'

    def node_ids_on_disk(self):
        """Ids of all node files (as the journal shows them), sorted."""
        ids = []
        stack = ['nodes']
        while stack:
            rel = stack.pop()
            for name in self.journal.listdir(rel):
                child = rel + '/' + name
                if rel.count('/') < 3:
                    stack.append(child)
                else:
                    node_id = parse_node_name(name)
                    if node_id is not None:
                        ids.append(node_id)
        return sorted(ids)

    # --- writing -------------------------------------------------------

    def put(self, node):
        """Record that a node was created or changed."""
        self.cache[node.id] = node
        self.cache.move_to_end(node.id)
        self.dirty.add(node.id)
        self._evict()

    def remove(self, node_id):
        """Forget a node whose refcount reached zero (or was never linked)."""
        self.cache.pop(node_id, None)
        self.dirty.discard(node_id)
        self.journal.remove(node_path(node_id),
                            node_id <= self.committed_last_id)

    def _evict(self):
        if len(self.cache) > self.cache_size:
            for node_id, node in self.cache.overflow(self.cache_size):
                if node_id in self.dirty:
                    self.journal.write(node_path(node_id), codec.encode(node))
                    self.dirty.discard(node_id)
                if self.dropped is not None:
                    self._note_dropped(node_id)

    def _note_dropped(self, node_id):
        """Remember (a bounded number of) ids dropped after being read on
        demand; a prefilled node was not asked for, and says nothing."""
        if node_id in self.prefilled:
            self.prefilled.discard(node_id)
            return
        self.dropped[node_id] = True
        for _ in self.dropped.overflow(self.cache_limit):
            pass

    def _count_read(self, node_id):
        self.reads += 1
        if self.dropped.pop(node_id, None) is None:
            return
        self.rereads += 1
        if self.rereads >= max(REREADS_TO_GROW, self.reads // 4):
            self.cache_size = min(2 * self.cache_size, self.cache_limit)
            self.reads = self.rereads = 0
            if self.cache_size == self.cache_limit:
                self.dropped = None
                self.prefilled = set()

    def flush(self):
        """Write all dirty nodes and refcount groups into the journal."""
        self.refcounts.save()
        for node_id in sorted(self.dirty):
            self.journal.write(node_path(node_id),
                               codec.encode(self.cache[node_id]))
        self.dirty = set()
