"""The format-neutral repository API that commands and engines use.

A Repository holds clients; each client has generations (snapshots, oldest
first); a generation maps absolute paths (bytes) to Metadata, directory
listings and, for regular files, a list of chunk ids; chunks hold file content
and are shared by every client, found by content checksum.

Writers take locks first (format-6.md §9): the client list to add or remove
clients, a client to change its generations, the chunk indexes to change
them.  Changes become durable only at the matching commit; an unlock without
commit discards them.  Readers take no locks.

`obnamlib.repo.factory.open_repository(settings=None, vfs=None,
create=False, url=None, repo_fs=None, **overrides)` returns the
implementation for the repository's format (settings: the app's settings or
a dict of Obnam setting names; overrides like `lock_timeout=0`).  Its `fs`
attribute is the repository storage (bytes_written / bytes_read counters).  Everything here raises
`obnamlib.errors` classes for conditions people can meet.

Generation ids: pass back the objects these methods return.  In format 6
they are `fmt_6.repo_fmt_6.GenId`, an `int` subclass (the number users see)
that also carries `.client_name`, because numbers are per client.
"""

import abc

# Generation keys (get_generation_key / set_generation_key).
GEN_ID = 'id'
GEN_STARTED = 'started'
GEN_ENDED = 'ended'
GEN_IS_CHECKPOINT = 'is_checkpoint'
GEN_FILE_COUNT = 'file_count'
GEN_TOTAL_DATA = 'total_data'
GENERATION_KEYS = (GEN_ID, GEN_STARTED, GEN_ENDED, GEN_IS_CHECKPOINT,
                   GEN_FILE_COUNT, GEN_TOTAL_DATA)

# Capabilities (Repository.capabilities): prefetch_chunks acts on its
# hints (reads the chunks together, or starts reading them).  Without it
# a caller need not work out which chunks come next.
PREFETCHES_CHUNKS = 'prefetches-chunks'


class Repository(abc.ABC):
    """One repository.  Methods named below are the whole contract."""

    # --- repository as a whole --------------------------------------------

    format_name = None          # '6'
    created = False             # True: opening it made it (repo.factory)
    capabilities = frozenset()  # of the constants above: none by default

    @abc.abstractmethod
    def close(self):
        """Release locks this object holds (without committing) and close."""

    @abc.abstractmethod
    def lock_everything(self):
        """Client list, every client, chunk indexes (forget, fsck)."""

    @abc.abstractmethod
    def commit_everything(self):
        """Commit and unlock everything lock_everything took."""

    @abc.abstractmethod
    def unlock_everything(self):
        """Unlock (discarding uncommitted changes) whatever this object holds."""

    @abc.abstractmethod
    def force_locks(self):
        """Remove every lock file of the repository (force-lock)."""

    # --- client list --------------------------------------------------------

    @abc.abstractmethod
    def get_client_names(self):
        """Client names (str) in the repository's own order."""

    @abc.abstractmethod
    def lock_client_list(self): ...

    @abc.abstractmethod
    def commit_client_list(self):
        """Commit client list changes and unlock it."""

    @abc.abstractmethod
    def unlock_client_list(self): ...

    @abc.abstractmethod
    def add_client(self, client_name, key_id=''):
        """Add a client (client list locked); RepositoryClientAlreadyExists."""

    @abc.abstractmethod
    def remove_client(self, client_name):
        """Remove from the client list (client list locked)."""

    @abc.abstractmethod
    def get_client_key_id(self, client_name):
        """The --encrypt-with value recorded for the client, or None."""

    # --- one client ---------------------------------------------------------

    @abc.abstractmethod
    def lock_client(self, client_name): ...

    @abc.abstractmethod
    def commit_client(self, client_name, now=None):
        """Commit the client's changes (sets GEN_ENDED of the generations
        created since it was locked to `now` (default time.time()) unless
        already set) and unlock it."""

    @abc.abstractmethod
    def unlock_client(self, client_name): ...

    @abc.abstractmethod
    def get_generation_ids(self, client_name):
        """Generation ids of the client, oldest first (checkpoints included).
        RepositoryClientDoesNotExist for an unknown client."""

    @abc.abstractmethod
    def interpret_generation_spec(self, client_name, spec):
        """'latest' or a decimal id string -> GenId; R0B15DX / REFB32X."""

    @abc.abstractmethod
    def generation_spec_was_used(self, client_name, spec):
        """Whether a generation of the client may have had this (decimal)
        spec: the client's history has reached that id, so a generation
        of that id that is missing now was removed (an interrupted
        forget's rerun asks).  False for 'latest' and for ids the client
        never reached."""

    @abc.abstractmethod
    def make_generation_spec(self, gen_id):
        """GenId -> the string users see (decimal id)."""

    @abc.abstractmethod
    def create_generation(self, client_name, now=None):
        """New generation cloned from the newest one (client locked); sets
        GEN_ID and GEN_STARTED (now: Unix seconds, default time.time())."""

    @abc.abstractmethod
    def get_generation_key(self, gen_id, key):
        """Integer value of a GEN_* key, or None when absent."""

    @abc.abstractmethod
    def set_generation_key(self, gen_id, key, value): ...

    @abc.abstractmethod
    def remove_generation(self, gen_id):
        """Drop the generation (client locked). Chunks it alone used are
        removed later by remove_unused_chunks."""

    @abc.abstractmethod
    def get_generation_chunk_ids(self, gen_id):
        """Set of chunk ids the generation's files use."""

    # --- files in a generation ---------------------------------------------

    @abc.abstractmethod
    def file_exists(self, gen_id, path):
        """path: absolute bytes path."""

    @abc.abstractmethod
    def get_metadata(self, gen_id, path):
        """Metadata of path; RepositoryFileDoesNotExistInGeneration if absent.
        (A checkpoint may hold a name without metadata: Metadata() then.)"""

    @abc.abstractmethod
    def set_metadata(self, gen_id, path, metadata):
        """Add or replace path (creating it, and linking it into its parent
        directory's listing, if new).  Missing ancestors are created as
        names without metadata (get_metadata gives Metadata() for them until
        their metadata is set), so children may be stored before parents."""

    @abc.abstractmethod
    def remove_file(self, gen_id, path):
        """Remove path and, for a directory, everything below it."""

    @abc.abstractmethod
    def get_file_children(self, gen_id, path):
        """Basenames (bytes) of a directory's entries, sorted bytewise."""

    @abc.abstractmethod
    def get_file_chunk_ids(self, gen_id, path):
        """Chunk ids of a regular file in order (empty list if none)."""

    @abc.abstractmethod
    def set_file_chunk_ids(self, gen_id, path, chunk_ids):
        """Replace the file's chunk list (and its chunk references)."""

    def append_file_chunk_ids(self, gen_id, path, chunk_ids):
        """Add chunk ids at the end of the file's chunk list (large files:
        no need to hold the whole list).  Default: read, extend, replace."""
        self.set_file_chunk_ids(
            gen_id, path,
            self.get_file_chunk_ids(gen_id, path) + list(chunk_ids))

    @abc.abstractmethod
    def get_file_data(self, gen_id, path):
        """Content stored inside the tree (old --small-files-in-btree), or
        None.  Readers check this before the chunk list."""

    def get_file_content(self, gen_id, path):
        """(content stored inside the tree, None) or, if there is none,
        (None, chunk ids) of a regular file: get_file_data, then
        get_file_chunk_ids, in one look where the format can."""
        data = self.get_file_data(gen_id, path)
        if data is not None:
            return data, None
        return None, self.get_file_chunk_ids(gen_id, path)

    # --- chunks -------------------------------------------------------------

    @abc.abstractmethod
    def put_chunk_content(self, data, md5_digest=None):
        """Store a new chunk file; returns its id.  Not yet in the indexes.

        md5_digest: the caller's MD5 of data (saves hashing it twice).  While
        the client is locked the file may still be being written; commits
        and reads through the same object wait for it."""

    @abc.abstractmethod
    def get_chunk_content(self, chunk_id):
        """RepositoryChunkDoesNotExist if missing."""

    def expect_chunk_reads(self, in_line=False):
        """A hint: this command reads many chunks (fsck, restore, verify).
        A format may get ready (start a helper process) meanwhile; doing
        nothing is correct.  in_line: the command shares its reads with a
        second process of its own (obnamlib.engine.side_process): each
        decrypts what it reads itself, no helper process."""

    def reopening(self):
        """How a second process may open this repository by itself to read
        chunks (obnamlib.engine.side_process: fsck's and restore's second
        process), as a value for obnamlib.repo.factory.reopen_repository
        (with the passphrases it needs, if encrypted); None where it
        cannot.  A key that cannot be had raises its ObnamError."""
        return None

    def prefetch_chunks(self, chunk_ids):
        """A hint: these chunks are read soon, in this order.  A format may
        fetch them together (one round trip for many over SFTP) and hand
        them to get_chunk_content; doing nothing is correct.  A format
        whose hints may do something says PREFETCHES_CHUNKS."""

    @abc.abstractmethod
    def has_chunk(self, chunk_id): ...

    @abc.abstractmethod
    def find_chunk_ids_by_content(self, data):
        """Ids of stored chunks whose checksum equals data's (may be empty)."""

    @abc.abstractmethod
    def lock_chunk_indexes(self): ...

    @abc.abstractmethod
    def commit_chunk_indexes(self):
        """Commit index changes and unlock them."""

    @abc.abstractmethod
    def unlock_chunk_indexes(self): ...

    @abc.abstractmethod
    def put_chunk_into_indexes(self, chunk_id, data, client_name):
        """Record chunk_id (content data) as used by client (indexes locked).
        Call it for the chunks you stored.  An index entry per user is what
        keeps a chunk alive when another client forgets it; format 6 adds
        the entries for chunks a client re-used (seen in the chunk lists it
        set) by itself when the indexes are committed."""

    # Checksum variants for the backup hot path: the engine hashes each
    # chunk once (it needs the MD5 for in-run de-duplication anyway) and
    # must not keep chunk contents in memory until the index commit.
    # Formats override these; the defaults are correct but slow.

    def find_chunk_ids_by_md5(self, md5_digest):
        """Like find_chunk_ids_by_content, given hashlib.md5(data).digest().
        Raises NotImplementedError if the format cannot (callers then use
        find_chunk_ids_by_content)."""
        raise NotImplementedError

    def put_chunk_md5_into_indexes(self, chunk_id, md5_digest, client_name):
        """Like put_chunk_into_indexes, given hashlib.md5(data).digest()
        instead of the content (indexes locked)."""
        self.put_chunk_into_indexes(
            chunk_id, self.get_chunk_content(chunk_id), client_name)

    @abc.abstractmethod
    def remove_chunk_from_indexes(self, chunk_id, client_name):
        """Drop the client's use of the chunk (indexes locked)."""

    @abc.abstractmethod
    def get_chunk_ids(self):
        """Every chunk id that has a chunk file."""

    @abc.abstractmethod
    def get_chunk_sizes(self, chunk_ids=None):
        """{chunk id: bytes its chunk file takes in the repository, as
        stored (after compression and encryption)} of the given chunks,
        or of every chunk file when None; a chunk without a file is left
        out.  In bulk: callers ask once for many."""

    @abc.abstractmethod
    def get_chunk_index_users(self, chunk_ids):
        """{chunk id: set of the client names the indexes record as its
        users} (None in the set: a user no client of the list is).  A
        chunk the indexes know nothing of and that has no file is left
        out: remove_unused_chunks leaves it alone.  Changes nothing."""

    @abc.abstractmethod
    def remove_chunk(self, chunk_id):
        """Delete the chunk file (callers first make sure nobody uses it)."""

    @abc.abstractmethod
    def remove_uncommitted_chunks(self):
        """Delete the chunk files this object wrote since the last commit
        of a client or of the chunk indexes: nothing committed refers to
        them.  For a run that failed or was interrupted, so that it
        leaves nothing behind; returns how many were removed."""

    # A format that keeps no record of a run's chunks has nothing for the
    # next run to find: these five do nothing there.

    def reuse_leftover_chunks(self, client_name):
        """Client locked: the chunk files a killed run of the client left
        (no index names them) become findable by content for this session,
        so their content is not stored again.  Returns how many."""
        return 0

    def remove_leftover_chunks(self, client_name):
        """Client and chunk indexes locked, before the run's last commit:
        delete the chunk files a killed run of the client left that this
        session did not reuse; the ones a generation uses get index
        entries at the next index commit.  Returns how many were deleted."""
        return 0

    def begin_forget(self, client_name):
        """Everything locked, before a forget removes anything: note that
        the client's forget is under way.  If an earlier one was killed,
        returns the chunk ids indexed for the client that no generation of
        it uses (candidates for remove_unused_chunks), else []."""
        return []

    def find_forget_leftovers(self, client_name):
        """Changing nothing (no locks needed): what a forget of the
        client would handle before removing a generation, as (the ids
        begin_forget would return, the chunk ids remove_leftover_chunks
        would delete).  ([], []) here."""
        return [], []

    def finish_forget(self, client_name):
        """The forget is complete once the next index commit is done."""

    @abc.abstractmethod
    def remove_unused_chunks(self, client_name, candidate_chunk_ids):
        """After generations were removed: drop the client's index entries
        for candidates no remaining generation of it uses, and delete chunk
        files no client uses any more.  Indexes locked.  Returns removed ids."""
