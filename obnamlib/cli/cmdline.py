"""The command line: options for every setting, the framework options, and
help text (cli.md §1.1-§1.2).

Built on the standard library's optparse, which gives Obnam 1.x's
grammar: options anywhere, `--` ends them, unambiguous prefixes of long
options, and usage errors as a usage block plus `obnam: error: ...`
with exit status 2.  The command line is parsed twice: first only
`--config` and `--no-default-configs` act (with `--help` and `--version`,
which optparse handles at once), then the configuration files are read,
then every option sets its setting.  `--dump-config`,
`--dump-setting-names`, `--list-config-files` and `--help-all` act once
the whole command line is parsed, so their position does not matter.
"""

import optparse
import sys
import textwrap

from obnamlib.cli import manpage
from obnamlib.cli.settings import ALWAYS_PRESENT_GROUPS, CONFIG_GROUP


# --- paragraph filling ---------------------------------------------------

# The narrowest fill: a bullet's `* ` and one character.  COLUMNS may
# say less (0, or what optparse makes of it by subtracting 2).
MIN_WIDTH = 3


def fill_paragraphs(text, width=78):
    """Text re-filled to `width` (at least MIN_WIDTH): blank lines separate
    paragraphs, and lines starting with `* ` are bullet points (indented
    continuation lines belong to the bullet); a list is set apart from the
    text around it by an empty line."""
    width = max(width, MIN_WIDTH)
    filled = '\n'.join(_fill(kind, lines, width)
                       for kind, lines in _paragraphs(text))
    if text and not filled.endswith('\n'):
        filled += '\n'
    return filled


def _paragraphs(text):
    """(kind, lines) pairs, kind being 'text', 'bullet' or 'empty'."""
    kind, lines = None, []
    for line in text.splitlines(True):
        if kind == 'bullet' and line.startswith(' '):
            lines.append(line)
        elif line.startswith('* '):
            if kind is not None:
                yield kind, lines
                if kind != 'bullet':
                    yield 'empty', []
            kind, lines = 'bullet', [line]
        elif not line.strip():
            if kind is not None:
                yield kind, lines
                yield 'empty', []
            kind, lines = None, []
        else:
            if kind == 'bullet':
                yield kind, lines
                yield 'empty', []
                kind, lines = None, []
            if kind is None:
                kind = 'text'
            lines.append(line)
    if kind is not None:
        yield kind, lines


def _fill(kind, lines, width):
    words = ' '.join(' '.join(line.split()) for line in lines)
    if kind == 'empty':
        return ''
    if kind == 'text':
        return textwrap.fill(words, width=width)
    body = textwrap.fill(words[2:], width=width - 2).splitlines(True)
    return ''.join(['* ' + (body[0] if body else '')] +
                   ['  ' + line for line in body[1:]])


class ParagraphHelpFormatter(optparse.IndentedHelpFormatter):
    """optparse's help layout, with descriptions filled by paragraph."""

    def _format_text(self, text):
        return fill_paragraphs(text, width=self.width).rstrip('\n')


# --- the option parser -----------------------------------------------------

class OptionParser(optparse.OptionParser):
    """An optparse parser that remembers which setting each option came
    from (None for the framework's own options): the manual page keeps
    `--foo` and `--no-foo` together."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.origins = {}

    def add_setting_option(self, container, setting, *names, **kwargs):
        option = container.add_option(*names, **kwargs)
        self.origins[option] = setting
        return option


def option_strings(names):
    """`-x` for one-letter names, `--name` for the others."""
    return ['-' + name if len(name) == 1 else '--' + name for name in names]


def negation_strings(settings, setting):
    """`--no-NAME` for each long name of a boolean, unless that is itself
    the name of a setting."""
    return ['--no-' + name for name in setting.names
            if len(name) > 1 and ('no-' + name) not in settings]


class CommandLine:
    """Parses argv into `settings`, telling `config_files` about
    `--config` and `--no-default-configs`.

    `usage` and `description` are callables giving optparse's usage and
    description text; `cmd_synopsis` maps subcommands to their argument
    synopsis (for the manual page).  What the framework options print goes
    to `stdout` (default: sys.stdout at the time)."""

    def __init__(self, settings, config_files, progname, version, usage,
                 description, cmd_synopsis, stdout=None):
        self.settings = settings
        self.config_files = config_files
        self.progname = progname
        self.version = version
        self.usage = usage
        self.description = description
        self.cmd_synopsis = cmd_synopsis
        self._stdout = stdout

    @property
    def stdout(self):
        return self._stdout if self._stdout is not None else sys.stdout

    def find_config_files(self, argv):
        """First pass: only `--config`, `--no-default-configs`, `--help`
        and `--version` act; usage errors stop the run here."""
        self.build_parser(acting=False).parse_args(argv)

    def parse(self, argv):
        """Second pass: every option acts; returns the other words."""
        after_parsing = []
        parser = self.build_parser(acting=True, after_parsing=after_parsing)
        _, args = parser.parse_args(argv)
        for action in after_parsing:
            action()
        return args

    def help_text(self, all_options=False):
        """What `--help` (or, with all_options, `--help-all`) prints."""
        return self.build_parser(acting=False,
                                 all_options=all_options).format_help()

    def build_parser(self, acting, after_parsing=None, all_options=False):
        """The option parser.  Unless `acting`, options other than
        `--config` and `--no-default-configs` only check their values."""
        parser = OptionParser(prog=self.progname, version=self.version,
                              formatter=ParagraphHelpFormatter(),
                              usage=self.usage(),
                              description=self.description())
        groups = self._add_groups(parser)
        FrameworkOptions(self, parser, acting, after_parsing).add(
            groups[CONFIG_GROUP])
        for setting in self.settings.settings():
            container = groups[setting.group] if setting.group else parser
            self._add_setting(parser, container, setting, acting,
                              all_options)
        return parser

    def _add_groups(self, parser):
        """Option groups by name, added in sorted order."""
        names = set(ALWAYS_PRESENT_GROUPS)
        names.update(s.group for s in self.settings.settings() if s.group)
        groups = {}
        for name in sorted(names):
            groups[name] = optparse.OptionGroup(parser, name)
            parser.add_option_group(groups[name])
        return groups

    def _add_setting(self, parser, container, setting, acting, all_options):
        def shown(text):
            if all_options or not setting.hidden:
                return text
            return optparse.SUPPRESS_HELP
        names = option_strings(setting.names)
        parser.add_setting_option(
            container, setting, *names,
            action='callback', callback=_set_value if acting else _ignore,
            callback_args=(setting,), type=setting.option_type,
            nargs=1 if setting.takes_value else None,
            choices=setting.choices, help=shown(setting.help),
            metavar=setting.metavar)
        if not setting.takes_value:
            parser.add_setting_option(
                container, setting, *negation_strings(self.settings, setting),
                action='callback', callback=_set_false if acting else _ignore,
                callback_args=(setting,),
                help=shown('opposite of %s' % names[0]))
        parser.set_defaults(**{setting.name.replace('-', '_'): setting.value})


def _set_value(option, opt_str, value, parser, setting):
    setting.set_from_command_line(value)
    setting.from_command_line = True


def _set_false(option, opt_str, value, parser, setting):
    setting.value = False
    setting.from_command_line = True


def _ignore(*args):
    pass


class FrameworkOptions:
    """The options every run has besides the settings: configuration
    files, dumps, the manual page and `--help-all`."""

    def __init__(self, command_line, parser, acting, after_parsing):
        self.command_line = command_line
        self.parser = parser
        self.acting = acting
        self.after_parsing = after_parsing

    def add(self, config_group):
        later = self._after_parsing
        self._option(config_group, '--dump-setting-names',
                     later(self._dump_setting_names),
                     'write out all names of settings and quit')
        self._option(config_group, '--dump-config', later(self._dump_config),
                     'write out the entire current configuration')
        self._option(config_group, '--no-default-configs',
                     self._no_default_configs,
                     'clear list of configuration files to read')
        self._option(config_group, '--config', self._config,
                     'add FILE to config files', takes='FILE')
        self._option(config_group, '--list-config-files',
                     later(self._list_config_files),
                     'list all possible config files')
        self._option(self.parser, '--generate-manpage',
                     self._when_acting(self._generate_manpage),
                     'fill in manual page TEMPLATE', takes='TEMPLATE')
        self._option(config_group, '--help-all', later(self._help_all),
                     'show all options')

    def _option(self, container, name, callback, help_text, takes=None):
        """A framework option; `takes` is the metavar of its value."""
        kwargs = {'action': 'callback', 'callback': callback,
                  'help': help_text}
        if takes:
            kwargs.update(nargs=1, type='string', metavar=takes)
        self.parser.add_setting_option(container, None, name, **kwargs)

    def _when_acting(self, action):
        return action if self.acting else _ignore

    def _after_parsing(self, action):
        """A callback that, when acting, runs `action` after the whole
        command line is parsed."""
        def callback(*args):
            if self.acting:
                self.after_parsing.append(action)
        return callback

    # The configuration-file list changes in both passes, as it did in
    # Obnam 1.x: the second pass adds each --config file once more (so
    # --list-config-files names it twice; reading it twice changes
    # nothing).

    def _no_default_configs(self, option, opt_str, value, parser):
        self.command_line.config_files.clear()

    def _config(self, option, opt_str, value, parser):
        self.command_line.config_files.add(value)

    def _dump_setting_names(self):
        for name in self.command_line.settings.keys():
            self.command_line.stdout.write('%s\n' % name)
        raise SystemExit(0)

    def _dump_config(self):
        self.command_line.settings.dump_config(self.command_line.stdout)
        raise SystemExit(0)

    def _list_config_files(self):
        for path in self.command_line.config_files.paths:
            self.command_line.stdout.write('%s\n' % path)
        raise SystemExit(0)

    def _help_all(self):
        text = self.command_line.help_text(all_options=True)
        self.command_line.stdout.write(text)
        raise SystemExit(0)

    def _generate_manpage(self, option, opt_str, value, parser):
        # Bytes that are not UTF-8 go back out as they came in.
        with open(value, encoding='utf-8', errors='surrogateescape') as f:
            template = f.read()
        self.command_line.stdout.write(manpage.fill_template(
            template, parser, self.command_line.cmd_synopsis))
        raise SystemExit(0)
