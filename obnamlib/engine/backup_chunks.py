"""The chunks one backup run writes (format-6.md §7.2, cli.md §6.4).

Each piece of content is stored once per run, or found again in the
chunk indexes as --deduplicate allows (fatalist: the MD5 digest is
enough; verify: the content must match too; never: always a new chunk).
A new chunk is remembered until a commit puts it into the indexes, so a
failed run can delete what nothing refers to.
"""

import hashlib
import logging

import obnamlib.engine.chunker
import obnamlib.errors


class RunChunks:
    """The chunks of one run: stored, found again, waiting for the
    indexes.  `bytes_written` counts new chunk content."""

    def __init__(self, repo, options, progress):
        self.repo = repo
        self.options = options
        self.progress = progress
        self.new_chunks = []          # (chunk id, md5 digest) not indexed
        self.file_start = None        # new_chunks index of the file's first
        self.run_chunks = {}          # md5 digest -> chunk id, this run
        self.bytes_written = 0
        self.find_by_md5 = True
        self.zero_digest = hashlib.md5(
            obnamlib.engine.chunker.zeros(options.chunk_size)).digest()

    def digest(self, data):
        """The MD5 digest of a chunk (a hole's shared zeros: known).  Safe
        in any thread (backup_reading's worker)."""
        if len(data) == self.options.chunk_size and \
                data is obnamlib.engine.chunker.zeros(len(data)):
            return self.zero_digest
        return hashlib.md5(data).digest()

    def store(self, data, digest=None):
        """(chunk id, MD5 digest) for data: an existing chunk if dedup
        allows, else a new one.  digest: data's, if already known."""
        mode = self.options.deduplicate
        if digest is None:
            digest = self.digest(data)
        if mode != 'never':
            chunk_id = self._reuse(digest, data, mode)
            if chunk_id is not None:
                return chunk_id, digest
        chunk_id = self.repo.put_chunk_content(data, md5_digest=digest)
        self.new_chunks.append((chunk_id, digest))
        self.run_chunks[digest] = chunk_id
        self.bytes_written += len(data)
        self.progress.uploaded(len(data))
        return chunk_id, digest

    def _reuse(self, digest, data, mode):
        chunk_id = self.run_chunks.get(digest)
        if chunk_id is not None:
            if mode == 'fatalist' or self._same(chunk_id, data):
                return chunk_id
        for chunk_id in self._find_in_indexes(digest, data):
            if mode == 'fatalist' or self._same(chunk_id, data):
                return chunk_id
        return None

    def _find_in_indexes(self, digest, data):
        if self.find_by_md5:
            try:
                return self.repo.find_chunk_ids_by_md5(digest)
            except NotImplementedError:
                self.find_by_md5 = False
        return self.repo.find_chunk_ids_by_content(data)

    def _same(self, chunk_id, data):
        try:
            return self.repo.get_chunk_content(chunk_id) == data
        except obnamlib.errors.RepositoryChunkDoesNotExist:
            return False

    def index_new(self, client):
        """Put the new chunks into the (locked) chunk indexes; those of a
        file still being read wait (it may yet be rejected)."""
        done = len(self.new_chunks) if self.file_start is None \
            else self.file_start
        for chunk_id, digest in self.new_chunks[:done]:
            self.repo.put_chunk_md5_into_indexes(chunk_id, digest, client)
        del self.new_chunks[:done]
        if self.file_start is not None:
            self.file_start = 0

    def file_started(self):
        self.file_start = len(self.new_chunks)

    def file_stored(self):
        self.file_start = None

    def file_rejected(self):
        """The file's content is not kept (it changed while read, or a
        read failed): the chunks it alone brought are removed now."""
        if self.file_start is None:
            return
        doomed = self.new_chunks[self.file_start:]
        del self.new_chunks[self.file_start:]
        self.file_start = None
        for chunk_id, digest in doomed:
            if self.run_chunks.get(digest) == chunk_id:
                del self.run_chunks[digest]
            self.repo.remove_chunk(chunk_id)

    def forget_indexed(self):
        """After a commit the indexes find this run's chunks: the in-run
        map need only cover one checkpoint interval (memory for a million
        files)."""
        self.run_chunks.clear()

    def remove_unindexed(self):
        """Delete the chunks written since the last commit: no committed
        generation or index refers to them, and after ENOSPC the space is
        what the next run needs.  The repository knows them all, also one
        whose writing an interruption cut short before its id came back.
        The chunks of a file a checkpoint cut in two stay for the next run,
        which reuses them (their ids are in the client's chunk journal)."""
        self.new_chunks = []
        self.file_start = None
        try:
            removed = self.repo.remove_uncommitted_chunks()
        except Exception:
            logging.warning('could not remove the chunks of this run',
                            exc_info=True)
        else:
            logging.info('removed %d chunk(s) this run wrote but did not '
                         'commit', removed)
