"""obnamlib.cli.config_files: which files, in which order, and how they read."""

import pytest

from obnamlib.cli import config_files as cf
from obnamlib.cli import settings


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / 'home'
    h.mkdir()
    monkeypatch.setenv('HOME', str(h))
    return h


def touch(path, text=''):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def test_default_files_in_order_including_yaml(home, tmp_path):
    confdir = home / '.config' / 'obnam'
    for name in ('b.yaml', 'a.conf', 'c.conf', 'notes.txt', 'B.conf'):
        touch(confdir / name)
    xdg_dir = tmp_path / 'xdg'
    touch(xdg_dir / 'obnam' / 'x.yaml')
    touch(xdg_dir / 'obnam' / 'x.ini')
    files = cf.default_config_files(
        environ={'XDG_CONFIG_DIRS': str(xdg_dir)})
    assert files[:2] == ['/etc/obnam.conf', '/etc/obnam.yaml']
    mine = [f for f in files if not f.startswith('/etc/')]
    assert mine == [str(home / '.obnam.conf'), str(home / '.obnam.yaml'),
                    str(confdir / 'B.conf'), str(confdir / 'a.conf'),
                    str(confdir / 'b.yaml'), str(confdir / 'c.conf'),
                    str(xdg_dir / 'obnam' / 'x.yaml')]


def test_xdg_directories_most_important_last_and_no_repeats(home, tmp_path):
    assert cf.xdg_config_dirs({'XDG_CONFIG_DIRS': '/a::/b'}) == \
        ['/b', '/a', str(home / '.config')]
    assert cf.xdg_config_dirs({'XDG_CONFIG_HOME': '/h'}) == ['/etc/xdg', '/h']
    touch(home / '.config' / 'obnam' / 'a.conf')
    files = cf.default_config_files(environ={})
    assert files.count(str(home / '.config' / 'obnam' / 'a.conf')) == 1


def test_default_files_are_the_programs(home):
    assert cf.ConfigFileList('small').paths[:2] == \
        ['/etc/small.conf', '/etc/small.yaml']
    assert cf.ConfigFileList().paths[:2] == \
        ['/etc/obnam.conf', '/etc/obnam.yaml']


def test_config_and_no_default_configs():
    files = cf.ConfigFileList(defaults=['/d1', '/d2'])
    files.add('/c1')
    assert (files.paths, files.required) == (['/d1', '/d2', '/c1'], ['/c1'])
    files.clear()
    files.add('/c2')
    assert (files.paths, files.required) == (['/c2'], ['/c2'])


def loaded(tmp_path, *texts, required=True):
    reg = settings.Settings()
    reg.string(['keep'], 'help')
    reg.string_list(['exclude'], 'help')
    files = cf.ConfigFileList(defaults=[])
    for i, text in enumerate(texts):
        suffix = '.yaml' if text.startswith('config:') else '.conf'
        path = touch(tmp_path / ('f%d%s' % (i, suffix)), text)
        if required:
            files.add(path)
        else:
            files.paths.append(path)
    cf.load_config_files(reg, files)
    return reg


def test_later_files_win_key_by_key_and_a_repeated_key_too(tmp_path):
    reg = loaded(tmp_path, '[config]\nkeep = 1d\nexclude = a\n',
                 'config:\n  keep: 2d\n',
                 '[config]\nexclude = b\nexclude = c, d\n')
    assert (reg['keep'], reg['exclude']) == ('2d', ['c', 'd'])


def test_missing_files(tmp_path):
    reg = settings.Settings()
    files = cf.ConfigFileList(defaults=[str(tmp_path / 'absent.conf')])
    cf.load_config_files(reg, files)
    files.add(str(tmp_path / 'missing.conf'))
    with pytest.raises(cf.ConfigFileUnreadable) as e:
        cf.load_config_files(reg, files)
    assert str(e.value) == '%s: No such file or directory' % (
        tmp_path / 'missing.conf')


@pytest.mark.parametrize('text, message', [
    ('[config]\nkeep = 5%\n',
     "'%' must be followed by '%' or '(', found: '%'"),
    ('keep = 1\n', 'File contains no section headers.'),
])
def test_ini_errors_are_one_line(tmp_path, text, message):
    with pytest.raises(cf.ConfigFileSyntaxError) as e:
        loaded(tmp_path, text)
    assert str(e.value) == '%s: %s' % (tmp_path / 'f0.conf', message)


def test_ini_interpolation_and_other_sections(tmp_path):
    reg = loaded(tmp_path, '[config]\nkeep = 100%%\nexclude = '
                 '%(keep)s, b\n[other]\nk = v\n')
    assert (reg['keep'], reg['exclude']) == ('100%', ['100%', 'b'])
    assert reg.other_sections == {'other': {'k': 'v'}}


def test_default_section_leaks_into_config(tmp_path):
    reg = loaded(tmp_path, '[DEFAULT]\nkeep = 1d\n[config]\n')
    assert reg['keep'] == '1d'
    with pytest.raises(settings.UnknownConfigVariable):
        loaded(tmp_path, '[DEFAULT]\nbase = 1\n[config]\n')


@pytest.mark.parametrize('text, problem', [
    ('- a\n', 'does not specify a key/value mapping'),
    ('other: {}\n', 'does not have a "config" key'),
    ('config: [a, b]\n', 'has "config" that is not a key/value mapping'),
    ('config:\nother: 5\n', 'has "other" that is not a key/value mapping'),
    ('config:\nother: text\n',
     'has "other" that is not a key/value mapping'),
])
def test_malformed_yaml(tmp_path, text, problem):
    path = touch(tmp_path / 'y.yaml', text)
    files = cf.ConfigFileList(defaults=[])
    files.add(path)
    with pytest.raises(cf.MalformedYamlConfig) as e:
        cf.load_config_files(settings.Settings(), files)
    assert str(e.value) == 'Configuration file %s %s' % (path, problem)


@pytest.mark.parametrize('text, reason', [
    ('config:\n  a: [\n',
     "line 3, column 1: expected the node content, but found '<stream end>'"),
    ('config:\n  a: b: c\n',
     'line 2, column 7: mapping values are not allowed here'),
    ('config:\n  keep: "\udcff"\n',
     'unacceptable character #xdcff: special characters are not allowed'),
])
def test_yaml_that_does_not_parse_is_one_line(tmp_path, text, reason):
    path = tmp_path / 'y.yaml'
    path.write_bytes(text.encode('utf-8', 'surrogateescape'))
    files = cf.ConfigFileList(defaults=[])
    files.add(str(path))
    with pytest.raises(cf.ConfigFileSyntaxError) as e:
        cf.load_config_files(settings.Settings(), files)
    assert str(e.value) == '%s: %s' % (path, reason)


def test_empty_yaml_sections(tmp_path):
    path = touch(tmp_path / 'y.yaml', 'config:\nextra:\n')
    reg = settings.Settings()
    files = cf.ConfigFileList(defaults=[])
    files.add(path)
    cf.load_config_files(reg, files)
    assert reg.other_sections == {'extra': {}}
