"""Ctrl-C and SIGTERM during a run.

A person who presses Ctrl-C, or a system that stops obnam with SIGTERM
(shutdown, systemd, a cron wrapper's timeout), must see at once that obnam
heard it: a frozen progress line looks like a hang.  So the first signal
writes one line on stderr and then raises an exception in the main
thread, which unwinds through every `with` block: the repository's
uncommitted work is discarded and its locks are released, as after any
other error.  A second signal while that cleanup runs stops the process
at once; a lock it leaves behind is broken by the next run on this host,
since its holder is gone.
"""

import contextlib
import os
import signal
import threading

INTERRUPTED_EXIT = 255      # Obnam 1.x's exit code after Ctrl-C
TERMINATED_EXIT = 128 + signal.SIGTERM


class Terminated(BaseException):
    """SIGTERM arrived: raised like KeyboardInterrupt, so that cleanup
    code runs and no `except Exception` takes it for an ordinary error."""


def exit_code(exception):
    """The exit code for an interruption, or None if it is none."""
    if isinstance(exception, KeyboardInterrupt):
        return INTERRUPTED_EXIT
    if isinstance(exception, Terminated):
        return TERMINATED_EXIT
    return None


@contextlib.contextmanager
def announced(progname, stderr):
    """Within the block, SIGINT and SIGTERM are announced on `stderr` and
    end the run by exception; the previous handlers come back after it.
    Signal handlers exist only in the main thread: elsewhere this does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signals}
    heard = []

    def on_signal(signum, frame):
        heard.append(signum)
        if len(heard) > 1:
            _say(stderr, '%s: stopped at once\n' % progname)
            os._exit(TERMINATED_EXIT if signum == signal.SIGTERM
                     else INTERRUPTED_EXIT)
        _say(stderr, '%s: interrupted, cleaning up (press Ctrl-C again to '
             'stop at once)\n' % progname)
        if signum == signal.SIGTERM:
            raise Terminated()
        raise KeyboardInterrupt()

    for signum in signals:
        signal.signal(signum, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _say(stderr, text):
    """One line on stderr, on a line of its own where stderr is a
    terminal (a progress line or the echoed ^C may be on it)."""
    try:
        if stderr.isatty():
            text = '\n' + text
        stderr.write(text)
        stderr.flush()
    except (OSError, ValueError):
        pass
