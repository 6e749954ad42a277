"""Opening an authenticated SFTP session the way OpenSSH users expect.

Two transports give the same thing: a connection whose `wire` carries
SFTP packets (wire.py, our own SFTP v3 codec) over a channel opened with
public APIs only:

* the OpenSSH client run as a subprocess (`ssh ... -s HOST sftp`), the
  default as in Obnam 1.x: the user's ~/.ssh/config, agent, keys and
  known_hosts all apply exactly as for `sftp`, and the crypto runs in C;
* paramiko's own SSH transport (ssh_paramiko.py: `--pure-paramiko`, or
  when the ssh executable cannot be started), loaded only then.

Host keys are never silently trusted.  With paramiko, an unknown host is an
error unless the host-key policy says `no` (Obnam 1.x accepted unknown hosts
by default; we do not), and a changed key is always an error.  The OpenSSH
client gets `StrictHostKeyChecking` from the same policy, with `no` passed as
`accept-new` so that a changed key stays fatal there too.
"""

import functools
import logging
import os
import signal
import subprocess
import sys
import threading

from obnamlib.errors import ObnamError
from obnamlib.vfs.sftp import ssh_ciphers, ssh_config
from obnamlib.vfs.sftp.codec import ProtocolError
from obnamlib.vfs.sftp.ssh_errors import (  # noqa: F401 (callers' names)
    KeyAuthenticationError, NoHostKeyError, NoHostKeyOfWantedTypeError,
    SshConnectError, WrongHostKeyError)
from obnamlib.vfs.sftp.wire import Wire


# What a connection's channel raises when the connection breaks (the
# paramiko transport turns its own exceptions into ConnectionErrors).
CONNECTION_ERRORS = (EOFError, OSError, ProtocolError)

log = logging.getLogger(__name__)


class ParamikoMissingError(ObnamError):
    code = 'R62619X'
    msg = ('Missing Python module {module}, needed {why}: install the '
           'Debian package python3-paramiko (or the pip package paramiko)')


class SshTarget:
    """Where to connect and how, after ~/.ssh/config and settings apply.

    The ssh configuration is read when first needed: ssh reads its own,
    so an OpenSSH connection asks `ssh -G` only for the ciphers where
    the processor has AES instructions (ssh_ciphers), and error messages
    and the paramiko transport read all of it.
    """

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
        self.policy_setting = _policy_setting(settings)

    @functools.cached_property
    def config(self):
        return ssh_config.lookup(self.alias, self.url_port, self.url_user,
                                 self.ssh_command, self.pure_paramiko)

    @property
    def cipher_order(self):
        """The ciphers to give OpenSSH's ssh (ssh_ciphers.preferred), or
        None to leave them to it."""
        if not ssh_ciphers.cpu_has_aes():
            return None
        found = ssh_config.from_openssh(self.ssh_command, self.alias,
                                        self.url_port, self.url_user) or {}
        return ssh_ciphers.preferred(found.get('ciphers'))

    @property
    def hostname(self):
        return self.config.get('hostname', self.alias)

    @property
    def port(self):
        return self.url_port or int(self.config.get('port', 22))

    @property
    def user(self):
        return self.url_user or self.config.get('user') or _local_user()

    @property
    def policy(self):
        return _host_key_policy(self.policy_setting, self.config)

    @property
    def known_hosts_name(self):
        """The host's name as OpenSSH writes it in known_hosts."""
        if self.port == 22:
            return self.hostname
        return '[%s]:%d' % (self.hostname, self.port)

    def accepts_unknown_hosts(self):
        return self.policy in ('no', 'off', 'accept-new')


# The settings that say how to connect (a second process connects as the
# first did: SftpSession.reopening).
CONNECTION_SETTINGS = ('ssh-key', 'ssh-known-hosts', 'ssh-command',
                       'pure-paramiko', 'ssh-host-keys-check',
                       'strict-ssh-host-keys', 'sftp-delay')


def connection_settings(settings):
    """The CONNECTION_SETTINGS that settings give, by name."""
    return {name: _setting(settings, name, None)
            for name in CONNECTION_SETTINGS}


def _setting(settings, name, default):
    try:
        value = settings[name]
    except (KeyError, TypeError):
        return default
    return default if value is None else value


def _local_user():
    import pwd
    return pwd.getpwuid(os.getuid()).pw_name


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
    if target.pure_paramiko:
        why = 'for --pure-paramiko'
    else:
        try:
            return OpenSSHConnection(target)
        except _ExecutableMissing as e:
            log.warning('Cannot run %s (%s); using paramiko instead',
                        target.ssh_command, e)
            why = 'because %s cannot be run (%s)' % (target.ssh_command, e)
    return _paramiko_transport(why).ParamikoConnection(target)


def _paramiko_transport(why):
    """The ssh_paramiko module; ParamikoMissingError if paramiko (or what
    it needs) is not installed."""
    try:
        from obnamlib.vfs.sftp import ssh_paramiko
    except ImportError as e:
        if (e.name or '').startswith('obnamlib'):
            raise
        raise ParamikoMissingError(module=e.name or 'paramiko', why=why)
    return ssh_paramiko


class _ExecutableMissing(Exception):
    pass


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
    ciphers = target.cipher_order
    if ciphers:
        argv += ['-o', 'Ciphers=%s' % ciphers]
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
