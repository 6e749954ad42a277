"""Repository format 6: the Repository API on larch forests and chunk files.

This class only orchestrates: which forest answers what, which locks a
change needs, and the order of commits (format-6.md §9, §10).  The trees'
contents live in clientlist, client_forest/client_tree and chunk_indexes;
chunk files in chunk_store.
"""

import time

from obnamlib import errors
from obnamlib.repo import interface as repo_interface
from obnamlib.repo.fmt_6 import keys
from obnamlib.repo.fmt_6.chunk_indexes import ChunkIndexes, TOPLEVELS as CHUNK_DIRS
from obnamlib.repo.fmt_6.chunk_store import ChunkStore
from obnamlib.repo.fmt_6.client_forest import ClientForest
from obnamlib.repo.fmt_6.clientlist import ClientList
from obnamlib.repo.fmt_6.damage import reporting_damage
from obnamlib.repo.fmt_6.gen_id import GenId, client_name_of
from obnamlib.repo.storage.lockmgr import LockManager

CLIENT_LIST_DIR = '.'
FORMAT = '6'

_GEN_SUBKEYS = {
    repo_interface.GEN_ID: keys.GEN_ID,
    repo_interface.GEN_STARTED: keys.GEN_STARTED,
    repo_interface.GEN_ENDED: keys.GEN_ENDED,
    repo_interface.GEN_IS_CHECKPOINT: keys.GEN_IS_CHECKPOINT,
    repo_interface.GEN_FILE_COUNT: keys.GEN_FILE_COUNT,
    repo_interface.GEN_TOTAL_DATA: keys.GEN_TOTAL_DATA,
}


class RepositoryFormat6(repo_interface.Repository):

    format_name = FORMAT

    def __init__(self, fs, node_size=None, lock_timeout=60, location='',
                 lock_manager=None, clock=time.time, owns_storage=False):
        """fs: the repository's StorageFS (RepositoryFS: filters applied),
        with lock/unlock.  location names the repository in messages.
        owns_storage: close fs too (e.g. end the ssh process of an SFTP
        connection the factory opened)."""
        self.fs = fs
        self.owns_storage = owns_storage
        self.node_size = node_size
        self.location = location
        self.clock = clock
        self.locks = lock_manager or LockManager(fs, lock_timeout, location)
        self.client_list = ClientList(fs, node_size)
        self.indexes = ChunkIndexes(fs, node_size)
        self.chunks = ChunkStore(fs)
        self.clients = {}             # client name -> ClientForest
        self.checksums = {}           # chunk id -> checksum, this session
        self.unindexed = {}           # checksum -> [chunk ids] not yet indexed
        self.pending_chunk_removals = []
        self.reused = {}              # client name -> chunk ids it re-used
        self.reused_committed = {}    # the same, for committed generations
        self.last_client = None

    # --- repository as a whole -----------------------------------------

    @reporting_damage
    def close(self):
        try:
            self.unlock_everything()
        finally:
            try:
                self.chunks.close()
            finally:
                if self.owns_storage:
                    self.fs.close()

    @reporting_damage
    def lock_everything(self):
        self.lock_client_list()
        try:
            dirs = [str(cid) for cid in self.client_list.ids().values()]
            self.locks.lock(dirs + list(CHUNK_DIRS))
        except BaseException:
            self.unlock_client_list()
            raise
        for name in self.client_list.names():
            self._open_client(name, writable=True)
        self.indexes.start_changes()

    @reporting_damage
    def commit_everything(self):
        """Clients first, then the client list, then the indexes (whose
        commit deletes freed chunk files): format-6.md §10.2."""
        for name in list(self.clients):
            if self.clients[name].writable:
                self.commit_client(name)
        if self.client_list.writable:
            self.commit_client_list()
        if self.indexes.writable:
            self.commit_chunk_indexes()
        self.locks.unlock_all()

    @reporting_damage
    def unlock_everything(self):
        if self.indexes.writable:
            self.unlock_chunk_indexes()
        for name in list(self.clients):
            if self.clients[name].writable:
                self.unlock_client(name)
        if self.client_list.writable:
            self.unlock_client_list()
        self.locks.unlock_all()

    @reporting_damage
    def force_locks(self):
        """Every client directory is its decimal id, so listing the root
        finds every client lock without reading (maybe undecryptable or
        damaged) trees."""
        dirs = {CLIENT_LIST_DIR} | set(CHUNK_DIRS)
        if self.fs.isdir('.'):
            dirs |= {name for name in self.fs.listdir('.') if name.isdigit()}
        for dirname in sorted(dirs):
            self.locks.break_lock(dirname)

    # --- client list ---------------------------------------------------

    @reporting_damage
    def get_client_names(self):
        return self.client_list.names()

    @reporting_damage
    def lock_client_list(self):
        self.locks.lock([CLIENT_LIST_DIR])
        try:
            self.client_list.start_changes()
        except BaseException:
            self.locks.unlock([CLIENT_LIST_DIR])
            raise

    @reporting_damage
    def commit_client_list(self):
        self._require_client_list_lock()
        self.client_list.commit()
        self.locks.unlock([CLIENT_LIST_DIR])

    @reporting_damage
    def unlock_client_list(self):
        self.client_list.discard()
        self.locks.unlock([CLIENT_LIST_DIR])

    def _require_client_list_lock(self):
        if not self.client_list.writable:
            raise errors.RepositoryClientListNotLocked()

    @reporting_damage
    def add_client(self, client_name, key_id=''):
        self._require_client_list_lock()
        if self.client_list.find(client_name) is not None:
            raise errors.RepositoryClientAlreadyExists(client_name=client_name)
        self.client_list.add(client_name, key_id or '')

    @reporting_damage
    def remove_client(self, client_name):
        self._require_client_list_lock()
        self._client_id(client_name)
        self.client_list.remove(client_name)
        self.clients.pop(client_name, None)

    @reporting_damage
    def get_client_key_id(self, client_name):
        self._client_id(client_name)
        return self.client_list.key_id(client_name)

    @reporting_damage
    def get_client_id(self, client_name):
        """The client's 64-bit id (its directory name in decimal)."""
        return self._client_id(client_name)

    def _client_id(self, client_name):
        client_id = self.client_list.find(client_name)
        if client_id is None:
            raise errors.RepositoryClientDoesNotExist(client_name=client_name)
        return client_id

    # --- one client ----------------------------------------------------

    def _open_client(self, client_name, writable=False):
        forest = self.clients.get(client_name)
        if forest is None or (writable and not forest.writable):
            client_id = self._client_id(client_name)
            forest = ClientForest(self.fs, client_id, self.node_size,
                                  allow_writes=writable)
            self.clients[client_name] = forest
        self.last_client = client_name
        return forest

    def _writable_client(self, client_name):
        """The locked client's forest, marked as about to change."""
        forest = self.clients.get(client_name)
        if forest is None or not forest.writable:
            raise errors.RepositoryClientNotLocked(client_name=client_name)
        forest.changed = True
        return forest

    @reporting_damage
    def lock_client(self, client_name):
        client_id = self._client_id(client_name)
        dirname = str(client_id)
        self.locks.lock([dirname])
        try:
            self.clients.pop(client_name, None)
            self._open_client(client_name, writable=True)
        except BaseException:
            self.locks.unlock([dirname])
            raise
        # New chunks matter only once this client commits, which waits for
        # them: until then they are written behind (chunk_writer).
        self.chunks.write_behind(True)

    @reporting_damage
    def commit_client(self, client_name, now=None):
        forest = self._writable_client(client_name)
        self.chunks.flush()       # every chunk the tree names is written
        forest.commit(self._now(now))
        self._release_client(client_name)
        reused = self.reused.pop(client_name, set())
        self.reused_committed.setdefault(client_name, set()).update(reused)
        if self.indexes.writable:
            self._index_reused_chunks()

    @reporting_damage
    def unlock_client(self, client_name):
        self.reused.pop(client_name, None)
        self._release_client(client_name)

    def _release_client(self, client_name):
        forest = self.clients.pop(client_name, None)
        if forest is not None and forest.writable:
            self.locks.unlock([forest.dirname])
        if not any(f.writable for f in self.clients.values()):
            self.chunks.write_behind(False)

    @reporting_damage
    def get_generation_ids(self, client_name):
        forest = self._open_client(client_name)
        return [GenId(n, client_name) for n in forest.generation_ids()]

    @reporting_damage
    def interpret_generation_spec(self, client_name, spec):
        if spec == 'latest':
            number = self._open_client(client_name).newest_generation_id()
            if number is None:
                raise errors.RepositoryClientHasNoGenerations(
                    client_name=client_name)
            return GenId(number, client_name)
        for gen_id in self.get_generation_ids(client_name):
            if str(int(gen_id)) == str(spec).strip():
                return gen_id
        raise errors.RepositoryGenerationDoesNotExist(
            gen_id=spec, client_name=client_name)

    @reporting_damage
    def make_generation_spec(self, gen_id):
        return '%d' % int(gen_id)

    @reporting_damage
    def create_generation(self, client_name, now=None):
        forest = self._writable_client(client_name)
        number = forest.create_generation(self._now(now))
        return GenId(number, client_name)

    def _now(self, now):
        return int(self.clock() if now is None else now)

    def _client_of(self, gen_id):
        client_name = client_name_of(gen_id)
        if client_name is None:
            client_name = self.last_client
        if client_name is None:
            raise errors.RepositoryGenerationDoesNotExist(
                gen_id=gen_id, client_name='?')
        return client_name

    def _generation(self, gen_id):
        client_name = self._client_of(gen_id)
        gen = self._open_client(client_name).generation(int(gen_id))
        if gen is None:
            raise errors.RepositoryGenerationDoesNotExist(
                gen_id=int(gen_id), client_name=client_name)
        return gen

    def _writable_generation(self, gen_id):
        self._writable_client(self._client_of(gen_id))
        return self._generation(gen_id)

    @reporting_damage
    def get_generation_key(self, gen_id, key):
        return self._generation(gen_id).get_gen_value(_gen_subkey(key))

    @reporting_damage
    def set_generation_key(self, gen_id, key, value):
        self._writable_generation(gen_id).set_gen_value(_gen_subkey(key),
                                                         value)

    @reporting_damage
    def remove_generation(self, gen_id):
        client_name = self._client_of(gen_id)
        forest = self._writable_client(client_name)
        if not forest.remove_generation(int(gen_id)):
            raise errors.RepositoryGenerationDoesNotExist(
                gen_id=int(gen_id), client_name=client_name)

    @reporting_damage
    def get_generation_chunk_ids(self, gen_id):
        return self._generation(gen_id).chunk_ids_in_use()

    # --- files in a generation -----------------------------------------

    def _missing(self, gen_id, path):
        return errors.RepositoryFileDoesNotExistInGeneration(
            client_name=self._client_of(gen_id),
            genspec=self.make_generation_spec(gen_id), filename=path)

    @reporting_damage
    def file_exists(self, gen_id, path):
        return self._generation(gen_id).exists(path)

    @reporting_damage
    def get_metadata(self, gen_id, path):
        metadata = self._generation(gen_id).get_metadata(path)
        if metadata is None:
            raise self._missing(gen_id, path)
        return metadata

    @reporting_damage
    def set_metadata(self, gen_id, path, metadata):
        self._writable_generation(gen_id).set_metadata(path, metadata)

    @reporting_damage
    def remove_file(self, gen_id, path):
        self._writable_generation(gen_id).remove(path)

    @reporting_damage
    def get_file_children(self, gen_id, path):
        children = self._generation(gen_id).children(path)
        if children is None:
            raise self._missing(gen_id, path)
        return children

    @reporting_damage
    def get_file_chunk_ids(self, gen_id, path):
        chunk_ids = self._generation(gen_id).chunk_ids(path)
        if chunk_ids is None:
            raise self._missing(gen_id, path)
        return chunk_ids

    @reporting_damage
    def set_file_chunk_ids(self, gen_id, path, chunk_ids):
        self._writable_generation(gen_id).set_chunk_ids(path, chunk_ids)
        self._note_reuse(gen_id, chunk_ids)

    @reporting_damage
    def append_file_chunk_ids(self, gen_id, path, chunk_ids):
        self._writable_generation(gen_id).append_chunk_ids(path, chunk_ids)
        self._note_reuse(gen_id, chunk_ids)

    def _note_reuse(self, gen_id, chunk_ids):
        """Remember chunks this client uses that it did not store here: each
        user of a chunk needs its own chunksums entry, or another client's
        forget would delete the chunk (format-6.md §7.4)."""
        reused = None
        for chunk_id in chunk_ids:
            if not self.chunks.wrote(chunk_id):
                if reused is None:
                    reused = self.reused.setdefault(self._client_of(gen_id),
                                                    set())
                reused.add(chunk_id)

    @reporting_damage
    def get_file_data(self, gen_id, path):
        gen = self._generation(gen_id)
        if not gen.exists(path):
            raise self._missing(gen_id, path)
        return gen.file_data(path)

    # --- chunks --------------------------------------------------------

    @reporting_damage
    def put_chunk_content(self, data, md5_digest=None):
        """md5_digest: the caller's MD5 of data, so it is not hashed twice.
        The chunk file may still be being written: the commits wait."""
        chunk_id = self.chunks.put(data)
        if md5_digest is None:
            checksum = keys.content_checksum(data)
        else:
            checksum = keys.checksum_of_digest(md5_digest)
        self.checksums[chunk_id] = checksum
        self.unindexed.setdefault(checksum, []).append(chunk_id)
        return chunk_id

    @reporting_damage
    def get_chunk_content(self, chunk_id):
        return self.chunks.get(chunk_id)

    @reporting_damage
    def expect_chunk_reads(self):
        """An encrypted local repository starts its helper process."""
        self.fs.expect_reads()

    @reporting_damage
    def prefetch_chunks(self, chunk_ids):
        """Read the chunk files together when the storage can (SFTP)."""
        self.chunks.prefetch(chunk_ids)

    @reporting_damage
    def has_chunk(self, chunk_id):
        return self.chunks.has(chunk_id)

    @reporting_damage
    def find_chunk_ids_by_content(self, data):
        checksum = keys.content_checksum(data)
        return self._find_by_checksum(checksum)

    @reporting_damage
    def find_chunk_ids_by_md5(self, md5_digest):
        return self._find_by_checksum(keys.checksum_of_digest(md5_digest))

    def _find_by_checksum(self, checksum):
        found = self.indexes.find(checksum)
        for chunk_id in self.unindexed.get(checksum, []):
            if chunk_id not in found:
                found.append(chunk_id)
        return found

    @reporting_damage
    def put_chunk_md5_into_indexes(self, chunk_id, md5_digest, client_name):
        self._require_indexes_lock()
        self._index(chunk_id, keys.checksum_of_digest(md5_digest), client_name)

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
        self._require_indexes_lock()
        self._index_reused_chunks()
        self.chunks.flush()
        self.indexes.commit()
        for chunk_id in self.pending_chunk_removals:
            self.chunks.remove(chunk_id)
        self.pending_chunk_removals = []
        self.locks.unlock(CHUNK_DIRS)

    @reporting_damage
    def unlock_chunk_indexes(self):
        self.indexes.discard()
        self.pending_chunk_removals = []
        self.locks.unlock(CHUNK_DIRS)

    def _index_reused_chunks(self):
        """Add a chunksums entry for each re-used chunk that lacks one for
        its new user."""
        reused, self.reused_committed = self.reused_committed, {}
        for client_name, chunk_ids in reused.items():
            client_id = self.client_list.find(client_name)
            if client_id is None:
                continue
            for chunk_id in sorted(chunk_ids):
                checksum = self.indexes.checksum(chunk_id)
                if checksum is None:
                    try:
                        checksum = self._checksum_of(chunk_id)
                    except errors.RepositoryChunkDoesNotExist:
                        continue
                if client_id not in self.indexes.users(checksum, chunk_id):
                    self.indexes.add(chunk_id, checksum, client_id)

    def _require_indexes_lock(self):
        if not self.indexes.writable:
            raise errors.RepositoryChunkIndexesNotLocked()

    @reporting_damage
    def put_chunk_into_indexes(self, chunk_id, data, client_name):
        """data may be None: the checksum then comes from this session,
        the chunklist, or the chunk's content."""
        self._require_indexes_lock()
        if data is not None:
            checksum = keys.content_checksum(data)
        else:
            checksum = self._checksum_of(chunk_id)
        self._index(chunk_id, checksum, client_name)

    def _index(self, chunk_id, checksum, client_name):
        # A chunk is indexed only once its file is written: a failed
        # create surfaces while the caller still knows its new chunks.
        self.chunks.flush()
        self.indexes.add(chunk_id, checksum, self._client_id(client_name))
        ids = self.unindexed.get(checksum)
        if ids and chunk_id in ids:
            ids.remove(chunk_id)
            if not ids:
                del self.unindexed[checksum]
        self.checksums.pop(chunk_id, None)

    def _checksum_of(self, chunk_id):
        """Checksum from this session, the chunklist, or the content."""
        checksum = self.checksums.get(chunk_id) or self.indexes.checksum(chunk_id)
        if checksum is None:
            checksum = keys.content_checksum(self.chunks.get(chunk_id))
        return checksum

    @reporting_damage
    def remove_chunk_from_indexes(self, chunk_id, client_name):
        self._require_indexes_lock()
        return self.indexes.remove_use(chunk_id, self._checksum_of(chunk_id),
                                       self._client_id(client_name))

    @reporting_damage
    def get_chunk_ids(self):
        return self.chunks.ids()

    @reporting_damage
    def remove_chunk(self, chunk_id):
        self.chunks.remove(chunk_id)

    @reporting_damage
    def remove_unused_chunks(self, client_name, candidate_chunk_ids):
        """Chunk files are deleted at commit_chunk_indexes, after the index
        commit, so a crash never leaves an index entry without its file."""
        self._require_indexes_lock()
        forest = self._writable_client(client_name)
        gens = [forest.generation(n)
                for n in reversed(forest.generation_ids())]   # likeliest first
        removed = []
        for chunk_id in sorted(set(candidate_chunk_ids)):
            if any(gen.uses_chunk(chunk_id) for gen in gens):
                continue
            try:
                unused = self.remove_chunk_from_indexes(chunk_id, client_name)
            except errors.RepositoryChunkDoesNotExist:
                continue
            if unused:
                removed.append(chunk_id)
        self.pending_chunk_removals.extend(removed)
        self.reused_committed.get(client_name, set()).difference_update(
            removed)
        return removed

    # --- extras for fsck and dumps --------------------------------------

    @reporting_damage
    def get_chunk_index_entries(self):
        """(chunklist pairs, chunksums triples) of the newest index trees."""
        return self.indexes.all_chunklist(), self.indexes.all_chunksums()


def _gen_subkey(key):
    try:
        return _GEN_SUBKEYS[key]
    except KeyError:
        raise ValueError('unknown generation key %r' % (key,))
