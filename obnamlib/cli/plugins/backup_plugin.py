"""The `backup` command (cli.md §5.1, §6): settings, roots, summary.

The work is done by obnamlib.engine.backup_engine; this module turns settings
into its options, shows progress on the terminal, and prints the summary
(§6.9) and the log statistics (§13.2).  A repository is created only in a
new or empty directory (repo_factory), which it says on stderr.
"""

import logging
import os
import re
import time

import obnamlib.engine.backup_engine as backup_engine
import obnamlib.cli.backup_progress as backup_progress
import obnamlib.cli.clock
from obnamlib.cli import json_output, summary_documents
from obnamlib.cli.live_fs import open_live_fs
import obnamlib.errors
import obnamlib.engine.pathname_excluder
import obnamlib.cli.plugin
import obnamlib.vfs.factory
import obnamlib.engine.walker

GROUP = 'Backing up'
PERF_GROUP = 'Performance tweaking'
DEVEL_GROUP = 'Development of Obnam itself'


class BackupPlugin(obnamlib.cli.plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string_list(['root'], 'what to back up (added to the command '
                      'line arguments)', metavar='URL', group=GROUP)
        s.bytesize(['checkpoint'], 'make a checkpoint after SIZE bytes '
                   'written to the repository', default=1024 ** 3,
                   group=GROUP)
        s.choice(['deduplicate'], ['fatalist', 'never', 'verify'],
                 'find duplicate data in the repository: fatalist trusts '
                 'checksums, never stores every chunk, verify compares '
                 'contents', metavar='MODE', group=GROUP)
        s.boolean(['leave-checkpoints'], 'keep the checkpoint generations '
                  'of this run', group=GROUP)
        s.boolean(['small-files-in-btree'], 'deprecated; has no effect',
                  group=GROUP)
        s.integer(['chunkids-per-group'], 'accepted for compatibility; '
                  'unused', default=1024, group=PERF_GROUP)
        s.string_list(['testing-fail-matching'], 'simulate a failure for '
                      'files matching REGEXP (testing)', metavar='REGEXP',
                      group=DEVEL_GROUP)
        self.app.add_subcommand('backup', self.backup,
                                arg_synopsis='[DIRECTORY|URL]...')

    def backup(self, args):
        """Backup data to repository

        Back up each DIRECTORY (and each --root) into the repository
        named by --repository, as a new generation of this client
        (--client-name, by default the host name).  A root may also be
        an sftp:// URL of a directory on a server.  Files unchanged
        since the previous generation are not read again, and data
        already in the repository is not stored again.

        A long backup commits a checkpoint generation every --checkpoint
        bytes, so an interrupted run loses little: the next run does not
        upload that data again.  Use --exclude, --exclude-from, --include,
        --exclude-caches and --one-file-system to choose what is backed
        up, --pretend to see what would be, and forget --keep afterwards
        to remove old generations.

        At the end a summary says how many files were backed up (of
        those found), how much new file data was uploaded (as stored:
        compressed and encrypted), how much was downloaded and uploaded
        in all, and the overhead: the bytes moved beyond the new file
        data (reading what the repository has, writing metadata), with
        its share of all bytes moved.  With --pretend nothing is backed
        up or uploaded and the summary says so; a line before it says
        how many files a real run would back up, and how much data.

        The exit code is 0 when everything was backed up, and 1 when
        some files could not be (each is reported on stderr) or when the
        backup failed.
        """
        settings = self.app.settings
        if not settings['repository']:
            raise obnamlib.errors.RepositorySettingMissingError()
        roots = list(settings['root']) + list(args)
        if not roots:
            raise backup_engine.BackupRootMissingError()
        fs, paths = open_live_fs(roots, settings)
        display = ProgressDisplay(self.app.ui.progress())
        progress = backup_progress.BackupProgress(
            on_error=self.app.ui.error, on_change=display.update,
            on_notice=json_output.notices(self.app.ui, settings),
            pretend=settings['pretend'])
        excluder = obnamlib.engine.pathname_excluder.from_settings(settings)
        for error in excluder.errors:
            progress.general_error(error)
        options = make_options(settings, excluder)
        try:
            generation_id = self._run(fs, options, progress, paths)
        finally:
            display.finish()
            fs.close()
        progress.log_statistics()
        if json_output.wanted(settings):
            json_output.write(self.app.ui.output, summary_documents.backup(
                progress, settings['client-name'], generation_id))
        else:
            self._write_summary(progress)
        if progress.errors:
            raise backup_engine.BackupErrors()

    def _write_summary(self, progress):
        """The text summary (§6.9), after a pretend run's notice."""
        if progress.pretend:
            self.app.ui.notify(progress.pretend_line())
        if not self.app.settings['quiet']:
            for line in progress.summary_lines():
                self.app.ui.output.write(line + '\n')

    def _run(self, fs, options, progress, paths):
        """Back up the paths; the new generation's id as `genids` spells
        it (None when pretending)."""
        backup_engine.check_roots(fs, paths)
        progress.what('connecting to repository')
        opened = False
        try:
            with self.app.open_repository(
                    lock='none', create=not options.pretend) as repo:
                opened = True
                if repo.created:
                    self.app.ui.error(created_notice(options.repository_url))
                progress.count_uploads_in(repo.fs)
                engine = backup_engine.BackupEngine(
                    repo, fs, options, progress, repo_io=repo.fs)
                engine.run(paths)
                if options.pretend:
                    return None
                return repo.make_generation_spec(engine.commits.gen)
        except obnamlib.errors.ObnamError:
            if options.pretend and not opened:
                self.app.ui.error(
                    "You are using --pretend without an existing backup "
                    "repository. That can't work, sorry.")
            raise


def created_notice(url):
    """Said once, on stderr, when a backup made the repository: a mistyped
    path or an unmounted disk shows at the first run, not at the first
    restore."""
    if obnamlib.vfs.factory.parse_scheme(url) == '':
        url = os.path.abspath(url)
    return 'Created a new repository at %s' % url


def make_options(settings, excluder):
    """BackupOptions from the application's settings."""
    exclusions = obnamlib.engine.walker.Exclusions(
        # No exclude patterns: no per-path test at all (the common case).
        exclude_path=excluder.excluding_pattern if excluder.excludes
        else None,
        exclude_caches=settings['exclude-caches'],
        one_file_system=settings['one-file-system'],
        log=logging.debug)
    return backup_engine.BackupOptions(
        client_name=settings['client-name'],
        chunk_size=settings['chunk-size'],
        checkpoint=settings['checkpoint'],
        deduplicate=settings['deduplicate'],
        leave_checkpoints=settings['leave-checkpoints'],
        pretend=settings['pretend'],
        now=lambda: int(obnamlib.cli.clock.now(settings)),
        exclusions=exclusions,
        fail_matching=[re.compile(os.fsencode(pattern))
                       for pattern in settings['testing-fail-matching']],
        repository_url=settings['repository'],
        key_id=settings['encrypt-with'])


class ProgressDisplay:
    """Feeds the terminal display at most ten times a second."""

    def __init__(self, terminal):
        self.terminal = terminal
        self.next_update = 0.0

    def update(self, progress):
        now = time.monotonic()
        if now < self.next_update:
            return
        self.next_update = now + 0.1
        self.terminal.status(' '.join(progress.progress_lines()))

    def finish(self):
        """Leave nothing on the terminal: the summary follows, and the
        application finishes the display at exit."""
        self.terminal.status('')
        self.terminal.clear()
