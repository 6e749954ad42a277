"""fsck's second process: a second obnam process that opens the same
repository and checks the contents of some of fsck's batches of files
(obnamlib.engine.fsck_content), while the first one walks the
generations and checks the other batches.

Why a process: checking contents is Python work for every chunk (read,
look up, compare) besides the hashing, and Python runs one thread at a
time; the walk and the checks then shared one core.

Only a repository that another process can open by itself, without the
user, has one (Repository.reopening: a local directory; the keys of an
encrypted one are handed over, no gpg runs); the second process takes no
lock (the first holds them all), starts no cipher helper of its own and
writes nothing.  What it finds comes back as the batch's problem lines and what
the first process remembers of a batch (chunks verified, chunks found
damaged, files verified, counters).  If it fails, or cannot start, the
first process checks its batches itself: a check never depends on it.
"""

import collections
import logging
import os
import queue
import subprocess
import sys
import threading

import obnamlib
from obnamlib import errors
from obnamlib.crypto.frame_pipe import Channel, new_pipe, run_child

# Batches sent and not answered, at most: the first process checks the
# next batch itself when this many wait (the two share the work).
BACKLOG = 2

# Seconds the second process has to stop when asked (then it is killed).
STOP_WAIT = 10

_BOOT = ('import sys; sys.path.insert(0, sys.argv[1]); '
         'from obnamlib.engine.fsck_side import serve; '
         'serve(*sys.argv[2:])')

_log = logging.getLogger(__name__)


class SideCheck:
    """The first process's end.  usable(): whether batches may be sent
    (starting the process at the first call where it can run);
    submit(); done(wait): the answered batches, in the order sent."""

    def __init__(self, repo):
        self.repo = repo
        self.proc = None
        self.requests = None
        self.replies = queue.Queue()    # from the reader thread
        self.sent = collections.OrderedDict()   # seq -> the batch's files
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

    def _start(self):
        try:
            reopening = self.repo.reopening()
        except errors.ObnamError as e:    # e.g. a key file it cannot read
            self._fail(e.first_line())
            return False
        if reopening is None or len(os.sched_getaffinity(0)) < 2:
            self.failed = 'not available here'
            return False
        to_child, from_parent = new_pipe()
        to_parent, from_child = new_pipe()
        package_parent = os.path.dirname(os.path.dirname(
            os.path.abspath(obnamlib.__file__)))
        argv = [sys.executable, '-I', '-c', _BOOT, package_parent,
                str(to_child), str(from_child)]
        try:
            self.proc = subprocess.Popen(
                argv, pass_fds=(to_child, from_child),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
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
                         name='obnam-fsck-side', daemon=True).start()
        _log.debug('Started fsck\'s second process %d', self.proc.pid)
        return self._send(('open', reopening))

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

    def submit(self, files, epoch):
        """Send a batch (fsck_content's queued files; epoch: how many
        generations began before it); its sequence number, or None if
        the process failed (then check the batch here)."""
        self.seq += 1
        self.sent[self.seq] = files
        if not self._send(('batch', self.seq, epoch, files)):
            del self.sent[self.seq]
            return None
        return self.seq

    def done(self, wait=False):
        """[(seq, findings, files)] of the batches answered (wait: of all
        sent), in the order sent; findings None: the process failed, and
        the batch's files are to be checked by the caller."""
        answered = []
        while self.sent:
            if self.failed is not None:     # give back what it did not do
                answered.extend((seq, None, files)
                                for seq, files in self.sent.items())
                self.sent.clear()
                break
            try:
                reply = self.replies.get(block=wait)
            except queue.Empty:
                break
            if reply[0] == 'done':
                _, seq, findings = reply
                answered.append((seq, findings, self.sent.pop(seq)))
            elif reply[0] == 'crashed':
                _log.error('fsck\'s second process failed:\n%s', reply[1])
                lines = reply[1].strip().splitlines()
                self._fail(lines[-1] if lines else 'it failed')
            else:
                self._fail('it ended: %s' % reply[1])
        return answered

    def _fail(self, why):
        if self.failed is None:
            self.failed = why
            _log.warning('fsck checks everything in one process: the '
                         'second one failed: %s', why)

    def close(self):
        """Stop the process: at once if batches are still unanswered (the
        check was interrupted; it writes nothing, so nothing is lost)."""
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
    """The second process: open the repository, then check each batch
    sent until 'stop' or the end of the pipe (see frame_pipe.run_child for
    Ctrl-C, logging and failures)."""
    requests = _Inbox(Channel(int(requests_fd)))
    replies = Channel(int(replies_fd))
    run_child(lambda: _serve(requests, replies), replies)


def _serve(requests, replies):
    from obnamlib.engine import fsck_content, fsck_stats
    from obnamlib.repo import factory
    from obnamlib.repo.fsck_checker import storage_checker_for
    kind, reopening = requests.get()
    if kind != 'open':
        raise ValueError('expected open, got %r' % (kind,))
    repo = factory.reopen_repository(reopening)
    content = fsck_content.ContentCheck(
        repo, storage_checker_for(repo, False), fsck_stats.FsckStats(),
        report=None, checking=lambda text: None, counted=lambda: None)
    epoch = 0
    try:
        while True:
            message = requests.get()
            if message[0] == 'stop':
                return
            _, seq, batch_epoch, files = message
            while epoch < batch_epoch:
                content.next_generation()
                epoch += 1
            replies.send(('done', seq, content.check_batch(files)))
    finally:
        content.close()
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
