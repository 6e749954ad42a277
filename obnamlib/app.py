"""The obnam command-line application: settings, configuration, logging,
plugins, and how a run ends (cli.md §1-§3, §13).

Built on Debian's python3-cliapp.  What we change in it, and why:
configuration files may repeat a key (last wins, as Obnam 1.x allowed);
bad values in files are one-line errors instead of tracebacks; a missing
`--config` file is a clean error; `--dump-config` writes values verbatim;
errors print one line on stderr and put the traceback in the log only.
"""

import configparser
import contextlib
import copy
import importlib
import io
import logging
import os
import pkgutil
import socket
import sys
import traceback

import cliapp

import obnamlib
from obnamlib import errors, plugin, repo_opening, ui
from obnamlib.version import __version__

PERF_GROUP = 'Performance tweaking'
DEVEL_GROUP = 'Development of Obnam itself'

DESCRIPTION = 'Back up files to, and restore them from, an Obnam repository.'


class ObnamSettings(cliapp.Settings):
    """cliapp settings with Obnam 1.x's tolerance of configuration files."""

    def load_configs(self, open_file=open):
        self._all_config_data = {}
        for pathname in self.config_files:
            try:
                f = open_file(pathname, encoding='utf-8',
                              errors='surrogateescape')
            except OSError as e:
                if pathname in self._required_config_files:
                    raise cliapp.AppException(
                        '%s: %s' % (pathname, e.strerror or e))
                continue
            with f:
                if pathname.endswith('.yaml'):
                    self._read_yaml(pathname, f)
                else:
                    self._read_ini(pathname, f)

    def _read_ini(self, pathname, f):
        cp = configparser.ConfigParser(strict=False)
        cp.add_section('config')
        try:
            cp.read_file(f, source=pathname)
            items = [(name, cp.get('config', name))
                     for name in cp.options('config')]
            others = {section: dict(cp.items(section))
                      for section in cp.sections() if section != 'config'}
        except configparser.Error as e:
            raise cliapp.AppException(
                '%s: %s' % (pathname, str(e).splitlines()[0]))
        for name, value in items:
            s = self.set_from_raw_string(pathname, name, value)
            _check_file_value(pathname, name, s)
            if hasattr(s, 'using_default_value'):
                s.using_default_value = True
        for section, data in others.items():
            self._all_config_data.setdefault(section, {}).update(data)

    def dump_config(self, output):
        output.write(self.config_text())

    def config_text(self):
        """The effective configuration as an INI file (cli.md §2.5)."""
        lines = ['[config]']
        for name in self._canonical_names:
            value = self._settingses[name].format()
            lines.append('%s = %s' % (name, value.replace('\n', '\n\t')))
        lines.append('')
        for section, data in self._all_config_data.items():
            lines.append('[%s]' % section)
            for key, value in data.items():
                lines.append('%s = %s' % (key, str(value).replace('\n', '\n\t')))
            lines.append('')
        return '\n'.join(lines) + '\n'

    def setting(self, name):
        """The Setting object behind a name or alias."""
        return self._settingses[name]


def _check_file_value(pathname, name, setting):
    """Integers must be integers and choices one of the listed words: a
    one-line error now, instead of a traceback later."""
    if isinstance(setting, cliapp.settings.IntegerSetting):
        try:
            setting.value
        except ValueError:
            raise cliapp.AppException(
                '%s: %s: not an integer: %s'
                % (pathname, name, setting._string_value))
    if isinstance(setting, cliapp.settings.ChoiceSetting):
        if setting.value not in setting.choices:
            raise cliapp.AppException(
                '%s: %s = %s is not one of %s' %
                (pathname, name, setting.value, ', '.join(setting.choices)))


class ObnamApp(cliapp.Application):
    """The obnam program: core settings, plugins, and the run's end."""

    def __init__(self, stdout=None, stderr=None):
        super().__init__(progname='obnam', version=__version__,
                         description=DESCRIPTION)
        self.settings = ObnamSettings(
            'obnam', __version__, usage=self._format_usage,
            description=self._format_description)
        self.memory_profile_dumper = cliapp.MemoryProfileDumper(self.settings)
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.plugins = []
        self.exit_code = 0
        self.ui = None
        self.output = self.stdout
        self._unimplemented = set()
        self._defaults = {}
        self._logging_ready = False

    # --- settings ---------------------------------------------------------

    def add_settings(self):
        self.settings['log-level'] = 'info'
        add_core_settings(self.settings)
        self.accept_unimplemented(
            'upload-queue-size', 'lru-size', 'idpath-depth', 'idpath-bits',
            'idpath-skip', 'trace', 'crash-limit', 'checksum-algorithm',
            'dir-cache-size', 'dir-bag-size', 'chunk-cache-size',
            'chunk-bag-size', 'dump-memory-profile', 'memory-dump-interval')

    def accept_unimplemented(self, *names):
        """These settings are accepted but do nothing yet: say so in the
        log whenever one of them is set to a value other than its default."""
        self._unimplemented.update(names)

    def implemented(self, *names):
        """These settings are honoured now (undoes accept_unimplemented)."""
        self._unimplemented.difference_update(names)

    def _remember_defaults(self):
        self._defaults = {name: copy.deepcopy(self.settings[name])
                          for name in self.settings.keys()}

    def _log_unimplemented_settings(self):
        for name in sorted(self._unimplemented):
            if name in self._defaults and \
                    self.settings[name] != self._defaults[name]:
                logging.warning(
                    'Setting %s is accepted but not implemented in this '
                    'version; it has no effect', name)

    # --- plugins ----------------------------------------------------------

    def setup_plugin_manager(self):
        """Plugins are found by file name and imported as package modules
        (so their error classes exist once, whoever imports them)."""
        self.plugins = load_plugins(self)

    def enable_plugins(self):
        for p in self.plugins:
            p.app = self
            p.enable_wrapper()

    def disable_plugins(self):
        for p in self.plugins:
            p.disable_wrapper()

    # --- running ----------------------------------------------------------

    def _run(self, args=None, stderr=None, log=None):
        try:
            self._run_subcommand(sys.argv[1:] if args is None else args)
        except BaseException as e:
            self.exit_code = self._report_failure(e)
        finally:
            if self.ui is not None:
                self._close_ui()
        if self.exit_code == 0 and self._logging_ready:
            logging.info('obnam version %s ends normally', __version__)

    def _run_subcommand(self, args):
        self._set_process_name()
        self.add_settings()
        self.setup_plugin_manager()
        self.setup()
        self.enable_plugins()
        self.add_default_subcommands()
        self._remember_defaults()
        self.parse_args(args, configs_only=True)
        self.settings.load_configs()
        args = self.parse_args(args)
        self.setup_logging()
        self._logging_ready = True
        self.log_config()
        self.ui = ui.UserInterface(
            quiet=self.settings['quiet'],
            output_filename=self.settings['output'],
            stdout=self.stdout, stderr=self.stderr)
        self.output = self.ui.output
        for p in self.plugins:
            p.settings_ready()
        self.process_args(args)
        self.cleanup()
        self.disable_plugins()

    def _close_ui(self):
        try:
            self.ui.close()
        except BrokenPipeError:
            pass

    def _report_failure(self, e):
        """Tell the user in one line, the log in full; return exit code."""
        if isinstance(e, SystemExit):
            return self._system_exit(e)
        if isinstance(e, KeyboardInterrupt):
            self._log_traceback('Interrupted by the user')
            return 255
        if isinstance(e, BrokenPipeError):
            return 1
        if isinstance(e, OSError) and e.errno is not None:
            e = errors.ObnamSystemError(
                filename=e.filename or '', errno=e.errno, strerror=e.strerror)
            text = str(e)
        elif isinstance(e, (errors.ObnamError, cliapp.AppException)):
            text = str(e)
        else:
            text = '%s: %s' % (type(e).__name__, str(e).splitlines()[0]
                               if str(e) else '')
        self._log_traceback('ERROR: %s' % text)
        self._tell('ERROR: %s\n' % text)
        return 1

    def _system_exit(self, e):
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        self._log_traceback('ERROR: %s' % e.code)
        self._tell('ERROR: %s\n' % e.code)
        return 1

    def _tell(self, text):
        try:
            if self.ui is not None:
                self.ui.error(text)
            else:
                self.stderr.write(text)
                self.stderr.flush()
        except BrokenPipeError:
            pass

    def _log_traceback(self, what):
        if self._logging_ready:
            logging.critical('%s\n%s', what, traceback.format_exc())

    def log_config(self):
        logging.info('obnam version %s starts', __version__)
        logging.debug('sys.argv: %r', sys.argv)
        logging.debug('current working directory: %s', os.getcwd())
        logging.debug('uid: %d, effective uid: %d, gid: %d, effective gid: %d',
                      os.getuid(), os.geteuid(), os.getgid(), os.getegid())
        for name in sorted(os.environ):
            logging.debug('environment: %s=%s', name, os.environ[name])
        logging.debug('Config:\n%s', self.settings.config_text())
        logging.debug('Python version: %s', sys.version)
        self._log_unimplemented_settings()

    # --- what plugins use ---------------------------------------------------

    def open_repository(self, lock='none', create=False, client_name=None,
                        **overrides):
        """Context manager: the repository, with locks of level `lock`
        ('none', 'client' or 'everything'), released at the end."""
        return repo_opening.opened_repository(
            self.settings, lock=lock, create=create, client_name=client_name,
            **overrides)

    # --- core subcommands -------------------------------------------------

    def cmd_list_formats(self, args):
        """List the repository formats this obnam can read and write."""
        from obnamlib import repo_factory
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
    """One instance of each ObnamPlugin class in obnamlib/plugins/*_plugin.py,
    in file name order."""
    directory = os.path.join(os.path.dirname(obnamlib.__file__), 'plugins')
    names = sorted(name[:-len('.py')] for name in os.listdir(directory)
                   if name.endswith('_plugin.py'))
    found = []
    for name in names:
        module = importlib.import_module('obnamlib.plugins.' + name)
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
