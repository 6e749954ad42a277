"""SftpFS against a real OpenSSH sshd on 127.0.0.1 (tests/sshd_server.py).

Both transports are exercised: the OpenSSH client as a subprocess (the
default) and paramiko's own SSH (--pure-paramiko).
"""

import atexit
import contextlib
import errno
import grp
import os
import pathlib
import pwd
import socket
import stat
import subprocess
import tempfile

import pytest

from obnamlib import errors
from obnamlib.vfs.sftp import codec, ssh_auth
from obnamlib.vfs.sftp.errors import HardlinkError, SftpConnectionLost
from obnamlib.vfs.sftp.fs import SftpFS
from obnamlib.vfs.sftp.limits import CHUNK, PREFETCH_SIZE
from obnamlib.vfs.sftp.url import InvalidPortError, SftpUrl, \
    WrongURLSchemeError
from tests.obnamlib.vfs_conformance import VfsConformance
from tests.sshd_server import SshdServer, generate_key, public_key_line


TRANSPORTS = ['openssh', 'paramiko']
_servers = {}
IS_ROOT = os.getuid() == 0


def shared_sshd(host='127.0.0.1', user=None):
    """One sshd per address and login user for every test (started on
    first use)."""
    key = (host, user)
    if key not in _servers:
        server = SshdServer(host=host, user=user)
        server.start()
        atexit.register(server.stop)
        _servers[key] = server
    return _servers[key]


def ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(('::1', 0))
        return True
    except OSError:
        return False


@contextlib.contextmanager
def small_tmpfs(path, size='1m'):
    """A tiny file system at `path` (root only): a disk that fills up."""
    path.mkdir(exist_ok=True)
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=%s,mode=755' % size,
                    'tmpfs', str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(['umount', str(path)], check=True)


def world_readable_dir():
    """A directory other users can reach (pytest's tmp_path is 0700)."""
    path = tempfile.mkdtemp(prefix='obnam-sftp-', dir='/tmp')
    os.chmod(path, 0o755)
    return pathlib.Path(path)


@pytest.fixture(scope='module')
def sshd():
    return shared_sshd()


_connection = []


def shared_connection():
    """One OpenSSH connection for the data-path tests (a handshake costs
    more than most tests); tests that break connections make their own."""
    if not _connection or not _connection[0].is_alive():
        sshd = shared_sshd()
        target = ssh_auth.SshTarget(sshd.host, sshd.port, sshd.user,
                                    settings_for(sshd, 'openssh'))
        _connection[:] = [ssh_auth.open_sftp(target)]
    return _connection[0]


def kill_sessions(sshd):
    """Drop every connection, the shared one too (made anew when needed)."""
    killed = sshd.kill_sessions()
    if _connection:
        _connection.pop().close()
    return killed


def shared_fs(root):
    sshd = shared_sshd()
    return SftpFS(sshd.url(root), settings_for(sshd, 'openssh'),
                  connection=shared_connection())


@pytest.fixture(autouse=True)
def isolated_ssh_user(tmp_path, monkeypatch):
    """No agent, no ~/.ssh of the person running the tests (paramiko)."""
    monkeypatch.delenv('SSH_AUTH_SOCK', raising=False)
    home = tmp_path / 'home'
    home.mkdir(exist_ok=True)
    monkeypatch.setenv('HOME', str(home))


def settings_for(sshd, transport, **extra):
    settings = {'ssh-key': sshd.client_key,
                'ssh-known-hosts': sshd.known_hosts,
                'pure-paramiko': transport == 'paramiko'}
    settings.update(extra)
    return settings


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


@pytest.fixture
def remote_dir(tmp_path):
    path = tmp_path / 'remote'
    path.mkdir()
    return path


@pytest.fixture
def fs(sshd, remote_dir):
    """Over the default transport; both share the SFTP layer, and the
    Repository suite in test_sftp_end_to_end.py runs over paramiko."""
    fs = shared_fs(str(remote_dir))
    yield fs
    fs.close()


def one_line(error):
    text = str(error)
    assert '\n' not in text.splitlines()[0]
    return text.splitlines()[0]


# --- URLs -----------------------------------------------------------------

def test_url_with_user_host_port_and_absolute_path():
    url = SftpUrl('sftp://liw@backup.example.com:2222/srv/repo')
    assert (url.user, url.host, url.port, url.path, url.home_relative) == (
        'liw', 'backup.example.com', 2222, '/srv/repo', False)


def test_url_without_user_or_port():
    url = SftpUrl('sftp://server/x/y')
    assert (url.user, url.host, url.port, url.path) == (
        None, 'server', None, '/x/y')


def test_url_home_relative():
    url = SftpUrl('sftp://server/~/backups/obnam')
    assert url.home_relative and url.path == 'backups/obnam'
    assert SftpUrl('sftp://server/~/.').path == '.'
    assert SftpUrl('sftp://server/~').home_relative
    assert SftpUrl('sftp://server').home_relative
    assert SftpUrl('sftp://server').path == ''


def test_url_ipv6_literal():
    url = SftpUrl('sftp://me@[::1]:2222/x')
    assert (url.user, url.host, url.port, url.path) == ('me', '::1', 2222,
                                                        '/x')
    assert SftpUrl('sftp://[fe80::1]/y').host == 'fe80::1'


@pytest.mark.parametrize('port', ['abc', '0', '70000', '-1'])
def test_url_bad_port_is_invalid_port_error(port):
    with pytest.raises(InvalidPortError) as e:
        SftpUrl('sftp://host:%s/x' % port)
    assert e.value.code == 'R5914DX'
    assert str(e.value).startswith(
        'R5914DX: Invalid port number %s in sftp://host:%s/x: ' % (port, port))


def test_non_sftp_url_is_wrong_scheme():
    with pytest.raises(WrongURLSchemeError) as e:
        SftpUrl('ssh://host/x')
    assert str(e.value) == (
        'RB8E98X: SftpFS used with non-sftp URL: ssh://host/x')


def test_pinned_error_codes():
    assert ssh_auth.NoHostKeyError.code == 'R5F98AX'
    assert ssh_auth.NoHostKeyOfWantedTypeError.code == 'R8AAC1X'
    assert ssh_auth.WrongHostKeyError.code == 'R47416X'
    assert ssh_auth.KeyAuthenticationError.code == 'RCB0CAX'
    assert HardlinkError.code == 'R02C17X'
    known = {cls.code for cls in errors.all_error_classes()
             if cls not in (ssh_auth.SshConnectError,
                            SftpConnectionLost)}
    assert ssh_auth.SshConnectError.code not in known
    assert SftpConnectionLost.code not in known


def test_openssh_command_line_passes_url_parts_and_policy(sshd):
    target = ssh_auth.SshTarget('example.org', 2222, 'liw', {
        'ssh-key': '/k', 'ssh-known-hosts': '/kh',
        'ssh-host-keys-check': 'no', 'ssh-command': '/opt/ssh'})
    argv = ssh_auth.openssh_argv(target)
    assert argv[0] == '/opt/ssh'
    assert argv[-2:] == ['example.org', 'sftp']
    joined = ' '.join(argv)
    for part in ['-s', '-p 2222', '-l liw', '-i /k',
                 '-o StrictHostKeyChecking=accept-new',
                 '-o UserKnownHostsFile=/kh']:
        assert part in joined
    plain = ssh_auth.openssh_argv(ssh_auth.SshTarget('h', None, None, {}))
    assert '-p' not in plain and '-l' not in plain
    assert not any('StrictHostKeyChecking' in a for a in plain)


# --- connecting -----------------------------------------------------------

def test_home_relative_root_is_below_login_directory(sshd, transport):
    home = pwd.getpwuid(os.getuid()).pw_dir.encode()
    if not os.path.isdir(home):
        home = b''      # sshd starts in / (e.g. nobody's /nonexistent)
    url = 'sftp://%s@127.0.0.1:%d/~/some/dir' % (sshd.user, sshd.port)
    fs = SftpFS(url, settings_for(sshd, transport))
    try:
        assert fs.root_bytes == home + b'/some/dir'
        assert fs.root == os.fsdecode(home + b'/some/dir')
        other = 'sftp://%s@127.0.0.1:%d/~/.' % (sshd.user, sshd.port)
        assert fs.path_of(other) == (home or b'/')
        assert fs.path_of(sshd.url('/etc')) == b'/etc'
        with pytest.raises(errors.ObnamSystemError):
            fs.path_of('sftp://elsewhere/etc')
    finally:
        fs.close()


def test_unknown_host_key_is_refused_by_default(sshd, transport, tmp_path):
    empty = tmp_path / 'known_hosts'
    empty.write_text('')
    settings = settings_for(sshd, transport, **{
        'ssh-known-hosts': str(empty)})
    with pytest.raises(ssh_auth.NoHostKeyError) as e:
        SftpFS(sshd.url('/tmp'), settings)
    assert one_line(e.value) == (
        'R5F98AX: No known host key for [127.0.0.1]:%d' % sshd.port)
    assert empty.read_text() == ''


@pytest.mark.parametrize('check', ['yes', 'ask', 'ssh-config'])
def test_unknown_host_key_refused_for_strict_policies(sshd, transport,
                                                      tmp_path, check):
    empty = tmp_path / 'known_hosts'
    empty.write_text('')
    settings = settings_for(sshd, transport, **{
        'ssh-known-hosts': str(empty), 'ssh-host-keys-check': check})
    with pytest.raises(ssh_auth.NoHostKeyError):
        SftpFS(sshd.url('/tmp'), settings)


def test_strict_ssh_host_keys_overrides_no(sshd, transport, tmp_path):
    empty = tmp_path / 'known_hosts'
    empty.write_text('')
    settings = settings_for(sshd, transport, **{
        'ssh-known-hosts': str(empty), 'ssh-host-keys-check': 'no',
        'strict-ssh-host-keys': True})
    with pytest.raises(ssh_auth.NoHostKeyError):
        SftpFS(sshd.url('/tmp'), settings)


def root_listing(url, settings):
    """The names in the root of url, over a connection made with
    settings (closed again)."""
    with SftpFS(url, settings) as fs:
        return fs.listdir('')


def test_unknown_host_key_accepted_when_check_is_no(sshd, transport,
                                                    tmp_path):
    empty = tmp_path / 'known_hosts'
    empty.write_text('')
    settings = settings_for(sshd, transport, **{
        'ssh-known-hosts': str(empty), 'ssh-host-keys-check': 'no'})
    assert 'known_hosts' in root_listing(sshd.url(str(tmp_path)), settings)
    # ssh (accept-new) records the new key; paramiko leaves the file alone
    recorded = empty.read_text()
    if transport == 'openssh':
        assert sshd.host_key_line.split()[1] in recorded
    else:
        assert recorded == ''


@pytest.mark.parametrize('check', ['ssh-config', 'no'])
def test_changed_host_key_is_always_fatal(sshd, transport, tmp_path, check):
    other = generate_key(str(tmp_path / 'other_host_key'))
    known = sshd.write_known_hosts(str(tmp_path / 'known_hosts'),
                                   public_key_line(other))
    settings = settings_for(sshd, transport, **{
        'ssh-known-hosts': known, 'ssh-host-keys-check': check})
    with pytest.raises(ssh_auth.WrongHostKeyError) as e:
        SftpFS(sshd.url('/tmp'), settings)
    assert one_line(e.value) == (
        'R47416X: SSH server [127.0.0.1]:%d offered wrong public key'
        % sshd.port)


def test_hashed_known_hosts_entries_are_understood(sshd, transport,
                                                  tmp_path):
    known = sshd.write_known_hosts(str(tmp_path / 'known_hosts'))
    subprocess.run(['ssh-keygen', '-q', '-H', '-f', known], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert open(known).read().startswith('|1|')
    settings = settings_for(sshd, transport, **{'ssh-known-hosts': known})
    assert 'known_hosts' in root_listing(sshd.url(str(tmp_path)), settings)


def test_known_host_without_key_of_offered_type(sshd, tmp_path):
    other = generate_key(str(tmp_path / 'rsa_host_key'), 'rsa')
    known = sshd.write_known_hosts(str(tmp_path / 'known_hosts'),
                                   public_key_line(other))
    settings = settings_for(sshd, 'paramiko', **{'ssh-known-hosts': known})
    with pytest.raises(ssh_auth.NoHostKeyOfWantedTypeError) as e:
        SftpFS(sshd.url('/tmp'), settings)
    assert one_line(e.value) == (
        'R8AAC1X: No known type ssh-ed25519 host key for [127.0.0.1]:%d'
        % sshd.port)


def test_unauthorized_key_is_refused(sshd, transport, tmp_path):
    stranger = generate_key(str(tmp_path / 'stranger'))
    settings = settings_for(sshd, transport, **{'ssh-key': stranger})
    with pytest.raises(ssh_auth.KeyAuthenticationError) as e:
        SftpFS(sshd.url('/tmp'), settings)
    assert one_line(e.value) == (
        "RCB0CAX: Can't authenticate to SSH server using key")


@pytest.fixture
def ssh_agent(tmp_path, monkeypatch):
    """A real ssh-agent on a private socket, for this test only."""
    sock = str(tmp_path / 'agent.sock')
    agent = subprocess.Popen(['ssh-agent', '-D', '-a', sock],
                             stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    agent.stdout.readline()     # it prints the socket once it listens
    monkeypatch.setenv('SSH_AUTH_SOCK', sock)
    yield sock
    agent.terminate()
    agent.wait()
    agent.stdout.close()


def test_agent_key_is_used(sshd, transport, tmp_path, ssh_agent):
    subprocess.run(['ssh-add', '-q', sshd.client_key], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    settings = settings_for(sshd, transport, **{'ssh-key': ''})
    assert 'home' in root_listing(sshd.url(str(tmp_path)), settings)


def test_key_from_home_ssh_directory_is_used(sshd, tmp_path):
    ssh_dir = tmp_path / 'home' / '.ssh'
    ssh_dir.mkdir()
    key = ssh_dir / 'id_ed25519'
    key.write_bytes(open(sshd.client_key, 'rb').read())
    settings = settings_for(sshd, 'paramiko', **{'ssh-key': ''})
    assert 'home' in root_listing(sshd.url(str(tmp_path)), settings)


def test_ssh_config_host_alias(sshd, tmp_path):
    ssh_dir = tmp_path / 'home' / '.ssh'
    ssh_dir.mkdir()
    (ssh_dir / 'config').write_text(
        'Host backupbox\n  HostName 127.0.0.1\n  Port %d\n  User %s\n'
        '  IdentityFile %s\n' % (sshd.port, sshd.user, sshd.client_key))
    settings = settings_for(sshd, 'paramiko', **{'ssh-key': ''})
    fs = SftpFS('sftp://backupbox%s' % tmp_path, settings)
    try:
        assert fs.target.hostname == '127.0.0.1'
        assert fs.target.port == sshd.port
        assert 'home' in fs.listdir('')
    finally:
        fs.close()


def wrapper_script(path, body):
    path.write_text('#!/bin/sh\n' + body)
    path.chmod(0o755)
    return str(path)


def test_ssh_command_runs_instead_of_ssh(sshd, tmp_path):
    marker = tmp_path / 'ran'
    config = tmp_path / 'ssh_config'
    config.write_text('Host backupbox\n  HostName 127.0.0.1\n  Port %d\n'
                      '  User %s\n' % (sshd.port, sshd.user))
    command = wrapper_script(tmp_path / 'myssh', 'echo "$@" > %s\n'
                             'exec ssh -F %s "$@"\n' % (marker, config))
    settings = settings_for(sshd, 'openssh', **{'ssh-command': command})
    fs = SftpFS('sftp://backupbox%s' % tmp_path, settings)
    try:
        assert 'ran' in fs.listdir('')
        assert type(fs.connection).__name__ == 'OpenSSHConnection'
    finally:
        fs.close()
    assert marker.read_text().split()[-2:] == ['backupbox', 'sftp']


def test_ctrl_c_does_not_kill_the_ssh_client(sshd, tmp_path):
    """SIGINT from the terminal reaches ssh too; obnam still needs the
    connection to release its locks."""
    import signal
    fs = SftpFS(sshd.url(str(tmp_path)), settings_for(sshd, 'openssh'))
    try:
        os.kill(fs.connection.process.pid, signal.SIGINT)
        fs.write_file('after-interrupt', b'still here')
        assert fs.connection.process.poll() is None
    finally:
        fs.close()
    assert (tmp_path / 'after-interrupt').read_bytes() == b'still here'


def test_missing_ssh_command_falls_back_to_paramiko(sshd, tmp_path):
    settings = settings_for(sshd, 'openssh', **{
        'ssh-command': str(tmp_path / 'no-such-ssh')})
    fs = SftpFS(sshd.url(str(tmp_path)), settings)
    try:
        assert type(fs.connection).__name__ == 'ParamikoConnection'
        assert 'home' in fs.listdir('')
    finally:
        fs.close()


def test_nothing_listening_is_a_one_line_error(sshd, transport):
    from tests.sshd_server import free_port
    port = free_port()
    settings = settings_for(sshd, transport)
    with pytest.raises(ssh_auth.SshConnectError) as e:
        SftpFS('sftp://127.0.0.1:%d/x' % port, settings)
    assert 'Connection refused' in one_line(e.value)
    assert one_line(e.value).startswith(ssh_auth.SshConnectError.code)


@pytest.mark.skipif(not ipv6_loopback(), reason='no IPv6 loopback')
def test_ipv6_url(transport, tmp_path):
    sshd = shared_sshd(host='::1')
    url = sshd.url(str(tmp_path))
    assert url.startswith('sftp://%s@[::1]:%d/' % (sshd.user, sshd.port))
    fs = SftpFS(url, settings_for(sshd, transport))
    try:
        fs.write_file('over-ipv6', b'6')
        assert fs.target.known_hosts_name == '[::1]:%d' % sshd.port
    finally:
        fs.close()
    assert (tmp_path / 'over-ipv6').read_bytes() == b'6'


def test_dropped_connection_is_a_clear_error(sshd, transport, remote_dir):
    fs = SftpFS(sshd.url(str(remote_dir)), settings_for(sshd, transport))
    try:
        fs.write_file('before', b'1')
        assert kill_sessions(sshd) > 0
        with pytest.raises(SftpConnectionLost) as e:
            for i in range(3):
                fs.write_file('after%d' % i, b'2' * 100000)
        assert one_line(e.value).startswith(
            '%s: Lost the SSH connection to 127.0.0.1: ' %
            SftpConnectionLost.code)
        with pytest.raises(SftpConnectionLost):
            fs.read_file('before')
    finally:
        fs.close()
    assert (remote_dir / 'before').read_bytes() == b'1'
    assert not [n for n in os.listdir(remote_dir) if n.startswith('after')]


# --- repository storage ---------------------------------------------------

def test_write_read_and_parents(fs, remote_dir):
    fs.write_file('nodes/0/0/1', b'node one')
    assert (remote_dir / 'nodes/0/0/1').read_bytes() == b'node one'
    assert fs.read_file('nodes/0/0/1') == b'node one'
    assert fs.listdir('nodes/0') == ['0']
    assert fs.isdir('nodes') and not fs.isdir('nodes/0/0/1')
    assert fs.exists('nodes/0/0/1') and not fs.exists('nodes/9')


def test_created_files_are_0600_and_dirs_0700(fs, remote_dir):
    fs.write_file('a/b', b'x')
    assert stat.S_IMODE(os.stat(remote_dir / 'a/b').st_mode) == 0o600
    assert stat.S_IMODE(os.stat(remote_dir / 'a').st_mode) == 0o700


def test_large_file_round_trip(fs, remote_dir):
    data = os.urandom(3 * 1024 * 1024 + 12345)
    fs.write_file('chunks/big', data)
    assert (remote_dir / 'chunks/big').read_bytes() == data
    assert fs.read_file('chunks/big') == data
    fs.write_file('empty', b'')
    assert fs.read_file('empty') == b''


def test_replace_is_atomic_and_leaves_no_temp_files(fs, remote_dir):
    fs.write_file('metadata', b'old')
    fs.write_file('metadata', b'new contents')
    assert fs.read_file('metadata') == b'new contents'
    assert sorted(os.listdir(remote_dir)) == ['metadata']


def test_rename_replaces_target_and_makes_parents(fs, remote_dir):
    fs.write_file('new/metadata', b'committed')
    fs.write_file('metadata', b'previous')
    fs.rename('new/metadata', 'metadata')
    assert (remote_dir / 'metadata').read_bytes() == b'committed'
    fs.write_file('new/x', b'x')
    fs.rename('new/x', 'deep/er/x')
    assert (remote_dir / 'deep/er/x').read_bytes() == b'x'


def test_missing_files_raise_file_not_found(fs):
    for call in (lambda: fs.read_file('nope'), lambda: fs.listdir('nope'),
                 lambda: fs.remove('nope')):
        with pytest.raises(FileNotFoundError):
            call()


def test_live_data_errors_are_obnam_errors(fs, remote_dir):
    missing = os.fsencode(remote_dir / 'nope')
    with pytest.raises(errors.ObnamSystemError) as e:
        fs.lstat(missing)
    assert str(e.value) == (
        'RD5FA4X: System error: %s: 2: No such file or directory'
        % (remote_dir / 'nope'))
    with pytest.raises(errors.ObnamIOError) as e:
        fs.open_read(missing)
    assert str(e.value) == (
        'RCE08AX: I/O error: %s: 2: No such file or directory'
        % (remote_dir / 'nope'))
    assert not fs.exists(missing)


def test_makedirs_remove_rmdir(fs, remote_dir):
    fs.makedirs('x/y/z')
    fs.makedirs('x/y/z')
    assert (remote_dir / 'x/y/z').is_dir()
    fs.write_file('x/y/z/f', b'')
    with pytest.raises(OSError) as e:
        fs.rmdir('x/y/z')
    assert e.value.errno == errno.ENOTEMPTY
    fs.remove('x/y/z/f')
    fs.rmdir('x/y/z')
    assert not (remote_dir / 'x/y/z').exists()
    fs.write_file('plain', b'')
    with pytest.raises(FileExistsError):
        fs.makedirs('plain')


def test_lock_is_exclusive_across_connections(sshd, transport, fs,
                                              remote_dir):
    other = SftpFS(sshd.url(str(remote_dir)), settings_for(sshd, transport))
    assert other.connection is not fs.connection
    try:
        fs.lock('client/lock', b'pid=1\n')
        assert (remote_dir / 'client/lock').read_bytes() == b'pid=1\n'
        with pytest.raises(errors.LockFail) as e:
            other.lock('client/lock')
        assert e.value.code == 'R681AEX'
        assert 'client/lock' in str(e.value)
        fs.unlock('client/lock')
        other.lock('client/lock')
        assert (remote_dir / 'client/lock').read_bytes() == b''
    finally:
        other.close()


def test_permission_denied_is_permission_error(fs, tmp_path):
    if os.getuid() == 0:
        target = b'/proc/sys/kernel/ostype'
    else:
        locked = tmp_path / 'locked'
        locked.mkdir(mode=0o500)
        target = os.fsencode(locked / 'f')
    with pytest.raises(errors.ObnamIOError) as e:
        fs.open_write(target)
    assert str(e.value) == 'RCE08AX: I/O error: %s: 13: Permission denied' % (
        os.fsdecode(target))


def test_disk_full_is_a_clear_error(fs):
    f = fs.open_write(b'/dev/full')
    with pytest.raises(errors.ObnamIOError) as e:
        f.write(b'x' * 1000)
        f.close()
    assert e.value.errno == errno.EIO
    assert one_line(e.value).startswith(
        'RCE08AX: I/O error: /dev/full: 5: SFTP server failure (')
    assert 'a full disk' in str(e.value)


@pytest.mark.skipif(not IS_ROOT, reason='mounting needs root')
def test_full_disk_is_no_space_left_on_device(fs, remote_dir):
    """SFTP says only "Failure"; statvfs@openssh.com tells why."""
    with small_tmpfs(remote_dir / 'small') as small:
        name = os.fsencode(small / 'big')
        f = fs.open_write(name)
        with pytest.raises(errors.ObnamIOError) as e:
            f.write(b'x' * 2 * 1024 * 1024)
            f.close()
        assert str(e.value) == ('RCE08AX: I/O error: %s: 28: No space left '
                                'on device' % os.fsdecode(name))
        os.remove(name)
        with pytest.raises(OSError) as e:
            fs.write_file('small/chunk', b'y' * 2 * 1024 * 1024)
        assert e.value.errno == errno.ENOSPC
        assert e.value.filename == fs.url_of(name[:-3] + b'chunk')
        assert os.listdir(small) == []      # no temporary file is left


def test_storage_errors_name_the_file_by_url(fs, remote_dir):
    with pytest.raises(FileNotFoundError) as e:
        fs.read_file('no/such')
    assert e.value.filename == '%s/no/such' % fs.url


def test_byte_counters(fs):
    fs.write_file('f', b'12345')
    fs.read_file('f')
    assert fs.bytes_written == 5 and fs.bytes_read == 5


# --- live data ------------------------------------------------------------

def test_scandir_gives_bytes_names_and_stats(fs, remote_dir):
    odd = os.fsencode(remote_dir) + b'/caf\xe9'
    with open(odd, 'wb') as f:
        f.write(b'12345')
    os.utime(odd, (1000000000, 1234567890))
    os.mkdir(remote_dir / 'sub')
    os.symlink('caf', remote_dir / 'link')
    entries = dict(fs.scandir(os.fsencode(remote_dir)))
    assert [name for name, _ in fs.scandir(os.fsencode(remote_dir))] == [
        b'caf\xe9', b'link', b'sub']
    st = entries[b'caf\xe9']
    local = os.lstat(odd)
    assert stat.S_ISREG(st.st_mode) and st.st_mode == local.st_mode
    assert (st.st_size, st.st_uid, st.st_gid) == (5, local.st_uid,
                                                  local.st_gid)
    assert st.st_mtime_ns == 1234567890 * 10**9
    assert st.st_atime_ns == 1000000000 * 10**9
    assert st.st_nlink == 1 and st.st_dev == 0 and st.st_blocks == 1
    assert stat.S_ISLNK(entries[b'link'].st_mode)
    assert stat.S_ISDIR(entries[b'sub'].st_mode)
    assert fs.lstat(odd).st_ino == st.st_ino
    owner = pwd.getpwuid(local.st_uid).pw_name.encode()
    assert st.st_username == owner
    group = grp.getgrgid(local.st_gid).gr_name.encode()
    assert st.st_groupname == group
    assert fs.readlink(os.fsencode(remote_dir / 'link')) == b'caf'


def test_lstat_has_names_and_link_counts_as_a_listing_does(fs, remote_dir):
    """SFTP v3 attributes lack both; lstat takes them from the parent's
    listing, as a backup root's metadata needs them."""
    base = os.fsencode(remote_dir)
    (remote_dir / 'f').write_bytes(b'1')
    os.link(remote_dir / 'f', remote_dir / 'hard')
    (remote_dir / 'd' / 'sub').mkdir(parents=True)
    owner = pwd.getpwuid(os.getuid()).pw_name.encode()
    group = grp.getgrgid(os.getgid()).gr_name.encode()
    for path, nlink in [(base + b'/f', 2), (base + b'/d', 3), (base, 3),
                        (b'/', os.lstat('/').st_nlink)]:
        st = fs.lstat(path)
        assert (st.st_nlink, st.st_username, st.st_groupname) == (
            nlink, owner if path != b'/' else b'root',
            group if path != b'/' else b'root'), path
    # A change of the attributes after the parent was listed is seen.
    assert fs.lstat(base + b'/hard').st_username == owner
    if os.getuid() == 0:
        os.chown(remote_dir / 'f', 65534, 65534)
        assert fs.lstat(base + b'/f').st_username == b'nobody'


def test_stream_read_of_large_file(fs, remote_dir):
    data = os.urandom(5 * 1024 * 1024 + 7)
    (remote_dir / 'big').write_bytes(data)
    f = fs.open_read(os.fsencode(remote_dir / 'big'))
    pieces = []
    while True:
        piece = f.read(65536)
        if not piece:
            break
        pieces.append(piece)
    f.close()
    assert b''.join(pieces) == data


def test_stream_write_then_restore_metadata(fs, remote_dir):
    path = os.fsencode(remote_dir / 'restored')
    data = os.urandom(1024 * 1024 + 3)
    f = fs.open_write(path)
    for i in range(0, len(data), 10000):
        f.write(data[i:i + 10000])
    f.close()
    assert (remote_dir / 'restored').read_bytes() == data
    fs.chmod(path, 0o640)
    fs.lutimes(path, 1500000000 * 10**9, 1600000000 * 10**9 + 5)
    st = os.lstat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert (st.st_atime, st.st_mtime) == (1500000000, 1600000000)
    fs.lchown(path, os.getuid(), os.getgid())
    fs.lchown(path, -1, os.getgid())


def test_sparse_write_with_seek_and_truncate(fs, remote_dir):
    path = os.fsencode(remote_dir / 'sparse')
    f = fs.open_write(path)
    f.write(b'head')
    f.seek(1000000)
    f.write(b'tail')
    f.truncate(2000000)
    f.close()
    data = (remote_dir / 'sparse').read_bytes()
    assert len(data) == 2000000
    assert data[:4] == b'head' and data[1000000:1000004] == b'tail'
    assert data.count(0) == 2000000 - 8


def test_create_file_is_exclusive(fs, remote_dir):
    fs.create_file('metadata/format', b'6\n')
    assert (remote_dir / 'metadata/format').read_bytes() == b'6\n'
    with pytest.raises(FileExistsError):
        fs.create_file('metadata/format', b'7\n')
    assert (remote_dir / 'metadata/format').read_bytes() == b'6\n'
    assert os.listdir(remote_dir / 'metadata') == ['format']


def test_create_file_of_a_large_chunk(fs, remote_dir):
    data = os.urandom(3 * 1024 * 1024 + 1)
    fs.create_file('chunks/0/0/1', data)
    assert (remote_dir / 'chunks/0/0/1').read_bytes() == data
    with pytest.raises(FileExistsError):
        fs.create_file('chunks/0/0/1', b'other')
    assert os.listdir(remote_dir / 'chunks/0/0') == ['1']


def test_large_lock_content(fs, remote_dir):
    content = os.urandom(600000)
    fs.lock('lock', content)
    assert (remote_dir / 'lock').read_bytes() == content


def test_open_vfs_picks_sftp(sshd, transport, remote_dir):
    import obnamlib.vfs.factory
    fs = obnamlib.vfs.factory.open_vfs(sshd.url(str(remote_dir)),
                               settings_for(sshd, transport))
    try:
        assert isinstance(fs, SftpFS)
        assert fs.baseurl == sshd.url(str(remote_dir))
    finally:
        fs.close()


def test_symlink_link_and_mkdir(fs, remote_dir):
    base = os.fsencode(remote_dir)
    fs.mkdir(base + b'/d')
    with pytest.raises(errors.ObnamSystemError) as e:
        fs.mkdir(base + b'/d')
    assert e.value.errno == errno.EEXIST
    fs.symlink(b'../target', base + b'/d/sym')
    assert os.readlink(base + b'/d/sym') == b'../target'
    fs.lutimes(base + b'/d/sym', 10**18, 1400000000 * 10**9)
    assert os.lstat(base + b'/d/sym').st_mtime == 1400000000
    fs.write_file('d/f', b'data')
    fs.link(base + b'/d/f', base + b'/d/hard')
    assert (os.lstat(base + b'/d/hard').st_ino ==
            os.lstat(base + b'/d/f').st_ino)
    with pytest.raises(errors.ObnamSystemError) as e:
        fs.mknod(base + b'/fifo', stat.S_IFIFO | 0o600)
    assert e.value.errno == errno.ENOTSUP


def test_no_extended_attributes(fs, remote_dir):
    assert fs.llistxattr(os.fsencode(remote_dir)) == []


# --- the VFS conformance suite ----------------------------------------------

class SftpConformance(VfsConformance):
    """What SFTP cannot do is checked to fail clearly instead."""

    transport = None

    def make_vfs(self, root):
        return shared_fs(root)

    def test_symlink_and_times(self):
        link = self.live('l')
        self.vfs.symlink(b'/nowhere', link)
        assert os.readlink(link) == b'/nowhere'
        self.vfs.lutimes(link, 1000000001, 2000000002)
        st = os.lstat(link)
        assert st.st_mtime_ns == 2000000000      # SFTP v3: whole seconds
        assert st.st_atime_ns == 1000000000

    def test_fifo_and_socket(self):
        for kind in (stat.S_IFIFO, stat.S_IFSOCK):
            with pytest.raises(errors.ObnamSystemError) as info:
                self.vfs.mknod(self.live('node'), kind | 0o644)
            assert info.value.errno == errno.ENOTSUP
        assert not os.path.lexists(self.live('node'))

    def test_xattrs(self):
        path = self.live('f')
        with open(path, 'wb'):
            pass
        assert self.vfs.llistxattr(path) == []
        with pytest.raises(errors.ObnamSystemError) as info:
            self.vfs.lsetxattr(path, b'user.foo', b'some value')
        assert info.value.errno == errno.ENOTSUP


class TestSftpConformance(SftpConformance):
    transport = 'openssh'


def test_scandir_of_a_large_directory(fs, remote_dir):
    """More names than several pipelined READDIR replies carry."""
    big = remote_dir / 'big'
    big.mkdir()
    names = sorted(b'%05d' % i for i in range(2500))
    for name in names:
        open(os.fsencode(big) + b'/' + name, 'wb').close()
    entries = fs.scandir(os.fsencode(big))
    assert [name for name, _ in entries] == names
    assert all(stat.S_ISREG(st.st_mode) for _, st in entries)
    assert sorted(fs.listdir('big')) == [n.decode() for n in names]


def test_stream_read_of_small_and_empty_files(fs, remote_dir):
    (remote_dir / 'small').write_bytes(b'tiny')
    (remote_dir / 'empty').write_bytes(b'')
    f = fs.open_read(os.fsencode(remote_dir / 'small'))
    assert (f.read(100), f.read(100)) == (b'tiny', b'')
    f.close()
    f = fs.open_read(os.fsencode(remote_dir / 'empty'))
    assert f.read() == b''
    f.close()


def test_read_files_reads_many_files_at_once(fs, remote_dir):
    contents = [os.urandom(n) for n in (0, 10, 300000, 1000000)]
    for i, data in enumerate(contents):
        fs.write_file('chunks/%d' % i, data)
    paths = ['chunks/%d' % i for i in (3, 0, 2, 1, 3)]
    assert fs.read_files(paths) == [contents[i] for i in (3, 0, 2, 1, 3)]
    with pytest.raises(FileNotFoundError):
        fs.read_files(['chunks/0', 'chunks/missing'])
    assert fs.read_file('chunks/1') == contents[1]    # nothing left open


def test_lock_released_between_attempt_and_check_is_retried(fs, remote_dir,
                                                           monkeypatch):
    """The server only says "Failure" when the lock exists; if its holder
    releases it before we look, the next attempt takes it."""
    (remote_dir / 'lock').write_bytes(b'')
    real_exists = fs._exists_abs

    def holder_releases_first(full):
        if (remote_dir / 'lock').exists():
            os.remove(remote_dir / 'lock')
            return False
        return real_exists(full)
    monkeypatch.setattr(fs, '_exists_abs', holder_releases_first)
    fs.lock('lock', b'mine')
    assert (remote_dir / 'lock').read_bytes() == b'mine'


def test_round_trips_per_operation(fs, remote_dir):
    """The cost model the module promises (one round trip is one wait for
    the server after sending)."""
    fs.makedirs('d/sub')
    (remote_dir / 'd' / 'to-sub').symlink_to('sub')

    def cost(operation, *args):
        before = fs.round_trips
        result = operation(*args)
        return fs.round_trips - before, result

    big = os.urandom(3 * 1024 * 1024)
    assert cost(fs.create_file, 'd/chunk', big) == (2, None)
    assert cost(fs.write_file, 'd/node', b'n' * 70000) == (3, None)
    assert cost(fs.read_file, 'd/node') == (2, b'n' * 70000)
    assert cost(fs.read_file, 'd/chunk') == (3, big)
    mib = big[:1024 * 1024 + 100]       # a default-size chunk, filtered
    fs.write_file('d/mib', mib)
    assert cost(fs.read_file, 'd/mib') == (2, mib)
    assert cost(fs.read_file, 'd/node') == (2, b'n' * 70000)
    assert cost(fs.read_file, 'd/mib') == (2, mib)     # after a small one
    assert cost(fs.read_files, ['d/node', 'd/chunk', 'd/mib']) == (
        3, [b'n' * 70000, big, mib])

    def stream(path):
        f = fs.open_read(os.fsencode(remote_dir / path))
        try:
            return len(f.read(1024 * 1024)), f.read(1)
        finally:
            f.close()
    assert cost(stream, 'd/node') == (2, (70000, b''))
    assert cost(fs.create_file, 'new/dirs/here/c', b'c') == (3, None)
    assert cost(fs.lock, 'd/lock') == (2, None)
    rt, names = cost(fs.listdir, 'd')
    assert rt == 2 and sorted(names) == ['chunk', 'lock', 'mib', 'node',
                                         'sub', 'to-sub']
    # Stats right after the listing come from it, each once.
    assert cost(fs.isdir, 'd/sub') == (0, True)
    assert cost(fs.isdir, 'd/node') == (0, False)
    assert cost(fs.exists, 'd/lock') == (0, True)
    assert cost(fs.isdir, 'd/to-sub') == (1, True)      # a link: followed
    assert cost(fs.exists, 'd/lock') == (1, True)       # asked again
    fs.listdir('d')
    (remote_dir / 'd' / 'later').write_bytes(b'')
    assert cost(fs.exists, 'd/later') == (0, False)     # as listed...
    assert cost(fs.exists, 'd/later') == (1, True)      # ...then the server
    fs.listdir('d')
    fs.remove('d/chunk')
    assert cost(fs.exists, 'd/node') == (1, True)       # a change: asks
    fs.listdir('d')
    assert cost(fs.isdir, 'd/sub') == (0, True)
    assert cost(fs.exists, 'd/sub') == (1, True)        # twice: asks


def test_prefetch_reads_small_files_together(fs, remote_dir):
    base = os.fsencode(remote_dir)
    small = os.urandom(1000)
    large = os.urandom(PREFETCH_SIZE + 1000)
    (remote_dir / 'small').write_bytes(small)
    (remote_dir / 'large').write_bytes(large)
    (remote_dir / 'empty').write_bytes(b'')
    paths = [base + b'/small', base + b'/large', base + b'/missing',
             base + b'/empty']
    before = fs.round_trips
    fs.prefetch(paths)
    assert fs.round_trips - before == 2
    for name, content in [(b'small', small), (b'empty', b'')]:
        f = fs.open_read(base + b'/' + name)
        assert f.read() == content
        f.close()
    assert fs.round_trips - before == 2
    with pytest.raises(errors.ObnamIOError) as e:
        fs.open_read(base + b'/missing')
    assert str(e.value) == ('RCE08AX: I/O error: %s/missing: 2: No such '
                            'file or directory' % os.fsdecode(base))
    f = fs.open_read(base + b'/large')     # too large: streamed
    assert f.read() == large
    f.close()
    # Each prefetched file is served once.
    (remote_dir / 'small').write_bytes(b'new')
    assert fs.open_read(base + b'/small').read() == b'new'


def test_prefetch_listings_lists_directories_together(fs, remote_dir):
    base = os.fsencode(remote_dir)
    (remote_dir / 'few').mkdir()
    for name in ('a', 'b', 'c'):
        (remote_dir / 'few' / name).write_bytes(b'')
    (remote_dir / 'many').mkdir()
    for i in range(250):
        (remote_dir / 'many' / str(i)).write_bytes(b'')
    expected = {name: fs.scandir(base + b'/' + name)
                for name in (b'few', b'many')}
    before = fs.round_trips
    fs.prefetch_listings([base + b'/few', base + b'/many', base + b'/none'])
    # OPENDIRs; two READDIRs each (200 names at most); the rest of many.
    assert fs.round_trips - before == 3
    for name in (b'few', b'many'):
        listing = fs.scandir(base + b'/' + name)
        assert [(n, st.st_mode, st.st_size, st.st_username)
                for n, st in listing] == [
            (n, st.st_mode, st.st_size, st.st_username)
            for n, st in expected[name]]
    assert fs.round_trips - before == 3
    with pytest.raises(errors.ObnamSystemError) as e:
        fs.scandir(base + b'/none')
    assert e.value.errno == errno.ENOENT
    (remote_dir / 'few' / 'd').write_bytes(b'')
    assert len(fs.scandir(base + b'/few')) == 4     # served once


def test_set_attributes_in_one_round_trip(fs, remote_dir):
    path = remote_dir / 'f'
    path.write_bytes(b'f')
    os.symlink('f', remote_dir / 'link')
    gid = os.getgid()
    before = fs.round_trips
    assert fs.set_attributes(os.fsencode(path), owner=(os.getuid(), gid),
                             mode=0o751, times=(10**9, 2 * 10**9)) == {}
    assert fs.round_trips - before == 1
    st = os.lstat(path)
    assert (stat.S_IMODE(st.st_mode), st.st_mtime, st.st_atime) == (
        0o751, 2, 1)
    # A symlink's own times (lsetstat@openssh.com), not its target's.
    assert fs.set_attributes(os.fsencode(remote_dir / 'link'),
                             times=(3 * 10**9, 4 * 10**9)) == {}
    assert os.lstat(remote_dir / 'link').st_mtime == 4
    assert os.lstat(path).st_mtime == 2
    failures = fs.set_attributes(os.fsencode(remote_dir / 'gone'),
                                 mode=0o600, times=(0, 0))
    assert sorted(failures) == ['mode', 'times']
    assert str(failures['mode']) == (
        'RD5FA4X: System error: %s/gone: 2: No such file or directory'
        % remote_dir)


def test_restoring_metadata_over_sftp_reports_each_step(fs, remote_dir):
    from obnamlib.engine import live_metadata
    from obnamlib.repo import metadata
    path = os.fsencode(remote_dir / 'f')
    (remote_dir / 'f').write_bytes(b'f')
    md = metadata.Metadata(st_mode=stat.S_IFREG | 0o640, st_uid=os.getuid(),
                           st_gid=os.getgid(), st_mtime_sec=5,
                           st_mtime_nsec=0,
                           xattr=live_metadata.encode_xattrs(
                               [(b'user.x', b'1')]))
    applier = live_metadata.MetadataApplier(fs)
    errors = applier.apply(path, md)
    assert [str(e) for e in errors] == [
        "R0FC21X: %s: Couldn't set metadata xattr user.x: 95: SFTP has no "
        "extended attributes" % os.fsdecode(path)]
    st = os.lstat(path)
    assert (stat.S_IMODE(st.st_mode), st.st_mtime) == (0o640, 5)


def test_create_files_creates_many_exclusively_in_two_round_trips(
        fs, remote_dir):
    fs.makedirs('c')
    (remote_dir / 'c' / 'taken').write_bytes(b'old')
    items = [('c/%d' % i, os.urandom(i * 100000)) for i in range(10)]
    items.append(('c/taken', b'new'))
    before = fs.round_trips
    results = fs.create_files(items)
    assert fs.round_trips - before == 3     # + one to tell "exists" apart
    assert results[:10] == [None] * 10
    assert isinstance(results[10], FileExistsError)
    for path, data in items[:10]:
        assert (remote_dir / path).read_bytes() == data
    assert (remote_dir / 'c' / 'taken').read_bytes() == b'old'
    before = fs.round_trips
    assert fs.create_files([('new/a/x', b'x'), ('new/b/y', b'y')]) == [
        None, None]
    assert fs.round_trips - before == 3     # OPENs; MKDIRs + OPENs; WRITEs
    assert (remote_dir / 'new' / 'b' / 'y').read_bytes() == b'y'


def test_lost_connection_while_restoring_metadata_is_not_a_step_error(
        sshd, remote_dir):
    from obnamlib.engine import live_metadata
    from obnamlib.repo import metadata
    fs = SftpFS(sshd.url(str(remote_dir)), settings_for(sshd, 'paramiko'))
    try:
        assert kill_sessions(sshd) > 0
        md = metadata.Metadata(st_mode=stat.S_IFREG | 0o600,
                               xattr=live_metadata.encode_xattrs(
                                   [(b'user.x', b'1')]))
        with pytest.raises(SftpConnectionLost):
            live_metadata.MetadataApplier(fs, euid=0).apply(b'/x', md)
    finally:
        fs.close()


class _CountingChannel:
    """The real channel, counting the writes that reach it."""

    def __init__(self, channel):
        self.channel = channel
        self.sends = 0

    def send(self, data):
        self.sends += 1
        return self.channel.send(data)

    def recv(self, size):
        return self.channel.recv(size)


def test_requests_sent_together_go_out_in_one_write(fs, remote_dir,
                                                    monkeypatch):
    """64 small files: 64 OPENs in one write, then 64 FSTATs and READs
    (and the CLOSEs) in another, not one write per request."""
    contents = {'c/%02d' % i: b'chunk %d\n' % i * i for i in range(64)}
    (remote_dir / 'c').mkdir()
    for path, data in contents.items():
        (remote_dir / path).write_bytes(data)
    counting = _CountingChannel(fs.wire.channel)
    monkeypatch.setattr(fs.wire, 'channel', counting)
    before = fs.round_trips
    assert fs.read_files(list(contents)) == list(contents.values())
    assert fs.round_trips - before == 2
    assert counting.sends == 2


def test_filesystems_sharing_a_connection_get_their_own_replies(
        fs, remote_dir):
    """Replies are filed by request number with the SftpFS that asked,
    whichever of them reads them from the connection."""
    (remote_dir / 'a').write_bytes(b'a' * 10)
    (remote_dir / 'b').write_bytes(b'b' * 20)
    other = shared_fs(str(remote_dir))
    assert other.wire is fs.wire
    num_a = fs._send(codec.CMD_LSTAT, os.fsencode(remote_dir / 'a'))
    num_b = other._send(codec.CMD_LSTAT, os.fsencode(remote_dir / 'b'))
    _, msg_b = other._wait(num_b)     # reads fs's reply on the way
    _, msg_a = fs._wait(num_a)
    assert codec.read_attrs(msg_a).st_size == 10
    assert codec.read_attrs(msg_b).st_size == 20


def test_replies_spanning_many_reads_of_the_connection_are_whole(
        fs, remote_dir):
    """Full READ replies (CHUNK bytes: more than a pipe holds) and the
    short last one are cut out of the received bytes intact."""
    data = os.urandom(CHUNK * 3 + 5)
    (remote_dir / 'big').write_bytes(data)
    assert fs.read_file('big') == data



def test_a_batch_of_files_asks_one_read_each_before_knowing_sizes(
        fs, remote_dir):
    """A READ past a file's end costs a request and a reply on both
    sides: a batch asks one READ per file with its FSTAT, and the rest
    of the big files afterwards, together (one round trip more)."""
    small = [b'%d' % i * 1000 for i in range(10)]
    for i, data in enumerate(small):
        fs.write_file('s/%d' % i, data)
    mib = os.urandom(1024 * 1024 + 100)
    fs.write_file('s/mib', mib)
    paths = ['s/%d' % i for i in range(10)]
    reads, trips = fs.requests['READ'], fs.round_trips
    assert fs.read_files(paths) == small
    assert (fs.requests['READ'] - reads, fs.round_trips - trips) == (10, 2)
    reads, trips = fs.requests['READ'], fs.round_trips
    assert fs.read_files(paths + ['s/mib']) == small + [mib]
    assert (fs.requests['READ'] - reads, fs.round_trips - trips) == (15, 3)
