"""Opening an authenticated SFTP session the way OpenSSH users expect.

Two transports give the same thing: a connection whose `wire` carries
SFTP packets (wire.py, our own SFTP v3 codec) over a channel opened with
public APIs only:

* the OpenSSH client run as a subprocess (`ssh ... -s HOST sftp`), the
  default as in Obnam 1.x: the user's ~/.ssh/config, agent, keys and
  known_hosts all apply exactly as for `sftp`, and the crypto runs in C;
* paramiko's own SSH transport (`--pure-paramiko`, or when the ssh
  executable cannot be started).

Host keys are never silently trusted.  With paramiko, an unknown host is an
error unless the host-key policy says `no` (Obnam 1.x accepted unknown hosts
by default; we do not), and a changed key is always an error.  The OpenSSH
client gets `StrictHostKeyChecking` from the same policy, with `no` passed as
`accept-new` so that a changed key stays fatal there too.
"""

import logging
import os
import signal
import socket
import subprocess
import sys
import threading

import paramiko

from obnamlib.errors import ObnamError
from obnamlib.vfs.sftp.codec import ProtocolError
from obnamlib.vfs.sftp.wire import Wire


CONNECT_TIMEOUT = 30
DEFAULT_KEY_FILES = ('~/.ssh/id_ed25519', '~/.ssh/id_ecdsa', '~/.ssh/id_rsa')
GLOBAL_KNOWN_HOSTS = '/etc/ssh/ssh_known_hosts'
KEY_CLASSES = tuple(getattr(paramiko, name) for name in
                    ('Ed25519Key', 'ECDSAKey', 'RSAKey', 'DSSKey')
                    if hasattr(paramiko, name))
# paramiko names the signature algorithms of an RSA host key differently.
RSA_ALGORITHMS = ('rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa')

# What a connection's channel raises when the connection breaks.
CONNECTION_ERRORS = (EOFError, OSError, ProtocolError, paramiko.SSHException)

log = logging.getLogger(__name__)


class NoHostKeyError(ObnamError):
    code = 'R5F98AX'
    msg = 'No known host key for {hostname}'


class NoHostKeyOfWantedTypeError(ObnamError):
    code = 'R8AAC1X'
    msg = 'No known type {key_type} host key for {hostname}'


class WrongHostKeyError(ObnamError):
    code = 'R47416X'
    msg = ('SSH server {hostname} offered wrong public key\n'
           'The server offered a key ({key_type}, fingerprint {fingerprint}) '
           'that differs from the one in your known hosts file. Someone may '
           'be intercepting the connection, or the server was reinstalled. '
           'Check the key with the server administrator; if it is right, '
           'remove the old entry (ssh-keygen -R {hostname}) and try again.')


class KeyAuthenticationError(ObnamError):
    code = 'RCB0CAX'
    msg = "Can't authenticate to SSH server using key"


class SshConnectError(ObnamError):
    """The server could not be reached or the ssh client failed."""
    code = 'RC4E32X'
    msg = 'Cannot connect to SSH server {hostname}: {reason}'


class SshTarget:
    """Where to connect and how, after ~/.ssh/config and settings apply."""

    def __init__(self, host, port=None, user=None, settings=None):
        settings = {} if settings is None else settings
        self.alias = host
        self.url_port = port
        self.url_user = user
        self.ssh_key = os.path.expanduser(_setting(settings, 'ssh-key', ''))
        self.known_hosts = os.path.expanduser(
            _setting(settings, 'ssh-known-hosts', '') or '~/.ssh/known_hosts')
        self.ssh_command = _setting(settings, 'ssh-command', '') or 'ssh'
        self.pure_paramiko = bool(_setting(settings, 'pure-paramiko', False))
        self.config = _ssh_config_for(host)
        self.hostname = self.config.get('hostname', host)
        self.port = port or int(self.config.get('port', 22))
        self.user = user or self.config.get('user') or _local_user()
        self.policy_setting = _policy_setting(settings)
        self.policy = _host_key_policy(self.policy_setting, self.config)

    @property
    def known_hosts_name(self):
        """The host's name as OpenSSH writes it in known_hosts."""
        if self.port == 22:
            return self.hostname
        return '[%s]:%d' % (self.hostname, self.port)

    def accepts_unknown_hosts(self):
        return self.policy in ('no', 'off', 'accept-new')


def _setting(settings, name, default):
    try:
        value = settings[name]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def _local_user():
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name


def _ssh_config_for(host):
    """The ~/.ssh/config entries for `host` (empty if there is no file)."""
    path = os.path.expanduser('~/.ssh/config')
    if not os.path.exists(path):
        return {}
    try:
        config = paramiko.SSHConfig.from_path(path)
        return dict(config.lookup(host))
    except Exception as e:  # a config paramiko cannot parse: ssh may still
        log.warning('Cannot use %s with paramiko: %s', path, e)
        return {}


def _policy_setting(settings):
    """ssh-host-keys-check, with the deprecated --strict-ssh-host-keys."""
    if _setting(settings, 'strict-ssh-host-keys', False):
        return 'yes'
    return str(_setting(settings, 'ssh-host-keys-check', 'ssh-config'))


def _host_key_policy(setting, config):
    """yes/ask/no/accept-new from the setting, else from ~/.ssh/config.

    OpenSSH's own default is `ask`; we cannot ask, so it refuses new hosts.
    """
    if setting == 'ssh-config':
        setting = config.get('stricthostkeychecking', 'ask')
    return setting.lower()


def open_sftp(target):
    """A connection to `target` with its SFTP session started (`.wire`)."""
    if not target.pure_paramiko:
        try:
            return OpenSSHConnection(target)
        except _ExecutableMissing as e:
            log.warning('Cannot run %s (%s); using paramiko instead',
                        target.ssh_command, e)
    return ParamikoConnection(target)


class _ExecutableMissing(Exception):
    pass


class ParamikoConnection:
    """SSH via paramiko's transport: host key check and key authentication."""

    stderr_lines = ()       # paramiko reports its problems as exceptions

    def __init__(self, target):
        self.target = target
        sock = _tcp_connect(target)
        self.transport = paramiko.Transport(sock)
        try:
            known = _load_known_hosts(target)
            _prefer_known_key_types(self.transport, known)
            self.transport.start_client(timeout=CONNECT_TIMEOUT)
            check_host_key(target, self.transport.get_remote_server_key(),
                           known)
            _authenticate(self.transport, target)
            self.channel = self.transport.open_session(
                window_size=16 * 1024 * 1024, max_packet_size=256 * 1024)
            self.channel.invoke_subsystem('sftp')
            self.wire = Wire(self.channel)
            self.wire.start()
        except EOFError:
            self.transport.close()
            raise SshConnectError(hostname=target.hostname,
                                  reason='EOF during negotiation')
        except (paramiko.SSHException, ProtocolError) as e:
            self.transport.close()
            raise SshConnectError(hostname=target.hostname, reason=str(e))
        except BaseException:
            self.transport.close()
            raise

    def is_alive(self):
        return self.transport.is_active()

    def close(self):
        try:
            self.channel.close()
        finally:
            self.transport.close()


def _tcp_connect(target):
    try:
        sock = socket.create_connection((target.hostname, target.port),
                                        timeout=CONNECT_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    except OSError as e:
        reason = e.strerror or str(e)
        raise SshConnectError(hostname='%s port %d' % (target.hostname,
                                                       target.port),
                              reason=reason)


def _load_known_hosts(target):
    """A HostKeys with the global and the user's known hosts."""
    keys = paramiko.HostKeys()
    for path in (GLOBAL_KNOWN_HOSTS, target.known_hosts):
        if os.path.exists(path):
            try:
                keys.load(path)
            except (OSError, paramiko.SSHException) as e:
                log.warning('Cannot read known hosts %s: %s', path, e)
    found = keys.lookup(target.known_hosts_name) or {}
    return dict(found)


def _prefer_known_key_types(transport, known):
    """Ask for a host key type we already know, as OpenSSH does."""
    if not known:
        return
    wanted = []
    for name in known:
        wanted.extend(RSA_ALGORITHMS if name == 'ssh-rsa' else [name])
    options = transport.get_security_options()
    current = list(options.key_types)
    first = [t for t in current if t in wanted]
    options.key_types = first + [t for t in current if t not in first]


def check_host_key(target, server_key, known):
    """Raise unless `server_key` is the known key (or policy allows new)."""
    key_type = server_key.get_name()
    hostname = target.known_hosts_name
    if key_type in known:
        if known[key_type] != server_key:
            raise WrongHostKeyError(hostname=hostname, key_type=key_type,
                                    fingerprint=_fingerprint(server_key))
        return
    if target.accepts_unknown_hosts():
        log.warning('Accepting unknown %s host key %s for %s '
                    '(ssh-host-keys-check=%s)', key_type,
                    _fingerprint(server_key), hostname, target.policy)
        return
    if known:
        raise NoHostKeyOfWantedTypeError(key_type=key_type, hostname=hostname)
    raise NoHostKeyError(hostname=hostname)


def _fingerprint(key):
    import base64
    import hashlib
    digest = hashlib.sha256(key.asbytes()).digest()
    return 'SHA256:' + base64.b64encode(digest).decode().rstrip('=')


def _authenticate(transport, target):
    """Try agent keys, --ssh-key, config IdentityFile, default keys."""
    for key in _candidate_keys(target):
        try:
            transport.auth_publickey(target.user, key)
        except paramiko.AuthenticationException as e:
            log.debug('Key %s refused: %s', key.get_name(), e)
            continue
        if transport.is_authenticated():
            return
    raise KeyAuthenticationError(hostname=target.hostname, user=target.user)


def _candidate_keys(target):
    try:
        agent_keys = paramiko.Agent().get_keys()
    except paramiko.SSHException as e:
        log.debug('No ssh-agent keys: %s', e)
        agent_keys = ()
    yield from agent_keys
    for path in _key_files(target):
        key = load_private_key(path)
        if key is not None:
            yield key


def _key_files(target):
    files = []
    if target.ssh_key:
        files.append(target.ssh_key)
    files.extend(target.config.get('identityfile', []))
    files.extend(DEFAULT_KEY_FILES)
    seen = []
    for path in files:
        path = os.path.expanduser(path)
        if path not in seen and (path == target.ssh_key or
                                 os.path.exists(path)):
            seen.append(path)
    return seen


def load_private_key(path):
    """A paramiko key from an OpenSSH/PEM private key file, or None."""
    for cls in KEY_CLASSES:
        try:
            return cls.from_private_key_file(path)
        except paramiko.PasswordRequiredException:
            log.warning('Key %s has a passphrase; load it into ssh-agent to '
                        'use it with paramiko', path)
            return None
        except (paramiko.SSHException, ValueError):
            continue
        except OSError as e:
            log.warning('Cannot read key %s: %s', path, e)
            return None
    log.warning('Cannot load key %s: unsupported type', path)
    return None


class OpenSSHConnection:
    """SFTP over the OpenSSH client's stdin/stdout."""

    def __init__(self, target):
        self.target = target
        argv = openssh_argv(target)
        log.debug('Running %r', argv)
        try:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, bufsize=0,
                preexec_fn=_ignore_interrupts)
        except OSError as e:
            raise _ExecutableMissing(e.strerror or str(e))
        self.stderr_lines = []
        self._stderr_reader = threading.Thread(target=self._read_stderr,
                                               daemon=True)
        self._stderr_reader.start()
        self.channel = PipeChannel(self.process)
        self.wire = Wire(self.channel)
        try:
            self.wire.start()
        except (ProtocolError, EOFError, OSError):
            self.close()
            raise self._failure()

    def _read_stderr(self):
        for raw in self.process.stderr:
            line = raw.decode('utf-8', 'replace').strip()
            if line:
                self.stderr_lines.append(line)
                log.debug('ssh: %s', line)

    def _failure(self):
        """The ObnamError matching what ssh said when it gave up."""
        self._stderr_reader.join(5)
        text = '\n'.join(self.stderr_lines)
        hostname = self.target.known_hosts_name
        if 'REMOTE HOST IDENTIFICATION HAS CHANGED' in text:
            return WrongHostKeyError(hostname=hostname, key_type='?',
                                     fingerprint=_offered_fingerprint(text))
        if 'Host key verification failed' in text:
            return NoHostKeyError(hostname=hostname)
        if 'Permission denied' in text:
            return KeyAuthenticationError(hostname=hostname)
        last = self.stderr_lines[-1] if self.stderr_lines else (
            'ssh exited with code %s' % self.process.returncode)
        return SshConnectError(hostname=self.target.hostname, reason=last)

    def is_alive(self):
        return self.process.poll() is None

    def close(self):
        self.channel.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stderr_reader.join(5)
        self.process.stderr.close()


def _ignore_interrupts():
    """In the ssh child: Ctrl-C must not cut the connection before obnam
    has released its locks (ssh keeps an ignored SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _offered_fingerprint(text):
    for word in text.split():
        if word.startswith('SHA256:'):
            return word.rstrip('.')
    return 'unknown'


def openssh_argv(target):
    """The ssh command line: like Obnam 1.x, user/port only from the URL."""
    argv = [target.ssh_command, '-oForwardX11=no', '-oForwardAgent=no',
            '-oClearAllForwardings=yes', '-s']
    if target.url_port:
        argv += ['-p', str(target.url_port)]
    if target.url_user:
        argv += ['-l', target.url_user]
    if target.ssh_key:
        argv += ['-i', target.ssh_key]
    policy = _openssh_policy(target)
    if policy:
        argv += ['-o', 'StrictHostKeyChecking=%s' % policy]
    argv += ['-o', 'UserKnownHostsFile=%s' % target.known_hosts]
    if not _interactive():
        argv += ['-o', 'BatchMode=yes']
    argv += [target.alias, 'sftp']
    return argv


def _openssh_policy(target):
    """StrictHostKeyChecking for ssh; None leaves ~/.ssh/config in charge."""
    if target.policy_setting == 'ssh-config':
        return None
    if target.policy_setting in ('no', 'off'):
        return 'accept-new'
    return target.policy_setting


def _interactive():
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except ValueError:
        return False


class PipeChannel:
    """send and recv, as on a paramiko Channel, over ssh's pipes."""

    def __init__(self, process):
        self.process = process
        self.out_fd = process.stdin.fileno()
        self.in_fd = process.stdout.fileno()
        self.closed = False

    def send(self, data):
        return os.write(self.out_fd, data)

    def recv(self, size):
        return os.read(self.in_fd, size)

    def close(self):
        if not self.closed:
            self.closed = True
            self.process.stdin.close()
            self.process.stdout.close()
