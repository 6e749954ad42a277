"""Chunk files and the chunk indexes kept in step during one session.

A new chunk is findable by its checksum at once (this session's
`unindexed`), before it is put into the indexes.  Chunks a client re-uses
from elsewhere get their own chunksums entry once the client commits
(format-6.md §7.4).  Freed chunk files are deleted only after the index
commit, so a crash never leaves an index entry without its file.
"""

from obnamlib import errors
from obnamlib.repo.fmt_6 import keys


class ChunkIndexing:

    def __init__(self, chunks, indexes, clients):
        """clients: the ClientSessions (client ids, locked forests)."""
        self.chunks = chunks
        self.indexes = indexes
        self.clients = clients
        self.checksums = {}           # chunk id -> checksum, this session
        self.unindexed = {}           # checksum -> [chunk ids] not yet indexed
        self.pending_removals = []
        self.reused = {}              # client name -> chunk ids it re-used
        self.reused_committed = {}    # the same, for committed generations

    def put(self, data, md5_digest=None):
        """md5_digest: the caller's MD5 of data, so it is not hashed twice."""
        chunk_id = self.chunks.put(data)
        if md5_digest is None:
            checksum = keys.content_checksum(data)
        else:
            checksum = keys.checksum_of_digest(md5_digest)
        self.checksums[chunk_id] = checksum
        self.unindexed.setdefault(checksum, []).append(chunk_id)
        return chunk_id

    def find(self, checksum):
        found = self.indexes.find(checksum)
        for chunk_id in self.unindexed.get(checksum, []):
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
                         self.clients.client_id(client_name))
        ids = self.unindexed.get(checksum)
        if ids and chunk_id in ids:
            ids.remove(chunk_id)
            if not ids:
                del self.unindexed[checksum]
        self.checksums.pop(chunk_id, None)

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

    def discard(self):
        self.indexes.discard()
        self.pending_removals = []
