"""Tests of gluster mode's setup and teardown (bench/lib_gluster.py) and of
what it reads from /proc (bench/lib_proc.py).

The volume's life is run against a stand-in machine that records what
would have been run; a real volume is a manual check (bench/README).
"""

import os
import signal
import socket
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lib_gluster  # noqa: E402
import lib_proc  # noqa: E402
from lib_gluster import GlusterVolume, Layout  # noqa: E402
from lib_measure import CommandFailed  # noqa: E402

PROGRAMS = {'glusterd': '/sbin/glusterd', 'gluster': '/sbin/gluster',
            'glusterfs': '/sbin/glusterfs'}
CLI = ['/sbin/gluster', '--mode=script', '--glusterd-sock=/tmp/glX/'
       'glusterd.socket', '--log-file=/w/gluster/log/cli.log']
BRICKS = ['vm:/w/gluster/brick1', 'vm:/w/gluster/brick2',
          'vm:/w/gluster/brick3']


def layout():
    return Layout('/w/gluster', '/tmp/glX', 'vm', PROGRAMS)


def test_glusterd_keeps_its_state_in_the_work_directory_on_loopback():
    volfile = layout().glusterd_volfile().splitlines()
    assert volfile[:2] == ['volume management', '    type mgmt/glusterd']
    assert volfile[-1] == 'end-volume'
    options = dict(line.split()[1:] for line in volfile[2:-1])
    assert options['working-directory'] == '/w/gluster/state'
    assert options['run-directory'] == '/tmp/glX'
    assert options['glusterd-sockfile'] == '/tmp/glX/glusterd.socket'
    assert options['transport.socket.bind-address'] == '127.0.0.1'
    assert options['transport-type'] == 'socket'
    assert layout().glusterd_argv() == [
        '/sbin/glusterd', '--no-daemon', '--volfile=/w/gluster/glusterd.vol',
        '--log-file=/w/gluster/log/glusterd.log']


def test_the_volume_is_replica_3_on_three_bricks_of_the_work_directory():
    assert layout().create_argv() == CLI + [
        'volume', 'create', 'benchvol', 'replica', '3', 'transport', 'tcp'
    ] + BRICKS + ['force']
    assert layout().start_argv() == CLI + ['volume', 'start', 'benchvol']
    assert layout().stop_argv() == CLI + ['volume', 'stop', 'benchvol',
                                          'force']
    assert layout().delete_argv() == CLI + ['volume', 'delete', 'benchvol']


def test_the_volume_is_mounted_from_loopback_by_the_fuse_client():
    assert layout().mount_argv() == [
        '/sbin/glusterfs', '--process-name=fuse',
        '--volfile-server=127.0.0.1', '--volfile-id=benchvol',
        '--log-file=/w/gluster/log/mount.log',
        '--pid-file=/tmp/glX/fuse-client.pid', '/w/gluster/mnt']
    assert layout().unmount_argv() == ['umount', '/w/gluster/mnt']
    assert layout().unmount_argv(lazy=True) == [
        'umount', '--lazy', '/w/gluster/mnt']


class FakeGlusterd:
    pid = 100

    def __init__(self, machine):
        self.machine = machine
        self.running = True

    def poll(self):
        return None if self.running else 0

    def terminate(self):
        self.machine.log.append('terminate glusterd')
        self.running = False

    def wait(self, timeout=None):
        return 0

    def kill(self):
        self.machine.log.append('kill glusterd')


class FakeMachine(lib_gluster.Machine):
    """Records commands by their gluster words (or argv[0]); the volume
    mounts when the client's command runs and unmounts with umount."""

    def __init__(self, fail=None, sockets=None):
        self.log = []
        self.fail = fail or {}          # word -> how often it fails
        self.sockets = sockets
        self.is_mounted = False
        self.live = set()
        self.now = 0.0
        self.glusterd = None

    def is_root(self):
        return True

    def find_programs(self):
        return PROGRAMS

    def brick_host(self):
        return 'vm'

    def port_in_use(self, port):
        return False

    def make_run_dir(self):
        return '/tmp/glX'

    def make_dirs(self, paths):
        self.log.append('mkdir %s' % ' '.join(paths))

    def write(self, path, text):
        self.log.append('write %s' % path)

    def spawn(self, argv):
        self.log.append('spawn %s' % os.path.basename(argv[0]))
        self.glusterd = FakeGlusterd(self)
        return self.glusterd

    def run(self, argv):
        what = self.name(argv)
        self.log.append(what)
        if self.fail.get(what):
            self.fail[what] -= 1
            raise CommandFailed('exit 1: %s failed' % what)
        if what == 'volume start':
            self.live |= {200, 201, 202}
        if what == 'mount':
            self.is_mounted = True
            self.live.add(300)
        if what.startswith('umount'):
            self.is_mounted = False
            self.live.discard(300)
        if what == 'volume stop':
            self.live -= {200, 201, 202}

    def name(self, argv):
        if argv[0] == PROGRAMS['gluster']:
            return ' '.join(argv[len(CLI):][:2])
        if argv[0] == PROGRAMS['glusterfs']:
            return 'mount'
        return ' '.join(argv[:2]) if argv[1] == '--lazy' else argv[0]

    def mounted(self, path):
        assert path == '/w/gluster/mnt'
        return self.is_mounted

    def alive(self, pid):
        if pid == 100:
            return self.glusterd.running
        return pid in self.live

    def pid_files(self, run_dir):
        files = {'/tmp/glX/vols/benchvol/b%d.pid' % n: 200 + n
                 for n in range(3) if 200 + n in self.live}
        if 300 in self.live and self.is_mounted:
            files['/tmp/glX/fuse-client.pid'] = 300
        return files

    def listening_sockets(self, pids):
        if self.sockets is not None:
            return self.sockets
        return [('tcp', '127.0.0.1', 24007, 100),
                ('tcp', '127.0.0.1', 49152, 200)]

    def cpu_seconds(self, pids):
        return float(sum(pids))

    def signal(self, pid, sig):
        self.log.append('signal %d %s' % (pid, signal.Signals(sig).name))
        if sig == signal.SIGKILL:
            self.live.discard(pid)

    def entries(self, roots):
        self.log.append('entries')
        return {'/var/log/glusterfs'} | (
            {'/var/log/glusterfs/x.log'} if self.glusterd else set())

    def tidy(self, new, log_dir):
        self.log.append('tidy %s into %s' % (' '.join(sorted(new)), log_dir))

    def remove_tree(self, path):
        self.log.append('rm -r %s' % path)

    def tail(self, path):
        return 'last words of %s' % os.path.basename(path)

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


SETUP = ['mkdir /w/gluster/state /w/gluster/log /w/gluster/mnt',
         'write /w/gluster/glusterd.vol', 'entries', 'spawn glusterd',
         'volume list', 'volume create', 'volume start', 'mount']
TIDY = ['entries',
        'tidy /var/log/glusterfs/x.log into /w/gluster/log/system',
        'rm -r /tmp/glX']


def test_a_volume_is_set_up_used_and_taken_down_in_reverse(tmp_path):
    machine = FakeMachine()
    with GlusterVolume('/w/gluster', machine) as volume:
        assert machine.log == SETUP
        assert volume.mountpoint == '/w/gluster/mnt'
        assert volume.daemon_pids == {100, 200, 201, 202, 300}
        assert volume.server_cpu_seconds() == 1003.0
        machine.log.clear()
    assert machine.log == ['umount', 'volume stop', 'volume delete',
                           'terminate glusterd'] + TIDY
    assert not machine.is_mounted
    assert machine.live == set()


def test_glusterd_is_asked_until_it_answers():
    machine = FakeMachine(fail={'volume list': 3})
    with GlusterVolume('/w/gluster', machine):
        assert machine.log.count('volume list') == 4


def test_a_glusterd_that_never_answers_is_given_up_with_its_log():
    machine = FakeMachine(fail={'volume list': 10 ** 6})
    with pytest.raises(CommandFailed) as failure:
        with GlusterVolume('/w/gluster', machine):
            pass
    assert str(failure.value) == ('gave up waiting for glusterd to answer; '
                                  'glusterd.log ends:\nlast words of '
                                  'glusterd.log')
    assert machine.log[-5:] == ['volume list', 'terminate glusterd'] + TIDY


def test_a_failed_start_stops_and_deletes_the_volume_it_made():
    machine = FakeMachine(fail={'volume start': 1})
    with pytest.raises(CommandFailed):
        with GlusterVolume('/w/gluster', machine):
            pass
    assert machine.log[SETUP.index('volume start'):] == [
        'volume start', 'volume stop', 'volume delete',
        'terminate glusterd'] + TIDY


def test_ctrl_c_while_mounting_still_unmounts_and_stops_everything():
    machine = FakeMachine()
    mounted = machine.mounted
    calls = []

    def interrupted_once(path):
        calls.append(path)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return mounted(path)
    machine.mounted = interrupted_once
    with pytest.raises(KeyboardInterrupt):
        with GlusterVolume('/w/gluster', machine):
            pass
    assert machine.log[len(SETUP):] == [
        'umount', 'volume stop', 'volume delete', 'terminate glusterd'] + TIDY
    assert not machine.is_mounted


def test_a_busy_mount_is_retried_then_detached_lazily():
    machine = FakeMachine(fail={'umount': 5})
    with GlusterVolume('/w/gluster', machine):
        machine.log.clear()
    assert machine.log[:7] == ['umount'] * 5 + ['umount --lazy',
                                                'volume stop']


def test_a_listener_beyond_loopback_stops_the_run():
    machine = FakeMachine(sockets=[('tcp', '127.0.0.1', 24007, 100),
                                   ('tcp6', '::', 49152, 201)])
    with pytest.raises(CommandFailed) as failure:
        with GlusterVolume('/w/gluster', machine):
            pass
    assert str(failure.value) == (
        'gluster listens beyond 127.0.0.1: tcp6 :: port 49152 (pid 201)')
    assert 'volume delete' in machine.log and not machine.is_mounted


def test_sockets_that_cannot_be_seen_are_not_taken_as_none():
    machine = FakeMachine(sockets=[])
    with pytest.raises(CommandFailed) as failure:
        with GlusterVolume('/w/gluster', machine):
            pass
    assert str(failure.value).startswith('cannot see glusterd\'s sockets')


def test_a_process_that_outlives_the_volume_is_killed_by_pid():
    machine = FakeMachine()
    with GlusterVolume('/w/gluster', machine) as volume:
        machine.log.clear()
        machine.live.add(203)          # a brick that ignores the stop
        volume.daemon_pids.add(203)
    assert machine.log[4:6] == ['signal 203 SIGTERM', 'signal 203 SIGKILL']
    assert machine.live == set()


def test_a_mount_left_behind_fails_the_run_loudly(capsys):
    machine = FakeMachine(fail={'umount': 5, 'umount --lazy': 1})
    with pytest.raises(CommandFailed) as failure:
        with GlusterVolume('/w/gluster', machine):
            pass
    assert str(failure.value) == (
        'gluster teardown left a mount on /w/gluster/mnt behind')
    assert 'warning: gluster teardown: exit 1: umount --lazy failed' in (
        capsys.readouterr().err)


def test_nothing_is_torn_down_when_gluster_is_not_there():
    machine = FakeMachine()

    def missing():
        raise CommandFailed('GlusterFS is not installed (no glusterd)')
    machine.find_programs = missing
    with pytest.raises(CommandFailed):
        with GlusterVolume('/w/gluster', machine):
            pass
    assert machine.log == []


def test_missing_programs_are_named_with_the_packages(monkeypatch):
    monkeypatch.setenv('PATH', '/nonexistent')
    monkeypatch.setattr(lib_gluster, 'SBIN', ())
    with pytest.raises(CommandFailed) as failure:
        lib_gluster.Machine().find_programs()
    assert str(failure.value) == (
        'GlusterFS is not installed (no glusterd, gluster, glusterfs): '
        'apt-get install glusterfs-server glusterfs-client')


def test_bricks_are_named_by_a_host_name_that_is_loopback_alone(
        monkeypatch):
    addresses = {'vm': {'127.0.0.1'}, 'lan': {'192.0.2.1'},
                 'both': {'127.0.0.1', '192.0.2.1'}}
    monkeypatch.setattr(lib_gluster, 'ipv4_addresses', addresses.get)
    for names, host in ((('localhost', 'vm'), 'vm'), (('vm', 'lan'), 'vm'),
                        (('lan', 'vm'), 'vm')):
        monkeypatch.setattr(socket, 'gethostname', lambda: names[0])
        monkeypatch.setattr(socket, 'getfqdn', lambda: names[1])
        assert lib_gluster.Machine().brick_host() == host
    monkeypatch.setattr(socket, 'gethostname', lambda: 'both')
    monkeypatch.setattr(socket, 'getfqdn', lambda: 'lan')
    with pytest.raises(CommandFailed) as failure:
        lib_gluster.Machine().brick_host()
    assert str(failure.value).endswith(
        '(both is 127.0.0.1, 192.0.2.1; lan is 192.0.2.1): add one to '
        '/etc/hosts')


def test_tidying_moves_new_logs_and_removes_the_rest(tmp_path, monkeypatch):
    logs = tmp_path / 'log' / 'glusterfs'
    (logs / 'bricks').mkdir(parents=True)
    (logs / 'bricks' / 'b1.log').write_text('brick says')
    (logs / 'old.log').write_text('was there before')
    run = tmp_path / 'run'
    (run / 'snaps').mkdir(parents=True)
    (run / 'x.socket').write_text('')
    monkeypatch.setattr(lib_gluster, 'SYSTEM_LOGS', str(logs))
    machine = lib_gluster.Machine()
    new = machine.entries([str(logs), str(run)]) - {
        str(logs), str(logs / 'old.log'), str(run)}
    keep = tmp_path / 'kept'
    machine.tidy(new, str(keep))
    assert (keep / 'bricks' / 'b1.log').read_text() == 'brick says'
    assert sorted(os.listdir(logs)) == ['old.log']
    assert os.listdir(run) == []


def test_pid_files_are_read_below_the_run_directory(tmp_path):
    (tmp_path / 'vols' / 'v').mkdir(parents=True)
    (tmp_path / 'vols' / 'v' / 'b.pid').write_text('123\n')
    (tmp_path / 'glusterd.socket').write_text('')
    (tmp_path / 'empty.pid').write_text('')
    assert lib_gluster.Machine().pid_files(str(tmp_path)) == {
        str(tmp_path / 'vols' / 'v' / 'b.pid'): 123}


NET_TCP = '''\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:5DC7 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4711 1 0
   1: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4712 1 0
   2: 0100007F:5DC7 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4713 1 0
'''


def test_listening_sockets_are_read_from_the_kernels_tables():
    assert lib_proc.parse_net_table(NET_TCP, lib_proc.TCP_LISTEN) == [
        ('127.0.0.1', 24007, 4711), ('0.0.0.0', 2024, 4712)]


def test_addresses_are_words_in_host_byte_order():
    assert lib_proc.decode_address('0100007F', 'little') == '127.0.0.1'
    assert lib_proc.decode_address('7F000001', 'big') == '127.0.0.1'
    assert lib_proc.decode_address(
        '0000000000000000FFFF00000100007F', 'little') == '::ffff:127.0.0.1'
    assert lib_proc.decode_address('00000000000000000000000001000000',
                                   'little') == '::1'


def test_a_processs_listening_socket_is_found_with_its_address():
    with socket.socket() as listener, socket.socket(
            socket.AF_INET, socket.SOCK_DGRAM) as datagrams:
        listener.bind(('127.0.0.1', 0))
        listener.listen()
        datagrams.bind(('127.0.0.1', 0))
        found = lib_proc.listening_sockets([os.getpid()])
        assert ('tcp', '127.0.0.1', listener.getsockname()[1],
                os.getpid()) in found
        assert ('udp', '127.0.0.1', datagrams.getsockname()[1],
                os.getpid()) in found


def test_a_process_that_has_ended_is_not_alive_before_it_is_reaped():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)   # a zombie now
    assert lib_proc.alive(os.getpid())
    assert not lib_proc.alive(pid)
    os.waitpid(pid, 0)
    assert not lib_proc.alive(pid)
    assert lib_proc.command_line(pid) == []


def test_mounts_are_found_in_the_mount_table_with_escapes(tmp_path):
    table = tmp_path / 'mounts'
    table.write_text(
        'proc /proc proc rw 0 0\n'
        'vm:/benchvol %s/a\\040b fuse.glusterfs rw 0 0\n' % tmp_path)
    assert lib_proc.mounted(str(tmp_path / 'a b'), str(table))
    assert not lib_proc.mounted(str(tmp_path / 'a'), str(table))
