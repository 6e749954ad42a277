"""fsck: find damage in a repository and say exactly what it affects.

The storage checks (format marker, key files, B-tree forests, chunk
indexes) are format-specific and come from a checker object; this module
walks every client's generations through the Repository API: generation
metadata, each file's metadata and directory listing, each chunk a file
uses (it exists, its content matches the checksum the indexes record, the
whole file matches its MD5).  Every problem is one line naming the client,
generation and path it affects.

The first generation checked of a client is walked from `/`; for each
later one the checker names the paths whose entries changed since the
generation before (format 6: the B-tree nodes they do not share), and
only those are checked.  If chunks turn out damaged, a last pass names
the files that use them in every generation, reading no chunk.

How file contents are read (in batches, in the order chunk files lie
on disk, with read-ahead) is obnamlib.engine.fsck_content's.  The
format's checker comes from obnamlib.repo.fsck_checker: this module
knows no format, and larch's errors reach it as the repository's
(RepositoryCorrupt).
"""

import dataclasses
import struct

from obnamlib import errors
from obnamlib.engine import stored_names
from obnamlib.engine.fsck_content import ContentCheck, error_line
from obnamlib.engine.fsck_side import SideCheck
from obnamlib.engine.fsck_stats import FsckStats
from obnamlib.repo import interface as repo_interface
from obnamlib.repo.fsck_checker import storage_checker_for


# What every generation must record (counts only when not a checkpoint).
_GENERATION_FACTS = {
    repo_interface.GEN_STARTED: 'generation start time',
    repo_interface.GEN_ENDED: 'generation end time',
    repo_interface.GEN_FILE_COUNT: 'file count',
    repo_interface.GEN_TOTAL_DATA: 'total data',
}


# The walk tells the checker of the files it is done with this many at a
# time (checker.walked_past).
_DONE_BATCH = 1024


@dataclasses.dataclass
class FsckOptions:
    fix: bool = False
    rm_unused: bool = False
    ignore_chunks: bool = False
    ignore_clients: tuple = ()
    last_generation_only: bool = False
    skip_generations: bool = False
    skip_dirs: bool = False
    skip_files: bool = False
    skip_per_client_b_trees: bool = False
    skip_shared_b_trees: bool = False
    skip_checksums: bool = False

    @classmethod
    def from_settings(cls, settings):
        return cls(
            fix=settings['fsck-fix'],
            rm_unused=settings['fsck-rm-unused'] or settings['fsck-fix'],
            ignore_chunks=settings['fsck-ignore-chunks'],
            ignore_clients=tuple(settings['fsck-ignore-client'] or ()),
            last_generation_only=settings['fsck-last-generation-only'],
            skip_generations=settings['fsck-skip-generations'],
            skip_dirs=settings['fsck-skip-dirs'],
            skip_files=settings['fsck-skip-files'],
            skip_per_client_b_trees=settings['fsck-skip-per-client-b-trees'],
            skip_shared_b_trees=settings['fsck-skip-shared-b-trees'],
            skip_checksums=settings['fsck-skip-checksums'])

    def checks_everything(self):
        """Only a full walk may call a chunk unused (Obnam's rule)."""
        return not (self.ignore_chunks or self.skip_files or self.skip_dirs
                    or self.skip_generations or self.last_generation_only
                    or self.ignore_clients)


class SilentReporter:
    """What fsck tells as it goes; the plugin passes one that prints."""

    def problem(self, text):
        pass

    def checking(self, text):
        pass

    def counted(self, stats):
        """The counters in stats changed (called often; throttle here)."""


class Fsck:

    def __init__(self, repo, options=None, reporter=None, checker=None):
        self.repo = repo
        self.options = options or FsckOptions()
        self.reporter = reporter or SilentReporter()
        self.checker = checker or storage_checker_for(repo, self.options.fix)
        self.stats = FsckStats()
        self.content = ContentCheck(
            repo, self.checker, self.stats, self._report, self._checking,
            lambda: self.reporter.counted(self.stats), side=SideCheck(repo))
        self.used = {}              # client name -> chunk ids its files use

    def _side_may_run(self):
        """Whether the second process may share the reads (then this one
        decrypts its own, without the helper process)."""
        side = self.content.side
        return side is not None and side.may_run()

    def run(self):
        """Check everything; returns the problem lines (also reported)."""
        self.problems = []
        self.reported = set()
        self.partly_checked = []    # (client, gen, where) of _check_changed
        self.walk_problems = 0      # problems that hide which chunks are used
        self.checker.lock()
        try:
            if not self.options.ignore_chunks:
                self.repo.expect_chunk_reads(in_line=self._side_may_run())
            self._storage_checks()
            if not self.options.skip_generations:
                for client_name in self._client_names():
                    self._check_client(client_name)
                self.content.finish()
                if not self.options.ignore_chunks:
                    self._name_users_of_damaged_chunks()
            complete = self.walk_problems == 0
            if self.options.checks_everything() and not complete:
                self._report('unused chunks were not looked for: the '
                             'problems above hide which chunks are in use')
            self._checking('chunk indexes')
            self._report_all(self.checker.check_chunk_indexes(
                self.used, remove_unused=self.options.rm_unused and complete,
                report_unused=self.options.checks_everything() and complete))
        finally:
            self.content.close()
            self.checker.unlock()
        return self.problems

    # --- reporting ----------------------------------------------------------

    def _report(self, text):
        self.problems.append(text)
        self.reported.add(text)
        self.stats.problems += 1
        if is_fixed(text):
            self.stats.fixed += 1
        self.reporter.problem(text)

    def _walk_problem(self, text):
        """A problem that hides part of a generation (and its chunks)."""
        self.walk_problems += 1
        self._report(text)

    def _report_all(self, texts):
        for text in texts:
            self._report(text)

    # --- storage -------------------------------------------------------------

    def _checking(self, text):
        self.stats.phase = text
        self.reporter.checking(text)
        self.reporter.counted(self.stats)

    def _storage_checks(self):
        self._checking('repository format and keys')
        self._report_all(self.checker.check_format())
        self._report_all(self.checker.check_keys())
        self._checking('B-trees')
        self._report_all(self.checker.check_forests(
            shared=not self.options.skip_shared_b_trees,
            per_client=not self.options.skip_per_client_b_trees,
            ignore_clients=self.options.ignore_clients))

    def _client_names(self):
        try:
            names = self.repo.get_client_names()
        except errors.ObnamError as e:
            self._walk_problem('client list cannot be read: %s'
                               % error_line(e))
            return []
        return [n for n in names if n not in self.options.ignore_clients]

    # --- generations --------------------------------------------------------

    def _check_client(self, client_name):
        self.stats.clients += 1
        self.used[client_name] = set()
        try:
            gen_ids = self.repo.get_generation_ids(client_name)
        except errors.ObnamError as e:
            self.used[client_name] = None
            self._walk_problem('client %s: generations cannot be listed: %s'
                         % (client_name, error_line(e)))
            return
        numbers = [self.repo.make_generation_spec(g) for g in gen_ids]
        for number in sorted(set(n for n in numbers if numbers.count(n) > 1)):
            # only one tree of an id can be read: the others' chunks must
            # not be taken for unused
            self._walk_problem('%s: duplicate generation id %s'
                               % (client_name, number))
        if self.options.last_generation_only:
            gen_ids = gen_ids[-1:]
        for i, gen_id in enumerate(gen_ids):
            self._checking('client %s generation %s (%d/%d)' % (
                client_name, self.repo.make_generation_spec(gen_id), i + 1,
                len(gen_ids)))
            self._check_generation(client_name, gen_id)
            self.checker.release_generation(gen_id)
            self.content.next_generation()

    def _check_generation(self, client_name, gen_id):
        self.stats.generations += 1
        where = '%s:%s' % (client_name, self.repo.make_generation_spec(gen_id))
        try:
            values = {key: self.repo.get_generation_key(gen_id, key)
                      for key in list(_GENERATION_FACTS) + [
                          repo_interface.GEN_IS_CHECKPOINT]}
        except errors.ObnamError as e:
            self._walk_problem('%s: generation metadata cannot be read: %s'
                               % (where, error_line(e)))
            return
        checkpoint = values[repo_interface.GEN_IS_CHECKPOINT]
        for key, what in _GENERATION_FACTS.items():
            counts = key in (repo_interface.GEN_FILE_COUNT,
                             repo_interface.GEN_TOTAL_DATA)
            if values[key] is None and not (checkpoint and counts):
                self._report('%s: no %s' % (where, what))
        if self.options.skip_dirs:
            return
        changed = self.checker.changed_paths(client_name, gen_id)
        if changed is None:
            self._walk(client_name, gen_id, where)
        else:
            self.partly_checked.append((client_name, gen_id, where))
            self._check_changed(client_name, gen_id, where, changed)

    def _check_changed(self, client_name, gen_id, where, changed):
        """Only what differs from the generations checked before: the
        rest is the very same B-tree nodes, checked already."""
        changed_set = set(changed)
        for path in changed:
            metadata = self._check_path(client_name, gen_id, path, where)
            if metadata is not None and metadata.isdir():
                for name in self._children(gen_id, path, where):
                    child = stored_names.child_path(path, name)
                    if child not in changed_set:
                        self._metadata(gen_id, child, where)

    def _name_users_of_damaged_chunks(self):
        """Files unchanged since an earlier generation were not looked at
        again; when chunks turned out damaged, name their users in every
        generation (reading no chunk)."""
        on_disk = self.content.chunk_ids_on_disk()
        if not self.content.bad_chunks and \
                on_disk >= self._chunks_in_use():
            return
        for client_name, gen_id, where in self.partly_checked:
            self._checking('which files of client %s generation %s use '
                           'damaged chunks' % (
                               client_name,
                               self.repo.make_generation_spec(gen_id)))
            for path in self._regular_files(gen_id):
                self._name_if_damaged(gen_id, path, where, on_disk)

    def _chunks_in_use(self):
        used = set()
        for chunk_ids in self.used.values():
            used |= chunk_ids or set()
        return used

    def _regular_files(self, gen_id):
        stack = [b'/']
        while stack:
            path = stack.pop()
            try:
                metadata = self.repo.get_metadata(gen_id, path)
                if metadata.isdir():
                    stack.extend(
                        stored_names.child_path(path, name)
                        for name in reversed(
                            self.repo.get_file_children(gen_id, path))
                        if stored_names.is_safe(name))
                elif metadata.isreg():
                    yield path
            except (errors.ObnamError, ValueError,
                    struct.error):
                continue    # reported when the generation was checked

    def _name_if_damaged(self, gen_id, path, where, on_disk):
        try:
            chunk_ids = self.repo.get_file_chunk_ids(gen_id, path)
        except errors.ObnamError:
            return
        shown = '%s: %s' % (where, _show(path))
        for chunk_id in chunk_ids:
            if chunk_id not in on_disk:
                problem = 'chunk %x does not exist' % chunk_id
            else:
                problem = self.content.bad_chunks.get(chunk_id)
            text = '%s: %s' % (shown, problem)
            if problem is not None and text not in self.reported:
                self._report(text)
                return

    def _walk(self, client_name, gen_id, where):
        """Depth-first from /, with an explicit stack (no depth limit).
        The checker is told, in batches, of the files (not directories)
        checked: the walk does not come back to them."""
        stack = [b'/']
        done = []
        while stack:
            path = stack.pop()
            metadata = self._check_path(client_name, gen_id, path, where)
            if metadata is not None and metadata.isdir():
                children = self._children(gen_id, path, where)
                stack.extend(stored_names.child_path(path, name)
                             for name in reversed(children))
            else:
                done.append(path)
                if len(done) >= _DONE_BATCH:
                    self.checker.walked_past(gen_id, done)
                    done = []
        self.checker.walked_past(gen_id, done)

    def _check_path(self, client_name, gen_id, path, where):
        """Count and check one object (a file's chunks too); its metadata,
        or None if that is unreadable."""
        metadata = self._metadata(gen_id, path, where)
        if metadata is None:
            return None
        self.stats.files += 1
        self.reporter.counted(self.stats)
        if metadata.isreg() and not self.options.skip_files:
            self._check_file(client_name, gen_id, path, metadata, where)
        return metadata

    def _metadata(self, gen_id, path, where):
        try:
            return self.repo.get_metadata(gen_id, path)
        except errors.RepositoryFileDoesNotExistInGeneration:
            self._walk_problem('%s: %s: listed in its directory but has no '
                         'entry' % (where, _show(path)))
        except (errors.ObnamError, ValueError,
                struct.error) as e:
            self._walk_problem('%s: %s: metadata cannot be read: %s'
                         % (where, _show(path), error_line(e)))
        return None

    def _children(self, gen_id, path, where):
        """The directory's names; an unsafe one (stored_names) is damage,
        reported and not walked into (restore refuses it too)."""
        try:
            names = self.repo.get_file_children(gen_id, path)
        except errors.ObnamError as e:
            self._walk_problem('%s: %s: directory cannot be listed: %s'
                         % (where, _show(path), error_line(e)))
            return []
        safe, unsafe = stored_names.partition(names)
        for name in unsafe:
            self._walk_problem(
                '%s: %s: unsafe name stored (empty, ".", ".." or '
                'containing "/" or NUL)'
                % (where, stored_names.shown_path(path, name)))
        return safe

    # --- files and chunks -------------------------------------------------

    def _check_file(self, client_name, gen_id, path, metadata, where):
        shown = '%s: %s' % (where, _show(path))
        try:
            chunk_ids = self.repo.get_file_chunk_ids(gen_id, path)
            data = (None if chunk_ids else
                    self.repo.get_file_data(gen_id, path))
        except errors.ObnamError as e:
            self._walk_problem('%s: chunk list cannot be read: %s'
                               % (shown, error_line(e)))
            return
        self.used[client_name].update(chunk_ids)
        if self.options.ignore_chunks:
            return
        if data is not None:
            self.content.check_in_tree(shown, metadata, data)
        else:
            self.content.check_chunks(shown, metadata, chunk_ids,
                                      self.options.skip_checksums)


def is_fixed(text):
    """Whether a problem line says the problem was repaired."""
    return text.endswith('[fixed]') or text.endswith('; deleting')


def _show(path):
    return path.decode('utf-8', 'backslashreplace')
