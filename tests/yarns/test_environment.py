"""The environment each step gets."""

import pytest

from yarnrunner.environment import parse_env_settings, step_environment
from yarnrunner.model import YarnError


def env(outer=None, extra=None, matches=None, shell='/bin/sh'):
    return step_environment(outer or {}, extra or {}, '/t/s/datadir',
                            '/src', matches or {}, shell)


def test_only_path_is_kept_from_the_runner():
    e = env({'PATH': '/bin', 'SECRET': 'x', 'TMPDIR': '/x'})
    assert e['PATH'] == '/bin'
    assert 'SECRET' not in e and 'TMPDIR' not in e


def test_fixed_values_make_runs_alike():
    e = env({'USER': 'root', 'LC_ALL': 'de_DE'})
    assert (e['USER'], e['LOGNAME'], e['LC_ALL'], e['TERM'], e['SHELL']) == \
        ('tomjon', 'tomjon', 'C', 'dumb', '/bin/sh')


def test_env_settings_override_fixed_values_but_not_yarns_own():
    e = env(extra={'LC_ALL': 'C.UTF-8', 'HOME': '/nope', 'R': '1=2'},
            matches={'MATCH_1': 'm'})
    assert (e['LC_ALL'], e['R'], e['MATCH_1']) == ('C.UTF-8', '1=2', 'm')
    assert (e['HOME'], e['DATADIR'], e['SRCDIR']) == \
        ('/t/s/datadir/HOME', '/t/s/datadir', '/src')


def test_python_shell_gets_srcdir_on_pythonpath():
    assert env(shell='/usr/bin/python3')['PYTHONPATH'] == '/src'
    assert 'PYTHONPATH' not in env()


def test_env_setting_splits_at_the_first_equals_sign_only():
    assert parse_env_settings(['A=b=c', 'A=d,e']) == {'A': 'd,e'}


def test_env_setting_without_equals_sign_is_an_error():
    with pytest.raises(YarnError, match='NAME=VALUE'):
        parse_env_settings(['A'])
