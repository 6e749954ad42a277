"""Running one benchmarked command and recording what it cost.

A Measurement is what one tool spent on one step: wall time, CPU time of
its whole process tree (from wait4), peak RSS, the repository size after
the step, and, for remote repositories, the CPU time the server side
spent.  A failed command is a Measurement too, carrying the error, so one
broken tool never stops the run.
"""

import os
import signal
import stat
import subprocess
import tempfile
import threading
import time

TAIL = 1500     # characters of a failed command's output worth keeping
timeout = 3600  # seconds one command may take; set by --timeout
DROP_CACHES = '/proc/sys/vm/drop_caches'


class Measurement:
    """The cost of one step of one tool, or why it has none."""

    def __init__(self, command, wall=None, cpu=None, rss_kib=None,
                 repo_bytes=None, server_cpu=None, error=None, same_as=None,
                 restored_bytes=None):
        self.command = command
        self.wall = wall
        self.cpu = cpu
        self.rss_kib = rss_kib
        self.repo_bytes = repo_bytes
        self.server_cpu = server_cpu
        self.error = error
        self.same_as = same_as
        self.restored_bytes = restored_bytes
        self.wall_min = None    # over --rounds, set by lib_rounds
        self.wall_max = None

    @property
    def ok(self):
        return self.error is None and self.same_as is None

    def as_dict(self):
        return {key: value for key, value in vars(self).items()
                if value is not None}


class CommandFailed(Exception):
    """A benchmarked or setup command exited non-zero or could not start."""


def run_measured(argv, env=None, cwd=None):
    """Run argv; (wall s, cpu s, peak RSS KiB) of its process tree.

    Raises CommandFailed with the tail of its output if it fails or runs
    longer than `timeout` seconds (then its process group is killed)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        try:
            # Its own process group, so a hung tool can be killed whole.
            child = subprocess.Popen(argv, env=env, cwd=cwd,
                                     stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=err, start_new_session=True)
        except OSError as e:
            raise CommandFailed('cannot run %s: %s' % (argv[0], e))
        status, usage, timed_out = _wait(child.pid)
        wall = time.monotonic() - started
        code = os.waitstatus_to_exitcode(status)
        if timed_out:
            raise CommandFailed('timed out after %g s (killed)\ncommand: '
                                '%s\n%s' % (timeout, ' '.join(argv),
                                            _tail(out, err)))
        if code != 0:
            tail = _tail(out, err)
            lines = tail.splitlines() or ['(no output)']
            raise CommandFailed('exit %d: %s\ncommand: %s\n%s' % (
                code, lines[-1], ' '.join(argv), tail))
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def _wait(pid):
    """wait4 for pid: (status, rusage of its tree, whether it was killed
    for taking too long).  Interrupted (^C), it kills the tree first."""
    fired = threading.Event()

    def kill():
        fired.set()
        _kill_group(pid)

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        # wait4: the child's usage plus that of the children it waited for.
        _, status, usage = os.wait4(pid, 0)
    except BaseException:
        _kill_group(pid)
        os.waitpid(pid, 0)
        raise
    finally:
        timer.cancel()
    return status, usage, fired.is_set()


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_quietly(argv, env=None, cwd=None):
    """Run a setup command (not measured); CommandFailed if it fails."""
    run_measured(argv, env=env, cwd=cwd)


def _tail(*files):
    text = ''
    for f in files:
        f.seek(0)
        text += f.read().decode(errors='replace')
    return text[-TAIL:].strip()


def _files_below(*trees):
    """The path of every non-directory below trees (none for a tree that
    does not exist)."""
    for tree in trees:
        for dirpath, _, names in os.walk(tree):
            for name in names:
                yield os.path.join(dirpath, name)


def tree_bytes(path):
    """Apparent size of every file below path (0 if it does not exist)."""
    total = 0
    for name in _files_below(path):
        try:
            total += os.lstat(name).st_size
        except FileNotFoundError:
            pass
    return total


def read_into_page_cache(*trees):
    """Read every regular file below trees once (symbolic links are not
    followed, unreadable files skipped); the bytes read.  obnam and borg
    drop what a backup read from the page cache and restic does not, so
    without this a tool's speed would depend on which tool ran before it."""
    return sum(_read_through(path) for path in _files_below(*trees))


def _read_through(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return 0
    total = 0
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return 0
        while True:
            data = os.read(fd, 1 << 20)
            if not data:
                return total
            total += len(data)
    except OSError:
        return total
    finally:
        os.close(fd)


def cannot_drop_page_cache():
    """Why --cold cannot work here, or None: dropping the page cache takes
    root and a writable /proc/sys.  Opening the file drops nothing."""
    try:
        os.close(os.open(DROP_CACHES, os.O_WRONLY))
    except OSError as e:
        return ('--cold drops the page cache by writing to %s, which this '
                'process cannot (%s): run as root, on a machine whose '
                '/proc/sys is writable' % (DROP_CACHES, e.strerror))
    return None


def drop_page_cache():
    """Write back what is dirty, then drop the clean page cache, dentries
    and inodes of the whole machine (--cold): the next command reads
    corpus, repository and its own program files from the disk."""
    os.sync()
    try:
        with open(DROP_CACHES, 'w') as f:
            f.write('3\n')
    except OSError as e:
        raise CommandFailed('cannot drop the page cache: %s' % e)
