"""SSH through paramiko's own transport (--pure-paramiko, or when the ssh
executable cannot be started), with paramiko's public API only.

The only module that imports paramiko, and only imported when one of
those paths runs: paramiko costs about 16 MB and a tenth of a second to
load, which the default OpenSSH path need not pay.

An unknown host is an error unless the host-key policy says `no`
(Obnam 1.x accepted unknown hosts by default; we do not), and a changed
key is always an error.
"""

import base64
import hashlib
import logging
import os
import socket

import paramiko

from obnamlib.vfs.sftp.codec import ProtocolError
from obnamlib.vfs.sftp.ssh_errors import (
    KeyAuthenticationError, NoHostKeyError, NoHostKeyOfWantedTypeError,
    SshConnectError, WrongHostKeyError)
from obnamlib.vfs.sftp.wire import Wire


CONNECT_TIMEOUT = 30
DEFAULT_KEY_FILES = ('~/.ssh/id_ed25519', '~/.ssh/id_ecdsa', '~/.ssh/id_rsa')
GLOBAL_KNOWN_HOSTS = '/etc/ssh/ssh_known_hosts'
KEY_CLASSES = tuple(getattr(paramiko, name) for name in
                    ('Ed25519Key', 'ECDSAKey', 'RSAKey', 'DSSKey')
                    if hasattr(paramiko, name))
# paramiko names the signature algorithms of an RSA host key differently.
RSA_ALGORITHMS = ('rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa')

log = logging.getLogger(__name__)


def config_for(host):
    """The ~/.ssh/config entries for `host` as paramiko reads them (empty
    if there is no file)."""
    path = os.path.expanduser('~/.ssh/config')
    if not os.path.exists(path):
        return {}
    try:
        config = paramiko.SSHConfig.from_path(path)
        return dict(config.lookup(host))
    except Exception as e:  # a config paramiko cannot parse: ssh may still
        log.warning('Cannot use %s with paramiko: %s', path, e)
        return {}


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
            session = self.transport.open_session(
                window_size=16 * 1024 * 1024, max_packet_size=256 * 1024)
            session.invoke_subsystem('sftp')
            self.channel = ChannelErrors(session)
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


class ChannelErrors:
    """A paramiko Channel whose failures are ConnectionErrors, which the
    SFTP layer catches without knowing paramiko (it need not load it)."""

    def __init__(self, channel):
        self.channel = channel

    def send(self, data):
        return _connection_errors(self.channel.send, data)

    def recv(self, size):
        return _connection_errors(self.channel.recv, size)

    def close(self):
        return _connection_errors(self.channel.close)


def _connection_errors(method, *args):
    try:
        return method(*args)
    except paramiko.SSHException as e:
        raise ConnectionError(str(e) or type(e).__name__) from e


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
