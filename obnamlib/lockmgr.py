"""Taking and releasing repository lock files (format-6.md §9).

A lock is a file named `lock` inside the directory it protects; holding it
means having created it exclusively.  Several locks are always taken in
byte-wise sorted order of their directories and released in that order, and
a failure part way releases what was taken, so two writers can never
deadlock or leave half a set behind.
"""

import os
import socket
import time

from obnamlib import errors

LOCK_NAME = 'lock'


def lock_path(dirname):
    """Repository-relative path of the lock of `dirname` ('.' = the root)."""
    if dirname in ('', '.'):
        return LOCK_NAME
    return dirname + '/' + LOCK_NAME


def lock_content():
    """Who holds the lock, for people looking at a stale one (Obnam 1.x
    ignores the content)."""
    return ('obnam-lock\nhost=%s\npid=%d\ntime=%s\n' % (
        socket.gethostname(), os.getpid(),
        time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))).encode('ascii')


class LockManager:
    """Locks below one repository.

    `fs` needs `lock(path, content)` (exclusive create; raises LockFail or
    FileExistsError if the file exists) and `unlock(path)`.  `timeout` is
    --lock-timeout in seconds: retry once per second until it has passed.
    `sleep` and `clock` are injectable so tests need not wait.
    """

    def __init__(self, fs, timeout=60, location='', sleep=time.sleep,
                 clock=time.monotonic):
        self.fs = fs
        self.timeout = timeout
        self.location = location
        self.sleep = sleep
        self.clock = clock
        self.held = set()

    def is_locked(self, dirname):
        return self.fs.exists(lock_path(dirname))

    def holds(self, dirname):
        return dirname in self.held

    def lock(self, dirnames):
        """Lock every directory in sorted order; all or nothing."""
        taken = []
        try:
            for dirname in sorted(set(dirnames), key=_sort_key):
                self._lock_one(dirname)
                taken.append(dirname)
        except BaseException:
            self.unlock(taken)
            raise

    def unlock(self, dirnames):
        """Release locks this manager holds, in sorted order."""
        for dirname in sorted(set(dirnames), key=_sort_key):
            if dirname in self.held:
                self.held.discard(dirname)
                try:
                    self.fs.unlock(lock_path(dirname))
                except FileNotFoundError:
                    pass    # removed by force-lock meanwhile

    def unlock_all(self):
        self.unlock(list(self.held))

    def _lock_one(self, dirname):
        if dirname in self.held:
            return
        path = lock_path(dirname)
        deadline = self.clock() + max(0, self.timeout)
        while True:
            if self._try_lock(path):
                self.held.add(dirname)
                return
            if self.clock() >= deadline:
                raise errors.LockFail(lock_name=self._shown(path),
                                      reason='timeout')
            self.sleep(1)

    def _try_lock(self, path):
        try:
            self.fs.lock(path, lock_content())
        except (errors.LockFail, FileExistsError):
            return False
        return True

    def _shown(self, path):
        if not self.location:
            return path
        return self.location.rstrip('/') + '/' + path

    def break_lock(self, dirname):
        """Remove a lock whoever holds it (force-lock)."""
        self.held.discard(dirname)
        try:
            self.fs.unlock(lock_path(dirname))
        except FileNotFoundError:
            pass


def _sort_key(dirname):
    """Byte-wise order of directory names, '.' for the root."""
    return os.fsencode(dirname if dirname not in ('', '.') else '.')
