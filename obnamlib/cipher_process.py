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
goes on.

The helper runs `serve` with the parent's interpreter and package.  Keys
reach it over the pipe, never on its command line or in its environment.
Errors never come from here as new messages: a create that failed is
reported with the exception the child met, and a read-ahead that failed
is simply not used, so the caller's own read reports it.
"""

import collections
import fcntl
import logging
import os
import pickle
import select
import struct
import signal
import subprocess
import sys
import threading
import traceback

from obnamlib import errors, filters

# Requests of one read-ahead still unanswered, at most: their paths fit in
# the request pipe, so sending one never waits for the child.
MAX_AHEAD = 256

_log = logging.getLogger(__name__)

_PIPE_BYTES = 1 << 20
# Bytes of requests the helper reads ahead of its work, at most (_Inbox).
INBOX_BYTES = 8 << 20
_IOV_MAX = 512
_F_SETPIPE_SZ = getattr(fcntl, 'F_SETPIPE_SZ', 1031)

_BOOT = ('import sys; sys.path.insert(0, sys.argv[1]); '
         'from obnamlib.cipher_process import serve; serve(*sys.argv[2:])')


class CipherProcessFailed(errors.ObnamError):
    code = 'RD910FX'
    msg = 'The encryption helper process failed: {reason}'


def seal(cipher, parts, passphrase):
    """The stored bytes of an encrypted file whose unencrypted tag chain
    is `parts` (filters.unencrypted_parts), as a view of this thread's
    scratch buffer: write them out before sealing the next file."""
    return cipher.encrypt_in_scratch(parts, passphrase,
                                     lead=filters.ENCRYPT1_PREFIX)


def can_seal(cipher):
    return hasattr(cipher, 'encrypt_in_scratch') and \
        hasattr(cipher, 'encrypted_size')


def sealed_size(cipher, parts, passphrase):
    """len(seal(cipher, parts, passphrase)), without encrypting."""
    return len(filters.ENCRYPT1_PREFIX) + cipher.encrypted_size(
        sum(len(part) for part in parts), passphrase)


class CipherProcess:
    """The parent's end: started at first use, stopped by close()."""

    def __init__(self, root):
        self.root = root
        self.proc = None
        self.requests = None
        self.replies = None
        self.key_ids = {}         # passphrase -> id the child knows it by
        self.ahead = {}           # path -> None (asked), data, or False
        self.failure_noticed = False
        self.broken = None        # why the child cannot be used
        self.used = False         # whether it was sent any work

    @property
    def started(self):
        return self.proc is not None

    def start(self):
        """Start the child now (it boots while the caller goes on); a
        failure to start is kept for the first use."""
        if self.proc is None and self.broken is None:
            try:
                self._start()
            except CipherProcessFailed:
                pass

    # --- writing -----------------------------------------------------------

    def create(self, path, parts, passphrase=None):
        """Have the child create path exclusively, with the parts sealed
        with passphrase (None: the parts are the stored bytes)."""
        self._forget_ahead()
        key_id = None if passphrase is None else self._key_id(passphrase)
        self._send(('create', path, key_id, len(parts)), parts)
        self.used = True

    def failure_reported(self):
        """Whether a create failed since the last sync (never waits)."""
        if self.broken is None and self.started:
            try:
                while self.replies.poll():
                    self._receive()
            except (OSError, EOFError) as e:
                self._break(e)
        return self.failure_noticed or self.broken is not None

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
                return [(path, _rebuilt(error)) for path, error in reply]

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
        """The contents read ahead for path, or None (not asked, or the
        read failed: the caller reads it and reports).  Older requests
        than path's are dropped: reads follow the order of asking."""
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
            data = self.ahead.pop(asked)
            if asked == path:
                return data or None

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

    def _send(self, message, parts=()):
        if self.proc is None:
            self._start()
        self._call(self.requests.send, message, parts)

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
        if kind == 'read':
            data = self.replies.frame() if reply[2] else False
            if reply[1] in self.ahead:
                self.ahead[reply[1]] = data
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

    def _break(self, error):
        if self.broken is None:
            code = self.proc.poll() if self.proc is not None else None
            self.broken = ('it ended (exit code %s)' % code
                           if code is not None else str(error))

    def _start(self):
        if self.broken is not None:
            raise CipherProcessFailed(reason=self.broken)
        to_child, from_parent = _pipe()
        to_parent, from_child = _pipe()
        package_parent = os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))
        argv = [sys.executable, '-I', '-c', _BOOT, package_parent,
                self.root, str(to_child), str(from_child)]
        try:
            self.proc = subprocess.Popen(
                argv, pass_fds=(to_child, from_child),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except OSError as e:
            for fd in (to_child, from_parent, to_parent, from_child):
                os.close(fd)
            self.broken = str(e)
            raise CipherProcessFailed(reason=self.broken)
        finally:
            if self.proc is not None:
                os.close(to_child)
                os.close(from_child)
        self.requests = _Channel(from_parent)
        self.replies = _Channel(to_parent)
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
        self.proc.wait()    # it ends at 'stop', or when its pipes close
        self.proc = None
        self.broken = self.broken or 'it was stopped'


class _Channel:
    """One direction of a pipe, carrying frames: a 4-byte length, then
    that many bytes (a pickled message, or data that goes with one).  A
    message and its data are written with one system call; frames are
    read through a buffer, so that small ones cost no system call each,
    and a big one is read straight into its own bytes."""

    BUFFER = 65536

    def __init__(self, fd):
        self.fd = fd
        self.buf = b''
        self.pos = 0

    def fileno(self):
        return self.fd

    def send(self, message, parts=()):
        frames = []
        for data in [pickle.dumps(message)] + list(parts):
            if len(data) > 0x7fffffff:
                raise ValueError('a part of over 2 GiB')
            frames += [struct.pack('!I', len(data)), data]
        _write_all(self.fd, frames)

    def recv(self):
        return pickle.loads(self.frame())

    def frame(self):
        self._fill(4)
        size, = struct.unpack_from('!I', self.buf, self.pos)
        self.pos += 4
        if len(self.buf) - self.pos >= size:
            data = self.buf[self.pos:self.pos + size]
            self.pos += size
            return data
        pieces = [self.buf[self.pos:]]
        got = len(pieces[0])
        self.buf, self.pos = b'', 0
        while got < size:
            more = os.read(self.fd, size - got)
            if not more:
                raise EOFError('the other end closed the pipe')
            pieces.append(more)
            got += len(more)
        return b''.join(pieces) if len(pieces) > 2 or pieces[0] \
            else pieces[1]

    def _fill(self, size):
        while len(self.buf) - self.pos < size:
            more = os.read(self.fd, self.BUFFER)
            if not more:
                raise EOFError('the other end closed the pipe')
            self.buf = self.buf[self.pos:] + more
            self.pos = 0

    def poll(self, timeout=0):
        """Whether a frame has started to arrive (waits up to timeout s)."""
        if self.pos < len(self.buf):
            return True
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        return bool(poller.poll(timeout * 1000))

    def close(self):
        os.close(self.fd)


def _write_all(fd, frames):
    """os.writev until every byte of frames is written."""
    frames = [memoryview(frame).cast('B') for frame in frames]
    while frames:
        written = os.writev(fd, frames[:_IOV_MAX])
        while frames and written >= len(frames[0]):
            written -= len(frames[0])
            frames.pop(0)
        if written:
            frames[0] = frames[0][written:]


def _pipe():
    """(read end, write end), with room for a whole chunk if the kernel
    allows it (fewer wake-ups per chunk)."""
    read_end, write_end = os.pipe()
    try:
        fcntl.fcntl(write_end, _F_SETPIPE_SZ, _PIPE_BYTES)
    except OSError:
        pass
    return read_end, write_end


def _described(error):
    """An exception as plain data the parent can raise again."""
    if isinstance(error, OSError):
        return ('os', error.errno, error.strerror, error.filename)
    return ('other', None, str(error), None)


def _rebuilt(described):
    kind, number, text, filename = described
    if kind == 'os' and number is not None:
        return OSError(number, text, filename)
    return CipherProcessFailed(reason=text)


# --- the child ---------------------------------------------------------------

def serve(root, requests_fd, replies_fd):
    """The child: requests in order until 'stop' or end of input.  Ctrl-C
    is the parent's to handle (it stops us); anything unexpected goes to
    the parent's log, not to the terminal."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests = _Channel(int(requests_fd))
    replies = _Channel(int(replies_fd))
    try:
        _serve(root, requests, replies)
    except (BrokenPipeError, EOFError):
        pass        # the parent stopped listening: nobody to tell
    except Exception:
        try:
            replies.send(('crashed', traceback.format_exc()))
        except OSError:
            pass
        os._exit(1)
    os._exit(0)     # nothing is buffered: skip the interpreter's teardown


def _serve(root, requests, replies):
    from obnamlib import openpgp, vfs_local
    server = _Server(vfs_local.LocalFS(root), openpgp.SymmetricCipher(),
                     replies)
    inbox = _Inbox(requests)
    while True:
        request, parts = inbox.get()
        if request[0] == 'stop':
            return
        if request[0] == 'create':
            server.create(request[1], request[2], parts)
        else:
            getattr(server, request[0])(*request[1:])


class _Inbox:
    """The child's requests, read from the pipe by a thread of its own up
    to INBOX_BYTES ahead of the work: the pipe holds only about one chunk,
    so without this a run of big chunks to encrypt would stop the parent
    whenever the child is a chunk behind."""

    def __init__(self, requests, limit=None):
        self.requests = requests
        self.limit = INBOX_BYTES if limit is None else limit
        self.items = collections.deque()
        self.bytes = 0
        self.ready = threading.Condition()
        threading.Thread(target=self._fill, name='inbox', daemon=True).start()

    def get(self):
        """(request, parts) in the order they were sent; ('stop',) at the
        end of input; a failure of the reading thread is raised here."""
        with self.ready:
            while not self.items:
                self.ready.wait()
            request, parts = self.items.popleft()
            self.bytes -= _size(parts)
            self.ready.notify_all()
        if isinstance(request, BaseException):
            raise request
        return request, parts

    def _fill(self):
        while True:
            try:
                request = self.requests.recv()
                parts = [self.requests.frame()
                         for _ in range(request[3])] \
                    if request[0] == 'create' else []
            except EOFError:
                request, parts = ('stop',), []
            except BaseException as e:
                request, parts = e, []
            self._put(request, parts)
            if not isinstance(request, tuple) or request[0] == 'stop':
                return

    def _put(self, request, parts):
        size = _size(parts)
        with self.ready:
            while self.bytes and self.bytes + size > self.limit:
                self.ready.wait()
            self.items.append((request, parts))
            self.bytes += size
            self.ready.notify_all()


def _size(parts):
    return sum(len(part) for part in parts)


class _Server:

    def __init__(self, fs, cipher, replies):
        self.fs = fs
        self.cipher = cipher
        self.replies = replies
        self.passphrases = {}
        self.failures = []

    def key(self, key_id, passphrase):
        self.passphrases[key_id] = passphrase

    def create(self, path, key_id, parts):
        try:
            if key_id is None:
                data = b''.join(parts)
            else:
                data = seal(self.cipher, parts, self.passphrases[key_id])
            self.fs.create_file(path, data)
        except Exception as e:
            if not self.failures:
                self.replies.send(('failed',))
            self.failures.append((path, _described(e)))

    def sync(self):
        self.replies.send(('synced', self.failures))
        self.failures = []

    def read(self, wanted):
        for path, key_id in wanted:
            self._read(path, self.passphrases[key_id])

    def _read(self, path, passphrase):
        try:
            data = filters.unwrap(
                self.fs.read_file(path),
                lambda data: self.cipher.decrypt_in_scratch(data, passphrase),
                filename=path, copy=False)
        except Exception:
            self.replies.send(('read', path, False))
            return
        self.replies.send(('read', path, True), [data])
