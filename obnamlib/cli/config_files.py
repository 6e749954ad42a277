"""Configuration files: which ones, in which order, and how they are read
(cli.md §2.1-§2.2).

The default list is Obnam 1.x's: /etc/obnam.conf, /etc/obnam.yaml,
/etc/obnam/*.{conf,yaml}, ~/.obnam.conf, ~/.obnam.yaml,
~/.config/obnam/*.{conf,yaml}, then the XDG configuration directories'
obnam/*.{conf,yaml} not already listed.  `--no-default-configs` empties
the list and `--config FILE` appends to it.  Missing default files are
skipped; a missing `--config` file is an error.

INI files are read with Python's ConfigParser as 1.x did (`%`
interpolation, `[DEFAULT]` keys leak into `[config]`, continuation
lines), with 1.x's tolerance of a repeated key (the last one wins); any
problem is a one-line error naming the file.  YAML files hold a mapping
whose `config` key maps setting names to values.
"""

import configparser
import os

from obnamlib import errors
from obnamlib.cli.settings import Uncoded

PROGNAME = 'obnam'
CONFIG_SECTION = 'config'


class ConfigFileUnreadable(Uncoded, errors.ObnamError):
    code = 'RB13C2X'
    msg = '{filename}: {reason}'


class ConfigFileSyntaxError(Uncoded, errors.ObnamError):
    code = 'R0B052X'
    msg = '{filename}: {reason}'


class MalformedYamlConfig(Uncoded, errors.ObnamError):
    code = 'RE29BAX'
    msg = 'Configuration file {filename} {problem}'


def default_config_files(progname=PROGNAME, environ=None):
    """The configuration files read unless `--no-default-configs`, whether
    they exist or not (a directory contributes the files it holds now)."""
    home_dir = os.path.expanduser('~/.config/%s' % progname)
    files = ['/etc/%s.conf' % progname, '/etc/%s.yaml' % progname]
    files += files_in_directory('/etc/%s' % progname)
    files += [os.path.expanduser('~/.%s.conf' % progname),
              os.path.expanduser('~/.%s.yaml' % progname)]
    files += files_in_directory(home_dir)
    for directory in xdg_config_dirs(environ):
        for path in files_in_directory(os.path.join(directory, progname)):
            if path not in files:
                files.append(path)
    return files


def xdg_config_dirs(environ=None):
    """XDG base directories for configuration, least important first."""
    environ = os.environ if environ is None else environ
    config_home = environ.get('XDG_CONFIG_HOME') or \
        os.path.join(os.path.expanduser('~'), '.config')
    dirs = [config_home] + \
        (environ.get('XDG_CONFIG_DIRS') or '/etc/xdg').split(':')
    return list(reversed([d for d in dirs if d]))


def files_in_directory(directory):
    """The *.conf and *.yaml names in a directory, sorted by code point;
    none if it is not a directory."""
    if not os.path.isdir(directory):
        return []
    names = sorted(name for name in os.listdir(directory)
                   if name.endswith('.conf') or name.endswith('.yaml'))
    return [os.path.join(directory, name) for name in names]


class ConfigFileList:
    """The files to read, in order, and which of them must exist: by
    default, the default files of program `progname`."""

    def __init__(self, progname=PROGNAME, defaults=None):
        self._progname = progname
        self._defaults = defaults
        self._paths = None
        self.required = []

    @property
    def paths(self):
        if self._paths is None:
            self._paths = list(default_config_files(self._progname)
                               if self._defaults is None else self._defaults)
        return self._paths

    def add(self, path):
        """`--config PATH`: read it last, and fail if it cannot be read."""
        self.paths.append(path)
        self.required.append(path)

    def clear(self):
        """`--no-default-configs`: forget every file listed so far."""
        self._paths = []
        self.required = []


def load_config_files(settings, file_list):
    """Read every file of file_list into settings, in order."""
    settings.other_sections.clear()
    for path in file_list.paths:
        try:
            f = open(path, encoding='utf-8', errors='surrogateescape')
        except OSError as e:
            if path in file_list.required:
                raise ConfigFileUnreadable(filename=path,
                                           reason=e.strerror or e)
            continue
        with f:
            if path.endswith('.yaml'):
                read_yaml(settings, path, f)
            else:
                read_ini(settings, path, f)


def read_ini(settings, path, f):
    """An INI file's [config] keys are settings; other sections are kept
    for --dump-config."""
    parser = configparser.ConfigParser(strict=False)
    parser.add_section(CONFIG_SECTION)
    try:
        parser.read_file(f, source=path)
        items = [(name, parser.get(CONFIG_SECTION, name))
                 for name in parser.options(CONFIG_SECTION)]
        others = [(section, {name: parser.get(section, name)
                             for name in parser.options(section)})
                  for section in parser.sections()
                  if section != CONFIG_SECTION]
    except configparser.Error as e:
        raise ConfigFileSyntaxError(filename=path,
                                    reason=str(e).splitlines()[0])
    for name, text in items:
        settings.set_from_ini(path, name, text)
    for section, data in others:
        settings.add_other_section(section, data)


def read_yaml(settings, path, f):
    """A YAML file's `config` mapping sets settings; other top-level keys
    are kept for --dump-config.  Every top-level value must be a mapping
    (or empty); a file YAML cannot parse is a one-line error."""
    import yaml
    try:
        obj = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ConfigFileSyntaxError(filename=path, reason=yaml_problem(e))
    if not isinstance(obj, dict):
        raise MalformedYamlConfig(
            filename=path, problem='does not specify a key/value mapping')
    if CONFIG_SECTION not in obj:
        raise MalformedYamlConfig(
            filename=path, problem='does not have a "config" key')
    sections = {section: yaml_section(path, section, data)
                for section, data in obj.items()}
    for name, value in sections.pop(CONFIG_SECTION).items():
        settings.set_from_yaml(path, name, value)
    for section, data in sections.items():
        settings.add_other_section(section, data)


def yaml_section(path, section, data):
    """The mapping under a top-level key; empty for an empty value."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise MalformedYamlConfig(
            filename=path,
            problem='has "%s" that is not a key/value mapping' % section)
    return data


def yaml_problem(e):
    """A YAML error in one line: `line L, column C: problem`."""
    problem = getattr(e, 'problem', None) or str(e).splitlines()[0]
    mark = getattr(e, 'problem_mark', None)
    if mark is None:
        return problem
    return 'line %d, column %d: %s' % (mark.line + 1, mark.column + 1,
                                       problem)
