"""Repository format 6: the Repository API on larch forests and chunk files.

This class only orchestrates: which part answers what, which locks a
change needs, and the order of commits (format-6.md §9, §10); here the
repository as a whole, the client list and a client's locking.  The API's
generation and file methods are in generation_methods, its chunk methods
in chunk_methods (both classes this one derives from).  They delegate to
collaborators: client_sessions (the client forests this object opened,
their generations) and chunk_indexing (a session's chunks and the chunk
indexes).  The trees' contents live in clientlist,
client_forest/client_tree and chunk_indexes; chunk files in chunk_store.

Every public method is decorated with reporting_damage: larch's errors
reach callers as RepositoryCorrupt.
"""

import time

from obnamlib import errors
from obnamlib.repo import interface as repo_interface
from obnamlib.repo.fmt_6.chunk_indexes import (
    CHUNKLIST, ChunkIndexes, TOPLEVELS as CHUNK_DIRS)
from obnamlib.repo.fmt_6.chunk_indexing import ChunkIndexing
from obnamlib.repo.fmt_6.chunk_methods import ChunkMethods
from obnamlib.repo.fmt_6.chunk_store import (
    ChunkStore, TOPLEVEL as CHUNK_TOPLEVEL)
from obnamlib.repo.fmt_6.client_sessions import ClientSessions
from obnamlib.repo.fmt_6.clientlist import ClientList
from obnamlib.repo.fmt_6.damage import reporting_damage
from obnamlib.repo.fmt_6.gen_id import GenId  # noqa: F401 (callers' name)
from obnamlib.repo.fmt_6.generation_methods import GenerationMethods
from obnamlib.repo.storage.lockmgr import LockManager

CLIENT_LIST_DIR = '.'
FORMAT = '6'


class RepositoryFormat6(GenerationMethods, ChunkMethods,
                        repo_interface.Repository):

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
        self.sessions = ClientSessions(fs, node_size, self.client_list)
        self.chunk_indexing = ChunkIndexing(self.chunks, self.indexes,
                                            self.sessions)

    # --- repository as a whole -----------------------------------------

    @reporting_damage
    def reopening(self):
        """The keys handed over are those of what reading chunks and
        their checksums needs (fsck's second process)."""
        found = self.fs.reopening((CHUNK_TOPLEVEL, CHUNKLIST))
        if found is None:
            return None
        url, settings, keys = found
        return {'url': url, 'settings': settings, 'node_size': self.node_size,
                'keys': keys}

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
            self.sessions.open(name, writable=True)
        self.indexes.start_changes()

    @reporting_damage
    def commit_everything(self):
        """Clients first, then the client list, then the indexes (whose
        commit deletes freed chunk files): format-6.md §10.2."""
        for name in self.sessions.writable_names():
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
        for name in self.sessions.writable_names():
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
        self.sessions.client_id(client_name)
        self.client_list.remove(client_name)
        self.sessions.close(client_name)

    @reporting_damage
    def get_client_key_id(self, client_name):
        self.sessions.client_id(client_name)
        return self.client_list.key_id(client_name)

    @reporting_damage
    def get_client_id(self, client_name):
        """The client's 64-bit id (its directory name in decimal)."""
        return self.sessions.client_id(client_name)

    # --- one client ----------------------------------------------------

    def _open_client(self, client_name, writable=False):
        return self.sessions.open(client_name, writable)

    def _writable_client(self, client_name):
        """The locked client's forest, marked as about to change."""
        return self.sessions.writable(client_name)

    @reporting_damage
    def lock_client(self, client_name):
        dirname = str(self.sessions.client_id(client_name))
        self.locks.lock([dirname])
        try:
            self.sessions.close(client_name)
            self.sessions.open(client_name, writable=True)
        except BaseException:
            self.locks.unlock([dirname])
            raise
        # New chunks matter only once this client commits, which waits for
        # them: until then they are written behind (chunk_writer).
        self.chunks.write_behind(True)
        self.chunk_indexing.client_locked(client_name)

    @reporting_damage
    def commit_client(self, client_name, now=None):
        forest = self.sessions.writable(client_name)
        self.chunks.flush()       # every chunk the tree names is written
        forest.commit(self._now(now))
        self._release_client(client_name)
        self.chunk_indexing.client_committed(client_name)

    @reporting_damage
    def unlock_client(self, client_name):
        self.chunk_indexing.client_unlocked(client_name)
        self._release_client(client_name)

    def _release_client(self, client_name):
        forest = self.sessions.close(client_name)
        if forest is not None and forest.writable:
            self.locks.unlock([forest.dirname])
        if not self.sessions.any_writable():
            self.chunks.write_behind(False)
