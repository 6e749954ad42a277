"""The shared chunk indexes: chunklist and chunksums (format-6.md §7.4).

chunklist maps a chunk id to its content checksum; chunksums lists, per
checksum, which client uses which chunk, and is what de-duplication and
chunk removal consult.  Both keep one tree; a change session edits a clone.
"""

from obnamlib.repo.fmt_6 import forests, keys

CHUNKLIST = 'chunklist'
CHUNKSUMS = 'chunksums'
TOPLEVELS = ('chunklist', 'chunks', 'chunksums')


class ChunkIndexes:

    def __init__(self, fs, node_size=None):
        self.fs = fs
        self.node_size = node_size
        self.list_forest = self.sums_forest = None
        self._list_tree = self._sums_tree = None
        self.writable = False
        self.changed = False
        self.pending = []      # (chunk id, checksum, client id) to add

    def _open(self, allow_writes):
        start = None if allow_writes else forests.INDEX_READER_START_NODES
        self.list_forest = forests.open_forest(
            self.fs, CHUNKLIST, keys.CHUNKLIST_KEY_SIZE, self.node_size,
            allow_writes, forests.INDEX_CACHE_NODES, start)
        self.sums_forest = forests.open_forest(
            self.fs, CHUNKSUMS, keys.CHUNKSUMS_KEY_SIZE, self.node_size,
            allow_writes, forests.INDEX_CACHE_NODES, start)

    @property
    def list_tree(self):
        return self._trees()[0]

    @property
    def sums_tree(self):
        return self._trees()[1]

    def _trees(self):
        """The two trees, their forests read at the first need: a change
        session that looks nothing up (a backup of unchanged files) never
        reads them, nor waits for their toplevels' keys."""
        if self.list_forest is None:
            self._open(self.writable)
            tree_of = forests.start_changes if self.writable \
                else forests.newest_tree
            self._list_tree = tree_of(self.list_forest)
            self._sums_tree = tree_of(self.sums_forest)
        return self._list_tree, self._sums_tree

    def _readers(self):
        self._flush()
        return self._trees()

    def start_changes(self):
        """Begin a change session (the caller holds the indexes' lock);
        the forests are read when first used."""
        self.discard()
        self.writable = True
        self.changed = False

    def commit(self):
        """chunklist first, then chunksums (format-6.md §10.2); nothing is
        written when nothing changed."""
        self._flush()
        if self.changed:
            self._trees()
            for forest in (self.list_forest, self.sums_forest):
                forests.keep_only_newest_tree(forest)
                forest.commit()
        self.discard()

    def discard(self):
        self.pending = []
        self.list_forest = self.sums_forest = None
        self._list_tree = self._sums_tree = None
        self.writable = False

    # --- queries -------------------------------------------------------

    def find(self, checksum):
        """Chunk ids recorded for a content checksum, in key order, unique."""
        _, sums = self._readers()
        if sums is None:
            return []
        found = []
        for key, _ in sums.lookup_range(*keys.chunksums_range(checksum)):
            chunk_id = keys.parse_chunksums_key(key)[1]
            if not found or found[-1] != chunk_id:
                found.append(chunk_id)
        return found

    def checksum(self, chunk_id):
        """The chunklist checksum of a chunk, or None (normal: see §7.4)."""
        chunklist, _ = self._readers()
        if chunklist is None:
            return None
        try:
            return chunklist.lookup(keys.chunklist_key(chunk_id))
        except KeyError:
            return None

    def users(self, checksum, chunk_id):
        """Client ids that use the chunk according to chunksums."""
        _, sums = self._readers()
        if sums is None:
            return []
        return [keys.parse_chunksums_key(key)[2] for key, _ in
                sums.lookup_range(*keys.chunksums_range(checksum, chunk_id))]

    def all_chunklist(self):
        """[(chunk id, checksum)] of the whole chunklist (fsck, dumps)."""
        chunklist, _ = self._readers()
        if chunklist is None:
            return []
        lo, hi = b'\x00' * 8, b'\xff' * 8
        return [(keys.unpack_u64(k), v) for k, v in chunklist.lookup_range(lo, hi)]

    def all_chunksums(self):
        """[(checksum, chunk id, client id)] of the whole chunksums."""
        _, sums = self._readers()
        if sums is None:
            return []
        lo, hi = b'\x00' * 48, b'\xff' * 48
        return [keys.parse_chunksums_key(k) for k, _ in sums.lookup_range(lo, hi)]

    # --- changes (session started) ---------------------------------------

    def add(self, chunk_id, checksum, client_id):
        """Queue an entry; queued entries go in sorted at the next read
        or commit, so each leaf is visited once however big the batch."""
        self.changed = True
        self.pending.append((chunk_id, checksum, client_id))

    def _flush(self):
        pending = self.pending
        if not pending:
            return
        self.pending = []
        list_tree, sums_tree = self._trees()
        list_tree.insert_sorted(
            (keys.chunklist_key(chunk_id), checksum)
            for chunk_id, checksum, _ in sorted(pending))
        sums_tree.insert_sorted(
            (keys.chunksums_key(checksum, chunk_id, client_id), b'')
            for checksum, chunk_id, client_id in sorted(
                (c, i, u) for i, c, u in pending))

    def remove_use(self, chunk_id, checksum, client_id):
        """Drop the client's use; drop the chunklist entry when nobody is
        left.  Returns True if no client uses the chunk any more."""
        self._flush()
        key = keys.chunksums_key(checksum, chunk_id, client_id)
        self.changed = True
        try:
            self.sums_tree.lookup(key)
        except KeyError:
            pass
        else:
            self.sums_tree.remove(key)
        if self.sums_tree.range_is_empty(
                *keys.chunksums_range(checksum, chunk_id)):
            list_key = keys.chunklist_key(chunk_id)
            try:
                self.list_tree.lookup(list_key)
            except KeyError:
                pass
            else:
                self.list_tree.remove(list_key)
            return True
        return False
