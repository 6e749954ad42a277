"""Locks that heal: a lock whose holder on this host is gone is broken at
once; live holders, other hosts and Obnam 1.x's empty locks wait as
before, and the timeout names the holder.  Real lock files, real
processes (a child blocked reading a pipe holds the lock)."""

import os
import re
import socket
import subprocess
import sys

import pytest

from obnamlib import errors
from obnamlib.repo.storage import lock_holder, lockmgr
from obnamlib.repo.storage.lockmgr import LockManager
from obnamlib.vfs.local import LocalFS
from tests import paths
from tests.obnamlib.repo.storage.test_lockmgr import FakeClock

ROOT = paths.CHECKOUT

HOLDER = r'''
import sys
sys.path.insert(0, %(root)r)
from obnamlib.repo.storage.lockmgr import LockManager
from obnamlib.vfs.local import LocalFS
manager = LockManager(LocalFS(sys.argv[1]), timeout=0)
manager.lock(sys.argv[2:])
print('locked', flush=True)
sys.stdin.read()
manager.unlock_all()
''' % {'root': ROOT}

RACER = r'''
import sys
sys.path.insert(0, %(root)r)
from obnamlib import errors
from obnamlib.repo.storage.lockmgr import LockManager
from obnamlib.vfs.local import LocalFS
from tests import paths
manager = LockManager(LocalFS(sys.argv[1]), timeout=0)
print('ready', flush=True)
sys.stdin.readline()
try:
    manager.lock(['.'])
except errors.LockFail:
    print('failed', flush=True)
else:
    print('got', flush=True)
    sys.stdin.read()
''' % {'root': ROOT}


def manager(root, timeout=0, clock=None, **kwargs):
    clock = clock or FakeClock()
    return LockManager(LocalFS(str(root)), timeout, sleep=clock.sleep,
                       clock=clock, **kwargs)


def start_holder(root, *dirnames):
    child = subprocess.Popen([sys.executable, '-c', HOLDER, str(root)] +
                             list(dirnames or ['.']),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout.readline() == b'locked\n'
    return child


def kill(child):
    child.kill()
    child.wait()


def dead_pid():
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen(['true'])
    child.wait()
    return child.pid


def lock_text(host=None, pid=None, boot_id=None, start='1', time=None):
    host = host or socket.gethostname()
    boot_id = lock_holder.THIS_HOST.boot_id() if boot_id is None else boot_id
    return ('obnam-lock\nhost=%s\npid=%d\ntime=%s\nboot_id=%s\nstart=%s\n'
            'token=0123\n' % (host, pid or dead_pid(),
                              time or '2026-01-01T00:00:00Z', boot_id,
                              start)).encode()


# --- a holder that is gone ---------------------------------------------------

@pytest.mark.timeout(30)
def test_lock_of_a_killed_process_is_broken_at_once(tmp_path):
    child = start_holder(tmp_path, '.', 'chunks')
    kill(child)
    lines = []
    clock = FakeClock()
    m = manager(tmp_path, clock=clock, on_break=lines.append)
    m.lock(['.', 'chunks'])
    assert clock.sleeps == []
    host = socket.gethostname()
    assert lines == [
        'Removed stale lock %s of host %s, pid %d: process %d is not '
        'running' % (path, host, child.pid, child.pid)
        for path in ('lock', 'chunks/lock')]
    assert lock_holder.parse((tmp_path / 'lock').read_bytes()).pid == \
        os.getpid()
    assert sorted(os.listdir(tmp_path)) == ['chunks', 'lock']
    assert os.listdir(tmp_path / 'chunks') == ['lock']


@pytest.mark.timeout(30)
def test_lock_of_a_reused_pid_is_broken(tmp_path):
    """A live process with the pid, started at another time."""
    child = start_holder(tmp_path / 'other')
    try:
        (tmp_path / 'lock').write_bytes(lock_text(pid=child.pid, start='1'))
        lines = []
        manager(tmp_path, on_break=lines.append).lock(['.'])
        assert lines[0].endswith('process %d is another program now'
                                 % child.pid)
    finally:
        kill(child)


@pytest.mark.timeout(30)
def test_lock_from_before_a_reboot_is_broken(tmp_path):
    (tmp_path / 'lock').write_bytes(lock_text(pid=os.getpid(), start='',
                                              boot_id='not-this-boot'))
    lines = []
    manager(tmp_path, on_break=lines.append).lock(['.'])
    assert lines[0].endswith('the host has restarted since')


@pytest.mark.timeout(30)
def test_lock_left_by_this_very_manager_is_taken_back(tmp_path):
    """Its file left behind (an unlock that failed): this process still
    runs, so only the manager's token tells that nobody holds it."""
    lines = []
    m = manager(tmp_path, on_break=lines.append)
    (tmp_path / 'lock').write_bytes(lock_holder.content(m.token))
    m.lock(['.'])
    assert m.holds('.')
    assert lines[0].endswith(': left by this process')


# --- holders that may still hold -------------------------------------------

@pytest.mark.timeout(30)
def test_live_holder_waits_and_the_timeout_names_it(tmp_path):
    child = start_holder(tmp_path)
    before = (tmp_path / 'lock').read_bytes()
    try:
        clock = FakeClock()
        with pytest.raises(errors.LockFail) as e:
            manager(tmp_path, timeout=3, clock=clock).lock(['.'])
        assert clock.sleeps == [1, 1, 1]
        assert re.fullmatch(
            r"R681AEX: Couldn't create lock lock: timeout; held by host %s, "
            r"pid %d, for \d+ s; if that obnam is no longer running, remove "
            r"the lock with obnam force-lock"
            % (re.escape(socket.gethostname()), child.pid), str(e.value))
        assert (tmp_path / 'lock').read_bytes() == before
    finally:
        child.stdin.close()
        child.wait()
    assert not (tmp_path / 'lock').exists()


@pytest.mark.timeout(30)
def test_lock_from_another_host_is_not_broken(tmp_path):
    text = lock_text(host='elsewhere.example',
                     time='2026-12-06T20:00:00Z')
    (tmp_path / 'lock').write_bytes(text)
    with pytest.raises(errors.LockFail) as e:
        manager(tmp_path).lock(['.'])
    assert 'held by host elsewhere.example, pid ' in str(e.value)
    assert 'obnam force-lock' in str(e.value)
    assert (tmp_path / 'lock').read_bytes() == text


@pytest.mark.timeout(30)
@pytest.mark.parametrize('text', [
    b'',
    b'[lockfile]\r\nclient=0123\r\npid=1\r\nboot_id=x',   # 0.27-1.9
    b'obnam-lock\npid=1\n',
    b'obnam-lock\nhost=h\npid=x\n',
    b'obnam-lock\nhost=h\x1b[2J\npid=1\n',              # terminal escapes
    b'obnam-lock\nhost=' + b'h' * 256 + b'\npid=1\n',
    b'obnam-lock\nhost=h\npid=' + b'9' * 1000 + b'\n'])
def test_locks_naming_no_holder_we_can_judge_behave_as_before(tmp_path,
                                                               text):
    (tmp_path / 'lock').write_bytes(text)
    clock = FakeClock()
    with pytest.raises(errors.LockFail) as e:
        manager(tmp_path, timeout=2, clock=clock).lock(['.'])
    assert str(e.value) == "R681AEX: Couldn't create lock lock: timeout"
    assert clock.sleeps == [1, 1]
    assert (tmp_path / 'lock').read_bytes() == text


# --- two breakers at once ----------------------------------------------------

class InterleavingFS:
    """LocalFS that lets another breaker act just before we take the
    breakers' token."""

    def __init__(self, base, before_token):
        self.base = base
        self.before_token = before_token

    def lock(self, path, content=b''):
        if path.startswith(lockmgr.TOKEN_PREFIX) and self.before_token:
            hook, self.before_token = self.before_token, None
            hook()
        self.base.lock(path, content)

    def __getattr__(self, name):
        return getattr(self.base, name)


def slow_manager(root, before_token):
    clock = FakeClock()
    return LockManager(InterleavingFS(LocalFS(str(root)), before_token),
                       timeout=0, sleep=clock.sleep, clock=clock)


@pytest.mark.timeout(30)
def test_a_breaker_that_comes_late_leaves_the_new_lock_alone(tmp_path):
    (tmp_path / 'lock').write_bytes(lock_text())
    first = manager(tmp_path)
    slow = slow_manager(tmp_path, lambda: first.lock(['.']))
    with pytest.raises(errors.LockFail):
        slow.lock(['.'])
    assert first.holds('.') and not slow.holds('.')
    assert lock_holder.parse((tmp_path / 'lock').read_bytes()).token == \
        first.token
    assert os.listdir(tmp_path) == ['lock']


@pytest.mark.timeout(30)
def test_a_breaker_waits_while_another_breaks(tmp_path):
    stale = lock_text()
    (tmp_path / 'lock').write_bytes(stale)
    child = start_holder(tmp_path / 'other')
    token = tmp_path / lockmgr.token_path('lock', stale)
    token.write_bytes(lock_text(pid=child.pid, start=''))
    try:
        with pytest.raises(errors.LockFail):
            manager(tmp_path).lock(['.'])
        assert (tmp_path / 'lock').read_bytes() == stale
    finally:
        kill(child)
    manager(tmp_path).lock(['.'])       # its breaker died: both broken
    assert os.listdir(tmp_path) == ['lock', 'other']


@pytest.mark.timeout(120)
def test_processes_breaking_one_stale_lock_at_once_never_both_hold_it(
        tmp_path):
    for round_number in range(15):
        root = tmp_path / str(round_number)
        root.mkdir()
        racers = [subprocess.Popen(
            [sys.executable, '-c', RACER, str(root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            for _ in range(3)]
        for racer in racers:
            assert racer.stdout.readline() == b'ready\n'
        (root / 'lock').write_bytes(lock_text())
        for racer in racers:
            racer.stdin.write(b'go\n')
            racer.stdin.flush()
        answers = sorted(r.stdout.readline() for r in racers)
        for racer in racers:
            racer.stdin.close()
            racer.wait()
        assert answers == [b'failed\n', b'failed\n', b'got\n']
        assert os.listdir(root) == ['lock']


# --- over SFTP ---------------------------------------------------------------

@pytest.mark.timeout(60)
def test_stale_lock_is_broken_over_sftp(tmp_path, monkeypatch):
    from tests.obnamlib.vfs import test_sftp as sftp
    monkeypatch.delenv('SSH_AUTH_SOCK', raising=False)
    remote = tmp_path / 'remote'
    (remote / '7').mkdir(parents=True)
    (remote / '7' / 'lock').write_bytes(lock_text())
    (remote / 'lock').write_bytes(lock_text(host='elsewhere.example'))
    fs = sftp.shared_fs(str(remote))
    try:
        lines = []
        m = LockManager(fs, 0, on_break=lines.append)
        m.lock(['7'])
        assert len(lines) == 1 and lines[0].startswith(
            'Removed stale lock 7/lock of host %s' % socket.gethostname())
        with pytest.raises(errors.LockFail) as e:
            m.lock(['.'])
        assert 'held by host elsewhere.example' in str(e.value)
        m.unlock_all()
    finally:
        fs.close()
    assert os.listdir(remote / '7') == []


# --- through bin/obnam -------------------------------------------------------

def obnam(tmp_path, *args):
    argv = [sys.executable, os.path.join(ROOT, 'bin', 'obnam'),
            '--no-default-configs', '--quiet', '--client-name=c',
            '--lock-timeout=0', '--repository=%s' % (tmp_path / 'repo'),
            '--log=%s' % (tmp_path / 'log')] + [str(a) for a in args]
    return subprocess.run(argv, capture_output=True)


@pytest.fixture
def repo_with_backup(tmp_path):
    (tmp_path / 'live').mkdir()
    (tmp_path / 'live' / 'f').write_bytes(b'data')
    result = obnam(tmp_path, 'backup', tmp_path / 'live')
    assert result.returncode == 0, result.stderr
    return tmp_path / 'repo'


@pytest.mark.timeout(60)
def test_forget_after_a_crash_heals_and_says_so(tmp_path, repo_with_backup):
    assert obnam(tmp_path, '_lock').returncode == 0
    result = obnam(tmp_path, 'forget', '--keep=1d')
    assert result.returncode == 0, result.stderr
    lines = result.stderr.decode().splitlines()
    assert [line.split(' of host ')[0] for line in lines] == [
        'Removed stale lock %s/%s' % (repo_with_backup, path)
        for path in lock_paths(repo_with_backup)]
    log = (tmp_path / 'log').read_text()
    assert log.count('WARNING Removed stale lock ') == len(lines)
    assert not [n for d, _, names in os.walk(repo_with_backup)
                for n in names if n == 'lock' or n.startswith('tmp')]


def lock_paths(repo):
    """The client's and the chunk indexes' lock paths, in lock order."""
    clients = sorted(n for n in os.listdir(repo) if n.isdigit())
    return ['lock'] + ['%s/lock' % n for n in
                       clients + ['chunklist', 'chunks', 'chunksums']]


@pytest.mark.timeout(60)
def test_backup_waits_for_a_live_holder_and_names_it(tmp_path,
                                                     repo_with_backup):
    child = start_holder(repo_with_backup, *[
        n for n in os.listdir(repo_with_backup) if n.isdigit()])
    try:
        result = obnam(tmp_path, 'backup', tmp_path / 'live')
    finally:
        child.stdin.close()
        child.wait()
    assert result.returncode == 1
    assert re.fullmatch(
        r"ERROR: R681AEX: Couldn't create lock %s/\d+/lock: timeout; held by "
        r"host \S+, pid %d, for \d+ s; if that obnam is no longer running, "
        r"remove the lock with obnam force-lock\n"
        % (re.escape(str(repo_with_backup)), child.pid),
        result.stderr.decode())
    result = obnam(tmp_path, 'backup', tmp_path / 'live')
    assert (result.returncode, result.stderr) == (0, b'')


# --- what a lock file says ---------------------------------------------------

def test_content_names_this_process_and_parses_back():
    holder = lock_holder.parse(lock_holder.content('abc', now=0))
    assert holder == lock_holder.Holder(
        socket.gethostname(), os.getpid(), '1970-01-01T00:00:00Z',
        lock_holder.THIS_HOST.boot_id(),
        lock_holder.THIS_HOST.process_start(os.getpid()), 'abc',
        lock_holder.THIS_HOST.pid_namespace())
    assert lock_holder.why_gone(holder) is None


@pytest.mark.timeout(30)
def test_lock_from_a_container_with_pids_of_its_own_is_not_broken(
        tmp_path):
    """Same host name, same boot, other pid namespace: its pids mean
    nothing here."""
    text = lock_text().replace(b'token=', b'pidns=pid:[1]\ntoken=')
    (tmp_path / 'lock').write_bytes(text)
    with pytest.raises(errors.LockFail):
        manager(tmp_path).lock(['.'])
    assert (tmp_path / 'lock').read_bytes() == text


@pytest.mark.parametrize('seconds, text', [
    (0, '0 s'), (119, '119 s'), (120, '2 min'), (7199, '119 min'),
    (7200, '2 h'), (172799, '47 h'), (172800, '2 days')])
def test_ages_are_short(seconds, text):
    assert lock_holder.humanise_age(seconds) == text


def test_description_without_a_readable_time_has_no_age():
    holder = lock_holder.Holder('h', 5, 'yesterday', '', '', '')
    assert lock_holder.describe(holder) == 'host h, pid 5'


# --- a host without /proc ----------------------------------------------------

def without_proc(monkeypatch):
    """/proc not mounted (a chroot, another system): every /proc/PID read
    fails as if that process did not exist."""
    def no_proc_open(path, *args, **kwargs):
        if str(path).startswith('/proc/'):
            raise FileNotFoundError(2, 'No such file or directory', path)
        return open(path, *args, **kwargs)
    monkeypatch.setattr(lock_holder, 'open', no_proc_open, raising=False)
    monkeypatch.setattr(lock_holder, '_has_proc', lambda: False)


@pytest.mark.timeout(30)
def test_without_proc_a_live_holder_still_holds(tmp_path, monkeypatch):
    child = start_holder(tmp_path)
    before = (tmp_path / 'lock').read_bytes()
    try:
        without_proc(monkeypatch)
        with pytest.raises(errors.LockFail) as e:
            manager(tmp_path).lock(['.'])
        assert 'held by host %s, pid %d' % (socket.gethostname(),
                                           child.pid) in str(e.value)
        assert (tmp_path / 'lock').read_bytes() == before
    finally:
        kill(child)


@pytest.mark.timeout(30)
def test_without_proc_a_dead_holder_is_still_gone(tmp_path, monkeypatch):
    without_proc(monkeypatch)
    this_host = lock_holder.ThisHost()
    assert this_host.process_start(os.getpid()) == ''
    assert this_host.process_start(dead_pid()) is None
    assert this_host.process_start(2 ** 40) is None
    (tmp_path / 'lock').write_bytes(lock_text(start=''))
    lines = []
    manager(tmp_path, on_break=lines.append).lock(['.'])
    assert lines[0].endswith('is not running')


@pytest.mark.timeout(30)
def test_a_lock_file_cut_short_is_not_judged(tmp_path):
    """Over SFTP a lock file is created, then written: a reader may see
    part of it, here a pid cut to its first digit: another process."""
    whole = lock_text(pid=os.getpid())
    text = whole[:whole.index(b'\npid=') + len(b'\npid=') + 1]
    assert lock_holder.parse(text + b'\n').pid == int(text[-1:])
    (tmp_path / 'lock').write_bytes(text)
    with pytest.raises(errors.LockFail) as e:
        manager(tmp_path).lock(['.'])
    assert str(e.value) == "R681AEX: Couldn't create lock lock: timeout"
    assert (tmp_path / 'lock').read_bytes() == text


class CountingFS:
    """LocalFS that counts the reads of lock files."""

    def __init__(self, base):
        self.base = base
        self.reads = 0

    def read_raw(self, path):
        self.reads += 1
        return self.base.read_raw(path)

    def __getattr__(self, name):
        return getattr(self.base, name)


@pytest.mark.timeout(30)
def test_a_held_lock_is_read_once_per_attempt(tmp_path):
    """Judged once a second; the timeout names the holder judged last."""
    child = start_holder(tmp_path)
    try:
        fs = CountingFS(LocalFS(str(tmp_path)))
        clock = FakeClock()
        with pytest.raises(errors.LockFail) as e:
            LockManager(fs, 2, sleep=clock.sleep, clock=clock).lock(['.'])
        assert 'pid %d' % child.pid in str(e.value)
        assert (len(clock.sleeps), fs.reads) == (2, 3)
    finally:
        kill(child)
