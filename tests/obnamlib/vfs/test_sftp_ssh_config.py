"""The ssh configuration without paramiko: on the OpenSSH path `ssh -G`
says what ~/.ssh/config means and paramiko is never loaded; paramiko reads
the configuration only on its own transport (--pure-paramiko, or no ssh),
and its absence is a one-line error there.  Against a real sshd on
127.0.0.1 (tests/sshd_server.py)."""

import os
import subprocess
import sys

import paramiko
import pytest

from obnamlib.vfs.sftp import session, ssh_auth, ssh_ciphers, ssh_config
from obnamlib.vfs.sftp.fs import SftpFS
from obnamlib.vfs.sftp.ssh_paramiko import ChannelErrors
from tests import paths
from tests.sshd_fixture import sshd  # noqa: F401

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def isolated_ssh_user(tmp_path, monkeypatch):
    """No agent, and a ~/.ssh of the test's own for paramiko ($HOME)."""
    monkeypatch.delenv('SSH_AUTH_SOCK', raising=False)
    home = tmp_path / 'home'
    (home / '.ssh').mkdir(parents=True)
    monkeypatch.setenv('HOME', str(home))


def alias_config(sshd, path, extra=''):
    """An ssh config naming the test server `backupbox`."""
    path.write_text('Host backupbox\n  HostName 127.0.0.1\n  Port %d\n'
                    '  User %s\n  IdentityFile %s\n%s'
                    % (sshd.port, sshd.user, sshd.client_key, extra))
    return path


def wrapper_script(path, body):
    path.write_text('#!/bin/sh\n' + body)
    path.chmod(0o755)
    return str(path)


def ssh_with_config(tmp_path, config, record=None):
    """A --ssh-command: ssh with its config file `config` (the ssh client
    reads ~/.ssh/config from the password database's home, not $HOME);
    each run's arguments appended to `record` if given."""
    log_runs = 'echo "$@" >> %s\n' % record if record else ''
    return wrapper_script(tmp_path / 'myssh', '%sexec ssh -F %s "$@"\n'
                          % (log_runs, config))


def settings(sshd, **extra):
    values = {'ssh-key': '', 'ssh-known-hosts': sshd.known_hosts,
              'pure-paramiko': False}
    values.update(extra)
    return values


@pytest.fixture
def no_paramiko_config(monkeypatch):
    """Fail the test if paramiko is asked to read the configuration."""
    def refuse(alias):
        raise AssertionError('paramiko read the ssh config for %s' % alias)
    monkeypatch.setattr(ssh_config, 'from_paramiko', refuse)


# --- the OpenSSH path: ssh -G ----------------------------------------------

def test_config_alias_takes_effect_over_openssh(sshd, tmp_path,
                                                no_paramiko_config):
    command = ssh_with_config(tmp_path, alias_config(sshd, tmp_path / 'cfg'))
    with SftpFS('sftp://backupbox%s' % tmp_path,
                settings(sshd, **{'ssh-command': command})) as fs:
        assert type(fs.connection).__name__ == 'OpenSSHConnection'
        assert 'cfg' in fs.listdir('')
        assert (fs.target.hostname, fs.target.port, fs.target.user) == (
            '127.0.0.1', sshd.port, sshd.user)


def test_config_alias_names_the_real_host_in_openssh_errors(
        sshd, tmp_path, no_paramiko_config):
    empty = tmp_path / 'known_hosts'
    empty.write_text('')
    command = ssh_with_config(tmp_path, alias_config(sshd, tmp_path / 'cfg'))
    with pytest.raises(ssh_auth.NoHostKeyError) as e:
        SftpFS('sftp://backupbox/tmp', settings(sshd, **{
            'ssh-command': command, 'ssh-known-hosts': str(empty)}))
    assert str(e.value) == (
        'R5F98AX: No known host key for [127.0.0.1]:%d' % sshd.port)


def test_url_port_and_user_override_the_config(sshd, tmp_path,
                                               no_paramiko_config):
    command = ssh_with_config(tmp_path, alias_config(sshd, tmp_path / 'cfg'))
    target = ssh_auth.SshTarget('backupbox', 2222, 'bob',
                                settings(sshd, **{'ssh-command': command}))
    assert (target.hostname, target.port, target.user) == (
        '127.0.0.1', 2222, 'bob')
    assert target.known_hosts_name == '[127.0.0.1]:2222'


@pytest.mark.parametrize('written, policy', [
    ('no', 'no'), ('yes', 'yes'), ('accept-new', 'accept-new'),
    (None, 'ask')])
def test_host_key_policy_from_the_openssh_config(sshd, tmp_path,
                                                 no_paramiko_config,
                                                 written, policy):
    extra = '  StrictHostKeyChecking %s\n' % written if written else ''
    command = ssh_with_config(
        tmp_path, alias_config(sshd, tmp_path / 'cfg', extra))
    target = ssh_auth.SshTarget('backupbox', None, None,
                                settings(sshd, **{'ssh-command': command}))
    assert target.policy == policy


def test_a_working_openssh_connection_reads_no_config(sshd, tmp_path,
                                                     monkeypatch):
    """Where the processor has no AES instructions (with them, ssh -G is
    asked for the ciphers: test_sftp_ssh_ciphers)."""
    monkeypatch.setattr(ssh_ciphers, 'cpu_has_aes', lambda: False)
    record = tmp_path / 'runs'
    command = ssh_with_config(tmp_path, alias_config(sshd, tmp_path / 'cfg'),
                              record)
    with SftpFS('sftp://backupbox%s' % tmp_path,
                settings(sshd, **{'ssh-command': command})) as fs:
        fs.write_file('x', b'x')
    runs = record.read_text().splitlines()
    assert len(runs) == 1 and '-G' not in runs[0].split()
    assert runs[0].split()[-2:] == ['backupbox', 'sftp']


def test_host_name_keeps_the_url_spelling():
    """ssh lowercases a name it does not rewrite; messages show the
    user's spelling, as they did when paramiko read the config."""
    found = ssh_config.parse_openssh(
        'user me\nhostname backupbox\nport 22\n', 'BackupBox')
    assert found['hostname'] == 'BackupBox'
    assert ssh_config.parse_openssh(
        'hostname other.example\nport 22\n', 'BackupBox')['hostname'] == \
        'other.example'


def test_openssh_yes_and_no_words_are_normalised():
    parse = ssh_config.parse_openssh
    assert parse('hostname h\nport 22\nstricthostkeychecking true\n',
                 'h')['stricthostkeychecking'] == 'yes'
    assert parse('hostname h\nport 22\nstricthostkeychecking false\n',
                 'h')['stricthostkeychecking'] == 'no'


@pytest.mark.parametrize('text', ['', 'hello\n', 'hostname h\n',
                                  'hostname h\nport x\n'])
def test_output_that_is_not_ssh_G_is_refused(text):
    assert ssh_config.parse_openssh(text, 'h') is None


# --- where ssh cannot answer: paramiko reads ~/.ssh/config ------------------

def test_no_ssh_means_paramiko_reads_the_config(sshd, tmp_path):
    alias_config(sshd, tmp_path / 'home' / '.ssh' / 'config')
    with SftpFS('sftp://backupbox%s' % tmp_path, settings(sshd, **{
            'ssh-command': str(tmp_path / 'no-such-ssh')})) as fs:
        assert type(fs.connection).__name__ == 'ParamikoConnection'
        assert 'home' in fs.listdir('')
        assert fs.target.port == sshd.port


@pytest.mark.parametrize('body', ['exit 255\n', 'echo hello\n'])
def test_an_ssh_command_without_G_falls_back_to_paramiko(sshd, tmp_path,
                                                         body):
    alias_config(sshd, tmp_path / 'home' / '.ssh' / 'config')
    command = wrapper_script(tmp_path / 'odd-ssh', body)
    assert ssh_config.from_openssh(command, 'backupbox') is None
    found = ssh_config.lookup('backupbox', ssh_command=command)
    assert found['port'] == str(sshd.port)


def test_pure_paramiko_never_runs_ssh(sshd, tmp_path):
    alias_config(sshd, tmp_path / 'home' / '.ssh' / 'config')
    record = tmp_path / 'runs'
    command = wrapper_script(tmp_path / 'myssh',
                             'echo "$@" >> %s\nexec ssh "$@"\n' % record)
    with SftpFS('sftp://backupbox%s' % tmp_path, settings(sshd, **{
            'ssh-command': command, 'pure-paramiko': True})) as fs:
        assert type(fs.connection).__name__ == 'ParamikoConnection'
        assert fs.target.hostname == '127.0.0.1'
        assert 'home' in fs.listdir('')
    assert not record.exists()


@pytest.mark.parametrize('error, text', [
    (paramiko.SSHException('Key-exchange timed out'),
     'Key-exchange timed out'),
    (paramiko.SSHException(), 'SSHException')])
def test_paramiko_channel_failures_are_connection_errors(error, text):
    """The SFTP layer catches them without knowing paramiko."""
    class Broken:
        def send(self, *args):
            raise error
        recv = close = send
    channel = ChannelErrors(Broken())
    for call in (lambda: channel.send(b'x'), lambda: channel.recv(1),
                 channel.close):
        with pytest.raises(session.WIRE_ERRORS) as e:
            call()
        assert type(e.value) is ConnectionError and str(e.value) == text


# --- the obnam command: which modules a run loads ---------------------------

PROBE = '''
import atexit, sys
if %(hide)r:
    sys.modules['paramiko'] = None      # as if it were not installed
def report():
    with open(%(report)r, 'w') as f:
        f.write(str(sys.modules.get('paramiko') is not None))
atexit.register(report)
sys.path.insert(0, %(checkout)r)
sys.argv = ['obnam'] + %(args)r
import obnamlib.cli.app
obnamlib.cli.app.main()     # as a pip install's entry point runs it
'''


def obnam(sshd, tmp_path, *args, hide_paramiko=False):
    """(exit code, stdout, stderr, was paramiko loaded?) of one run."""
    report = tmp_path / 'paramiko-loaded'
    code = PROBE % {'hide': hide_paramiko, 'report': str(report),
                    'checkout': paths.CHECKOUT,
                    'args': ['--no-default-configs', '--quiet',
                             '--ssh-key', sshd.client_key,
                             '--ssh-known-hosts', sshd.known_hosts,
                             '--lock-timeout', '0'] + list(args)}
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
           'HOME': str(tmp_path / 'home'), 'LC_ALL': 'C.UTF-8'}
    p = subprocess.run([sys.executable, '-c', code], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True)
    return p.returncode, p.stdout, p.stderr, report.read_text() == 'True'


@pytest.fixture(scope='module')
def repository(sshd, tmp_path_factory):
    """An sftp:// repository with one backup of a small tree."""
    top = tmp_path_factory.mktemp('repo')
    live = top / 'live'
    live.mkdir()
    (live / 'file').write_bytes(b'data\n' * 1000)
    (top / 'home').mkdir()
    url = sshd.url(str(top / 'repo'))
    code, _, err, loaded = obnam(sshd, top, 'backup', '--repository', url,
                                 str(live))
    assert code == 0, err
    assert not loaded
    return url, live


def test_obnam_over_openssh_never_loads_paramiko(sshd, repository, tmp_path):
    url, live = repository
    (tmp_path / 'home').mkdir(exist_ok=True)
    code, out, err, loaded = obnam(sshd, tmp_path, 'generations',
                                   '--repository', url)
    assert (code, err, loaded) == (0, b'', False)
    assert len(out.splitlines()) == 1
    target = tmp_path / 'restored'
    code, _, err, loaded = obnam(sshd, tmp_path, 'restore', '--repository',
                                 url, '--to', str(target))
    assert (code, err, loaded) == (0, b'', False)
    restored = target / str(live).lstrip('/') / 'file'
    assert restored.read_bytes() == b'data\n' * 1000


def test_pure_paramiko_loads_paramiko(sshd, repository, tmp_path):
    url, _ = repository
    code, out, err, loaded = obnam(sshd, tmp_path, 'generations',
                                   '--repository', url, '--pure-paramiko')
    assert (code, err, loaded) == (0, b'', True)
    assert len(out.splitlines()) == 1


def test_openssh_path_works_without_paramiko_installed(sshd, repository,
                                                      tmp_path):
    url, _ = repository
    code, out, err, _ = obnam(sshd, tmp_path, 'generations',
                              '--repository', url, hide_paramiko=True)
    assert (code, err) == (0, b'')
    assert len(out.splitlines()) == 1


INSTALL = (b'install the Debian package python3-paramiko (or the pip '
           b'package paramiko)\n')


def test_pure_paramiko_without_paramiko_is_a_one_line_error(
        sshd, repository, tmp_path):
    url, _ = repository
    code, out, err, _ = obnam(sshd, tmp_path, 'generations', '--repository',
                              url, '--pure-paramiko', hide_paramiko=True)
    assert (code, out) == (1, b'')
    assert err == (b'ERROR: R62619X: Missing Python module paramiko, needed '
                   b'for --pure-paramiko: ' + INSTALL)


def test_no_ssh_and_no_paramiko_is_a_one_line_error(sshd, repository,
                                                    tmp_path):
    url, _ = repository
    missing = str(tmp_path / 'no-such-ssh')
    code, out, err, _ = obnam(sshd, tmp_path, 'generations', '--repository',
                              url, '--ssh-command', missing,
                              hide_paramiko=True)
    assert (code, out) == (1, b'')
    assert err == (b'ERROR: R62619X: Missing Python module paramiko, needed '
                   b'because %s cannot be run (No such file or directory): '
                   % missing.encode() + INSTALL)
