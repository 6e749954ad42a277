"""Files of an unencrypted repository on a local disk read ahead by a few
threads (RepositoryFS.read_ahead): restore, verify and fsck name the
chunk files they read next.

One reader takes the four system calls per file and the unwrapping out
of the caller's thread, and with a cold page cache has a read in flight
while the caller works or reads.  More readers only contended for the
GIL: with four, a warm fsck of --scale 1 took 15-30% longer with twice
the system time, and starting more only when the caller waited for a
file no reader had begun did the same on a loaded machine, where a
reader lags for want of CPU, not of the disk.  (An encrypted repository
reads ahead in its cipher process instead: second_process.)

A read that fails here is not reported: take() says None, and the
caller's own read_file meets the failure and reports it as always.
"""

import collections
import threading

# Reader threads; files asked for and not yet taken, at most; and the
# data read and not yet taken above which the readers wait (peak RSS).
READ_THREADS = 1
MAX_AHEAD = 256
MAX_HELD_BYTES = 4 * 1024 * 1024


class ThreadReads:
    """read(path) -> (data, stored size), safe to call from any thread."""

    def __init__(self, read, threads=READ_THREADS):
        self._read = read
        self._threads_wanted = threads
        self._threads = []
        lock = threading.Lock()
        self._work = threading.Condition(lock)    # for the readers
        self._done = threading.Condition(lock)    # for take
        self._waiting_for = None
        self._ahead = collections.OrderedDict()  # path -> _PENDING or got
        self._queue = collections.deque()        # paths not yet started
        self._held = 0            # bytes read and not yet taken
        self._closing = False

    def read_ahead(self, paths):
        """Read these files, in this order, for take()."""
        with self._work:
            for path in paths:
                if len(self._ahead) >= MAX_AHEAD:
                    break
                if path not in self._ahead:
                    self._ahead[path] = _PENDING
                    self._queue.append(path)
            if self._queue:
                while len(self._threads) < self._threads_wanted:
                    self._start_thread()
                self._work.notify()

    def take(self, path):
        """(data, stored size) of path read ahead, or None (not asked for,
        or its read failed).  Files asked for before path and not taken
        are dropped: the reading goes on in the order of asking."""
        with self._done:
            if path not in self._ahead:
                return None
            while next(iter(self._ahead)) != path:
                self._drop(*self._ahead.popitem(last=False))
            self._waiting_for = path
            while self._ahead[path] is _PENDING:
                self._done.wait()
            self._waiting_for = None
            got = self._ahead.pop(path)
            self._release(got)
            return got

    def _drop(self, path, got):
        """A file asked for earlier than the one taken: no longer wanted."""
        if got is not _PENDING:
            self._release(got)
            return
        try:
            self._queue.remove(path)
        except ValueError:
            pass        # being read: its result finds no slot

    def _release(self, got):
        if got is not None:
            self._held -= got[1]
            self._work.notify()

    def close(self):
        with self._work:
            self._closing = True
            self._queue.clear()
            self._ahead.clear()
            self._work.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads = []

    def _start_thread(self):
        thread = threading.Thread(target=self._serve, daemon=True,
                                  name='read-ahead')
        thread.start()
        self._threads.append(thread)

    def _serve(self):
        while True:
            with self._work:
                while not self._closing and (
                        not self._queue or self._held >= MAX_HELD_BYTES):
                    self._work.wait()
                if self._closing:
                    return
                path = self._queue.popleft()
                if self._queue:
                    self._work.notify()     # another reader may start
            try:
                got = self._read(path)
            except Exception:       # the caller's read_file reports it
                got = None
            with self._work:
                if path in self._ahead:
                    self._ahead[path] = got
                    if got is not None:
                        self._held += got[1]
                    if self._waiting_for == path:
                        self._done.notify()


_PENDING = object()
