"""The base class of obnam's plugins: one module per command group.

Each `obnamlib/cli/plugins/*_plugin.py` defines one subclass of `ObnamPlugin`.
The application finds it, sets `self.app`, and calls `enable()`, which
registers the group's settings and subcommands.  The API a plugin uses:

* Settings: register in `enable()` with the methods of
  obnamlib.cli.settings.Settings
  (`self.app.settings.string([...], help, default=..., group=...)`,
  `.boolean`, `.integer`, `.bytesize`, `.choice`, `.string_list`); read
  them in a command with `self.app.settings['name']`.  A setting that is
  accepted but not honoured yet is named in
  `self.app.accept_unimplemented('name', ...)`; the log then says so
  when someone sets it.
* Subcommands: `self.app.add_subcommand('name', self.method,
  arg_synopsis='[FILE]...')`; the method gets the list of arguments and
  its docstring's first line is the help summary.
* Output (obnamlib/cli/ui.py): `self.app.ui.output` (stdout, or the `--output`
  file) for results; `self.app.ui.stdout` for what 1.x always printed on
  stdout; `self.app.ui.notify(text)` for messages `--quiet` silences;
  `self.app.ui.error(text)` for per-item errors (stderr, always);
  `self.app.ui.progress()` for a progress reporter to hand to an engine.
  Engines never print.
* Repository: `with self.app.open_repository(lock='none'|'client'|
  'everything', create=False) as repo:` gives an
  `obnamlib.repo.interface.Repository`; the locks taken are released
  when the block ends, also on errors.  Commit inside the block.
* `settings_ready()` is called after the settings are parsed and before
  the subcommand runs (for notices about settings).
* Errors: raise an `obnamlib.errors.ObnamError` subclass; the application
  prints `ERROR: CODE: message` and exits 1.  Return normally for
  success; set `self.app.exit_code` for other exit codes (nagios).
"""

from obnamlib import errors
from obnamlib.cli import json_output


class NotImplementedYet(errors.ObnamError):
    """A command (or a use of one) that this version does not do yet."""
    code = 'R43CB2X'
    msg = '{what} is not implemented yet in this version of obnam'


class ObnamPlugin:
    """A command group: settings plus subcommands, enabled by the app."""

    def __init__(self, app=None):
        self.app = app

    def enable(self):
        """Register settings and subcommands (override)."""

    def disable(self):
        """Undo enable (nothing to undo by default)."""

    def settings_ready(self):
        """Called once settings are final and `self.app.ui` exists, before
        the subcommand runs: for checks and notices about settings."""

    @property
    def client_name(self):
        """The client the command works on (--client-name)."""
        return self.app.settings['client-name']

    def json_wanted(self):
        """Whether --output-format=json asks for one JSON document."""
        return json_output.wanted(self.app.settings)

    def require_client(self, repo):
        """Fail clearly when the repository has no such client, before
        any generation is looked up."""
        if self.client_name not in repo.get_client_names():
            raise errors.ClientDoesNotExistError(
                client=self.client_name,
                repo=self.app.settings['repository'])

    def one_generation_spec(self, error_class):
        """The one --generation a command that reads one generation
        takes; `error_class` (the command's own code) if there are more
        or none."""
        specs = self.app.settings['generation'] or []
        if len(specs) != 1:
            raise error_class()
        return specs[0]

    def not_implemented(self, what):
        """Fail clearly instead of doing the wrong thing."""
        raise NotImplementedYet(what=what)
