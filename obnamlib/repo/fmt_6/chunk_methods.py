"""The Repository API's chunk methods, in format 6.

A part of RepositoryFormat6 (which see), kept apart because it is one
concern: chunk files and the chunk indexes.  It uses the repository's
`chunks` (ChunkStore), `indexes` (ChunkIndexes), `chunk_indexing`
(ChunkIndexing), `locks` and `fs`.
"""

from obnamlib.repo import interface as repo_interface
from obnamlib.repo.fmt_6 import keys
from obnamlib.repo.fmt_6.chunk_indexes import TOPLEVELS as CHUNK_DIRS
from obnamlib.repo.fmt_6.damage import reporting_damage


_PREFETCHING = frozenset({repo_interface.PREFETCHES_CHUNKS})


class ChunkMethods:

    @property
    def capabilities(self):
        """PREFETCHES_CHUNKS where the chunk store's prefetch does
        something (not for a plain repository in memory, tmpfs)."""
        if self.chunks.prefetches:
            return _PREFETCHING
        return frozenset()

    @reporting_damage
    def put_chunk_content(self, data, md5_digest=None):
        """md5_digest: the caller's MD5 of data, so it is not hashed twice.
        The chunk file may still be being written: the commits wait."""
        return self.chunk_indexing.put(data, md5_digest)

    @reporting_damage
    def get_chunk_content(self, chunk_id):
        return self.chunks.get(chunk_id)

    @reporting_damage
    def expect_chunk_reads(self, in_line=False):
        """An encrypted local repository starts its helper process, unless
        in_line."""
        self.fs.expect_reads(in_line)

    @reporting_damage
    def prefetch_chunks(self, chunk_ids):
        """Read the chunk files together when the storage can (SFTP)."""
        self.chunks.prefetch(chunk_ids)

    @reporting_damage
    def has_chunk(self, chunk_id):
        return self.chunks.has(chunk_id)

    @reporting_damage
    def find_chunk_ids_by_content(self, data):
        return self.chunk_indexing.find(keys.content_checksum(data))

    @reporting_damage
    def find_chunk_ids_by_md5(self, md5_digest):
        return self.chunk_indexing.find(keys.checksum_of_digest(md5_digest))

    @reporting_damage
    def put_chunk_md5_into_indexes(self, chunk_id, md5_digest, client_name):
        self.chunk_indexing.require_lock()
        self.chunk_indexing.index(
            chunk_id, keys.checksum_of_digest(md5_digest), client_name)

    @reporting_damage
    def lock_chunk_indexes(self):
        self.locks.lock(CHUNK_DIRS)
        try:
            self.indexes.start_changes()
        except BaseException:
            self.locks.unlock(CHUNK_DIRS)
            raise

    @reporting_damage
    def commit_chunk_indexes(self):
        self.chunk_indexing.commit()
        self.locks.unlock(CHUNK_DIRS)

    @reporting_damage
    def unlock_chunk_indexes(self):
        self.chunk_indexing.discard()
        self.locks.unlock(CHUNK_DIRS)

    @reporting_damage
    def put_chunk_into_indexes(self, chunk_id, data, client_name):
        """data may be None: the checksum then comes from this session,
        the chunklist, or the chunk's content."""
        indexing = self.chunk_indexing
        indexing.require_lock()
        if data is not None:
            checksum = keys.content_checksum(data)
        else:
            checksum = indexing.checksum_of(chunk_id)
        indexing.index(chunk_id, checksum, client_name)

    @reporting_damage
    def remove_chunk_from_indexes(self, chunk_id, client_name):
        return self.chunk_indexing.remove_use(chunk_id, client_name)

    @reporting_damage
    def get_chunk_ids(self):
        return self.chunks.ids()

    @reporting_damage
    def get_chunk_sizes(self, chunk_ids=None):
        """One listing with sizes per chunk directory (together over
        SFTP, chunk_store.SIZE_LISTINGS at a time)."""
        return self.chunks.sizes(
            None if chunk_ids is None else list(chunk_ids))

    @reporting_damage
    def get_chunk_index_users(self, chunk_ids):
        names = self.client_list.names()
        by_id = {self.client_list.find(name): name for name in names}
        users = {}
        for chunk_id in chunk_ids:
            ids = self.chunk_indexing.index_users(chunk_id)
            if ids is not None:
                users[chunk_id] = {by_id.get(i) for i in ids}
        return users

    @reporting_damage
    def find_forget_leftovers(self, client_name):
        return self.chunk_indexing.forget_leftovers(client_name)

    @reporting_damage
    def remove_chunk(self, chunk_id):
        """Also one this session put and did not index: it is no longer
        found by content."""
        self.chunk_indexing.forget_unindexed(chunk_id)
        self.chunks.remove(chunk_id)

    @reporting_damage
    def remove_uncommitted_chunks(self):
        return self.chunks.remove_uncommitted()

    @reporting_damage
    def reuse_leftover_chunks(self, client_name):
        """The chunks a killed run of the client left (chunk_journal,
        leftover_chunks) become findable by content in this session."""
        return self.chunk_indexing.reuse_leftovers(client_name)

    @reporting_damage
    def remove_leftover_chunks(self, client_name):
        return self.chunk_indexing.remove_leftovers(client_name)

    @reporting_damage
    def begin_forget(self, client_name):
        return self.chunk_indexing.begin_forget(client_name)

    @reporting_damage
    def finish_forget(self, client_name):
        self.chunk_indexing.finish_forget(client_name)

    @reporting_damage
    def remove_unused_chunks(self, client_name, candidate_chunk_ids):
        """Chunk files are deleted at commit_chunk_indexes, after the index
        commit, so a crash never leaves an index entry without its file."""
        return self.chunk_indexing.remove_unused(client_name,
                                                 candidate_chunk_ids)

    # --- extras for fsck and dumps --------------------------------------

    @reporting_damage
    def get_chunk_index_entries(self):
        """(chunklist pairs, chunksums triples) of the newest index trees."""
        return self.indexes.all_chunklist(), self.indexes.all_chunksums()
