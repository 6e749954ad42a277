"""The examples obnam ships (examples/, installed by the Debian package in
/usr/share/doc/obnam/examples): the configuration file is read without a
word of complaint, the systemd units pass `systemd-analyze verify`, the
cron file and the units run commands obnam accepts, and the bash
completion is current, complete and completes.

systemd-analyze (Debian: systemd) is needed for the units' check; where
it is missing that test skips and says so.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

from obnamlib.engine import forget_policy
from tests.paths import CHECKOUT, OBNAM

EXAMPLES = os.path.join(CHECKOUT, 'examples')
CONF = os.path.join(EXAMPLES, 'obnam.conf')
COMPLETION = os.path.join(EXAMPLES, 'obnam.bash-completion')
UNITS = ('obnam-backup.service', 'obnam-backup.timer',
         'obnam-forget.service', 'obnam-forget.timer')
INSTALLED_OBNAM = '/usr/bin/obnam'


def run(argv, **kwargs):
    return subprocess.run(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          **kwargs)


def obnam(*args):
    return run([sys.executable, OBNAM, '--no-default-configs'] + list(args))


def read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def dump_config(*args):
    p = obnam('--config', CONF, *args, '--dump-config')
    assert (p.returncode, p.stderr.decode()) == (0, '')
    return dict(line.split(' = ', 1)
                for line in p.stdout.decode().splitlines()[1:] if line)


# --- obnam.conf --------------------------------------------------------------

def test_example_config_is_read_without_complaint():
    settings = dump_config()
    assert settings['repository'] == '/srv/backup/obnam-repository'
    assert settings['root'] == '/etc, /home'
    assert settings['compress-with'] == 'deflate'
    assert settings['log-max'] == str(10 * 2 ** 20)


def test_example_config_is_read_without_complaint_with_the_defaults_too(
        tmp_path):
    """As `obnam --config examples/obnam.conf` reads it, after the default
    files (the system's; the home directory is an empty one)."""
    p = run([sys.executable, OBNAM, '--config', CONF, '--dump-config'],
            env=dict(os.environ, HOME=str(tmp_path)))
    assert (p.returncode, p.stderr.decode()) == (0, '')


def test_example_keep_policy_is_accepted():
    policy = forget_policy.parse(dump_config()['keep'])
    assert str(policy) == '72h,14d,8w,12m,10y'


def test_example_excludes_are_regular_expressions_that_match():
    excludes = dump_config()['exclude'].split(', ')
    for path in ('/home/me/.cache', '/home/me/.local/share/Trash',
                 '/home/me/src/x.o', '/home/me/src/x.pyc'):
        assert any(re.search(e, path) for e in excludes), path
    assert not any(re.search(e, '/home/me/.cache.txt') for e in excludes)


def test_example_commented_settings_are_real_settings():
    """Every `# name = value` line names a setting, so uncommenting it
    cannot give an unknown-setting error."""
    names = set(obnam('--dump-setting-names').stdout.decode().split())
    commented = re.findall(r'^# ([a-z-]+) = ', read(CONF), re.MULTILINE)
    assert commented and set(commented) <= names


# --- the commands the schedules run ------------------------------------------

def scheduled_commands():
    """(where, argv) of each obnam command line in the units and cron."""
    found = []
    for name in UNITS:
        for line in read(os.path.join(EXAMPLES, name)).splitlines():
            if line.startswith('ExecStart='):
                found.append((name, line[len('ExecStart='):].split()))
    for line in read(os.path.join(EXAMPLES, 'obnam.cron')).splitlines():
        if line.strip() and not line.startswith('#'):
            fields = line.split()
            found.append(('obnam.cron', fields[6:]))
    return found


def test_schedules_run_backup_hourly_and_forget_daily():
    commands = sorted((where, argv[-1]) for where, argv in
                      scheduled_commands())
    assert commands == [('obnam-backup.service', 'backup'),
                        ('obnam-forget.service', 'forget'),
                        ('obnam.cron', 'backup'), ('obnam.cron', 'forget')]
    timers = {name: read(os.path.join(EXAMPLES, name))
              for name in UNITS if name.endswith('.timer')}
    assert 'OnCalendar=hourly\n' in timers['obnam-backup.timer']
    assert 'OnCalendar=daily\n' in timers['obnam-forget.timer']


def test_scheduled_command_lines_are_accepted_by_obnam():
    for where, argv in scheduled_commands():
        assert argv[0] == INSTALLED_OBNAM, where
        # `help COMMAND` after the options: they parse and it exists.
        p = obnam(*argv[1:-1], 'help', argv[-1])
        assert (p.returncode, p.stderr) == (0, b''), where


def test_cron_lines_are_hourly_and_daily():
    for line in read(os.path.join(EXAMPLES, 'obnam.cron')).splitlines():
        if line.strip() and not line.startswith('#'):
            minute, hour, dom, month, dow, user = line.split()[:6]
            assert 0 <= int(minute) < 60
            assert hour == '*' or 0 <= int(hour) < 24
            assert (dom, month, dow, user) == ('*', '*', '*', 'root')


def test_systemd_units_pass_systemd_analyze_verify(tmp_path):
    """The units as shipped, except that ExecStart runs this checkout's
    obnam (systemd-analyze insists that the program exists)."""
    if not shutil.which('systemd-analyze'):
        pytest.skip('systemd-analyze is not installed (Debian: systemd)')
    for name in UNITS:
        text = read(os.path.join(EXAMPLES, name))
        (tmp_path / name).write_text(text.replace(INSTALLED_OBNAM, OBNAM))
    p = run(['systemd-analyze', 'verify', '--man=no'] +
            [str(tmp_path / name) for name in UNITS])
    assert (p.returncode, p.stderr.decode()) == (0, '')


# --- bash completion ---------------------------------------------------------

def test_completion_is_what_make_bash_completion_makes_now():
    made = run([sys.executable,
                os.path.join(CHECKOUT, 'tools', 'make-bash-completion'),
                '-'], check=True).stdout.decode()
    assert made == read(COMPLETION), \
        'examples/obnam.bash-completion is stale: run ' \
        'tools/make-bash-completion and commit it'


def completion_list(name):
    match = re.search(r'^    local %s="([^"]*)"$' % name, read(COMPLETION),
                      re.MULTILINE)
    return match.group(1).split()


def test_completion_lists_every_setting_and_command():
    names = obnam('--dump-setting-names').stdout.decode().split()
    options = completion_list('options')
    assert 'repository' in names
    assert [n for n in names if '--' + n not in options] == []
    help_text = obnam('help').stdout.decode()
    commands = re.findall(r'^\* obnam ([^:]+):', help_text, re.MULTILINE)
    assert 'backup' in commands
    assert completion_list('commands') == commands


# Just enough of bash-completion's helpers for the function to run where
# the bash-completion package is not installed: _init_completion -s as it
# splits `--name=value`, and _filedir offering one made-up name.
STUBS = r'''
_init_completion() {
    words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD
    cur=${words[cword]}; prev=${words[cword-1]}; split=false
    if [[ $cur == --*=* ]]; then
        prev=${cur%%=*}; cur=${cur#*=}; split=true
    fi
}
_filedir() { COMPREPLY=(FILES); }
'''


def complete(*words):
    """What the completion offers for the command line `words` (the last
    one being completed)."""
    if not shutil.which('bash'):
        pytest.skip('bash is not installed')
    script = STUBS + read(COMPLETION) + '''
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
_obnam
printf '%s\\n' "${COMPREPLY[@]}"
'''
    p = run(['bash', '-c', script, 'bash', 'obnam'] + list(words),
            check=True)
    return p.stdout.decode().split()


def test_completes_commands():
    assert complete('ba') == ['backup']
    assert complete('-r', 'sftp://h/repo', 'for') == ['force-lock', 'forget']


def test_completes_options():
    assert complete('--compr') == ['--compress-with']
    assert '--no-one-file-system' in complete('--no-one')


def test_completes_choices_with_and_without_equals():
    assert complete('--compress-with', '') == ['none', 'deflate', 'gzip']
    assert complete('--log-level=w') == ['warning']


def test_completes_files_after_file_options_and_command_arguments():
    assert complete('--config', '') == ['FILES']
    assert complete('--to=') == ['FILES']
    assert complete('restore', '') == ['FILES']
    assert complete('--keep', '') == []
    assert complete('help', 'ver') == ['verify']
