"""obnam's command-line layer against cliapp, the framework Obnam 1.x was
built on: the same settings (core + every plugin's), the same command
lines and configuration files, through both; the same values, the same
--dump-config text, the same help and manual page.

Runs only where cliapp can be imported (Debian 12's python3-cliapp, on
Python up to 3.11); elsewhere the module is skipped.

obnam differs from cliapp on purpose where NEWS says so; those cases are
listed in DELIBERATE and each has a test that names the difference and
checks both sides.
"""

import io
import os
import warnings

import pytest

try:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        import cliapp
except ImportError as e:      # Python 3.12+ (no `imp`), or not installed
    pytest.skip('cliapp cannot be imported here (%s): nothing to compare '
                'with' % e, allow_module_level=True)

import obnamlib.cli.app

# cliapp reads INI files with ConfigParser.readfp (deprecated in 3.11).
pytestmark = pytest.mark.filterwarnings(
    'ignore::DeprecationWarning:cliapp.settings')

# Where obnam deliberately differs from cliapp (NEWS, "Differences from
# 1.21"); each is checked by the test named here.
DELIBERATE = {
    'a repeated key in a file: last wins (cliapp: DuplicateOptionError)':
        'test_deliberate_repeated_key',
    'a missing --config file: one-line error (cliapp: OSError text)':
        'test_deliberate_missing_config_file',
    'a bad integer in a file: one-line error when read (cliapp: '
    'ValueError later)': 'test_deliberate_bad_integer_in_file',
    'a bad choice in a file: one-line error (cliapp: optparse traceback)':
        'test_deliberate_bad_choice_in_file',
    'a ConfigParser error (lone %, no section header): one-line error '
    '(cliapp: traceback)': 'test_deliberate_config_parser_errors',
    '--dump-config writes values verbatim (cliapp: ValueError on a %)':
        'test_deliberate_dump_config_verbatim',
    'YAML values are checked as INI ones are (cliapp: not checked)':
        'test_deliberate_yaml_values_checked',
    'XDG configuration directories without python-xdg (cliapp: only '
    'with it)': 'test_deliberate_xdg_directories',
    'YAML that does not parse, or a top-level value that is not a '
    'mapping: one-line error (cliapp: traceback)':
        'test_deliberate_yaml_errors',
    'a YAML number for a choice is that word, and for a byte size is '
    'parsed (cliapp: the number; ValueError later)':
        'test_deliberate_yaml_numbers',
    'a YAML number or date for a string setting is its text (cliapp: the '
    'number or datetime; TypeError or AttributeError later)':
        'test_deliberate_yaml_scalars_for_strings',
    'YAML list items are text, and an empty list value is an empty list '
    '(cliapp: [1] and [None]; TypeError later)':
        'test_deliberate_yaml_list_items',
    'the help group "Performance" is spelt right (cliapp: "Peformance")':
        'test_deliberate_performance_group',
    'usage and the manual page list no hidden subcommand, so no test aid '
    'such as _lock (cliapp: lists them all)':
        'test_deliberate_hidden_subcommands',
}


def as_obnam_says_it(text):
    """cliapp's help text with the deliberate help differences made
    (the two tests named in DELIBERATE check each against cliapp)."""
    if not isinstance(text, str):
        return text
    text = text.replace('Usage: obnam [options] _lock \n       obnam',
                        'Usage: obnam')
    text = text.replace('       obnam [options] _lock \n', '')
    text = text.replace('.br\n.B obnam\n.RI [ options ]\n_lock\n.RI\n', '')
    return text.replace('Peformance', 'Performance')


class Prepared:
    """Registration, as a run does it before parsing (both apps)."""

    def prepare(self):
        self.add_settings()
        self.setup_plugin_manager()
        self.enable_plugins()
        self.add_default_subcommands()


class ReferenceApp(Prepared, cliapp.Application):
    """obnam's settings and subcommands, on cliapp."""

    cmd_list_formats = obnamlib.cli.app.ObnamApp.cmd_list_formats
    cmd_list_errors = obnamlib.cli.app.ObnamApp.cmd_list_errors

    def __init__(self):
        super().__init__(progname='obnam', version=obnamlib.cli.app.__version__,
                         description=obnamlib.cli.app.DESCRIPTION)

    def add_settings(self):
        self.settings['log-level'] = 'info'
        obnamlib.cli.app.add_core_settings(self.settings)

    def accept_unimplemented(self, *names):
        pass

    def implemented(self, *names):
        pass

    def setup_plugin_manager(self):
        self.plugins = obnamlib.cli.app.load_plugins(self)

    def enable_plugins(self):
        for p in self.plugins:
            p.app = self
            p.enable()

    def parse(self, argv):
        self.parse_args(argv, configs_only=True)
        self.settings.load_configs()
        return self.parse_args(argv)


class OurApp(Prepared, obnamlib.cli.app.ObnamApp):
    """The same steps on obnam's own layer, parsed as a run parses."""

    def parse(self, argv):
        return self.parse_command_line(argv)


def outcome(app_class, argv, capsys):
    """What a parse of argv did: ('values', {name: value}, args, out, err)
    or ('exit', code, out, err) or ('error', text)."""
    capsys.readouterr()
    app = app_class()
    app.prepare()
    try:
        args = app.parse(argv)
    except SystemExit as e:
        out, err = capsys.readouterr()
        return ('exit', e.code, out, err)
    except (cliapp.AppException, obnamlib.errors.ObnamError) as e:
        return ('error', str(e))
    values = {name: app.settings[name] for name in app.settings.keys()}
    out, err = capsys.readouterr()
    return ('values', values, args, out, err)


def both(argv, capsys):
    return (outcome(ReferenceApp, argv, capsys),
            outcome(OurApp, argv, capsys))


def assert_same(argv, capsys):
    ref, ours = both(argv, capsys)
    assert ours == tuple(as_obnam_says_it(part) for part in ref)
    return ours


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """A HOME of our own, an 80-column terminal, the test directory as
    cwd, and no XDG variables."""
    h = tmp_path / 'home'
    h.mkdir()
    monkeypatch.setenv('HOME', str(h))
    monkeypatch.setenv('COLUMNS', '80')
    monkeypatch.delenv('XDG_CONFIG_HOME', raising=False)
    monkeypatch.delenv('XDG_CONFIG_DIRS', raising=False)
    monkeypatch.chdir(tmp_path)
    return h


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


# --- command lines ---------------------------------------------------------

COMMAND_LINES = [
    [],
    ['list-formats', 'extra', 'words'],
    ['--repository=/x'], ['-r', '/x'], ['-r/y'], ['--repository', '/z'],
    ['--repo=x'], ['--reposi', 'x'], ['--repository-f=6'],
    ['--repository-format=green-albatross'],
    ['--no-default-config'], ['--no-def'], ['--no'], ['--no-d'],
    ['--dry-run', '--no-pretend'], ['--no-act'], ['--no-no-act'],
    ['--no-act', '--no-dry-run'], ['--silent'], ['--quiet', '--no-silent'],
    ['--pretend=yes'],
    ['--exclude=a,b', '--exclude=c'], ['--exclude', '"q,r"'],
    ['--root=/a', 'backup', '--root', '/b', '/c'],
    ['--node-size=64Ki'], ['--chunk-size=1.5 MB'], ['--checkpoint=2gib'],
    ['--log-max=nonsense'], ['--node-size=10 k'], ['--chunk-size=1.5Ti'],
    ['--node-size=7b'], ['--node-size=1.5KiB'], ['--node-size=-1'],
    ['--deduplicate=never'], ['--deduplicate=maybe'], ['--deduplicate'],
    ['--log-level=debug'], ['--log-level', 'fatal'], ['--log-l=error'],
    ['--lock-timeout=7'], ['--lock-timeout=x'], ['--lock-timeout'],
    ['--lock-timeout=-3'], ['--lock-timeout=0x10'],
    ['--frob'], ['-x'], ['--', '--dry-run'], ['a', '--', '-r', 'b'],
    ['--keep=1d', '--keep', '2d'], ['--keep='],
    ['--ssh-key=~/k'], ['--fuse-opt=a', '--fuse-opt=b'],
    ['--verbose', 'diff', '--no-verbose'],
    ['--version'], ['--version', '--frob'], ['--frob', '--version'],
    ['--dump-setting-names'], ['--dump-config'], ['--list-config-files'],
    ['--dump-config', '--list-config-files'],
    ['--list-config-files', '--dump-config'],
    ['--dump-config', '--frob'], ['--help'], ['-h'], ['--help-all'],
    ['--help-a'], ['--he'], ['--dump-config', '-r', '/late'],
    ['--log=none', '--log-keep=3', '--log-mode=0640', '--dump-config'],
    ['--memory-dump-interval=5', '--dump-memory-profile=none',
     '--dump-config'],
    ['--output=/tmp/x', '--dump-config'],
    ['--generate-manpage'],
]


@pytest.mark.parametrize('argv', COMMAND_LINES, ids=' '.join)
def test_command_line(argv, capsys):
    assert_same(argv, capsys)


@pytest.mark.parametrize('columns', ['80', '60', '140', 'wide'])
@pytest.mark.parametrize('option', ['--help', '--help-all'])
def test_help_at_any_width(option, columns, capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', columns)
    got = assert_same([option], capsys)
    assert got[0] == 'exit' and got[1] == 0 and got[2].startswith('Usage:')


def test_help_after_a_config_file_shows_its_defaults(home, capsys):
    """--help acts before the files are read; --help-all after."""
    write(home / '.obnam.conf', '[config]\nlog-level = error\nlog-keep = 4\n')
    assert_same(['--help'], capsys)
    got = assert_same(['--help-all'], capsys)
    assert 'keep last N logs (4)' in got[2]


@pytest.mark.parametrize('args', [[], ['backup'], ['fsck'], ['_lock'],
                                  ['help'], ['list-formats']])
@pytest.mark.parametrize('method', ['help', 'help_all'])
def test_help_subcommands(method, args, capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', '72')
    texts = []
    for app_class in (ReferenceApp, OurApp):
        app = app_class()
        app.prepare()
        app.output = io.StringIO()
        getattr(app, method)(args)
        texts.append(app.output.getvalue())
    assert as_obnam_says_it(texts[0]) == texts[1]
    assert texts[1].startswith('Usage: obnam [options] ')


def test_help_of_unknown_subcommand():
    texts = []
    for app_class in (ReferenceApp, OurApp):
        app = app_class()
        app.prepare()
        with pytest.raises(Exception) as e:
            app.help(['nosuch'])
        texts.append(str(e.value))
    assert texts == ['Unknown subcommand nosuch'] * 2


def test_manual_page(tmp_path, capsys):
    template = write(tmp_path / 'obnam.1.in', '.TH OBNAM 1\n.SH NAME\n'
                     'obnam \\- backup\n.SH SYNOPSIS\n.SH DESCRIPTION\n'
                     'Words.\n.SH OPTIONS\n.SH "SEE ALSO"\nNothing.\n')
    got = assert_same(['--generate-manpage=' + template], capsys)
    assert got[:2] == ('exit', 0)
    assert '.BR \\-\\-pretend ", " \\-\\-dry\\-run' in got[2]
    got = assert_same(['--generate-manpage', template, '-r', '/late'],
                      capsys)


# --- configuration files ---------------------------------------------------

INI_FILES = {
    'lists': '[config]\nexclude = a, "b,c",\n  d\nroot = /r1, /r2\n'
             'trace = "x,y" , z ,, w,\nfuse-opt =\ninclude = "un,closed\n',
    'continuation without comma': '[config]\nexclude = one\n two\n\n'
                                  ' three\n',
    'booleans': '[config]\nquiet = yes\nverbose = maybe\npretend = TRUE\n'
                'exclude-caches = On\none-file-system = 0\nfsck-fix = 1\n'
                'weak-random = no\nleave-checkpoints =\n',
    'sizes': '[config]\nnode-size = 64Ki\nchunk-size = 1.5 MB\n'
             'checkpoint = 2gib\nlog-max = nonsense\nlru-size = 3 k\n',
    'choices and ints': '[config]\ndeduplicate = never\nlock-timeout = 42\n'
                        'log-level = debug\nrepository-format = 6\n',
    'aliases and case': '[config]\nno-act = yes\nr = /repo\nsilent = 1\n'
                        'Client-Name: Upper\nDRY-RUN = no\n',
    'DEFAULT leaks': '[DEFAULT]\nkeep = 1d\n[config]\nrepository = /r\n'
                     '[other]\nx = 1\n',
    'DEFAULT unknown': '[DEFAULT]\nbase = /srv\n[config]\n',
    'interpolation': '[config]\nclient-name = host\n'
                     'repository = /r/%(client-name)s\n',
    'interpolation from DEFAULT': '[DEFAULT]\nclient-name = h\n[config]\n'
                                  'repository = /b/%(client-name)s\n',
    'other sections': '[config]\nkeep = 3d\n[zeta]\nb = 2\na = 1\n'
                      '[alpha]\nk = v\n  more\n',
    'comments': '# c\n; c\n[config]\nkeep = 1d ; not a comment\n'
                'exclude = x # nor this\n',
    'unknown key': '[config]\nfrobnicate = 1\n',
    'unknown key in other section': '[elsewhere]\nfrob = 1\n',
    'empty': '',
    'empty config': '[config]\n',
    'colon and spaces': '[config]\nkeep:2d\n  repository  =  /sp  \n',
}


def test_doubled_percent_in_a_file(tmp_path, capsys):
    conf = write(tmp_path / 'p.conf', '[config]\nkeep = 100%%\n')
    got = assert_same(['--config', conf], capsys)
    assert got[1]['keep'] == '100%'


def test_command_line_list_replaces_file_value_then_appends(tmp_path,
                                                             capsys):
    conf = write(tmp_path / 'c.conf', '[config]\nexclude = a, b\n'
                 'root = /r\n')
    got = assert_same(['--config', conf, '--exclude=x,y', '--exclude=z'],
                      capsys)
    assert got[1]['exclude'] == ['x,y', 'z']
    assert got[1]['root'] == ['/r']
    assert_same(['--config', conf, '--exclude=x', '--dump-config'], capsys)


def test_later_files_override_earlier_key_by_key(home, tmp_path, capsys):
    write(home / '.obnam.conf', '[config]\nclient-name = home\n'
          'repository = /home-repo\nexclude = h1, h2\n')
    write(home / '.config' / 'obnam' / 'b.conf', '[config]\nrepository = /b\n')
    write(home / '.config' / 'obnam' / 'a.yaml',
          'config:\n  repository: /a\n  keep: 1d\n')
    write(home / '.config' / 'obnam' / 'c.conf', '[config]\nexclude = c\n')
    write(home / '.config' / 'obnam' / 'ignored.txt', '[config]\nkeep = x\n')
    extra = write(tmp_path / 'extra.conf', '[config]\nkeep = 2d\n')
    got = assert_same(['--config', extra], capsys)
    assert (got[1]['client-name'], got[1]['repository'], got[1]['keep'],
            got[1]['exclude']) == ('home', '/b', '2d', ['c'])
    assert_same(['--config', extra, '--dump-config'], capsys)
    got = assert_same(['--config', extra, '--list-config-files'], capsys)
    assert got[2].splitlines()[-2:] == [extra, extra]


@pytest.mark.parametrize('order', [
    ['--config', 'A', '--no-default-configs', '--config', 'B'],
    ['--no-default-configs', '--config', 'A', '--config', 'B'],
    ['--config', 'A', '--config', 'B', '--no-default-configs'],
    ['--config', 'B', '--config', 'A'],
    ['--no-default-configs'],
])
@pytest.mark.parametrize('then', [['--dump-config'],
                                  ['--list-config-files'], []])
def test_no_default_configs_and_config_order(order, then, home, tmp_path,
                                             capsys):
    write(home / '.obnam.conf', '[config]\nkeep = home\n')
    a = write(tmp_path / 'a.conf', '[config]\nkeep = a\nexclude = a\n')
    b = write(tmp_path / 'b.yaml', 'config:\n  keep: b\n')
    argv = [{'A': a, 'B': b}.get(word, word) for word in order] + then
    assert_same(argv, capsys)


YAML_FILES = {
    'plain': 'config:\n  keep: 3d\n  exclude: [a, "b,c"]\n  quiet: yes\n'
             '  lock-timeout: 7\n  node-size: 64Ki\n  chunk-size: 4096\n',
    'string for a list': 'config:\n  exclude: a, b\n',
    'non-string values': 'config:\n  verbose: 1\n'
                         '  pretend: "no"\n  repository: null\n',
    'other sections': 'config:\n  keep: 1d\nextra:\n  k: v\n',
    'empty config': 'config:\n',
    'unknown key': 'config:\n  frob: 1\n',
    'no config key': 'other:\n  a: 1\n',
    'not a mapping': '- a\n- b\n',
    'aliases': 'config:\n  dry-run: true\n  r: /yaml\n',
}


CONFIG_FILES = sorted([('c.conf', name, text)
                       for name, text in INI_FILES.items()] +
                      [('c.yaml', name, text)
                       for name, text in YAML_FILES.items()])


@pytest.mark.parametrize('filename,name,text', CONFIG_FILES,
                         ids=['%s: %s' % c[:2] for c in CONFIG_FILES])
@pytest.mark.parametrize('then', [['--dump-config'], ['list-formats']])
def test_config_file(filename, name, text, then, tmp_path, capsys):
    conf = write(tmp_path / filename, text)
    assert_same(['--no-default-configs', '--config', conf] + then, capsys)


def test_files_in_directories_sorted_by_code_point(home, capsys):
    for name in ('b.conf', 'B.yaml', 'a.conf', '_x.conf', 'é.conf',
                 'z.txt', 'd.yaml'):
        write(home / '.config' / 'obnam' / name, '[config]\n'
              if name.endswith('.conf') else 'config:\n')
    got = assert_same(['--list-config-files'], capsys)
    listed = [line for line in got[2].splitlines()
              if line.startswith(str(home))]
    assert [os.path.basename(p) for p in listed] == [
        '.obnam.conf', '.obnam.yaml', 'B.yaml', '_x.conf', 'a.conf',
        'b.conf', 'd.yaml', 'é.conf']


# --- deliberate differences -------------------------------------------------


def test_every_deliberate_difference_has_its_test():
    names = set(globals())
    assert [t for t in DELIBERATE.values() if t not in names] == []


def test_deliberate_performance_group(capsys):
    cliapp_says, ours = both(['--help'], capsys)
    assert '\n  Peformance:\n' in cliapp_says[2]
    assert '\n  Performance:\n' in ours[2]
    assert 'Peformance' not in ours[2]


def test_deliberate_hidden_subcommands(capsys, tmp_path):
    cliapp_says, ours = both(['--help'], capsys)
    assert cliapp_says[2].startswith('Usage: obnam [options] _lock \n')
    assert ours[2].startswith('Usage: obnam [options] add-key ')
    assert ' _lock ' not in ours[2]
    template = write(tmp_path / 'obnam.1.in', '.TH OBNAM 1\n.SH SYNOPSIS\n')
    cliapp_says, ours = both(['--generate-manpage=' + template], capsys)
    assert '\n_lock\n' in cliapp_says[2] and '_lock' not in ours[2]


def test_hidden_subcommand_still_runs_and_help_all_names_it(capsys):
    app = OurApp()
    app.prepare()
    assert '_lock' in app.subcommands
    app.output = io.StringIO()
    app.help_all([])
    assert '* obnam _lock: ' in app.output.getvalue()


def cliapp_raises(argv, capsys):
    """The exception cliapp's parse raised (outside AppException)."""
    app = ReferenceApp()
    app.prepare()
    with pytest.raises(Exception) as e:
        app.parse(argv)
        {name: app.settings[name] for name in app.settings.keys()}
    return e.value


def test_deliberate_repeated_key(tmp_path, capsys):
    conf = write(tmp_path / 'd.conf', '[config]\nkeep = 1d\nkeep = 2d\n')
    assert type(cliapp_raises(['--config', conf], capsys)).__name__ == \
        'DuplicateOptionError'
    got = outcome(OurApp, ['--config', conf], capsys)
    assert got[0] == 'values' and got[1]['keep'] == '2d'


def test_deliberate_missing_config_file(tmp_path, capsys):
    missing = str(tmp_path / 'missing.conf')
    assert isinstance(cliapp_raises(['--config', missing], capsys),
                      FileNotFoundError)
    assert outcome(OurApp, ['--config', missing], capsys) == \
        ('error', '%s: No such file or directory' % missing)


def test_deliberate_bad_integer_in_file(tmp_path, capsys):
    conf = write(tmp_path / 'i.conf', '[config]\nlock-timeout = soon\n')
    assert isinstance(cliapp_raises(['--config', conf], capsys), ValueError)
    assert outcome(OurApp, ['--config', conf], capsys) == \
        ('error', '%s: lock-timeout: not an integer: soon' % conf)


def test_deliberate_bad_choice_in_file(tmp_path, capsys):
    conf = write(tmp_path / 'c.conf', '[config]\ndeduplicate = maybe\n')
    cliapp_raises(['--config', conf], capsys)
    assert outcome(OurApp, ['--config', conf], capsys) == \
        ('error', '%s: deduplicate = maybe is not one of fatalist, never, '
         'verify' % conf)


@pytest.mark.parametrize('text, first_line', [
    ('[config]\nkeep = 100%\n',
     "'%' must be followed by '%' or '(', found: '%'"),
    ('keep = 1d\n', 'File contains no section headers.'),
    ('[config]\nrepository = %(nosuch)s\n',
     "Bad value substitution: option 'repository' in section 'config' "
     "contains an interpolation key 'nosuch' which is not a valid option "
     "name. Raw value: '%(nosuch)s'"),
])
def test_deliberate_config_parser_errors(text, first_line, tmp_path, capsys):
    conf = write(tmp_path / 'p.conf', text)
    assert isinstance(cliapp_raises(['--config', conf], capsys),
                      Exception)
    assert outcome(OurApp, ['--config', conf], capsys) == \
        ('error', '%s: %s' % (conf, first_line))


def test_deliberate_dump_config_verbatim(capsys):
    assert isinstance(cliapp_raises(['--exclude=100%', '--dump-config'],
                                    capsys), ValueError)
    got = outcome(OurApp, ['--exclude=100%', '--dump-config'], capsys)
    assert got[:2] == ('exit', 0) and '\nexclude = 100%\n' in got[2]


def test_deliberate_yaml_values_checked(tmp_path, capsys):
    conf = write(tmp_path / 'y.yaml', 'config:\n  lock-timeout: soon\n')
    assert isinstance(cliapp_raises(['--config', conf], capsys), ValueError)
    assert outcome(OurApp, ['--config', conf], capsys) == \
        ('error', '%s: lock-timeout: not an integer: soon' % conf)
    conf = write(tmp_path / 'c.yaml', 'config:\n  deduplicate: maybe\n')
    cliapp_raises(['--config', conf], capsys)
    assert outcome(OurApp, ['--config', conf], capsys)[0] == 'error'


def test_deliberate_xdg_directories(home, tmp_path, monkeypatch, capsys):
    xdg = tmp_path / 'xdg'
    write(xdg / 'obnam' / 'x.conf', '[config]\nkeep = xdg\n')
    monkeypatch.setenv('XDG_CONFIG_DIRS', str(xdg))
    ref, ours = both(['--list-config-files'], capsys)
    assert ours[2] == ref[2] + '%s\n' % (xdg / 'obnam' / 'x.conf')


@pytest.mark.parametrize('text, message', [
    ('config:\n  a: [\n', "{}: line 3, column 1: expected the node "
     "content, but found '<stream end>'"),
    ('config: [a]\n', 'Configuration file {} has "config" that is not a '
     'key/value mapping'),
    ('config: {}\nextra: 5\n', 'Configuration file {} has "extra" that is '
     'not a key/value mapping'),
])
def test_deliberate_yaml_errors(text, message, tmp_path, capsys):
    conf = write(tmp_path / 'e.yaml', text)
    cliapp_raises(['--config', conf], capsys)
    assert outcome(OurApp, ['--config', conf], capsys) == \
        ('error', message.format(conf))


def test_deliberate_yaml_numbers(tmp_path, capsys):
    conf = write(tmp_path / 'n.yaml', 'config:\n  repository-format: 6\n')
    ref, ours = both(['--config', conf], capsys)
    assert (ref[1]['repository-format'], ours[1]['repository-format']) == \
        (6, '6')
    conf = write(tmp_path / 's.yaml', 'config:\n  node-size: 1.5\n')
    assert isinstance(cliapp_raises(['--config', conf], capsys), ValueError)
    assert outcome(OurApp, ['--config', conf], capsys)[1]['node-size'] == 1


def test_deliberate_yaml_scalars_for_strings(tmp_path, capsys):
    conf = write(tmp_path / 's.yaml', 'config:\n  client-name: 12\n'
                 '  pretend-time: 2015-06-01 10:00:00\n')
    ref, ours = both(['--config', conf], capsys)
    assert (ref[1]['client-name'], ours[1]['client-name']) == (12, '12')
    assert str(ref[1]['pretend-time']) == ours[1]['pretend-time'] == \
        '2015-06-01 10:00:00'
    assert_same(['--config', conf, '--dump-config'], capsys)


def test_deliberate_yaml_list_items(tmp_path, capsys):
    conf = write(tmp_path / 'l.yaml', 'config:\n  exclude: [1, a]\n'
                 '  root:\n')
    ref, ours = both(['--config', conf], capsys)
    assert (ref[1]['exclude'], ref[1]['root']) == ([1, 'a'], [None])
    assert (ours[1]['exclude'], ours[1]['root']) == (['1', 'a'], [])
