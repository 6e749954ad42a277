"""The obnam program: core settings (cli.md §3.1), plugin loading, and the
commands that need no plugin (`list-formats`, `list-errors`).

The command-line machinery (settings, configuration files, option
parsing, logging, how a run ends) is obnamlib.cli.application and the
modules it uses.
"""

import contextlib
import copy
import importlib
import io
import logging
import os
import pkgutil
import socket
import sys

import obnamlib
import obnamlib.cli.plugins
from obnamlib.cli import application, plugin
from obnamlib import errors
from obnamlib.repo import opening as repo_opening
from obnamlib.version import __version__

PERF_GROUP = 'Performance tweaking'
DEVEL_GROUP = 'Development of Obnam itself'

DESCRIPTION = 'Back up files to, and restore them from, an Obnam repository.'


class ObnamApp(application.Application):
    """The obnam program: core settings, plugins, list-formats and
    list-errors."""

    def __init__(self, stdout=None, stderr=None):
        super().__init__(progname='obnam', version=__version__,
                         description=DESCRIPTION, stdout=stdout,
                         stderr=stderr)
        self.plugins = []
        self._unimplemented = set()
        self._defaults = {}

    # --- settings ---------------------------------------------------------

    def add_settings(self):
        self.settings['log-level'] = 'info'
        add_core_settings(self.settings)
        self.accept_unimplemented(
            'upload-queue-size', 'lru-size', 'idpath-depth', 'idpath-bits',
            'idpath-skip', 'trace', 'crash-limit', 'checksum-algorithm',
            'dir-cache-size', 'dir-bag-size', 'chunk-cache-size',
            'chunk-bag-size')

    def accept_unimplemented(self, *names):
        """These settings are accepted but do nothing yet: say so in the
        log whenever one of them is set to a value other than its default."""
        self._unimplemented.update(names)

    def implemented(self, *names):
        """These settings are honoured now (undoes accept_unimplemented)."""
        self._unimplemented.difference_update(names)

    def all_settings_added(self):
        self._defaults = {name: copy.deepcopy(self.settings[name])
                          for name in self.settings.keys()}

    def _log_unimplemented_settings(self):
        for name in sorted(self._unimplemented):
            if name in self._defaults and \
                    self.settings[name] != self._defaults[name]:
                logging.warning(
                    'Setting %s is accepted but not implemented in this '
                    'version; it has no effect', name)

    def log_config(self):
        super().log_config()
        self._log_unimplemented_settings()

    # --- plugins ----------------------------------------------------------

    def setup_plugin_manager(self):
        """Plugins are found by file name and imported as package modules
        (so their error classes exist once, whoever imports them)."""
        self.plugins = load_plugins(self)

    def enable_plugins(self):
        for p in self.plugins:
            p.app = self
            p.enable()

    def settings_ready(self):
        for p in self.plugins:
            p.settings_ready()

    def disable_plugins(self):
        for p in self.plugins:
            p.disable()

    # --- what plugins use ---------------------------------------------------

    def open_repository(self, lock='none', create=False, client_name=None,
                        on_stale_lock=None, **overrides):
        """Context manager: the repository, with locks of level `lock`
        ('none', 'client' or 'everything'), released at the end.  A stale
        lock broken on the way is told through the user interface (so it
        does not run into the progress line)."""
        return repo_opening.opened_repository(
            self.settings, lock=lock, create=create, client_name=client_name,
            on_stale_lock=on_stale_lock or self.ui.error, **overrides)

    # --- core subcommands -------------------------------------------------

    def cmd_list_formats(self, args):
        """List the repository formats this obnam can read and write."""
        from obnamlib.repo import factory as repo_factory
        for name in repo_factory.SUPPORTED_FORMATS:
            self.ui.output.write('%s\n' % name)

    def cmd_list_errors(self, args):
        """List every error obnam can report, with its code, as Markdown."""
        import_all_modules()
        self.ui.output.write(error_catalogue(errors.all_error_classes()))


def add_core_settings(settings):
    """The settings of cli.md §3.1 (and the 1.21 green-albatross ones)."""
    settings.string(['repository', 'r'], 'name of backup repository '
                    '(a local path or an sftp:// URL)', metavar='URL')
    settings.string(['client-name'], 'name of this client in the repository',
                    default=socket.gethostname(), metavar='NAME')
    settings.boolean(['quiet', 'silent'], 'be silent: no progress display, '
                     'no messages except errors')
    settings.boolean(['verbose'], 'be more verbose (diff prints ls-style '
                     'lines)')
    settings.boolean(['pretend', 'dry-run', 'no-act'],
                     'do not change the repository or the file system, '
                     'only show what would happen')
    settings.choice(['output-format'], ['text', 'json'],
                    'write results as text (as Obnam 1.x did) or as one '
                    'JSON document (keys in doc/json-output.md)',
                    metavar='FORMAT')
    settings.integer(['lock-timeout'], 'wait at most N seconds for a '
                     'repository lock (0 = try once)', default=60,
                     metavar='N')
    settings.choice(['repository-format'],
                    ['6', 'green-albatross-20160813', 'green-albatross'],
                    'use FORMAT for new repositories (only 6 is supported)',
                    metavar='FORMAT')
    settings.bytesize(['node-size'], 'size of B-tree nodes of new B-trees',
                      default=256 * 1024, group=PERF_GROUP)
    settings.bytesize(['chunk-size'], 'size of file data chunks',
                      default=1024 * 1024, group=PERF_GROUP)
    settings.bytesize(['upload-queue-size'], 'length of the B-tree node '
                      'upload queue (a count)', default=1024, group=PERF_GROUP)
    settings.bytesize(['lru-size'], 'number of B-tree nodes cached '
                      '(a count)', default=256, group=PERF_GROUP)
    settings.integer(['idpath-depth'], 'depth of the chunk directory tree',
                     default=3, group=PERF_GROUP)
    settings.integer(['idpath-bits'], 'bits of the chunk id per chunk '
                     'directory level', default=12, group=PERF_GROUP)
    settings.integer(['idpath-skip'], 'low bits of the chunk id not used '
                     'for chunk directories', default=13, group=PERF_GROUP)
    settings.string_list(['trace'], 'add debug log lines for source files '
                         'matching PATTERN', metavar='PATTERN',
                         group=DEVEL_GROUP)
    settings.string(['pretend-time'], 'use TIMESTAMP (YYYY-MM-DD HH:MM:SS, '
                    'local time) as the current time', metavar='TIMESTAMP',
                    group=DEVEL_GROUP)
    settings.integer(['crash-limit'], 'crash after N repository writes '
                     '(testing; 0 = never)', metavar='N', group=DEVEL_GROUP)
    settings.choice(['checksum-algorithm'],
                    ['sha512', 'sha224', 'sha256', 'sha384'],
                    'checksum algorithm (green-albatross only; ignored)',
                    metavar='ALGORITHM')
    for name, default in (('dir-cache-size', 256 * 2 ** 20),
                          ('dir-bag-size', 2 ** 20),
                          ('chunk-cache-size', 2 ** 20),
                          ('chunk-bag-size', 2 ** 20)):
        settings.bytesize([name], 'green-albatross only; ignored',
                          default=default, group=PERF_GROUP)


def load_plugins(app):
    """One instance of each ObnamPlugin class in obnamlib/cli/plugins/*_plugin.py,
    in file name order."""
    names = sorted(info.name for info in
                   pkgutil.iter_modules(obnamlib.cli.plugins.__path__)
                   if info.name.endswith('_plugin'))
    found = []
    for name in names:
        module = importlib.import_module('obnamlib.cli.plugins.' + name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, plugin.ObnamPlugin) \
                    and obj.__module__ == module.__name__:
                found.append(obj(app))
    return found


def import_all_modules():
    """Import every obnamlib module so that every error class exists."""
    for info in pkgutil.walk_packages(obnamlib.__path__, 'obnamlib.'):
        try:
            importlib.import_module(info.name)
        except ImportError as e:     # optional dependency (e.g. fuse)
            logging.debug('list-errors: cannot import %s: %s', info.name, e)


def error_catalogue(classes):
    """Markdown list of error classes by code and by name (1.20+ form)."""
    out = io.StringIO()
    out.write('# Obnam error messages\n\n## By error code\n\n')
    for cls in sorted(classes, key=lambda c: (c.code, c.__name__)):
        out.write('* `%s %s`\n' % (cls.code, cls.__name__))
    out.write('\n## By name\n\n')
    for cls in sorted(classes, key=lambda c: (c.__name__, c.code)):
        out.write('`%s` (`%s`)\n: %s\n\n'
                  % (cls.__name__, cls.code, cls.msg.replace('\n', '\n  ')))
    return out.getvalue()


def main():
    """Entry point of bin/obnam."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, io.UnsupportedOperation):
            stream.reconfigure(errors='surrogateescape')
    app = ObnamApp()
    app.run()
    sys.exit(app.exit_code)
