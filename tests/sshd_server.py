"""A real OpenSSH sshd on 127.0.0.1 for tests, run as the current user.

Tests of the SFTP code talk to Debian's own sshd rather than to a fake, so
host-key checks, authentication and dropped connections behave as they do in
the field.  Everything the server needs (host key, user key, authorized_keys,
known_hosts, config) is generated in a private directory; the server listens
on 127.0.0.1 only, on a free port, and accepts only public-key logins of the
current user (root included: CI runs as root).

PAM: off for root (its session modules, e.g. pam_loginuid, fail in
containers); on for other users, because sshd without PAM and without
access to /etc/shadow takes their accounts for locked.

    with SshdServer() as server:
        url = server.url('/tmp/repo')   # sftp://USER@127.0.0.1:PORT/tmp/repo
        server.client_key                  # private key file for --ssh-key
        server.known_hosts                 # known_hosts listing the host key
        server.kill_sessions()             # drop every open connection
"""

import functools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading


SSHD = '/usr/sbin/sshd'
SFTP_SERVER = '/usr/lib/openssh/sftp-server'
START_TIMEOUT = 20


class SshdError(Exception):
    """The test sshd could not be started."""


def generate_key(path, key_type='ed25519'):
    """Create a passphrase-less key pair at `path` and `path`.pub."""
    if os.path.exists(path):
        os.remove(path)
    args = ['ssh-keygen', '-q', '-t', key_type, '-N', '', '-C', 'obnam-test',
            '-f', path]
    if key_type == 'rsa':
        args[4:4] = ['-b', '2048', '-m', 'PEM']
    subprocess.run(args, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL)
    return path


def public_key_line(path):
    """The 'type base64' part of a public key file (no comment)."""
    with open(path + '.pub') as f:
        fields = f.read().split()
    return '%s %s' % (fields[0], fields[1])


def free_port(host='127.0.0.1'):
    family = socket.AF_INET6 if ':' in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _children_of(pid):
    """Pids whose parent is `pid`, read from /proc."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(')', 1)[1].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def descendants_of(pid):
    result = []
    pending = [pid]
    while pending:
        children = _children_of(pending.pop())
        result.extend(children)
        pending.extend(children)
    return result


class SshdServer:
    """One sshd process; start() / stop(), or use as a context manager."""

    def __init__(self, subsystem='internal-sftp', host='127.0.0.1',
                 user=None):
        """`host`: 127.0.0.1 or ::1.  `user`: who may log in (default: the
        current user; another user needs root, e.g. 'nobody' for real
        permission errors on the server)."""
        self.subsystem = subsystem
        self.user = user or pwd.getpwuid(os.getuid()).pw_name
        self.host = host
        self.port = None
        self.process = None
        self.log_lines = []
        self._listening = threading.Event()
        # A short path: sshd and ssh limit socket/ControlPath lengths.
        self.dir = tempfile.mkdtemp(prefix='sshd', dir='/tmp')
        self.host_key = generate_key(os.path.join(self.dir, 'host_ed25519'))
        self.client_key = generate_key(os.path.join(self.dir, 'user_ed25519'))
        self.authorized_keys = os.path.join(self.dir, 'authorized_keys')
        with open(self.authorized_keys, 'w') as f:
            f.write(public_key_line(self.client_key) + '\n')
        if user is not None:
            # sshd reads authorized_keys as the user logging in.
            os.chmod(self.dir, 0o711)
            os.chmod(self.authorized_keys, 0o644)
        self.known_hosts = os.path.join(self.dir, 'known_hosts')
        self.config = os.path.join(self.dir, 'sshd_config')

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def host_key_line(self):
        return public_key_line(self.host_key)

    @property
    def known_hosts_name(self):
        """How OpenSSH names this server in known_hosts."""
        return '[%s]:%d' % (self.host, self.port)

    def url(self, path, user=True):
        """An sftp:// URL for an absolute `path` on this server."""
        who = '%s@' % self.user if user else ''
        host = '[%s]' % self.host if ':' in self.host else self.host
        return 'sftp://%s%s:%d%s' % (who, host, self.port, path)

    def write_known_hosts(self, path=None, key_line=None):
        """Write a known_hosts file with `key_line` (default: the real key)."""
        path = path or self.known_hosts
        with open(path, 'w') as f:
            f.write('%s %s\n' % (self.known_hosts_name,
                                 key_line or self.host_key_line))
        return path

    def start(self):
        _ensure_privsep_dir()
        for _ in range(5):
            self.port = free_port(self.host)
            self._write_config()
            if self._launch():
                self.write_known_hosts()
                return
        raise SshdError('sshd did not start:\n' + '\n'.join(self.log_lines))

    def _write_config(self):
        subsystem = self.subsystem
        if subsystem == 'sftp-server':
            subsystem = SFTP_SERVER
        lines = [
            'Port %d' % self.port,
            'ListenAddress %s' % self.host,
            'HostKey %s' % self.host_key,
            'PidFile none',
            'UsePAM %s' % ('no' if os.getuid() == 0 else 'yes'),
            'StrictModes no',
            'PermitRootLogin yes',
            'PubkeyAuthentication yes',
            'PasswordAuthentication no',
            'KbdInteractiveAuthentication no',
            'AuthenticationMethods publickey',
            'AuthorizedKeysFile %s' % self.authorized_keys,
            'AllowUsers %s' % self.user,
            'AllowAgentForwarding no',
            'AllowTcpForwarding no',
            'X11Forwarding no',
            'PrintMotd no',
            'MaxStartups 50',
            'MaxSessions 50',
            'LogLevel VERBOSE',
            'Subsystem sftp %s' % subsystem,
        ]
        if _knows_source_penalties():
            # OpenSSH 9.8 on (Debian 13) refuses a while every connection
            # from an address that failed to log in; tests fail logins on
            # purpose, all from 127.0.0.1.
            lines.append('PerSourcePenalties no')
        with open(self.config, 'w') as f:
            f.write('\n'.join(lines) + '\n')

    def _launch(self):
        """Start sshd; True once it listens, False if the port was taken."""
        self._listening.clear()
        self.log_lines = []
        self.process = subprocess.Popen(
            [SSHD, '-D', '-e', '-f', self.config],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()
        if self._listening.wait(START_TIMEOUT) and self.process.poll() is None:
            return True
        self._terminate()
        self._reader.join(5)
        if any('Address already in use' in line for line in self.log_lines):
            return False
        raise SshdError('sshd did not start:\n' + '\n'.join(self.log_lines))

    def _read_log(self):
        for raw in self.process.stderr:
            line = raw.decode('utf-8', 'replace').rstrip()
            self.log_lines.append(line)
            if line.startswith('Server listening on'):
                self._listening.set()
        self._listening.set()

    def session_pids(self):
        """Pids of the per-connection sshd processes (and their children)."""
        if self.process is None:
            return []
        return descendants_of(self.process.pid)

    def kill_sessions(self):
        """SIGKILL every connection's processes: a dropped connection."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def _terminate(self):
        if self.process is None:
            return
        self.kill_sessions()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def stop(self):
        self._terminate()
        if self.process is not None and self.process.stderr:
            self._reader.join(10)   # EOF once sshd is gone; then close
            self.process.stderr.close()
        self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)


@functools.lru_cache(maxsize=None)
def _knows_source_penalties():
    """Whether this sshd has the PerSourcePenalties option (asked once)."""
    probe = subprocess.run(
        [SSHD, '-G', '-f', '/dev/null', '-o', 'PerSourcePenalties=no'],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL)
    return probe.returncode == 0 and b'persourcepenalties' in probe.stdout


def _ensure_privsep_dir():
    """sshd started by root needs its privilege separation directory."""
    if os.getuid() == 0 and not os.path.isdir('/run/sshd'):
        os.makedirs('/run/sshd', mode=0o755, exist_ok=True)


# --- a server for the yarn scenarios ----------------------------------------

def serve(state_dir):
    """Start a server in a background process; return once it listens.

    Writes STATE_DIR/env (shell assignments SFTP_BASE=sftp://USER@HOST:PORT,
    SSH_KEY, SSH_KNOWN_HOSTS) and STATE_DIR/pid (SIGTERM stops it).  The
    caller's stdout/stderr should be a file: the background process keeps
    them.
    """
    os.makedirs(state_dir, exist_ok=True)
    ready_r, ready_w = os.pipe()
    if os.fork() != 0:
        os.close(ready_w)
        with os.fdopen(ready_r, 'rb') as ready:
            return ready.read() == b'ok'
    os.close(ready_r)
    os.setsid()
    try:
        server = SshdServer()
        server.start()
    except BaseException:
        os._exit(1)
    signal.signal(signal.SIGTERM, lambda *args: _stop_and_exit(server))
    with open(os.path.join(state_dir, 'env'), 'w') as f:
        f.write('SFTP_BASE=sftp://%s@%s:%d\nSSH_KEY=%s\n'
                'SSH_KNOWN_HOSTS=%s\n' % (server.user, server.host,
                                          server.port, server.client_key,
                                          server.known_hosts))
    with open(os.path.join(state_dir, 'pid'), 'w') as f:
        f.write('%d\n' % os.getpid())
    os.write(ready_w, b'ok')
    os.close(ready_w)
    while True:
        signal.pause()


def _stop_and_exit(server):
    server.stop()
    os._exit(0)


if __name__ == '__main__':
    import sys
    sys.exit(0 if serve(sys.argv[1]) else 1)
