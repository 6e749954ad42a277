"""restore: copy a generation's files out of the repository (§5.2, §8).

The work is done by obnamlib.engine.restorer; here we check the settings, open
the repository (no locks: restore may run beside a backup) and the target,
and turn the engine's reports into output, progress, the summary and the
log statistics.
"""

import logging
import os
import time

from obnamlib import errors
from obnamlib.cli import humanise, json_output, plugin, summary_documents
from obnamlib.engine import restorer
from obnamlib.vfs import factory as vfs


class NoToError(errors.ObnamError):
    code = 'R7A971X'
    msg = 'The restore command wants a target set with --to'


class RestoreToStdoutError(errors.ObnamError):
    """`--to -` would quietly make a directory named `-` (#28)."""
    code = 'RB0378X'
    msg = ('restore --to - would make a directory named "-": restore '
           'writes into a directory; for one file, use obnam cat PATH > file')


class WrongNumberOfGenerationSettingsError(errors.ObnamError):
    code = 'R2FA37X'
    msg = 'The restore command wants exactly one generation option'


class RestorePlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string(['to'], 'where to restore or FUSE mount; for restores, '
                 'must be empty or must not exist', metavar='DIR')
        s.string_list(['generation'], 'which generation to restore or '
                      'list', default=['latest'], metavar='GENERATION')
        s.boolean(['always-restore-setuid'], 'restore setuid/setgid bits '
                  'even when not root and not the owner')
        self.app.add_subcommand('restore', self.restore,
                                arg_synopsis='[DIRECTORY]...')

    def restore(self, args):
        """Restore some or all files from a generation"""
        settings = self.app.settings
        if not settings['to']:
            raise NoToError()
        if settings['to'] == '-':
            raise RestoreToStdoutError()
        spec = self.one_generation_spec(WrongNumberOfGenerationSettingsError)
        client_name = settings['client-name']
        with self.app.open_repository() as repo:
            gen = repo.interpret_generation_spec(client_name, spec)
            with vfs.open_vfs(settings['to'], settings) as fs:
                self._restore(repo, gen, fs, client_name,
                              [os.fsencode(a) for a in args])

    def _restore(self, repo, gen, fs, client_name, paths):
        settings = self.app.settings
        reporter = UiReporter(self.app.ui, repo, gen, full=not paths,
                              notify=json_output.notices(self.app.ui,
                                                         settings))
        engine = restorer.Restorer(
            repo, gen, fs, os.fsencode(fs.root), reporter=reporter,
            always_restore_setuid=settings['always-restore-setuid'],
            pretend=settings['pretend'], client_name=client_name,
            target_display=settings['to'])
        storage = repo.fs
        read_before = storage.bytes_read
        logging.info('Restoring generation %s of %s to %s',
                     repo.make_generation_spec(gen), client_name,
                     settings['to'])
        try:
            engine.restore(paths or None)
        except restorer.RestoreErrors:
            self._finish(repo, engine, reporter,
                         storage.bytes_read - read_before)
            raise
        self._finish(repo, engine, reporter, storage.bytes_read - read_before)

    def _finish(self, repo, engine, reporter, read):
        """The summary (also after per-file errors) and the log
        statistics; `read` is what the run read from the repository."""
        stats = engine.stats
        stats.ended = stats.ended or time.time()
        downloaded = max(read, stats.bytes)
        duration = stats.duration
        self.app.ui.progress().remove()
        for line in statistics_lines(stats.files, downloaded, duration):
            logging.info('%s', line)
        if json_output.wanted(self.app.settings):
            json_output.write(self.app.ui.stdout, summary_documents.restore(
                client=engine.client_name,
                generation_id=repo.make_generation_spec(engine.gen),
                target=self.app.settings['to'], pretend=engine.pretend,
                stats=stats, bytes_downloaded=downloaded,
                errors=reporter.errors))
        else:
            self.app.ui.notify(summary_line(stats.files, downloaded,
                                            duration))


def summary_line(files, downloaded, duration):
    """The end-of-restore summary of §8."""
    return ('Restored %d files, downloaded %s in %s at %s average speed' %
            (files, humanise.size(downloaded), humanise.duration(duration),
             humanise.speed(downloaded, duration)))


def statistics_lines(files, downloaded, duration):
    """The log statistics block of §13.2."""
    return [
        'Restore performance statistics:',
        '* files restored: %d' % files,
        '* downloaded data: %d bytes (%s)' % (downloaded,
                                             humanise.size(downloaded)),
        '* duration: %s s (%s)' % (duration, humanise.duration(duration)),
        '* average speed: %s' % humanise.speed(downloaded, duration),
    ]


class UiReporter(restorer.RestoreReporter):
    """Restore reports on the app's channels; progress on the terminal as
    `N files SIZE SPEED PATH`, and `ETA 1m20s N files SIZE (P %) SPEED
    PATH` when the total is known (a whole generation).  Notices go to
    `notify` (by default ui.notify); error lines are counted."""

    def __init__(self, ui, repo, gen, full, clock=time.time, notify=None):
        self.ui = ui
        self.notify_channel = notify or ui.notify
        self.errors = 0             # error lines reported
        self.progress = ui.progress()
        self.clock = clock
        self.started = clock()
        self.files = 0
        self.bytes = 0
        self.total_bytes = None
        self.next_update = 0
        if full:
            self.total_bytes = _generation_key(repo, gen, 'total_data')

    def error(self, text):
        self.errors += 1
        logging.error('%s', text)
        self.ui.error(text)

    def notify(self, text):
        logging.warning('%s', text)
        self.notify_channel(text)

    def log(self, text):
        logging.info('%s', text)

    def downloaded(self, size):
        self.bytes += size

    def restored(self, path, metadata):
        self.files += 1
        now = self.clock()
        if now >= self.next_update:
            self.next_update = now + 0.1
            self.progress.status(self._status(path))

    def _status(self, path):
        elapsed = max(self.clock() - self.started, 1e-9)
        speed = humanise.speed(self.bytes, elapsed)
        shown = path.decode('utf-8', 'backslashreplace')
        if not self.total_bytes:
            return '%d files %s %s %s' % (
                self.files, humanise.size(self.bytes), speed, shown)
        percent = min(100.0, 100.0 * self.bytes / self.total_bytes)
        rate = self.bytes / elapsed
        return '%s %d files %s (%.0f %%) %s %s' % (
            eta(self.total_bytes - self.bytes, rate), self.files,
            humanise.size(self.bytes), percent, speed, shown)


def eta(bytes_left, rate):
    """`ETA 1m20s`: the time left at the average rate so far (`ETA ?`
    before anything was downloaded)."""
    if rate <= 0:
        return 'ETA ?'
    return 'ETA %s' % (humanise.duration(round(max(bytes_left, 0) / rate))
                       or '0s')


def _generation_key(repo, gen, key):
    try:
        return repo.get_generation_key(gen, key)
    except errors.ObnamError:
        return None
