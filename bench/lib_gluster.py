"""A throwaway GlusterFS volume on 127.0.0.1, for gluster mode's
repositories.

The bench installs nothing: it needs glusterd, gluster and glusterfs
(Debian's glusterfs-server and glusterfs-client) and root.  glusterd runs
as the bench's child, from a volfile written for the run: its state
(working-directory) in the work directory, its run directory (pid files,
the socket the CLI talks to) under a short /tmp path, because a Unix
socket's path must stay under 108 bytes.  It listens on 127.0.0.1 only
(transport.socket.bind-address, which glusterd also hands to the bricks it
starts); after mounting, the bench reads every gluster process's sockets
from /proc and refuses to go on if any listens elsewhere.

The volume: replica 3 from three bricks in the work directory (`force`:
gluster refuses three bricks on one host, and bricks on the root
filesystem, without it), mounted through FUSE by the glusterfs client.
gluster's CLI refuses "localhost" and "127.0.0.1" by name as a brick's
host, so the bricks are named by this machine's host name, which must
resolve to 127.0.0.1 alone.

A few paths are compiled into glusterd 10 and no volfile moves them: it
makes empty directories in /var/lib/glusterd, the bricks' sockets in
/var/run/gluster, logs in /var/log/glusterfs.  Whatever appeared there
during the run is removed at the end (the logs are first moved to the work
directory's gluster/log/system).

Closing, also after a failed start, an error or Ctrl-C (which waits until
it is done), unmounts, stops and deletes the volume, stops glusterd, ends
by pid any gluster process still running, and checks that neither a mount
nor a process is left.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import lib_proc
from lib_measure import CommandFailed
from lib_service import Service

VOLUME = 'benchvol'
LOOPBACK = '127.0.0.1'
GLUSTERD_PORT = 24007
BRICKS = 3
PROGRAMS = ('glusterd', 'gluster', 'glusterfs')
PACKAGES = 'glusterfs-server glusterfs-client'
SBIN = ('/usr/sbin', '/sbin')     # off a normal user's PATH
# Where glusterd 10 writes whatever its volfile says.
SYSTEM_PATHS = ('/var/lib/glusterd', '/var/run/gluster', '/var/log/glusterfs')
SYSTEM_LOGS = '/var/log/glusterfs'
COMMAND_TIMEOUT = 120   # seconds for one gluster CLI command
READY_TIMEOUT = 60      # seconds for glusterd to answer, the mount to appear
STOP_TIMEOUT = 20       # seconds for a process to end after SIGTERM
UNMOUNT_TRIES = 5       # a killed tool's files may keep the mount busy
TAIL = 1500             # characters of a log worth showing


class Layout:
    """Where the volume's parts go, and the command lines that make and
    unmake it; nothing here runs anything."""

    def __init__(self, base, run_dir, host, programs):
        self.base = base
        self.state = os.path.join(base, 'state')
        self.log_dir = os.path.join(base, 'log')
        self.bricks = [os.path.join(base, 'brick%d' % n)
                       for n in range(1, BRICKS + 1)]
        self.mountpoint = os.path.join(base, 'mnt')
        self.volfile = os.path.join(base, 'glusterd.vol')
        self.run_dir = run_dir
        self.socket = os.path.join(run_dir, 'glusterd.socket')
        self.client_pid_file = os.path.join(run_dir, 'fuse-client.pid')
        self.host = host
        self.programs = programs

    def directories(self):
        return [self.state, self.log_dir, self.mountpoint]

    def log(self, name):
        return os.path.join(self.log_dir, name)

    def glusterd_volfile(self):
        """Debian's /etc/glusterfs/glusterd.vol, moved into the work
        directory and bound to 127.0.0.1."""
        options = (
            ('working-directory', self.state),
            ('run-directory', self.run_dir),
            ('glusterd-sockfile', self.socket),
            ('transport-type', 'socket'),
            ('transport.socket.bind-address', LOOPBACK),
            ('transport.socket.listen-port', GLUSTERD_PORT),
            ('transport.socket.keepalive-time', 10),
            ('transport.socket.keepalive-interval', 2),
            ('transport.socket.read-fail-log', 'off'),
            ('ping-timeout', 0),
            ('event-threads', 1),
            ('max-port', 60999),
        )
        return ''.join(['volume management\n', '    type mgmt/glusterd\n']
                       + ['    option %s %s\n' % o for o in options]
                       + ['end-volume\n'])

    def glusterd_argv(self):
        return [self.programs['glusterd'], '--no-daemon',
                '--volfile=%s' % self.volfile,
                '--log-file=%s' % self.log('glusterd.log')]

    def cli(self, *words):
        return [self.programs['gluster'], '--mode=script',
                '--glusterd-sock=%s' % self.socket,
                '--log-file=%s' % self.log('cli.log')] + list(words)

    def ready_argv(self):
        return self.cli('volume', 'list')

    def create_argv(self):
        bricks = ['%s:%s' % (self.host, brick) for brick in self.bricks]
        return self.cli('volume', 'create', VOLUME, 'replica', str(BRICKS),
                        'transport', 'tcp', *bricks, 'force')

    def start_argv(self):
        return self.cli('volume', 'start', VOLUME)

    def stop_argv(self):
        return self.cli('volume', 'stop', VOLUME, 'force')

    def delete_argv(self):
        return self.cli('volume', 'delete', VOLUME)

    def mount_argv(self):
        return [self.programs['glusterfs'], '--process-name=fuse',
                '--volfile-server=%s' % LOOPBACK,
                '--volfile-id=%s' % VOLUME,
                '--log-file=%s' % self.log('mount.log'),
                '--pid-file=%s' % self.client_pid_file, self.mountpoint]

    def unmount_argv(self, lazy=False):
        return ['umount'] + (['--lazy'] if lazy else []) + [self.mountpoint]


class GlusterVolume(Service):
    """The volume, mounted; use as a context manager.  `mountpoint` is
    where the repositories go."""

    def __init__(self, base, machine=None):
        self.base = base
        self.machine = machine or Machine()
        self.layout = None
        self.glusterd = None
        self.created = self.start_tried = self.mount_tried = False
        self.system_before = None
        self.daemon_pids = set()

    @property
    def mountpoint(self):
        return self.layout.mountpoint

    def start(self):
        m = self.machine
        if not m.is_root():
            raise CommandFailed('gluster mode needs root (glusterd, the '
                                'bricks\' extended attributes, FUSE)')
        programs = m.find_programs()
        host = m.brick_host()
        if m.port_in_use(GLUSTERD_PORT):
            raise CommandFailed('port %d on %s is taken: is another '
                                'glusterd running?' % (GLUSTERD_PORT,
                                                       LOOPBACK))
        layout = Layout(self.base, m.make_run_dir(), host, programs)
        self.layout = layout
        m.make_dirs(layout.directories())
        m.write(layout.volfile, layout.glusterd_volfile())
        self.system_before = m.entries(SYSTEM_PATHS)
        self.glusterd = m.spawn(layout.glusterd_argv())
        self._wait_for(lambda: m.succeeds(layout.ready_argv()),
                       'glusterd to answer',
                       lambda: self.glusterd.poll() is None, 'glusterd.log')
        m.run(layout.create_argv())
        self.created = True
        self.start_tried = True
        m.run(layout.start_argv())
        self.mount_tried = True
        m.run(layout.mount_argv())
        self._wait_for(lambda: m.mounted(layout.mountpoint),
                       'the volume to be mounted', self._client_may_run,
                       'mount.log')
        self.daemon_pids = self._known_pids()
        self._check_loopback_only()

    def _wait_for(self, ready, what, still_running, log_name):
        m = self.machine
        deadline = m.clock() + READY_TIMEOUT
        while not ready():
            if not still_running() or m.clock() > deadline:
                raise CommandFailed('gave up waiting for %s; %s ends:\n%s' % (
                    what, log_name, m.tail(self.layout.log(log_name))))
            m.sleep(0.2)

    def _client_may_run(self):
        """The FUSE client runs, or has not written its pid file yet."""
        pid = self.machine.pid_files(self.layout.run_dir).get(
            self.layout.client_pid_file)
        return pid is None or self.machine.alive(pid)

    def _known_pids(self):
        """glusterd and every process it or the mount left a pid file of
        (bricks, self-heal daemon, FUSE client)."""
        pids = set(self.daemon_pids)
        pids.update(self.machine.pid_files(self.layout.run_dir).values())
        if self.glusterd is not None:
            pids.add(self.glusterd.pid)
        return pids

    def _check_loopback_only(self):
        sockets = self.machine.listening_sockets(self._known_pids())
        if not sockets:
            raise CommandFailed('cannot see glusterd\'s sockets in /proc, so '
                                'cannot check that they are on %s only'
                                % LOOPBACK)
        elsewhere = [s for s in sockets if s[1] != LOOPBACK]
        if elsewhere:
            raise CommandFailed('gluster listens beyond %s: %s' % (
                LOOPBACK, ', '.join('%s %s port %d (pid %d)' % s
                                    for s in elsewhere)))

    def server_cpu_seconds(self):
        """CPU time glusterd, the bricks and the FUSE client have spent:
        the work a tool's own wait4 does not see."""
        return self.machine.cpu_seconds(self.daemon_pids)

    def close(self):
        """Undo what start did, step by step, each tried even when one
        before it failed; raise if a mount or a process is left."""
        if self.layout is None:
            return
        problems = []
        with _signals_deferred():
            pids = self._known_pids()
            for step in (self._unmount, self._remove_volume,
                         self._stop_glusterd):
                try:
                    step()
                except Exception as e:
                    problems.append(str(e))
            pids |= self._known_pids()
            for pid in sorted(pids):
                self._end(pid)
            left = self._what_is_left(pids)
            self._tidy(problems)
        for problem in problems:
            sys.stderr.write('warning: gluster teardown: %s\n' % problem)
        self.layout = None
        if left:
            raise CommandFailed('gluster teardown left %s behind' % ', '.join(
                left))

    def _unmount(self):
        if not self.mount_tried:
            return
        m, layout = self.machine, self.layout
        tries = 0
        while m.mounted(layout.mountpoint) and tries < UNMOUNT_TRIES:
            tries += 1
            try:
                m.run(layout.unmount_argv())
            except CommandFailed:
                m.sleep(1)
        if m.mounted(layout.mountpoint):
            m.run(layout.unmount_argv(lazy=True))

    def _remove_volume(self):
        if self.glusterd is None or self.glusterd.poll() is not None:
            return      # nobody to ask; its bricks are ended by pid
        if self.start_tried:
            self.machine.run(self.layout.stop_argv())
        if self.created:
            self.machine.run(self.layout.delete_argv())

    def _stop_glusterd(self):
        if self.glusterd is None:
            return
        self.glusterd.terminate()
        try:
            self.glusterd.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.glusterd.kill()
            self.glusterd.wait()

    def _end(self, pid):
        """SIGTERM, then SIGKILL, to a gluster process still running."""
        m = self.machine
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not m.alive(pid):
                return
            m.signal(pid, sig)
            deadline = m.clock() + STOP_TIMEOUT
            while m.alive(pid) and m.clock() < deadline:
                m.sleep(0.1)

    def _what_is_left(self, pids):
        left = ['process %d' % pid for pid in sorted(pids)
                if self.machine.alive(pid)]
        if self.machine.mounted(self.layout.mountpoint):
            left.insert(0, 'a mount on %s' % self.layout.mountpoint)
        return left

    def _tidy(self, problems):
        m = self.machine
        try:
            if self.system_before is not None:
                m.tidy(m.entries(SYSTEM_PATHS) - self.system_before,
                       os.path.join(self.layout.log_dir, 'system'))
            m.remove_tree(self.layout.run_dir)
        except OSError as e:
            problems.append('tidying up: %s' % e)


@contextlib.contextmanager
def _signals_deferred():
    """Ctrl-C and SIGTERM wait until the teardown is done: one cut short
    would leave a mount or daemons behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK,
                                 {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class Machine:
    """What GlusterVolume does to this machine; tests give it a
    stand-in."""

    def is_root(self):
        return os.geteuid() == 0

    def find_programs(self):
        search = os.pathsep.join([os.environ.get('PATH', '')] + list(SBIN))
        found = {name: shutil.which(name, path=search) for name in PROGRAMS}
        missing = [name for name, path in found.items() if path is None]
        if missing:
            raise CommandFailed('GlusterFS is not installed (no %s): '
                                'apt-get install %s' % (', '.join(missing),
                                                        PACKAGES))
        return found

    def brick_host(self):
        """A name of this machine that resolves to 127.0.0.1 alone, and
        that gluster's CLI takes for a brick's host."""
        tried = []
        for name in dict.fromkeys([socket.gethostname(), socket.getfqdn()]):
            if name in ('', 'localhost', LOOPBACK):
                continue
            addresses = ipv4_addresses(name)
            if addresses == {LOOPBACK}:
                return name
            tried.append('%s is %s' % (name, ', '.join(sorted(addresses))
                                       or 'unknown'))
        raise CommandFailed(
            'gluster\'s CLI refuses localhost and %s as a brick\'s host, and '
            'no other name of this machine resolves to %s alone (%s): add one '
            'to /etc/hosts' % (LOOPBACK, LOOPBACK, '; '.join(tried)))

    def port_in_use(self, port):
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((LOOPBACK, port))
            except OSError:
                return True
        return False

    def make_run_dir(self):
        return tempfile.mkdtemp(prefix='gl', dir='/tmp')

    def make_dirs(self, paths):
        for path in paths:
            os.makedirs(path, exist_ok=True)

    def write(self, path, text):
        with open(path, 'w') as f:
            f.write(text)

    def spawn(self, argv):
        """A daemon as our child, in its own session: the terminal's
        Ctrl-C must not end it before the volume is stopped."""
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL,
                                start_new_session=True)

    def run(self, argv):
        """Run a setup command; CommandFailed with its output if it fails.
        Output goes to a file, not a pipe: a daemon it starts may keep a
        pipe open forever."""
        with tempfile.TemporaryFile() as out:
            try:
                done = subprocess.run(argv, stdin=subprocess.DEVNULL,
                                      stdout=out, stderr=subprocess.STDOUT,
                                      timeout=COMMAND_TIMEOUT,
                                      start_new_session=True)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise CommandFailed('%s: %s' % (' '.join(argv), e))
            if done.returncode != 0:
                out.seek(0)
                text = out.read().decode(errors='replace')[-TAIL:].strip()
                raise CommandFailed('exit %d: %s\ncommand: %s' % (
                    done.returncode, text, ' '.join(argv)))

    def succeeds(self, argv):
        try:
            self.run(argv)
        except CommandFailed:
            return False
        return True

    def mounted(self, path):
        return lib_proc.mounted(path)

    def alive(self, pid):
        return lib_proc.alive(pid)

    def pid_files(self, run_dir):
        """{path: pid} of each *.pid file below run_dir."""
        found = {}
        for dirpath, _, names in os.walk(run_dir):
            for name in names:
                if name.endswith('.pid'):
                    path = os.path.join(dirpath, name)
                    try:
                        with open(path) as f:
                            found[path] = int(f.read().split()[0])
                    except (OSError, ValueError, IndexError):
                        pass
        return found

    def listening_sockets(self, pids):
        return lib_proc.listening_sockets(pids)

    def cpu_seconds(self, pids):
        return lib_proc.cpu_seconds(pids)

    def signal(self, pid, sig):
        """Signal pid if it still is a gluster process (pids get reused)."""
        if any('gluster' in arg for arg in lib_proc.command_line(pid)[:1]):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def entries(self, roots):
        """Every path below roots (and the roots), symbolic links not
        followed."""
        found = set()
        for root in roots:
            if os.path.lexists(root):
                found.add(root)
            for dirpath, dirnames, names in os.walk(root):
                found.update(os.path.join(dirpath, n) for n in dirnames + names)
        return found

    def tidy(self, new, log_dir):
        """Remove what glusterd made in the system's paths: logs moved to
        log_dir, sockets and pid files deleted, directories if empty."""
        for path in sorted(new, key=len, reverse=True):
            if os.path.isdir(path) and not os.path.islink(path):
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            elif path.startswith(SYSTEM_LOGS + os.sep):
                target = os.path.join(log_dir,
                                      os.path.relpath(path, SYSTEM_LOGS))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.move(path, target)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)

    def remove_tree(self, path):
        shutil.rmtree(path, ignore_errors=True)

    def tail(self, path):
        try:
            with open(path, 'rb') as f:
                return f.read().decode(errors='replace')[-TAIL:].strip()
        except OSError as e:
            return '(%s)' % e

    def clock(self):
        return time.monotonic()

    def sleep(self, seconds):
        time.sleep(seconds)


def ipv4_addresses(name):
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET)
    except OSError:
        return set()
    return {info[4][0] for info in infos}
