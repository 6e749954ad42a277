"""A second obnam process beside an engine: it opens the same repository
by itself and does some of the engine's batches of work (fsck's checks,
restore's files) while the first process walks the generation and does
the rest.

Why a process: the work is Python for every chunk and every file besides
the hashing and the system calls, and Python runs one thread at a time;
the walk and the work then shared one core.

Only a repository that another process can open by itself, without the
user, has one (Repository.reopening: a local directory, or sftp:// with
the settings the first process was given, never asking the user; the
keys of an encrypted one are handed over, no gpg runs); the second
process takes no lock (the first holds them all) and starts no cipher
helper of its own.
If it fails, dies, sends something garbled or cannot start, the batches
it did not answer are given back to the first process, which does them
itself: no result ever depends on it.

The work is named by a module (`worker`) with a function
open_worker(repo, setup) giving an object with handle(payload) -> result
and close(); it runs in the second process only.
"""

import collections
import importlib
import logging
import os
import queue
import subprocess
import threading

from obnamlib import errors
from obnamlib.crypto.frame_pipe import (Channel, new_pipe, run_child,
                                        start_child)

# Batches sent and not answered, at most: the first process does the
# next batch itself when this many wait (the two share the work).
BACKLOG = 2

# Seconds the second process has to stop when asked (then it is killed).
STOP_WAIT = 10

_log = logging.getLogger(__name__)


class SideProcess:
    """The first process's end.  usable(): whether a batch may be sent
    (starting the process at the first call where it can run); submit();
    done(wait): the answered batches, in the order sent.  what: the
    work's name in log messages; setup: what open_worker is given (None:
    there is no second process here)."""

    def __init__(self, repo, worker, setup=None, what='the work'):
        self.repo = repo
        self.worker = worker
        self.setup = setup
        self.what = what
        self.proc = None
        self.requests = None
        self.replies = queue.Queue()    # from the reader thread
        self.sent = collections.OrderedDict()   # seq -> what is given back
        self.seq = 0
        self.failed = None      # why it can no longer be used, if so

    def usable(self):
        """Whether a batch may go to the second process now: it runs (or
        could be started) and fewer than BACKLOG batches wait for it."""
        if self.failed is not None:
            return False
        if self.proc is None and not self._start():
            return False
        return len(self.sent) < BACKLOG

    def may_run(self):
        """Whether the second process may be used here: it has work it can
        do, two cores to run on, and has not failed (it may still fail to
        start, or to open the repository)."""
        return self.failed is None and self.setup is not None and \
            len(os.sched_getaffinity(0)) >= 2

    def _start(self):
        try:
            reopening = self.repo.reopening()
        except errors.ObnamError as e:    # e.g. a key file it cannot read
            self._fail(e.first_line())
            return False
        if reopening is None or not self.may_run():
            self.failed = 'not available here'
            return False
        to_child, from_parent = new_pipe()
        to_parent, from_child = new_pipe()
        try:
            self.proc = start_child(__name__, (to_child, from_child),
                                    (to_child, from_child))
        except OSError as e:
            os.close(from_parent)
            os.close(to_parent)
            self.failed = str(e)
            return False
        finally:
            os.close(to_child)
            os.close(from_child)
        self.requests = Channel(from_parent)
        threading.Thread(target=self._receive, args=(Channel(to_parent),),
                         name='obnam-side', daemon=True).start()
        _log.debug('Started a second process %d for %s', self.proc.pid,
                   self.what)
        return self._send(('open', self.worker, reopening, self.setup))

    def _receive(self, replies):
        """The reader thread: every reply into the queue (so that neither
        process ever waits on a full pipe), then why it ended."""
        try:
            while True:
                self.replies.put(replies.recv())
        except Exception as e:  # the end of the pipe, or a garbled reply
            self.replies.put(('gone', str(e) or type(e).__name__))
        finally:
            replies.close()

    def _send(self, message):
        try:
            self.requests.send(message)
        except (OSError, ValueError) as e:
            self._fail('cannot send it work: %s' % e)
            return False
        return True

    def submit(self, payload, kept=None):
        """Send a batch; kept (default: the payload) is what done() gives
        back with its result.  Its sequence number, or None if the
        process failed (then do the batch here)."""
        self.seq += 1
        self.sent[self.seq] = payload if kept is None else kept
        if not self._send(('batch', self.seq, payload)):
            del self.sent[self.seq]
            return None
        return self.seq

    def done(self, wait=False):
        """[(seq, result, kept)] of the batches answered (wait: of all
        sent), in the order sent; result None: the process failed, and
        the batch is the caller's to do."""
        answered = []
        while self.sent:
            if self.failed is not None:     # give back what it did not do
                answered.extend((seq, None, kept)
                                for seq, kept in self.sent.items())
                self.sent.clear()
                break
            try:
                reply = self.replies.get(block=wait)
            except queue.Empty:
                break
            if reply[0] == 'done':
                _, seq, result = reply
                answered.append((seq, result, self.sent.pop(seq)))
            elif reply[0] == 'crashed':
                _log.error('The second process for %s failed:\n%s',
                           self.what, reply[1])
                lines = reply[1].strip().splitlines()
                self._fail(lines[-1] if lines else 'it failed')
            else:
                self._fail('it ended: %s' % reply[1])
        return answered

    def _fail(self, why):
        if self.failed is None:
            self.failed = why
            _log.warning('%s goes on in one process: the second one '
                         'failed: %s', self.what, why)

    def close(self):
        """Stop the process: at once if batches are still unanswered (the
        run was interrupted; the caller cleans up after them)."""
        if self.proc is None:
            return
        if self.sent:
            self.proc.kill()
        elif self.failed is None:
            self._send(('stop',))
        if self.requests is not None:
            self.requests.close()
            self.requests = None
        try:
            self.proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        if self.failed is None:
            self.failed = 'it was stopped'


def serve(requests_fd, replies_fd):
    """The second process: open the repository and the worker, then hand
    it each batch sent until 'stop' or the end of the pipe (see
    frame_pipe.run_child for Ctrl-C, logging and failures)."""
    requests = _Inbox(Channel(int(requests_fd)))
    replies = Channel(int(replies_fd))
    run_child(lambda: _serve(requests, replies), replies)


def _serve(requests, replies):
    from obnamlib.repo import factory
    kind, worker_module, reopening, setup = requests.get()
    if kind != 'open':
        raise ValueError('expected open, got %r' % (kind,))
    repo = factory.reopen_repository(reopening)
    try:
        worker = importlib.import_module(worker_module).open_worker(
            repo, setup)
        try:
            while True:
                message = requests.get()
                if message[0] == 'stop':
                    return
                _, seq, payload = message
                replies.send(('done', seq, worker.handle(payload)))
        finally:
            worker.close()
    finally:
        repo.close()


class _Inbox:
    """Requests read by a thread as they come, so that the first process
    never waits for this one to finish a batch before it can send the
    next (nor both wait on full pipes)."""

    def __init__(self, channel):
        self.queue = queue.Queue()
        self.channel = channel
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            while True:
                message = self.channel.recv()
                self.queue.put(message)
                if message[0] == 'stop':
                    return
        except (OSError, EOFError, ValueError):
            self.queue.put(('stop',))

    def get(self):
        return self.queue.get()
