"""The local OpenSSH server that sftp-mode runs back up to.

It is the test suite's SshdServer (tests/sshd_server.py): Debian's sshd on
127.0.0.1 and a free port, with throwaway host and user keys.  On top of it
this module gives the ssh command line the other tools need, and the CPU
time the server side spent, which no client's wait4 can see: sshd reaps
its per-connection processes, so their time accumulates in its cutime and
cstime (/proc/PID/stat).
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from lib_service import Service   # noqa: E402
from tests.sshd_server import SshdServer   # noqa: E402

SESSION_END_TIMEOUT = 30


class BenchSshd(Service):
    """A running sshd; use as a context manager."""

    def __init__(self):
        self.server = SshdServer()

    def start(self):
        self.server.start()

    def close(self):
        self.server.stop()

    @property
    def user(self):
        return self.server.user

    @property
    def host(self):
        return self.server.host

    @property
    def port(self):
        return self.server.port

    @property
    def client_key(self):
        return self.server.client_key

    @property
    def known_hosts(self):
        return self.server.known_hosts

    def url(self, path):
        """sftp://USER@127.0.0.1:PORT/path, as obnam takes it."""
        return self.server.url(path)

    def ssh_argv(self):
        """ssh with this server's user key and known_hosts, no agent and
        no user configuration, never asking anything."""
        return ['ssh', '-F', 'none', '-i', self.client_key,
                '-p', str(self.port),
                '-o', 'UserKnownHostsFile=%s' % self.known_hosts,
                '-o', 'StrictHostKeyChecking=yes',
                '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes']

    def ssh_command(self):
        return ' '.join(self.ssh_argv())

    def server_cpu_seconds(self):
        """CPU time of every finished connection so far (user+system)."""
        self.wait_for_sessions_to_end()
        with open('/proc/%d/stat' % self.server.process.pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        # After the command name: state is field 3, cutime 16, cstime 17.
        ticks = int(fields[13]) + int(fields[14])
        return ticks / os.sysconf('SC_CLK_TCK')

    def wait_for_sessions_to_end(self):
        """A client may exit a moment before sshd has reaped its session."""
        deadline = time.monotonic() + SESSION_END_TIMEOUT
        while self.server.session_pids() and time.monotonic() < deadline:
            time.sleep(0.01)
