"""The generation a backup run writes, from start to commit (cli.md
§6.1, §6.7; format-6.md §10).

Add the client if new and lock it, start a generation cloned from the
newest one, commit a checkpoint every `checkpoint` bytes written (so an
interrupted run's successor skips that work), at the end commit the
client before the chunk indexes (§10.2: a crash at any point leaves at
worst unreferenced chunks), and after a failure release the locks and
delete the chunks nothing refers to.
"""

import logging

import obnamlib.errors
import obnamlib.repo.interface as ri
from obnamlib.engine import forgetter


class GenerationCommits:
    """The commits of one run.  `gen` is the generation being written
    (a checkpoint commits it and starts the next); `chunks` is the run's
    RunChunks.  `repo_io`, if given, has `bytes_written` and `bytes_read`
    counters of the repository's storage; checkpoints and the summary use
    them."""

    def __init__(self, repo, options, progress, chunks, repo_io=None):
        self.repo = repo
        self.options = options
        self.progress = progress
        self.chunks = chunks
        self.repo_io = repo_io
        self.client = options.client_name
        self.gen = None
        self.checkpoints = []
        self.last_checkpoint_at = 0
        self.io_base = self._io_counters()

    # --- start ---------------------------------------------------------

    def begin(self):
        """Add and lock the client; start the run's first generation."""
        self._add_client()
        self._lock_client()
        self._reuse_leftovers()
        self._start_generation()

    def _add_client(self):
        self.progress.what('adding client')
        if self.client in self.repo.get_client_names():
            return
        self.repo.lock_client_list()
        try:
            if self.client not in self.repo.get_client_names():
                self.repo.add_client(self.client, self.options.key_id)
            self.repo.commit_client_list()
        except BaseException:
            self.repo.unlock_client_list()
            raise

    def _lock_client(self):
        self.progress.what('locking client')
        self.repo.lock_client(self.client)
        self.repo.lock_chunk_indexes()
        self.repo.unlock_chunk_indexes()

    def _reuse_leftovers(self):
        """What a killed run of this client uploaded is not uploaded
        again: its chunks are found by content like this run's own."""
        found = self.repo.reuse_leftover_chunks(self.client)
        if found:
            logging.info('%d chunk(s) a killed run left can be reused',
                         found)

    def _remove_leftovers(self):
        """Before the last commit: the killed run's chunks this run did
        not reuse go (nothing refers to them)."""
        removed = self.repo.remove_leftover_chunks(self.client)
        if removed:
            logging.info('removed %d unused chunk(s) a killed run left',
                         removed)

    def _start_generation(self):
        self.gen = self.repo.create_generation(
            self.client, now=self.options.now())

    # --- checkpoints -----------------------------------------------------

    def maybe_checkpoint(self):
        """Commit a checkpoint if `checkpoint` bytes were written since
        the last one (checked after every file and chunk)."""
        if self.options.checkpoint <= 0:
            return
        if self._bytes_written() - self.last_checkpoint_at < \
                self.options.checkpoint:
            return
        self._checkpoint()

    def _checkpoint(self):
        self.progress.what('making checkpoint')
        logging.info('Making checkpoint')
        self._commit(is_checkpoint=1)
        self.chunks.forget_indexed()
        self.checkpoints.append(self.gen)
        self.repo.lock_client(self.client)
        self._start_generation()
        self.last_checkpoint_at = self._bytes_written()
        self.progress.what('')

    def _commit(self, is_checkpoint):
        """format-6.md §10 step 5: client first, then chunk indexes."""
        self.repo.lock_chunk_indexes()
        self.chunks.index_new(self.client)
        if not is_checkpoint:
            self._remove_leftovers()
        self._set_totals(is_checkpoint)
        self.repo.set_generation_key(self.gen, ri.GEN_ENDED,
                                     self.options.now())
        self.repo.commit_client(self.client)
        self.repo.commit_chunk_indexes()

    def _set_totals(self, is_checkpoint):
        self.repo.set_generation_key(self.gen, ri.GEN_FILE_COUNT,
                                     self.progress.file_count)
        self.repo.set_generation_key(self.gen, ri.GEN_TOTAL_DATA,
                                     self.progress.scanned_bytes)
        self.repo.set_generation_key(self.gen, ri.GEN_IS_CHECKPOINT,
                                     is_checkpoint)

    # --- the end ---------------------------------------------------------

    def finish(self):
        """Commit the run's last generation."""
        self.progress.what('committing changes to repository')
        self._commit(is_checkpoint=0)

    def remove_checkpoints(self):
        """Remove the run's checkpoint generations (the run succeeded)."""
        self.progress.what('removing checkpoints')
        try:
            self.repo.lock_everything()
        except obnamlib.errors.ObnamError as e:
            logging.warning('Could not remove checkpoints: %s', e)
            return
        try:
            forgetter.remove_checkpoints(self.repo, self.client,
                                         self.checkpoints)
        except BaseException:
            self._unlock_after_failure()
            raise

    def abandon(self):
        """After a failure: release locks, then delete the chunks written
        since the last commit."""
        self._unlock_after_failure()
        self.chunks.remove_unindexed()

    def _unlock_after_failure(self):
        try:
            self.repo.unlock_everything()
        except Exception:
            logging.exception('releasing locks after a failed backup')

    # --- bytes written and read ----------------------------------------

    def _io_counters(self):
        if self.repo_io is None:
            return (0, 0)
        return (self.repo_io.bytes_written, self.repo_io.bytes_read)

    def _bytes_written(self):
        if self.repo_io is not None:
            return self.repo_io.bytes_written - self.io_base[0]
        return self.chunks.bytes_written

    def report_io(self):
        """Tell the progress the run's repository I/O, for the summary."""
        if self.repo_io is not None:
            written, read = self._io_counters()
            self.progress.set_io(written - self.io_base[0],
                                 read - self.io_base[1])
        else:
            self.progress.set_io(self.chunks.bytes_written, 0)
