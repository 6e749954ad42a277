"""Chunk files and the chunk indexes kept in step during one session.

A new chunk is findable by its checksum at once (this session's
`unindexed`), before it is put into the indexes.  Chunks a client re-uses
from elsewhere get their own chunksums entry once the client commits
(format-6.md §7.4).  Freed chunk files are deleted only after the index
commit, so a crash never leaves an index entry without its file.
"""

from obnamlib import errors
from obnamlib.repo.fmt_6 import forget_marker, keys, leftover_chunks
from obnamlib.repo.fmt_6.chunk_journal import ChunkJournal
from obnamlib.repo.fmt_6.client_forest import ClientForest


class ChunkIndexing:

    def __init__(self, chunks, indexes, clients):
        """clients: the ClientSessions (client ids, locked forests)."""
        self.chunks = chunks
        self.indexes = indexes
        self.clients = clients
        self.checksums = {}           # chunk id -> checksum, this session
        self.unindexed = {}           # checksum -> id (or ids) not yet indexed
        self.pending_removals = []
        self.reused = {}              # client name -> chunk ids it re-used
        self.reused_committed = {}    # the same, for committed generations
        self.journals = {}            # client name -> its ChunkJournal
        self.journaling = None        # the client whose lock put() uses
        self.forgets_done = set()     # client ids: markers to remove
        self.indexing_as = None       # (client name, list read, its id)

    def put(self, data, md5_digest=None):
        """md5_digest: the caller's MD5 of data, so it is not hashed twice."""
        self.chunks.journal = self._put_journal()
        chunk_id = self.chunks.put(data)
        if md5_digest is None:
            checksum = keys.content_checksum(data)
        else:
            checksum = keys.checksum_of_digest(md5_digest)
        self._add_unindexed(chunk_id, checksum)
        return chunk_id

    def _add_unindexed(self, chunk_id, checksum):
        """Remember a chunk of this session until it is indexed.  A
        checksum's ids are kept as the id itself, or a tuple where there
        are several: a first backup adds an entry per new chunk, and a
        one-item list in each cost 64 bytes more and was one more object
        for the garbage collector to visit."""
        self.checksums[chunk_id] = checksum
        self._set_unindexed(
            checksum, _ids(self.unindexed.get(checksum, ())) + (chunk_id,))

    def _set_unindexed(self, checksum, ids):
        if not ids:
            del self.unindexed[checksum]
        else:
            self.unindexed[checksum] = ids[0] if len(ids) == 1 else ids

    def find(self, checksum):
        found = self.indexes.find(checksum)
        for chunk_id in _ids(self.unindexed.get(checksum, ())):
            if chunk_id not in found:
                found.append(chunk_id)
        return found

    def require_lock(self):
        if not self.indexes.writable:
            raise errors.RepositoryChunkIndexesNotLocked()

    def index(self, chunk_id, checksum, client_name):
        # A chunk is indexed only once its file is written: a failed
        # create surfaces while the caller still knows its new chunks.
        self.chunks.flush()
        self.indexes.add(chunk_id, checksum,
                         self._indexing_id(client_name))
        self.forget_unindexed(chunk_id)

    def _indexing_id(self, client_name):
        """The client's id, looked up once per client list read while
        the list is not being changed (a commit indexes each of a run's
        new chunks: a B-tree lookup each was 3% of a first backup)."""
        client_list = self.clients.client_list
        known = self.indexing_as
        if known is not None and known[0] == client_name and \
                known[1] is client_list.tree and not client_list.writable:
            return known[2]
        client_id = self.clients.client_id(client_name)
        self.indexing_as = (client_name, client_list.tree, client_id)
        return client_id

    def forget_unindexed(self, chunk_id):
        """A chunk of this session that was indexed or is being removed
        (found by the checksum this session recorded for it: checksums and
        unindexed always hold the same chunk ids)."""
        checksum = self.checksums.pop(chunk_id, None)
        if checksum is not None:
            self._set_unindexed(checksum, tuple(
                i for i in _ids(self.unindexed[checksum]) if i != chunk_id))

    def checksum_of(self, chunk_id):
        """Checksum from this session, the chunklist, or the content."""
        checksum = self.checksums.get(chunk_id) or self.indexes.checksum(chunk_id)
        if checksum is None:
            checksum = keys.content_checksum(self.chunks.get(chunk_id))
        return checksum

    def remove_use(self, chunk_id, client_name):
        """Drop the client's use of the chunk; whether none is left."""
        self.require_lock()
        return self.indexes.remove_use(chunk_id, self.checksum_of(chunk_id),
                                       self.clients.client_id(client_name))

    def remove_unused(self, client_name, candidate_chunk_ids):
        """Of the candidates, those no generation of the client uses and
        no other client uses either; their files go at commit()."""
        self.require_lock()
        forest = self.clients.writable(client_name)
        gens = [forest.generation(n)
                for n in reversed(forest.generation_ids())]   # likeliest first
        removed = []
        for chunk_id in sorted(set(candidate_chunk_ids)):
            if any(gen.uses_chunk(chunk_id) for gen in gens):
                continue
            try:
                unused = self.remove_use(chunk_id, client_name)
            except errors.RepositoryChunkDoesNotExist:
                continue
            if unused:
                removed.append(chunk_id)
        if removed:
            journal = self.journal(client_name)
            journal.note_newest(forest.last_id())
            journal.note_removals(removed)
        self.pending_removals.extend(removed)
        self.reused_committed.get(client_name, set()).difference_update(
            removed)
        return removed

    # --- chunks re-used by a client ------------------------------------

    def note_reuse(self, client_name, chunk_ids):
        """Remember chunks this client uses that it did not store here: each
        user of a chunk needs its own chunksums entry, or another client's
        forget would delete the chunk (format-6.md §7.4)."""
        reused = None
        for chunk_id in chunk_ids:
            if not self.chunks.wrote(chunk_id):
                if reused is None:
                    reused = self.reused.setdefault(client_name, set())
                reused.add(chunk_id)

    def client_committed(self, client_name):
        self.chunks.committed()
        reused = self.reused.pop(client_name, set())
        self.reused_committed.setdefault(client_name, set()).update(reused)
        if self.indexes.writable:
            self.index_reused_chunks()

    def client_unlocked(self, client_name):
        self.reused.pop(client_name, None)

    def index_reused_chunks(self):
        """Add a chunksums entry for each re-used chunk that lacks one for
        its new user."""
        reused, self.reused_committed = self.reused_committed, {}
        for client_name, chunk_ids in reused.items():
            client_id = self.clients.client_list.find(client_name)
            if client_id is None:
                continue
            for chunk_id in sorted(chunk_ids):
                checksum = self.indexes.checksum(chunk_id)
                if checksum is None:
                    try:
                        checksum = self.checksum_of(chunk_id)
                    except errors.RepositoryChunkDoesNotExist:
                        continue
                if client_id not in self.indexes.users(checksum, chunk_id):
                    self.indexes.add(chunk_id, checksum, client_id)
                self.forget_unindexed(chunk_id)

    # --- what a killed run of a client left (leftover_chunks) ------------

    def journal(self, client_name):
        """The client's ChunkJournal (read at its first use)."""
        journal = self.journals.get(client_name)
        if journal is None:
            client_id = self.clients.client_id(client_name)
            journal = ChunkJournal(self.chunks.fs, str(client_id))
            self.journals[client_name] = journal
        return journal

    def client_locked(self, client_name):
        """The client's new chunks go into its journal from now on."""
        forest = self.clients.open(client_name)
        self.journal(client_name).note_newest(forest.last_id())
        self.journaling = client_name

    def _put_journal(self):
        """The journal of the client locked last, while it is locked."""
        name = self.journaling
        if name is None:
            return None
        forest = self.clients.forests.get(name)    # per chunk: no list
        if forest is None or not forest.writable:
            return None
        return self.journals[name]

    def _leftovers(self, client_name):
        forest = self.clients.open(client_name)
        if not forest.writable:
            raise errors.RepositoryClientNotLocked(client_name=client_name)
        found = self._find_leftovers(client_name, forest)
        # A newer generation uses these: they get their index entries.
        self.reused_committed.setdefault(client_name, set()).update(
            found.used)
        return found

    def _find_leftovers(self, client_name, forest):
        return leftover_chunks.find(
            self.chunks, self.indexes, self.journal(client_name), forest,
            lambda chunk_id: self._used_by_another(client_name, chunk_id))

    def _used_by_another(self, client_name, chunk_id):
        """Read from disk, outside the sessions (a read here must not
        change which client a plain generation number means)."""
        for other in self.clients.client_list.names():
            if other == client_name:
                continue
            forest = ClientForest(self.clients.fs,
                                  self.clients.client_id(other),
                                  self.clients.node_size)
            if any(forest.generation(number).uses_chunk(chunk_id)
                   for number in forest.generation_ids()):
                return True
        return False

    def reuse_leftovers(self, client_name):
        """Make the unused leftovers findable by content in this session,
        as if this run had written them; how many."""
        reusable = 0
        for chunk_id, data in leftover_chunks.contents(
                self.chunks, self._leftovers(client_name).unused):
            checksum = keys.content_checksum(data)
            self._add_unindexed(chunk_id, checksum)
            reusable += 1
        return reusable

    def remove_leftovers(self, client_name):
        """Remove the leftovers that nothing uses now, nor this session
        (it is about to commit for the last time; the indexes are locked);
        the journal forgets them at the next index commit.  Returns how
        many."""
        self.require_lock()
        found = self._leftovers(client_name)
        in_use = self.reused.get(client_name, set()) | \
            self.reused_committed.get(client_name, set())
        removed = 0
        for chunk_id in found.unused:
            if chunk_id in in_use:
                continue
            self.forget_unindexed(chunk_id)
            if self.indexes.checksum(chunk_id) is not None:
                self.remove_use(chunk_id, client_name)  # chunklist only
            self.chunks.remove(chunk_id)
            removed += 1
        self.journal(client_name).settle_inherited()
        return removed

    def begin_forget(self, client_name):
        """Place the client's forget marker; if an earlier forget's was
        there, the chunk ids indexed for the client that no generation of
        it uses (else [])."""
        self.require_lock()
        client_id = self.clients.client_id(client_name)
        if not forget_marker.place(self.chunks.fs, client_id):
            return []
        return self._indexed_unused(client_id,
                                    self.clients.writable(client_name))

    def _indexed_unused(self, client_id, forest):
        """The chunk ids indexed for the client that no generation of it
        uses, sorted."""
        used = set()
        for number in forest.generation_ids():
            used |= forest.generation(number).chunk_ids_in_use()
        indexed = {chunk_id for _, chunk_id, user
                   in self.indexes.all_chunksums() if user == client_id}
        return sorted(indexed - used)

    def forget_leftovers(self, client_name):
        """Changing nothing: what a forget of the client would find before
        it removes a generation, as (begin_forget's answer, the unused
        leftovers remove_leftovers would delete)."""
        client_id = self.clients.client_id(client_name)
        forest = self.clients.open(client_name)
        stale = []
        if forget_marker.is_placed(self.chunks.fs, client_id):
            stale = self._indexed_unused(client_id, forest)
        return stale, self._find_leftovers(client_name, forest).unused

    def index_users(self, chunk_id):
        """The client ids the chunksums entries of the chunk name (found
        by the checksum remove_use would use), or None if the chunk has
        neither a chunklist entry nor a file."""
        try:
            checksum = self.checksum_of(chunk_id)
        except errors.RepositoryChunkDoesNotExist:
            return None
        return self.indexes.users(checksum, chunk_id)

    def finish_forget(self, client_name):
        self.forgets_done.add(self.clients.client_id(client_name))

    def _journals_committed(self):
        unindexed = set(self.checksums)
        for journal in self.journals.values():
            journal.committed(unindexed)

    # --- the session ---------------------------------------------------

    def commit(self):
        """Commit the indexes, then delete the files they no longer name."""
        self.require_lock()
        self.index_reused_chunks()
        self.chunks.flush()
        self.indexes.commit()
        self.chunks.committed()
        for chunk_id in self.pending_removals:
            self.chunks.remove(chunk_id)
        self.pending_removals = []
        self._journals_committed()
        for client_id in sorted(self.forgets_done):
            forget_marker.take_away(self.chunks.fs, client_id)
        self.forgets_done = set()
        self.indexing_as = None

    def discard(self):
        self.indexing_as = None
        self.indexes.discard()
        self.pending_removals = []
        self.forgets_done = set()


def _ids(value):
    """The chunk ids of one `unindexed` entry (an id, or a tuple)."""
    return (value,) if isinstance(value, int) else value
