"""A run of a command-line program with subcommands (cli.md §1, §13):
settings, configuration files, logging, the subcommand, and how it ends.

The steps: register settings and subcommands; parse the command line
for `--config`/`--no-default-configs`; read the configuration files;
parse the command line again, now setting values; set up logging and the
output channels; run the subcommand.  How a run ends:

* an `ObnamError` prints `ERROR: message` (with its code for coded
  errors) on stderr, the traceback goes to the log, exit 1;
* an `OSError` with an errno becomes `ObnamSystemError` (RD5FA4X);
* any other exception prints `ERROR: Type: first line`, exit 1;
* Ctrl-C exits 255, a broken pipe exits 1 quietly;
* usage errors (optparse) exit 2 with the usage block on stderr;
* a command may set `self.exit_code` for other codes.

With OBNAM_PROFILE=FILE in the environment the run is profiled with
cProfile into FILE.
"""

import inspect
import logging
import os
import sys
import textwrap
import traceback

from obnamlib.cli import cmdline, config_files, interruption, log_setup, ui
from obnamlib import errors
from obnamlib.cli.memory_profile import MemoryProfiler
from obnamlib.cli.settings import Settings, Uncoded


class NoSubcommand(Uncoded, errors.ObnamError):
    code = 'R958ECX'
    msg = 'must give subcommand'


class UnknownSubcommand(Uncoded, errors.ObnamError):
    code = 'R716AAX'
    msg = 'unknown subcommand {name}'


class UnknownHelpSubcommand(Uncoded, errors.ObnamError):
    code = 'R75589X'
    msg = 'Unknown subcommand {name}'


def help_width():
    """Width of `help` text: $COLUMNS, or 78."""
    try:
        return int(os.environ.get('COLUMNS', '78'))
    except ValueError:
        return 78


class Application:
    """A program with subcommands.  Subclasses register settings in
    `add_settings`, and subcommands as `cmd_NAME` methods or with
    `add_subcommand`."""

    def __init__(self, progname, version, description=None, stdout=None,
                 stderr=None):
        self.progname = progname
        self.version = version
        self.description = description
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        self.settings = Settings()
        self.config_files = config_files.ConfigFileList(progname)
        self.subcommands = {}
        self.cmd_synopsis = {}
        self.subcommand_aliases = {}
        self.hidden_subcommands = set()
        self._add_method_subcommands()
        self.memory_profiler = MemoryProfiler(self.settings)
        self.exit_code = 0
        self.ui = None
        self.output = self.stdout
        self._logging_ready = False

    # --- subcommands --------------------------------------------------------

    def _add_method_subcommands(self):
        """Every `cmd_foo_bar` method is the subcommand `foo-bar`."""
        for attr in dir(self):
            if attr.startswith('cmd_'):
                method = getattr(self, attr)
                if inspect.ismethod(method):
                    self.subcommands[attr[4:].replace('_', '-')] = method

    def add_subcommand(self, name, func, arg_synopsis=None, aliases=None,
                       hidden=False):
        """Register `func(args)` as subcommand `name`; its docstring's
        first line is its summary in help.  The first registration of a
        name wins."""
        if name in self.subcommands:
            return
        self.subcommands[name] = func
        self.cmd_synopsis[name] = arg_synopsis
        self.subcommand_aliases[name] = aliases or []
        if hidden:
            self.hidden_subcommands.add(name)

    def add_default_subcommands(self):
        self.add_subcommand('help', self.help)
        self.add_subcommand('help-all', self.help_all)

    def help(self, args):
        """Print help."""
        self._write_help(args, show_all=False)

    def help_all(self, args):
        """Print help, including hidden subcommands."""
        self._write_help(args, show_all=True)

    def _write_help(self, args, show_all):
        width = help_width()
        if args:
            name = args[0]
            if name not in self.subcommands:
                raise UnknownHelpSubcommand(name=name)
            usage = self.usage_of(name)
            text = cmdline.fill_paragraphs(self.subcommand_help(name), width)
        else:
            usage = self.usage_text()
            text = cmdline.fill_paragraphs(self.description_text(show_all),
                                           width)
        self.output.write(
            ('%s\n\n%s' % (usage, text)).replace('%prog', self.progname))

    def usage_of(self, name):
        return 'Usage: %%prog [options] %s %s' % (
            name, self.cmd_synopsis.get(name) or '')

    def usage_text(self):
        """One usage line per subcommand, hidden ones (test aids) left out
        (Obnam 1.x listed them: cli.md §1.2); `help-all` names them."""
        lines = []
        for name in self.visible_subcommands():
            prefix = 'Usage:' if not lines else ' ' * len('Usage:')
            lines.append('%s %%prog [options] %s %s' % (
                prefix, name, self.cmd_synopsis.get(name) or ''))
        return '\n'.join(lines)

    def visible_subcommands(self):
        """Subcommand names, sorted, without the hidden ones (test aids)."""
        return sorted(set(self.subcommands) - self.hidden_subcommands)

    def description_text(self, show_all=False):
        """The program's description, then one `* %prog NAME: summary`
        line per (visible) subcommand."""
        summaries = ''.join(
            '* %%prog %s: %s\n' % (name, self.summary_of(name))
            for name in sorted(self.subcommands)
            if show_all or name not in self.hidden_subcommands)
        return '%s\n%s' % (self.description or '', summaries)

    def summary_of(self, name):
        lines = (self.subcommands[name].__doc__ or '').splitlines()
        return lines[0].strip() if lines else ''

    def subcommand_help(self, name):
        doc = self.subcommands[name].__doc__ or ''
        first, newline, rest = doc.partition('\n')
        return first + '\n' + textwrap.dedent(rest) if newline else doc

    # --- hooks for subclasses -----------------------------------------------

    def add_settings(self):
        """Register the program's own settings."""

    def setup_plugin_manager(self):
        """Find plugins."""

    def enable_plugins(self):
        """Let plugins register settings and subcommands."""

    def all_settings_added(self):
        """Every setting is registered; nothing is parsed yet."""

    def settings_ready(self):
        """Settings are final and `self.ui` exists."""

    def disable_plugins(self):
        """After the subcommand."""

    # --- running ------------------------------------------------------------

    def run(self, args=None):
        """Run with `args` (default: sys.argv[1:]); sets `exit_code`."""
        filename = os.environ.get(profile_variable(self.progname), '')
        if filename:
            self._run_profiled(args, filename)
        else:
            self._run(args)

    def _run_profiled(self, args, filename):
        """The run under cProfile; a profile that cannot be written is
        an error like any other (after the command has run)."""
        import cProfile
        profiler = cProfile.Profile()
        profiler.runcall(self._run, args)
        try:
            profiler.dump_stats(filename)
        except OSError as e:
            self.exit_code = self._report_failure(e)

    def _run(self, args=None):
        try:
            with interruption.announced(self.progname, self.stderr):
                self._run_subcommand(sys.argv[1:] if args is None else args)
        except BaseException as e:
            self.exit_code = self._report_failure(e)
        finally:
            if self.ui is not None:
                self._close_ui()
        if self._logging_ready:
            self.memory_profiler.dump('at the end of the run')
        if self.exit_code == 0 and self._logging_ready:
            logging.info('%s version %s ends normally', self.progname,
                         self.version)

    def command_line(self):
        return cmdline.CommandLine(
            self.settings, self.config_files, self.progname, self.version,
            usage=self.usage_text, description=self.description_text,
            cmd_synopsis={name: synopsis for name, synopsis
                          in self.cmd_synopsis.items()
                          if name not in self.hidden_subcommands})

    def _run_subcommand(self, args):
        set_process_name(self.progname)
        self.register_everything()
        args = self.parse_command_line(args)
        self.setup_logging()
        self._logging_ready = True
        self.log_config()
        self.ui = ui.UserInterface(
            quiet=self.settings['quiet'],
            output_filename=self.settings['output'],
            stdout=self.stdout, stderr=self.stderr)
        self.output = self.ui.output
        self.settings_ready()
        self.process_args(args)
        self.disable_plugins()

    def register_everything(self):
        """Every setting and subcommand registered, as a run has them
        before it parses the command line (tools/ list them from here)."""
        self.add_settings()
        self.setup_plugin_manager()
        self.enable_plugins()
        self.add_default_subcommands()
        self.all_settings_added()

    def parse_command_line(self, args):
        """Both passes over the command line, with the configuration files
        read in between; returns the words that are not options."""
        command_line = self.command_line()
        command_line.find_config_files(args)
        config_files.load_config_files(self.settings, self.config_files)
        return command_line.parse(args)

    def process_args(self, args):
        """Run the subcommand the first word names."""
        if not args:
            raise NoSubcommand()
        self.subcommand(args[0])(args[1:])

    def subcommand(self, name):
        if name in self.subcommands:
            return self.subcommands[name]
        for real, aliases in self.subcommand_aliases.items():
            if name in aliases:
                return self.subcommands[real]
        raise UnknownSubcommand(name=name)

    def setup_logging(self):
        log_setup.setup_logging(self.settings, self.progname)

    def log_config(self):
        logging.info('%s version %s starts', self.progname, self.version)
        logging.debug('sys.argv: %r', sys.argv)
        logging.debug('current working directory: %s', os.getcwd())
        logging.debug('uid: %d, effective uid: %d, gid: %d, effective gid: %d',
                      os.getuid(), os.geteuid(), os.getgid(), os.getegid())
        for name in sorted(os.environ):
            logging.debug('environment: %s=%s', name, os.environ[name])
        logging.debug('Config:\n%s', self.settings.config_text())
        logging.debug('Python version: %s', sys.version)

    # --- how a run ends -----------------------------------------------------

    def _close_ui(self):
        """Close the output channels; later errors go to stderr."""
        try:
            self.ui.close()
        except BrokenPipeError:
            pass
        self.ui = None

    def _report_failure(self, e):
        """Tell the user in one line, the log in full; return exit code."""
        if isinstance(e, SystemExit):
            return self._system_exit(e)
        interrupted = interruption.exit_code(e)
        if interrupted is not None:
            self._log_traceback('Interrupted by %s' % (
                'the user' if isinstance(e, KeyboardInterrupt) else 'SIGTERM'))
            return interrupted
        if isinstance(e, BrokenPipeError):
            return 1
        if isinstance(e, OSError) and e.errno is not None:
            e = errors.ObnamSystemError(
                filename=e.filename or '', errno=e.errno, strerror=e.strerror)
            text = str(e)
        elif isinstance(e, errors.ObnamError):
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


def profile_variable(progname):
    """OBNAM_PROFILE for obnam: the name upper-cased, other characters
    than letters and digits as `_`, anything after a dot dropped."""
    base = os.path.basename(progname).split('.')[0]
    return ''.join(c.upper() if c.isascii() and c.isalnum() else '_'
                   for c in base) + '_PROFILE'


def set_process_name(progname):
    """Show the program's name in ps and top (Linux only)."""
    try:
        with open('/proc/self/comm', 'wb', 0) as f:
            f.write(progname[:15].encode())
    except OSError:
        pass
