"""Ctrl-C and SIGTERM: a line on stderr at once, cleanup, locks released,
the repository as it was before the run; a second signal stops at once."""

import io
import os
import signal
import subprocess
import sys
import time

import pytest

from obnamlib.cli import interruption
from tests import paths
from tests.gpg_fixture import gpg_home  # noqa: F401 (a fixture)

NOTICE = (b'%s: interrupted, cleaning up (press Ctrl-C again to stop at '
          b'once)\n')

# A command that says it is running, then waits for a line on stdin;
# `slow-cleanup` also waits in its cleanup, so a second signal can come.
WAITING_APP = '''
import sys
sys.path.insert(0, %(checkout)r)
import obnamlib.cli.app

class App(obnamlib.cli.app.ObnamApp):
    def cmd_wait(self, args):
        print('running', flush=True)
        sys.stdin.readline()
    def cmd_slow_cleanup(self, args):
        try:
            print('running', flush=True)
            sys.stdin.readline()
        finally:
            print('cleaning', flush=True)
            sys.stdin.readline()

app = App()
app.run()
sys.exit(app.exit_code)
'''


@pytest.fixture
def waiting_app(tmp_path):
    script = tmp_path / 'waiting_app.py'
    script.write_text(WAITING_APP % {'checkout': paths.CHECKOUT})
    return str(script)


def start(argv, tmp_path):
    return subprocess.Popen(
        argv, env={'HOME': str(tmp_path), 'PATH': '/usr/bin:/bin',
                   'LC_ALL': 'C.UTF-8'},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def start_waiting(script, command, tmp_path):
    proc = start([sys.executable, script, '--no-default-configs', '--log',
                  str(tmp_path / 'log'), command], tmp_path)
    assert proc.stdout.readline() == b'running\n'
    return proc


def backed_up_then_64_gib_of_holes(tmp_path):
    """(src, repo): src backed up once (one chunk of zeros, stored), then
    given a 64 GiB file of holes, so a second backup is certainly still
    reading it when a signal comes, and stores nothing new."""
    src, repo = tmp_path / 'src', tmp_path / 'repo'
    src.mkdir()
    (src / 'zeros').write_bytes(bytes(1024 * 1024))
    first = subprocess.run(obnam(repo, tmp_path, 'backup', str(src)),
                           capture_output=True, timeout=120)
    assert first.returncode == 0, first.stderr
    with open(src / 'holes', 'wb') as f:
        f.truncate(64 * 1024 ** 3)
    return src, repo


@pytest.mark.parametrize('signum, code', [(signal.SIGINT, 255),
                                          (signal.SIGTERM, 143)])
def test_a_signal_is_announced_at_once_and_ends_the_run(
        waiting_app, tmp_path, signum, code):
    proc = start_waiting(waiting_app, 'wait', tmp_path)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (code, b'', NOTICE % b'obnam')
    log = (tmp_path / 'log').read_text()
    assert ('Interrupted by the user' if signum == signal.SIGINT
            else 'Interrupted by SIGTERM') in log


def test_the_previous_handlers_come_back_after_the_run():
    def previous(signum, frame):
        pass

    saved = {n: signal.signal(n, previous)
             for n in (signal.SIGINT, signal.SIGTERM)}
    try:
        with pytest.raises(KeyboardInterrupt):
            with interruption.announced('obnam', io.StringIO()):
                assert signal.getsignal(signal.SIGINT) is not previous
                raise KeyboardInterrupt()
        assert signal.getsignal(signal.SIGINT) is previous
        assert signal.getsignal(signal.SIGTERM) is previous
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def test_a_second_signal_during_cleanup_stops_at_once(waiting_app, tmp_path):
    proc = start_waiting(waiting_app, 'slow-cleanup', tmp_path)
    proc.send_signal(signal.SIGINT)
    assert proc.stdout.readline() == b'cleaning\n'
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (
        255, b'', NOTICE % b'obnam' + b'obnam: stopped at once\n')


# --- a real backup, interrupted -------------------------------------------

def obnam(repo, tmp_path, *args):
    return [sys.executable, paths.OBNAM, '--no-default-configs', '--log',
            str(tmp_path / 'obnam.log'), '--repository', str(repo)] + \
        list(args)


def lock_files(repo):
    return sorted(os.path.relpath(os.path.join(d, n), repo)
                  for d, _, names in os.walk(repo) for n in names
                  if n == 'lock')


def chunk_files(repo):
    return [name for _, _, names in os.walk(repo / 'chunks')
            for name in names if name not in ('lock', 'key', 'userkeys')]


def wait_for_lock(repo, proc):
    """Until the running backup holds its client lock (or has ended)."""
    deadline = time.monotonic() + 60
    while not lock_files(repo) and proc.poll() is None:
        assert time.monotonic() < deadline, 'the backup took no lock'
        time.sleep(0.01)


@pytest.mark.parametrize('signum, code', [(signal.SIGINT, 255),
                                          (signal.SIGTERM, 143)])
def test_an_interrupted_backup_leaves_the_repository_as_it_was(
        tmp_path, signum, code):
    """The file being read is 64 GiB of holes, so the run is certainly
    still reading when the signal comes; its one chunk (zeros) is
    already stored, so the interrupted run adds nothing."""
    src, repo = backed_up_then_64_gib_of_holes(tmp_path)
    before = subprocess.run(obnam(repo, tmp_path, 'generations'),
                            capture_output=True, timeout=60).stdout
    # No checkpoint: one committed before the signal (a slow machine)
    # would rightly stay, and the generations would differ.
    proc = start(obnam(repo, tmp_path, '--checkpoint=1T', 'backup',
                       str(src)), tmp_path)
    wait_for_lock(repo, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (code, NOTICE % b'obnam')
    assert lock_files(repo) == []
    after = subprocess.run(obnam(repo, tmp_path, 'generations'),
                           capture_output=True, timeout=60)
    assert (after.returncode, after.stdout) == (0, before)
    fsck = subprocess.run(obnam(repo, tmp_path, 'fsck'),
                          capture_output=True, timeout=120)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def test_an_interrupted_encrypted_backup_leaves_no_chunk_behind(
        tmp_path, gpg_home):
    """New chunks are encrypted and written behind the reading; whatever
    the moment of the interruption (also inside the hand-over of a
    chunk), the chunks this run wrote go again, so fsck finds nothing."""
    src, repo = tmp_path / 'src', tmp_path / 'repo'
    src.mkdir()
    (src / 'small').write_bytes(b'first backup\n')
    encrypted = ['--encrypt-with', gpg_home.keys['Alice'], '--gnupghome',
                 gpg_home.path]
    first = subprocess.run(
        obnam(repo, tmp_path, 'backup', str(src), *encrypted),
        capture_output=True, timeout=120)
    assert first.returncode == 0, first.stderr
    with open(src / 'random', 'wb') as f:
        for _ in range(256):
            f.write(os.urandom(1024 * 1024))
    before = chunk_files(repo)
    proc = start(obnam(repo, tmp_path, 'backup', str(src), *encrypted),
                 tmp_path)
    deadline = time.monotonic() + 60
    while len(chunk_files(repo)) < len(before) + 3 and proc.poll() is None:
        assert time.monotonic() < deadline, 'the backup wrote no chunk'
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (255, NOTICE % b'obnam')
    assert lock_files(repo) == []
    fsck = subprocess.run(obnam(repo, tmp_path, 'fsck', *encrypted),
                          capture_output=True, timeout=120)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr


def run_on_terminal_until(argv, ready, typed, deadline=120):
    """Run argv on a new pseudo-terminal; once ready() is true, type
    `typed` on it.  (everything the terminal showed, exit code)."""
    import pty
    import select
    pid, fd = pty.fork()
    if pid == 0:    # pragma: no cover (child)
        try:
            os.execve(argv[0], argv, {'PATH': '/usr/bin:/bin',
                                      'TERM': 'xterm', 'LC_ALL': 'C.UTF-8'})
        finally:
            os._exit(127)
    shown, sent, status = b'', False, None
    end = time.monotonic() + deadline
    while True:
        assert time.monotonic() < end, shown
        if not sent and ready():
            os.write(fd, typed)
            sent = True
        if select.select([fd], [], [], 0.05)[0]:
            try:
                chunk = os.read(fd, 4096)
            except OSError:     # the child closed the terminal
                chunk = b''
            shown += chunk
            if not chunk:
                break
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return shown, os.waitstatus_to_exitcode(status), sent


def test_ctrl_c_typed_on_a_terminal_during_a_backup(tmp_path):
    """As a person does it: the terminal turns ^C into SIGINT for obnam;
    the notice is shown, obnam exits 255, no lock stays, fsck is clean."""
    src, repo = backed_up_then_64_gib_of_holes(tmp_path)
    shown, code, sent = run_on_terminal_until(
        obnam(repo, tmp_path, '--checkpoint=1T', 'backup', str(src)),
        ready=lambda: bool(lock_files(repo)), typed=b'\x03')
    assert sent and code == 255, shown
    assert (NOTICE % b'obnam').rstrip(b'\n') in shown.replace(b'\r', b'')
    assert lock_files(repo) == []
    fsck = subprocess.run(obnam(repo, tmp_path, 'fsck'),
                          capture_output=True, timeout=120)
    assert fsck.returncode == 0, fsck.stdout + fsck.stderr
