"""verify: compare backed-up data with live data (§5.9, §9).

The comparison is obnamlib.engine.verifier's; this module picks the generation
and the paths, and reports failures where Obnam 1.x did: on stdout, or on
stderr with --quiet; success is one line on stdout.
"""

import time

import obnamlib.errors
import obnamlib.engine.verifier
import obnamlib.cli.settings
from obnamlib.cli import plugin
from obnamlib.cli.live_fs import open_live_fs


class WrongNumberOfGenerationsForVerify(obnamlib.errors.ObnamError):
    code = 'R3B42AX'
    msg = 'verify must be given exactly one generation'


class VerifyPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.integer(['verify-randomly'], 'verify N files '
                                  'chosen at random (0 = all)',
                                  metavar='N')
        self.app.add_subcommand('verify', self.verify,
                                arg_synopsis='[DIRECTORY]...')

    def verify(self, args):
        """Verify that live data and backed up data match"""
        settings = self.app.settings
        spec = self.one_generation_spec(WrongNumberOfGenerationsForVerify)
        roots = list(args) or list(settings['root'])
        if not roots:
            raise obnamlib.cli.settings.RequiredSettingMissing(name='root')
        fs, paths = open_live_fs(roots, settings)
        display = VerifyDisplay(self.app.ui.progress())
        try:
            with self.app.open_repository(lock='none') as repo:
                client = settings['client-name']
                gen = repo.interpret_generation_spec(client, spec)
                checker = obnamlib.engine.verifier.Verifier(
                    repo, fs, gen, self._report, on_file=display.update)
                count = settings['verify-randomly']
                if count:
                    self.app.ui.notify(
                        'finding all files to choose randomly')
                    failures = checker.verify_randomly(paths, count)
                else:
                    failures = checker.verify_paths(paths)
        finally:
            display.finish()
            fs.close()
        if failures:
            self.app.exit_code = 1
        else:
            self.app.ui.stdout.write('Verify did not find problems.\n')

    def _report(self, failure):
        text = 'verify failure: %s' % failure.first_line()
        if self.app.settings['quiet']:
            self.app.ui.error(text)
        else:
            self.app.ui.notify(text)


class VerifyDisplay:
    """`ELAPSED verifying file N: PATH`, at most ten times a second."""

    def __init__(self, terminal):
        self.terminal = terminal
        self.started = time.monotonic()
        self.count = 0
        self.next_update = 0.0

    def update(self, path, size):
        self.count += 1
        now = time.monotonic()
        if now < self.next_update:
            return
        self.next_update = now + 0.1
        elapsed = int(now - self.started)
        self.terminal.status('%02dh%02dm%02ds verifying file %d: %s' % (
            elapsed // 3600, elapsed // 60 % 60, elapsed % 60, self.count,
            path.decode('utf-8', 'backslashreplace')))

    def finish(self):
        """Leave nothing on the terminal: the summary follows, and the
        application finishes the display at exit."""
        self.terminal.status('')
        self.terminal.clear()
