"""The cipher order obnam asks OpenSSH for (obnamlib.vfs.sftp.ssh_ciphers):
AES-GCM first only where the processor has AES instructions and the
user's ssh configuration leaves the ciphers at OpenSSH's default; the
connection works either way, against a real sshd on 127.0.0.1."""

import subprocess

import pytest

from obnamlib.vfs.sftp import ssh_ciphers
from obnamlib.vfs.sftp.fs import SftpFS
from tests.sshd_fixture import sshd  # noqa: F401
from tests.obnamlib.vfs.test_sftp_ssh_config import (  # noqa: F401
    alias_config, isolated_ssh_user, settings, ssh_with_config)

pytestmark = pytest.mark.timeout(300)

DEFAULT = ','.join(ssh_ciphers.OPENSSH_DEFAULTS[0])


@pytest.mark.parametrize('default', ssh_ciphers.OPENSSH_DEFAULTS)
def test_a_default_list_gets_aes_gcm_first_where_the_cpu_has_aes(default):
    order = ssh_ciphers.preferred(','.join(default), has_aes=True).split(',')
    assert order[:2] == ['aes128-gcm@openssh.com', 'aes256-gcm@openssh.com']
    assert sorted(order) == sorted(default)
    rest = [name for name in default if name not in order[:2]]
    assert order[2:] == rest


def test_this_machines_ssh_has_a_known_default():
    """A new OpenSSH default is to be added to OPENSSH_DEFAULTS."""
    out = subprocess.run(['ssh', '-G', '-F', '/dev/null', 'localhost'],
                         capture_output=True, text=True, check=True).stdout
    ciphers = [line.split()[1] for line in out.splitlines()
               if line.startswith('ciphers ')]
    assert tuple(ciphers[0].split(',')) in ssh_ciphers.OPENSSH_DEFAULTS


@pytest.mark.parametrize('configured, has_aes', [
    (DEFAULT, False),
    (None, True),
    ('aes256-ctr', True),
    ('aes128-gcm@openssh.com,' + DEFAULT.replace(
        ',aes128-gcm@openssh.com', ''), True),
])
def test_anything_else_is_left_to_ssh(configured, has_aes):
    assert ssh_ciphers.preferred(configured, has_aes=has_aes) is None


@pytest.mark.parametrize('text, expected', [
    (b'processor\t: 0\nflags\t\t: fpu sse2 aes avx2\n', True),
    (b'processor\t: 0\nflags\t\t: fpu sse2 avx2 vaes_x\n', False),
    (b'Features\t: fp asimd aes pmull sha1\n', True),
    (b'', False),
])
def test_aes_instructions_are_read_from_cpuinfo(tmp_path, monkeypatch,
                                                 text, expected):
    (tmp_path / 'cpuinfo').write_bytes(text)
    monkeypatch.setattr(ssh_ciphers, 'CPUINFO', str(tmp_path / 'cpuinfo'))
    ssh_ciphers.cpu_has_aes.cache_clear()
    try:
        assert ssh_ciphers.cpu_has_aes() is expected
    finally:
        ssh_ciphers.cpu_has_aes.cache_clear()


def connect_and_record(sshd, tmp_path, extra_config=''):  # noqa: F811
    """The ssh runs of one connection that writes a file (each run's
    arguments, split)."""
    record = tmp_path / 'runs'
    command = ssh_with_config(
        tmp_path, alias_config(sshd, tmp_path / 'cfg', extra_config), record)
    with SftpFS('sftp://backupbox%s' % tmp_path,
                settings(sshd, **{'ssh-command': command})) as fs:
        fs.write_file('x', b'x')
    assert (tmp_path / 'x').read_bytes() == b'x'
    return [run.split() for run in record.read_text().splitlines()]


def test_with_aes_ssh_is_asked_and_then_given_aes_gcm_first(
        sshd, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(ssh_ciphers, 'cpu_has_aes', lambda: True)
    runs = connect_and_record(sshd, tmp_path)
    assert len(runs) == 2 and '-G' in runs[0]
    wanted = [arg for arg in runs[1] if arg.startswith('Ciphers=')]
    assert len(wanted) == 1 and wanted[0].startswith(
        'Ciphers=aes128-gcm@openssh.com,aes256-gcm@openssh.com,')
    assert runs[1][-2:] == ['backupbox', 'sftp']


def test_a_users_ciphers_line_is_left_alone(sshd, tmp_path,
                                            monkeypatch):  # noqa: F811
    monkeypatch.setattr(ssh_ciphers, 'cpu_has_aes', lambda: True)
    runs = connect_and_record(sshd, tmp_path, '  Ciphers aes256-ctr\n')
    assert not any(arg.startswith('Ciphers=') for arg in runs[-1])


def test_without_aes_ssh_is_not_asked(sshd, tmp_path,
                                      monkeypatch):  # noqa: F811
    monkeypatch.setattr(ssh_ciphers, 'cpu_has_aes', lambda: False)
    runs = connect_and_record(sshd, tmp_path)
    assert len(runs) == 1 and '-G' not in runs[0]
    assert not any(arg.startswith('Ciphers=') for arg in runs[0])
