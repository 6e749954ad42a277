"""fsck: check the repository's consistency (§5.11, §10).

The checking is done by obnamlib.engine.fsck_engine; here we read the settings,
open the repository (fsck takes every lock itself, before it opens any
B-tree for writing), print each problem on stderr as it is found, and a
summary at the end.  Exit 1 when a problem remains unfixed.  On a
terminal (only there: /dev/tty) a status line says what is being checked
and how far the counts have got.
"""

import logging
import time

from obnamlib import errors
from obnamlib.engine import fsck_engine
from obnamlib.cli import json_output, plugin, summary_documents
from obnamlib.cli.backup_progress import format_elapsed, format_progress_size

GROUP = 'Integrity checking (fsck)'

BOOLEANS = (
    ('fsck-fix', 'fix problems found (implies --fsck-rm-unused)'),
    ('fsck-rm-unused', 'remove chunks that no generation uses'),
    ('fsck-ignore-chunks', 'do not check file data chunks'),
    ('fsck-last-generation-only', 'check only the newest generation of '
     'each client'),
    ('fsck-skip-generations', 'do not check any generations'),
    ('fsck-skip-dirs', 'do not check the directories of generations'),
    ('fsck-skip-files', 'do not check files in generations'),
    ('fsck-skip-per-client-b-trees', 'do not check the B-trees of clients'),
    ('fsck-skip-shared-b-trees', 'do not check the shared B-trees'),
    ('fsck-skip-checksums', 'do not read chunk data to check checksums'),
)


class FsckPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        for name, help_text in BOOLEANS:
            s.boolean([name], help_text, group=GROUP)
        s.string_list(['fsck-ignore-client'], 'do not check the client '
                      'NAME', metavar='NAME', group=GROUP)
        self.app.add_subcommand('fsck', self.fsck)

    def fsck(self, args):
        """Verify internal consistency of backup repository"""
        settings = self.app.settings
        options = fsck_engine.FsckOptions.from_settings(settings)
        progress = self.app.ui.progress()
        reporter = UiReporter(self.app.ui, progress,
                              notify=json_output.notices(self.app.ui,
                                                         settings))
        with self.app.open_repository() as repo:
            fsck = fsck_engine.Fsck(repo, options, reporter)
            problems = fsck.run()
        progress.finish()
        stats = fsck.stats
        unfixed = stats.problems - stats.fixed
        summary = summary_line(stats)
        logging.info(summary)
        if json_output.wanted(settings):
            json_output.write(self.app.ui.output,
                              summary_documents.fsck(stats, problems))
        else:
            self.app.ui.output.write(summary + '\n')
        if unfixed:
            raise FsckFoundProblems(count=unfixed)


class FsckFoundProblems(errors.ObnamError):
    """fsck reports every problem as it goes; this sets the exit code."""
    code = 'R1E173X'
    msg = 'fsck found {count} problem(s) that remain'


def summary_line(stats):
    found = ('no problems' if not stats.problems else
             '%d problem(s), %d fixed' % (stats.problems, stats.fixed))
    return ('fsck checked %d client(s), %d generation(s), %d file(s), '
            '%d chunk(s): %s' % (stats.clients, stats.generations,
                                 stats.files, stats.chunks, found))


class UiReporter:
    """Problems on stderr (and the log); progress on the terminal display,
    redrawn at most ten times a second.  Repairs are notices, told to
    `notify` (by default ui.notify)."""

    PERIOD = 0.1

    def __init__(self, ui, progress, clock=time.monotonic, notify=None):
        self.ui = ui
        self.notify = notify or ui.notify
        self.progress = progress
        self.clock = clock
        self.started = clock()
        self.next_update = 0.0

    def problem(self, text):
        """Errors on stderr; what fsck repaired is a warning (cli.md §10:
        `...; deleting` goes to notify, so --quiet silences it)."""
        self.progress.clear()
        if fsck_engine.is_fixed(text):
            logging.warning('fsck: %s', text)
            self.notify(text)
        else:
            logging.error('fsck: %s', text)
            self.ui.error(text)

    def checking(self, text):
        logging.info('fsck: checking %s', text)
        self.next_update = 0.0

    def counted(self, stats):
        now = self.clock()
        if now < self.next_update:
            return
        self.next_update = now + self.PERIOD
        self.progress.status(progress_line(stats, now - self.started))


def progress_line(stats, elapsed):
    """`00h00m03s Checking client c generation 5 (1/2): 1200 files,
    300/900 chunks, 12.00 MiB` (chunk counts once chunks are looked at)."""
    line = '%s Checking %s: %d files' % (format_elapsed(elapsed),
                                         stats.phase, stats.files)
    if stats.chunks_total or stats.chunk_reads:
        line += ', %d/%d chunks, %s' % (
            stats.chunks, stats.chunks_total,
            format_progress_size(stats.chunk_bytes))
    return line
