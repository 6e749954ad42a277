"""Settings: their types, the registry, and the `--dump-config` text.

A setting has one value, which comes from its default, then from each
configuration file that names it, then from the command line (cli.md
§2.3-§2.5).  Every setting is also a long option (and a config-file key)
under each of its names; a one-letter name is a short option.  The value
types and their spellings are Obnam 1.x's:

* string: verbatim;
* string list: in a file, comma-separated with double quotes protecting
  commas; on the command line one item per occurrence, where the first
  occurrence replaces what the files said and later ones append;
* boolean: `yes`, `on`, `true`, `1` (any case) are true, anything else
  false; `--no-NAME` sets it false;
* integer: decimal;
* byte size: a number with an optional unit (`k`, `Ki`, `M`, `Mi`, ...,
  optional `B`); text that is not a size means 0;
* choice: one of a fixed list of words, the first being the default.

What obnam adds: a value read from a file is checked when it is read (a
bad integer or choice is a one-line error naming the file, cli.md NEWS),
and `--dump-config` writes values verbatim (a `%` in a value is fine).
"""

import re

from obnamlib import errors

LOG_GROUP = 'Logging'
CONFIG_GROUP = 'Configuration files and settings'
# Obnam 1.x's framework (cliapp) misspelt it 'Peformance' (#28).
FRAMEWORK_PERF_GROUP = 'Performance'
ALWAYS_PRESENT_GROUPS = (LOG_GROUP, CONFIG_GROUP, FRAMEWORK_PERF_GROUP)


class Uncoded:
    """Mixed into an ObnamError that Obnam 1.x printed without an error
    code: we print it the same way (`ERROR: message`); the class still has
    a pinned code for `list-errors`."""

    def __str__(self):
        return self.message()


class UnknownConfigVariable(Uncoded, errors.ObnamError):
    code = 'R1D5F9X'
    msg = '{filename}: Unknown configuration variable {name}'


class NotAnInteger(Uncoded, errors.ObnamError):
    code = 'R173CAX'
    msg = '{filename}: {name}: not an integer: {text}'


class NotAChoice(Uncoded, errors.ObnamError):
    code = 'R187ABX'
    msg = '{filename}: {name} = {value} is not one of {choices}'


class RequiredSettingMissing(errors.ObnamError):
    """Printed with its code (cliapp printed none, #28)."""
    code = 'R39951X'
    msg = 'Setting {name} has no value, but one is required'


class Setting:
    """One setting: its names, help, and value.  Subclasses define how a
    value is spelled in files, on the command line, and in a dump."""

    option_type = 'string'     # how optparse converts the option's value
    takes_value = True

    def __init__(self, names, default, help_text, metavar=None, group=None,
                 hidden=False):
        self.names = list(names)
        self.help = help_text
        self.metavar = metavar or self.default_metavar()
        self.group = group
        self.hidden = hidden
        self.value = default
        # Whether the command line gave a value (a command may treat an
        # empty one there differently from one in a configuration file).
        self.from_command_line = False

    @property
    def name(self):
        """The canonical name: the first one given."""
        return self.names[0]

    def default_metavar(self):
        return self.names[0].upper()

    @property
    def choices(self):
        return None

    def set_from_file_text(self, text):
        """A value as an INI file spells it."""
        self.value = text

    def set_from_yaml(self, obj):
        """A value as YAML parsed it (any type)."""
        self.value = obj

    def set_from_command_line(self, value):
        """A value from an option (already converted by optparse)."""
        self.value = value

    def mark_as_from_file(self):
        """The value now in force came from a configuration file."""

    def has_value(self):
        return self.value is not None

    def dump_text(self):
        """The value as `--dump-config` writes it."""
        return str(self.value)

    def check_file_value(self, filename):
        """Raise a one-line error if a file gave a value that cannot be
        used; the default is that every value can."""


class StringSetting(Setting):
    """Text, taken verbatim."""

    def set_from_yaml(self, obj):
        """YAML reads `12` as a number and `2015-06-01 10:00:00` as a
        datetime: a string setting gets their text (None stays None)."""
        self.value = obj if obj is None or isinstance(obj, str) else str(obj)


class IntegerSetting(Setting):
    """A decimal integer.  The text is kept as given and converted when
    read, so a file can be checked with a clear error."""

    option_type = 'int'

    @property
    def value(self):
        return int(self._text)

    @value.setter
    def value(self, value):
        self._text = str(value)

    def check_file_value(self, filename):
        try:
            int(self._text)
        except ValueError:
            raise NotAnInteger(filename=filename, name=self.name,
                               text=self._text)


class ChoiceSetting(Setting):
    """One word out of a fixed list; the first is the default."""

    option_type = 'choice'

    def __init__(self, names, choices, help_text, **kwargs):
        self._choices = list(choices)
        super().__init__(names, choices[0], help_text, **kwargs)

    @property
    def choices(self):
        return self._choices

    def set_from_yaml(self, obj):
        """YAML reads `6` as a number: a choice is a word."""
        self.value = obj if isinstance(obj, str) else str(obj)

    def check_file_value(self, filename):
        if self.value not in self._choices:
            raise NotAChoice(filename=filename, name=self.name,
                             value=self.value,
                             choices=', '.join(self._choices))


TRUE_WORDS = ('yes', 'on', '1', 'true')


class BooleanSetting(Setting):
    """True or false; text is true only if it is one of TRUE_WORDS."""

    option_type = None
    takes_value = False

    def default_metavar(self):
        return None

    @property
    def value(self):
        return self._true

    @value.setter
    def value(self, value):
        if isinstance(value, str):
            self._true = value.lower() in TRUE_WORDS
        else:
            self._true = bool(value)

    def set_from_command_line(self, value):
        self.value = True


BYTE_UNITS = {
    'k': 10 ** 3, 'm': 10 ** 6, 'g': 10 ** 9, 't': 10 ** 12,
    'ki': 2 ** 10, 'mi': 2 ** 20, 'gi': 2 ** 30, 'ti': 2 ** 40,
}
_SIZE = re.compile(r'(\d+(?:\.\d+)?)\s*(ki|k|mi|m|gi|g|ti|t)?b?\s*$')


def parse_byte_size(text):
    """Bytes in a size such as `64Ki`, `1.5 MB` or `1024`; 0 for text that
    is not a size (Obnam 1.x never complained), nor a number a float
    cannot hold."""
    m = _SIZE.match(text.lower())
    if not m:
        return 0
    number, unit = m.groups()
    try:
        return int(float(number) * BYTE_UNITS.get(unit, 1))
    except OverflowError:
        return 0


class ByteSizeSetting(Setting):
    """A count of bytes; anything but an integer (text, or what YAML
    made of it: `1.5`, a list) is parsed with parse_byte_size."""

    def default_metavar(self):
        return 'SIZE'

    @property
    def value(self):
        return int(self._text)

    @value.setter
    def value(self, value):
        if not isinstance(value, int):
            value = parse_byte_size(str(value))
        self._text = str(value)


class StringListSetting(Setting):
    """A list of strings.  A file's value replaces the list; on the
    command line the first item replaces a default or file value and
    later ones append."""

    def __init__(self, names, default, help_text, **kwargs):
        super().__init__(names, list(default or []), help_text, **kwargs)
        self._from_default_or_file = True

    @property
    def value(self):
        return self._items

    @value.setter
    def value(self, value):
        self._items = list(value) if isinstance(value, list) else [value]
        self._from_default_or_file = False

    def has_value(self):
        return self._items != []

    def set_from_file_text(self, text):
        self.value = split_list_text(text)

    def set_from_yaml(self, obj):
        """A YAML list, or one item; items are text (`[1]` is `['1']`),
        and an empty value is an empty list."""
        items = [] if obj is None else obj if isinstance(obj, list) else [obj]
        self.value = [item if isinstance(item, str) else str(item)
                      for item in items]

    def set_from_command_line(self, value):
        if self._from_default_or_file:
            self.value = [value]
        else:
            self.value = self._items + [value]

    def mark_as_from_file(self):
        self._from_default_or_file = True

    def dump_text(self):
        return ', '.join('"%s"' % item if ',' in item else item
                         for item in map(str, self._items))


def split_list_text(text):
    """Items of a comma-separated list: `"` toggles quoting (and is
    dropped), each item is stripped, and an empty last item is dropped."""
    items = []
    current = []
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
        elif char == ',' and not quoted:
            items.append(''.join(current))
            current = []
        else:
            current.append(char)
    if current:
        items.append(''.join(current))
    return [item.strip() for item in items]


class Settings:
    """Every setting of the program by name, in registration order.

    `settings['name']` reads a value, `settings['name'] = v` sets one; a
    plugin registers its settings with the methods `string`, `string_list`,
    `boolean`, `integer`, `bytesize` and `choice`.
    """

    def __init__(self):
        self._by_name = {}
        self._canonical = []
        self.other_sections = {}
        self._add_framework_settings()

    def _add_framework_settings(self):
        self.string(['output'],
                    'write output to FILE, instead of standard output',
                    metavar='FILE')
        self.string(['log'],
                    'write log entries to FILE (default is to not write log '
                    'files at all); use "syslog" to log to system log, '
                    '"stderr" to log to the standard error output, '
                    'or "none" to disable logging',
                    metavar='FILE', group=LOG_GROUP)
        self.choice(['log-level'],
                    ['debug', 'info', 'warning', 'error', 'critical', 'fatal'],
                    'log at LEVEL, one of debug, info, warning, '
                    'error, critical, fatal (default: %default)',
                    metavar='LEVEL', group=LOG_GROUP)
        self.bytesize(['log-max'],
                      'rotate logs larger than SIZE, '
                      'zero for never (default: %default)',
                      metavar='SIZE', default=0, group=LOG_GROUP)
        self.integer(['log-keep'], 'keep last N logs (%default)',
                     metavar='N', default=10, group=LOG_GROUP)
        self.string(['log-mode'],
                    'set permissions of new log files to MODE (octal; '
                    'default %default)',
                    metavar='MODE', default='0600', group=LOG_GROUP)
        self.choice(['dump-memory-profile'], ['simple', 'none'],
                    'make memory profiling dumps using METHOD, which is one '
                    'of: none, or simple (no meliae support anymore)'
                    '(default: %default)',
                    metavar='METHOD', group=FRAMEWORK_PERF_GROUP)
        self.integer(['memory-dump-interval'],
                     'make memory profiling dumps at least SECONDS apart',
                     metavar='SECONDS', default=300,
                     group=FRAMEWORK_PERF_GROUP)

    # --- registering ------------------------------------------------------

    def add(self, setting):
        """Register a setting under each of its names."""
        self._canonical.append(setting.name)
        for name in setting.names:
            self._by_name[name] = setting
        return setting

    def string(self, names, help_text, default='', **kwargs):
        return self.add(StringSetting(names, default, help_text, **kwargs))

    def string_list(self, names, help_text, default=None, **kwargs):
        return self.add(StringListSetting(names, default, help_text,
                                          **kwargs))

    def choice(self, names, possibilities, help_text, **kwargs):
        return self.add(ChoiceSetting(names, possibilities, help_text,
                                      **kwargs))

    def boolean(self, names, help_text, default=False, **kwargs):
        return self.add(BooleanSetting(names, default, help_text, **kwargs))

    def bytesize(self, names, help_text, default=0, **kwargs):
        return self.add(ByteSizeSetting(names, default, help_text, **kwargs))

    def integer(self, names, help_text, default=0, **kwargs):
        return self.add(IntegerSetting(names, default, help_text, **kwargs))

    # --- reading and writing ----------------------------------------------

    def __getitem__(self, name):
        return self._by_name[name].value

    def __setitem__(self, name, value):
        self._by_name[name].value = value

    def __contains__(self, name):
        return name in self._by_name

    def __iter__(self):
        return iter(list(self._canonical))

    def keys(self):
        """Canonical names, in registration order."""
        return list(self._canonical)

    def setting(self, name):
        """The Setting object behind a name or alias."""
        return self._by_name[name]

    def from_command_line(self, name):
        """Whether the command line gave the setting its value."""
        return self._by_name[name].from_command_line

    def settings(self):
        """Every Setting object, in registration order."""
        return [self._by_name[name] for name in self._canonical]

    def require(self, *names):
        """Raise RequiredSettingMissing for the first setting without a
        value (a default counts as one)."""
        for name in names:
            if not self._by_name[name].has_value():
                raise RequiredSettingMissing(name=name)

    def set_from_ini(self, filename, name, text):
        """A key of an INI file's config section."""
        setting = self._known(filename, name)
        setting.set_from_file_text(text)
        self._accept_file_value(filename, setting)

    def set_from_yaml(self, filename, name, obj):
        """A key of a YAML file's config mapping."""
        setting = self._known(filename, name)
        setting.set_from_yaml(obj)
        self._accept_file_value(filename, setting)

    def _known(self, filename, name):
        if name not in self._by_name:
            raise UnknownConfigVariable(filename=filename, name=name)
        return self._by_name[name]

    @staticmethod
    def _accept_file_value(filename, setting):
        setting.check_file_value(filename)
        setting.mark_as_from_file()

    def add_other_section(self, section, items):
        """Keys of a non-config section: kept for `--dump-config` only."""
        self.other_sections.setdefault(section, {}).update(items)

    def config_text(self):
        """The effective configuration as an INI file (cli.md §2.5)."""
        lines = ['[config]']
        for setting in self.settings():
            lines.append(_ini_line(setting.name, setting.dump_text()))
        lines.append('')
        for section, items in self.other_sections.items():
            lines.append('[%s]' % section)
            for key, value in items.items():
                lines.append(_ini_line(key, str(value)))
            lines.append('')
        return '\n'.join(lines) + '\n'

    def dump_config(self, output):
        output.write(self.config_text())


def _ini_line(key, value):
    """`key = value`, continuation lines indented with a tab."""
    return '%s = %s' % (key, value.replace('\n', '\n\t'))
