"""Run one step's shell script, with a time limit.

Each step runs in its own session (so in its own process group): on
timeout or interrupt the whole group is killed, and nothing a step
starts can read the runner's terminal.  As in cmdtest's yarn, a step
is over only when the shell has exited *and* its stdout and stderr are
closed (a background process that keeps them open holds the step);
its stdin is an empty pipe.

Background processes a step leaves behind (a FUSE server, sshd) live on
in its process group for the later steps; the group ids of a running
scenario's steps are remembered until the scenario ends, so that an
interrupted run can stop them too.
"""

import dataclasses
import os
import signal
import subprocess
import threading

KILL_GRACE = 2.0      # seconds between SIGTERM and SIGKILL
DRAIN_GRACE = 2.0     # seconds to collect output after the kill

_live = set()          # Popen objects of steps running now
_groups = set()        # process groups of running scenarios' steps
_live_lock = threading.Lock()
_interrupted = threading.Event()


@dataclasses.dataclass
class StepOutcome:
    exit_code: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    group: int = None
    held_open: bool = False   # the shell had exited; its output had not


def run_script(argv, env, cwd, timeout):
    """Run argv; return a StepOutcome (timeout None means no limit)."""
    if _interrupted.is_set():
        return StepOutcome(-signal.SIGINT, b'',
                           b'not started: the run was interrupted\n')
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
    with _live_lock:
        _live.add(proc)
        _groups.add(proc.pid)
    try:
        outcome = _wait(proc, timeout)
        outcome.group = proc.pid
        return outcome
    except BaseException:
        _signal_group(proc.pid, signal.SIGKILL)
        raise
    finally:
        with _live_lock:
            _live.discard(proc)


def _wait(proc, timeout):
    try:
        out, err = proc.communicate(timeout=timeout)
        return StepOutcome(proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        held_open = proc.poll() is not None
        kill_group(proc)
        out, err = _drain(proc)
        return StepOutcome(_exit_code(proc), out, err, timed_out=True,
                           held_open=held_open)


def _drain(proc):
    """Collect what the killed step wrote, without waiting for escapees."""
    try:
        return proc.communicate(timeout=DRAIN_GRACE)
    except subprocess.TimeoutExpired as e:
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
        return e.output or b'', e.stderr or b''


def _exit_code(proc):
    try:
        return proc.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        return -signal.SIGKILL


def kill_group(proc):
    """SIGTERM the step's process group, then SIGKILL what is left."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def forget_groups(groups):
    """A scenario has ended: its steps' group ids may be reused now."""
    with _live_lock:
        _groups.difference_update(groups)


def kill_all_running():
    """Kill running steps and what running scenarios left in the
    background; start no more steps."""
    _interrupted.set()
    with _live_lock:
        procs = list(_live)
        groups = list(_groups)
    for proc in procs:
        _signal_group(proc.pid, signal.SIGKILL)
    for group in groups:
        _signal_group(group, signal.SIGTERM)
