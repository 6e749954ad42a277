"""The helper process of obnamlib.crypto.cipher_process, run as
`python3 -I -c ... serve(root, requests_fd, replies_fd[, ring_fd])`:
it seals and creates files, and reads and unwraps files ahead, for one
repository root, in the order asked.  It imports as little as it needs:
it boots while the parent works."""

import collections
import concurrent.futures
import mmap
import os
import threading

from obnamlib.crypto import reply_ring
from obnamlib.crypto.frame_pipe import Channel, run_child
from obnamlib.crypto.tag_chain import seal, unwrap

# Bytes of requests the helper reads ahead of its work, at most (_Inbox).
INBOX_BYTES = 8 << 20
# Files given to the creators (_creators) and not yet created, at most.
CREATES_WAITING = 64


def serve(root, requests_fd, replies_fd, ring_fd=None):
    """The child: requests in order until 'stop' or end of input (see
    frame_pipe.run_child for Ctrl-C, logging and failures).  ring_fd: the
    shared memory for read replies (obnamlib.crypto.reply_ring), if the
    parent made one."""
    requests = Channel(int(requests_fd))
    replies = Channel(int(replies_fd))
    run_child(lambda: _serve(root, requests, replies, ring_fd), replies)


def _serve(root, requests, replies, ring_fd):
    from obnamlib.crypto import openpgp
    from obnamlib.vfs import local as vfs_local
    ring = None
    if ring_fd is not None:
        try:
            ring = reply_ring.RingWriter(mmap.mmap(int(ring_fd), 0))
        except (OSError, ValueError):
            pass        # replies go through the pipe (the parent reads both)
        finally:
            os.close(int(ring_fd))
    fs = vfs_local.LocalFS(root)
    server = _Server(fs, openpgp.SymmetricCipher(), replies, ring,
                     creators=_creators(fs))
    inbox = _Inbox(requests, ring=ring)
    replies.send(('ready',))    # booted: the parent may leave work to us
    while True:
        request, parts = inbox.get()
        if request[0] == 'stop':
            server.finish_creates()
            return
        if request[0] == 'create':
            server.create(request[1], request[2], parts)
        else:
            getattr(server, request[0])(*request[1:])


class _Inbox:
    """The child's requests, read from the pipe by a thread of its own up
    to INBOX_BYTES ahead of the work: the pipe holds only about one chunk,
    so without this a run of big chunks to encrypt would stop the parent
    whenever the child is a chunk behind.  The parent's releases of the
    reply ring are handled here, as they come, not in order of work."""

    def __init__(self, requests, limit=None, ring=None):
        self.requests = requests
        self.ring = ring
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
                if request[0] == 'release':
                    self.ring.release(request[1])
                    continue
                parts = [self.requests.frame()
                         for _ in range(request[3])] \
                    if request[0] == 'create' else []
            except EOFError:
                # The parent went without saying 'stop': it died (a
                # SIGKILL).  What it queued is unwanted, and files it
                # never heard of would be left behind for nobody.
                self._drop_queued()
                request, parts = ('stop',), []
            except BaseException as e:
                request, parts = e, []
            last = not isinstance(request, tuple) or request[0] == 'stop'
            if last and self.ring is not None:
                self.ring.stop()    # a reply waiting for room is unwanted
            self._put(request, parts)
            if last:
                return

    def _drop_queued(self):
        with self.ready:
            self.items.clear()
            self.bytes = 0
            self.ready.notify_all()

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


def described_error(error):
    """An exception as plain data the parent can raise again
    (cipher_process.rebuilt_error)."""
    if isinstance(error, OSError):
        return ('os', error.errno, error.strerror, error.filename)
    return ('other', None, str(error), None)


def _creators(fs):
    """Threads to seal and create files with, where each create is a
    round trip to a server (a repository on NFS, SMB, GlusterFS: see
    obnamlib.vfs.mounts); None on a local disk, where one at a time in
    this thread is fastest."""
    from obnamlib.vfs import base, local
    if base.CREATES_IN_PARALLEL not in fs.capabilities:
        return None
    return concurrent.futures.ThreadPoolExecutor(
        local.CREATES_IN_FLIGHT, thread_name_prefix='creates')


class _Server:

    def __init__(self, fs, cipher, replies, ring=None, creators=None):
        self.fs = fs
        self.cipher = cipher
        self.replies = replies
        self.ring = ring
        self.creators = creators
        self.creating = collections.deque()     # creators' futures
        self.lock = threading.Lock()            # failures, replies
        self.passphrases = {}
        self.failures = []

    def key(self, key_id, passphrase):
        self.passphrases[key_id] = passphrase

    def create(self, path, key_id, parts):
        """Seal and create now, or leave it to the creators (a bounded
        number of files waiting: the parent's data is kept until then)."""
        if self.creators is None:
            self._create(path, key_id, parts)
            return
        while len(self.creating) >= CREATES_WAITING:
            self.creating.popleft().result()
        self.creating.append(
            self.creators.submit(self._create, path, key_id, parts))

    def _create(self, path, key_id, parts):
        try:
            if key_id is None:
                data = b''.join(parts)
            else:   # each thread seals into a scratch buffer of its own
                data = seal(self.cipher, parts, self.passphrases[key_id])
            self.fs.create_file(path, data)
        except Exception as e:
            with self.lock:
                if not self.failures:
                    self.replies.send(('failed',))
                self.failures.append((path, described_error(e)))

    def _reply(self, message, parts=()):
        """Send a reply; creators may be sending one at the same time."""
        with self.lock:
            self.replies.send(message, parts)

    def finish_creates(self):
        while self.creating:
            self.creating.popleft().result()

    def sync(self):
        self.finish_creates()
        with self.lock:
            self.replies.send(('synced', self.failures))
            self.failures = []

    def read(self, wanted):
        for path, key_id in wanted:
            self._read(path, self.passphrases[key_id])

    def _read(self, path, passphrase):
        try:
            stored = self.fs.read_file(path)
            data = unwrap(
                stored,
                lambda data: self.cipher.decrypt_in_scratch(data, passphrase),
                filename=path, copy=False)
        except Exception:
            self._reply(('read', path, None))
            return
        if self.ring is not None and self.ring.fits(len(data)):
            where = self.ring.put(data)
            self._reply(('read', path, len(stored)) + where)
        else:
            self._reply(('read', path, len(stored)), [data])
