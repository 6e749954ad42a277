"""A second process for the costly half of encrypted repository I/O on a
local disk: encrypting and creating chunk files (backup), and reading and
decrypting files asked for ahead (restore, verify, fsck).

Why a process and not a thread: AES-CFB and SHA-1 of a backup's data cost
about as much CPU as all the rest of a backup's work.  OpenSSL releases
the GIL, but a thread making a few calls per chunk must take the GIL back
after each one, and with the backup busy in Python every hand-over costs
a wake-up (on a virtual machine an inter-processor interrupt): measured on
a 100 MiB backup, such a thread finished later than encrypting in line.
A process shares no lock: the parent copies each chunk into a pipe and
goes on.  What the helper reads and decrypts comes back through shared
memory (obnamlib.crypto.reply_ring), with a short message in a pipe.

The helper (obnamlib.crypto.cipher_helper) runs with the parent's
interpreter and package.  Keys reach it over the pipe, never on its
command line or in its environment.
Errors never come from here as new messages: a create that failed is
reported with the exception the child met, and a read-ahead that failed
is simply not used, so the caller's own read reports it.
"""

import logging
import os
import subprocess

from obnamlib import errors
from obnamlib.crypto import reply_ring
from obnamlib.crypto.frame_pipe import Channel, new_pipe, start_child
# The helper seals with them too; the storage layer (repo_fs) calls them here.
from obnamlib.crypto.tag_chain import (  # noqa: F401
    can_seal, seal, sealed_size)

# Read-ahead requests unanswered at once, at most: the replies waiting
# to be taken are bounded by this many files.
MAX_AHEAD = 256
# Seconds close() waits for the child to end before killing it (one stuck,
# e.g. in a hung network file system, must not keep obnam from exiting).
STOP_WAIT = 60

_log = logging.getLogger(__name__)


class CipherProcessFailed(errors.ObnamError):
    code = 'RD910FX'
    msg = 'The encryption helper process failed: {reason}'


class CipherProcess:
    """The parent's end: started at first use, stopped by close()."""

    def __init__(self, root):
        self.root = root
        self.proc = None
        self.requests = None
        self.replies = None
        self.key_ids = {}         # passphrase -> id the child knows it by
        self.ahead = {}           # path -> None (asked), (data, stored
                                  # size), or False (could not be read)
        self.failure_noticed = False
        self.broken = None        # why the child cannot be used
        self.used = False         # whether it was sent any work
        self.booted = False       # the child said it is ready
        self.start_failed = False
        self.ring = None          # reply_ring.RingReader, if shared

    @property
    def started(self):
        return self.proc is not None

    @property
    def could_not_start(self):
        """Whether starting the child failed (its users then do its work
        in line: a machine where it cannot run still gets backups)."""
        return self.start_failed

    def start(self):
        """Start the child now (it boots while the caller goes on); a
        failure to start is kept for the first use."""
        if self.proc is None and self.broken is None:
            try:
                self._start()
            except CipherProcessFailed:
                pass

    def ready(self):
        """Whether the child has booted (it says so first thing); never
        waits.  Before that, work given to it waits for the boot."""
        if not self.booted and self.proc is not None:
            self._drain()
        return self.booted

    # --- writing -----------------------------------------------------------

    def create(self, path, parts, passphrase=None):
        """Have the child create path exclusively, with the parts sealed
        with passphrase (None: the parts are the stored bytes).  What was
        read ahead is taken first: no data is ever queued behind a reply
        that waits for room in the ring (reply_ring's no-deadlock rule).
        A small create is held (Channel.send's hold) and written with the
        next ones: one system call, and one wake-up of the child, for
        several; any other request, sync and close write it."""
        self._forget_ahead()
        key_id = None if passphrase is None else self._key_id(passphrase)
        self._send(('create', path, key_id, len(parts)), parts, hold=True)
        self.used = True

    def failure_reported(self):
        """Whether a create failed since the last sync (never waits): one
        that was written to the child (small creates are held and written
        together, see create)."""
        if self.started:
            self._drain()
        return self.failure_noticed or self.broken is not None

    def _drain(self):
        """Handle the replies that have come, without waiting."""
        if self.broken is not None:
            return
        try:
            while self.replies.poll():
                self._receive()
        except (OSError, EOFError) as e:
            self._break(e)

    def sync(self):
        """Wait until every create sent so far is done: [(path, error)]
        for those that failed."""
        if not self.started:
            return []
        self._send(('sync',))
        while True:
            reply = self._call(self._receive)
            if reply is not None:
                self.failure_noticed = False
                return [(path, rebuilt_error(error)) for path, error in reply]

    # --- reading ahead -----------------------------------------------------

    def read_ahead(self, wanted):
        """Ask, in one message, for the contents of [(path, passphrase)]
        (unwrapped with that key) to be ready for take(); beyond
        MAX_AHEAD outstanding requests the rest is not asked for."""
        if self.broken is not None:
            return
        asked = []
        for path, passphrase in wanted:
            if len(self.ahead) >= MAX_AHEAD:
                break
            if path not in self.ahead:
                try:
                    asked.append((path, self._key_id(passphrase)))
                except CipherProcessFailed:
                    self.ahead.clear()
                    return
                self.ahead[path] = None
        if asked:
            try:
                self._send(('read', asked))
            except CipherProcessFailed:
                self.ahead.clear()
                return
            self.used = True

    def take(self, path):
        """(contents, stored size) of path read ahead, or None (not asked,
        or the read failed: the caller reads it and reports).  Older
        requests than path's are dropped: reads follow the order of
        asking."""
        if path not in self.ahead:
            return None
        try:
            while self.ahead[path] is None:
                self._receive()
        except (OSError, EOFError) as e:
            self._break(e)
            self.ahead.clear()
            return None
        while True:     # replies come in order: the older are stale
            asked = next(iter(self.ahead))
            got = self.ahead.pop(asked)
            if asked == path:
                return got or None

    def _forget_ahead(self):
        """Receive and drop every read-ahead reply still to come: the
        child must never be blocked on a reply while we send it data."""
        try:
            while any(data is None for data in self.ahead.values()):
                self._receive()
        except (OSError, EOFError) as e:
            self._break(e)
        self.ahead.clear()

    # --- the pipes ---------------------------------------------------------

    def _key_id(self, passphrase):
        key_id = self.key_ids.get(passphrase)
        if key_id is None:
            key_id = len(self.key_ids)
            self._send(('key', key_id, passphrase))
            self.key_ids[passphrase] = key_id
        return key_id

    def _send(self, message, parts=(), hold=False):
        if self.proc is None:
            self._start()
        self._call(self.requests.send, message, parts, hold)

    def _call(self, method, *args):
        if self.broken is not None:
            raise CipherProcessFailed(reason=self.broken)
        try:
            return method(*args)
        except (OSError, EOFError) as e:
            self._break(e)
            raise CipherProcessFailed(reason=self.broken)

    def _receive(self):
        """Handle one reply; a sync's list of failures is returned."""
        reply = self.replies.recv()
        kind = reply[0]
        if kind == 'ready':
            self.booted = True
        elif kind == 'read':
            self._read_reply(*reply[1:])
        elif kind == 'failed':
            self.failure_noticed = True
        elif kind == 'synced':
            return reply[1]
        elif kind == 'crashed':
            _log.error('The cipher helper process failed:\n%s', reply[1])
            lines = reply[1].strip().splitlines()
            if self.broken is None:
                self.broken = 'it failed: %s' % (lines[-1] if lines else '?')
            raise EOFError(self.broken)
        return None

    def _read_reply(self, path, stored_size, *in_ring):
        """A file read ahead, its contents in the ring (in_ring: where)
        or in the frame that follows; stored_size None: it failed."""
        if stored_size is None:
            got = False
        elif in_ring:
            data, release = self.ring.take(*in_ring)
            if release is not None:
                try:
                    self.requests.send(('release', release))
                except OSError:
                    pass    # it is gone: its crash report may follow
            got = (data, stored_size)
        else:
            got = (self.replies.frame(), stored_size)
        if path in self.ahead:
            self.ahead[path] = got

    def _break(self, error):
        """The child is gone: say why, with its own crash report if it
        sent one before the pipe failed us."""
        if self.broken is None and self.proc is not None:
            try:
                while self.broken is None and self.replies.poll():
                    self._receive()     # 'crashed' sets broken and logs
            except Exception:   # the rest of its replies do not matter
                pass
        if self.broken is None:
            code = self.proc.poll() if self.proc is not None else None
            self.broken = ('it ended (exit code %s)' % code
                           if code is not None else str(error))

    def _start(self):
        if self.broken is not None:
            raise CipherProcessFailed(reason=self.broken)
        to_child, from_parent = new_pipe()
        to_parent, from_child = new_pipe()
        ring = reply_ring.new_ring()
        child_fds = (to_child, from_child) + (() if ring is None
                                              else (ring[0],))
        try:
            self.proc = start_child('obnamlib.crypto.cipher_helper',
                                    (self.root,) + child_fds, child_fds)
        except OSError as e:
            for fd in (from_parent, to_parent):
                os.close(fd)
            self.broken = str(e)
            self.start_failed = True
            raise CipherProcessFailed(reason=self.broken)
        finally:
            for fd in child_fds:
                os.close(fd)
            if ring is not None and self.proc is None:
                ring[1].close()
        if ring is not None:
            self.ring = reply_ring.RingReader(ring[1])
        self.requests = Channel(from_parent)
        self.replies = Channel(to_parent)
        _log.debug('Started the cipher helper process %d for %s',
                   self.proc.pid, self.root)

    def close(self):
        """Stop the child (it finishes what it was sent first)."""
        if self.proc is None:
            return
        if not self.used:
            self.proc.kill()        # it had nothing to do: no wait
        try:
            if self.broken is None and self.used:
                self.requests.send(('stop',))
        except (OSError, EOFError):
            pass
        self.requests.close()
        self.replies.close()
        try:    # it ends at 'stop', or when its pipes close
            self.proc.wait(STOP_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self.broken = self.broken or 'it was stopped'
        if self.ring is not None:
            self.ring.close()
            self.ring = None


def rebuilt_error(described):
    """The exception a helper reported (cipher_helper.described_error)."""
    kind, number, text, filename = described
    if kind == 'os' and number is not None:
        return OSError(number, text, filename)
    return CipherProcessFailed(reason=text)
