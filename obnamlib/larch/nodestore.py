"""Node storage: an LRU cache of decoded nodes over the journal.

Changed nodes stay in the cache marked dirty; when the cache overflows, a
dirty node is written into the journal (new/) before it is dropped, so
memory stays bounded. Everything still dirty is written at commit.
"""

from . import codec, errors
from .idpath import node_path, parse_node_name
from .lru import LRUCache
from .refcounts import RefcountStore

MIN_CACHE = 8


class NodeStore:

    def __init__(self, journal, dirname, key_size, cache_size,
                 committed_last_id):
        self.journal = journal
        self.dirname = dirname
        self.key_size = key_size
        self.cache_size = max(MIN_CACHE, cache_size)
        self.cache = LRUCache()
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

    def load(self, node_id):
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

    def flush(self):
        """Write all dirty nodes and refcount groups into the journal."""
        self.refcounts.save()
        for node_id in sorted(self.dirty):
            self.journal.write(node_path(node_id),
                               codec.encode(self.cache[node_id]))
        self.dirty = set()
