"""Taking and releasing repository lock files (format-6.md §9).

A lock is a file named `lock` inside the directory it protects; holding it
means having created it exclusively.  Several locks are always taken in
byte-wise sorted order of their directories and released in that order, and
a failure part way releases what was taken, so two writers can never
deadlock or leave half a set behind.

A lock whose holder is gone (lock_holder: a process of this host that no
longer runs) is broken at once, so an hourly backup heals after a crash.
Breaking must never remove a lock another process has just taken in its
place, whatever the number of processes at it: breakers take turns
through a token file named after the stale content (exclusive create),
and the one holding it removes the lock only if it still holds that
content.  Nobody else removes a lock (its holder is gone; force-lock
aside) and a stale content never comes back, so the lock cannot change
between that check and the removal.  A token left by a breaker that died
is broken the same way.  Locks we cannot judge wait as before, and the
timeout names their holder and force-lock.
"""

import hashlib
import logging
import os
import secrets
import time

from obnamlib import errors
from obnamlib.repo.storage import lock_holder

LOCK_NAME = 'lock'
TOKEN_PREFIX = 'tmp-breaking-'     # tmp*: chunk listings ignore it
MAX_RETRIES_AT_ONCE = 10           # then wait a second as usual
MAX_TOKEN_DEPTH = 3                # tokens of dead breakers' tokens
# A lock file is a few lines (lock_holder); a bigger one (a damaged or
# hostile repository) is not read into memory, and counts as unreadable.
MAX_LOCK_BYTES = 64 * 1024

REMOVED, CHANGED, BUSY = 'removed', 'changed', 'busy'


def lock_path(dirname):
    """Repository-relative path of the lock of `dirname` ('.' = the root)."""
    if dirname in ('', '.'):
        return LOCK_NAME
    return dirname + '/' + LOCK_NAME


class LockManager:
    """Locks below one repository.

    `fs` is a vfs.base.Storage (a VFS, or RepositoryFS): `lock(path,
    content)` (exclusive create; raises LockFail or FileExistsError if the
    file exists), `unlock(path)`, `read_raw(path)` (lock and token files
    are never filtered) and `remove(path)`.  `timeout` is
    --lock-timeout in seconds: retry once per second until it has passed.
    `sleep` and `clock` are injectable so tests need not wait; `this_host`
    (lock_holder.ThisHost) too.  `on_break(line)` hears of each stale
    lock broken (the log always does).
    """

    def __init__(self, fs, timeout=60, location='', sleep=time.sleep,
                 clock=time.monotonic, this_host=lock_holder.THIS_HOST,
                 on_break=None):
        self.fs = fs
        self.timeout = timeout
        self.location = location
        self.sleep = sleep
        self.clock = clock
        self.this_host = this_host
        self.on_break = on_break
        self.token = secrets.token_hex(8)
        self.held = set()

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
        at_once = 0
        while True:
            if self._try_lock(path):
                self.held.add(dirname)
                return
            data = self._read(path)
            if at_once < MAX_RETRIES_AT_ONCE and self._is_gone(path, data):
                at_once += 1
                continue
            if self.clock() >= deadline:
                holder = lock_holder.parse(data or b'')
                raise errors.LockFail(lock_name=self._shown(path),
                                      reason=_timeout_reason(holder))
            self.sleep(1)
            at_once = 0

    def _is_gone(self, path, data):
        """True if the lock (its content `data`, None if no file) is gone:
        released, or broken as stale."""
        if data is None:
            return True
        holder = lock_holder.parse(data)
        return holder is not None and self._break_if_gone(path, data, holder)

    def _try_lock(self, path):
        try:
            self.fs.lock(path, lock_holder.content(self.token, self.this_host))
        except (errors.LockFail, FileExistsError):
            return False
        return True

    def _read(self, path):
        """A lock file's bytes, None if it is gone, b'' if unreadable (or
        too big to be a lock)."""
        if self._too_big(path):
            logging.warning('Lock file %s is over %d bytes: not read',
                            self._shown(path), MAX_LOCK_BYTES)
            return b''
        try:
            return self.fs.read_raw(path)
        except FileNotFoundError:
            return None
        except OSError:
            logging.warning('Cannot read lock file %s', self._shown(path),
                            exc_info=True)
            return b''

    def _too_big(self, path):
        """Whether the directory listing says path is over MAX_LOCK_BYTES
        (unknown, or gone: no)."""
        dirname, _, name = path.rpartition('/')
        sizes = self.fs.file_sizes([dirname or '.'])[0]
        if isinstance(sizes, Exception):
            return False        # read_raw meets it again, and says so
        return sizes.get(name, 0) > MAX_LOCK_BYTES

    def _break_if_gone(self, path, data, holder):
        """Break the lock if its holder is gone (or is this manager, which
        no longer holds it); True to try again at once."""
        if holder.token == self.token and holder.pid == os.getpid():
            reason = 'left by this process'
        else:
            reason = lock_holder.why_gone(holder, self.this_host)
        if reason is None:
            return False
        outcome = self._remove_if_unchanged(path, data)
        if outcome == REMOVED:
            line = 'Removed stale lock %s of host %s, pid %d: %s' % (
                self._shown(path), holder.host, holder.pid, reason)
            logging.warning(line)
            if self.on_break is not None:
                self.on_break(line)
        return outcome != BUSY

    def _remove_if_unchanged(self, path, stale, depth=0):
        """Remove the file at path if it still holds `stale`, holding the
        breakers' token for that content meanwhile."""
        token = token_path(path, stale)
        try:
            self.fs.lock(token, lock_holder.content(self.token,
                                                    self.this_host))
        except (errors.LockFail, FileExistsError):
            return self._token_taken(token, depth)
        try:
            if self._read(path) != stale:
                return CHANGED
            self.fs.remove(path)
            return REMOVED
        except FileNotFoundError:
            return CHANGED
        finally:
            self._remove_quietly(token)

    def _token_taken(self, token, depth):
        """Another breaker is at it: wait for it (BUSY), unless it is done
        or died there, when its token is broken in turn."""
        data = self._read(token)
        if data is None:
            return CHANGED
        holder = lock_holder.parse(data)
        if (depth < MAX_TOKEN_DEPTH and holder is not None and
                lock_holder.why_gone(holder, self.this_host) and
                self._remove_if_unchanged(token, data, depth + 1) != BUSY):
            return CHANGED
        return BUSY

    def _remove_quietly(self, path):
        try:
            self.fs.remove(path)
        except FileNotFoundError:
            pass

    def _shown(self, path):
        if not self.location:
            return path
        return self.location.rstrip('/') + '/' + path

    def break_lock(self, dirname):
        """Remove a lock whoever holds it (force-lock), and the tokens of
        stale-lock breakers that died beside it."""
        self.held.discard(dirname)
        try:
            self.fs.unlock(lock_path(dirname))
        except FileNotFoundError:
            pass
        for token in self._tokens(dirname):
            self._remove_quietly(token)

    def _tokens(self, dirname):
        top = '' if dirname in ('', '.') else dirname + '/'
        try:
            names = self.fs.listdir(dirname if top else '.')
        except FileNotFoundError:
            return []
        return [top + name for name in names
                if name.startswith(TOKEN_PREFIX)]


def _timeout_reason(holder):
    """LockFail's reason: 1.x's bare 'timeout' for a lock that names no
    holder (Obnam 1.x's empty files), else who holds it and what to do."""
    if holder is None:
        return 'timeout'
    return ('timeout; held by %s; if that obnam is no longer running, '
            'remove the lock with obnam force-lock'
            % lock_holder.describe(holder))


def token_path(path, stale):
    """The breakers' token for a stale content, next to the lock file."""
    dirname, _, _ = path.rpartition('/')
    name = TOKEN_PREFIX + hashlib.sha1(stale).hexdigest()
    return dirname + '/' + name if dirname else name


def _sort_key(dirname):
    """Byte-wise order of directory names, '.' for the root."""
    return os.fsencode(dirname if dirname not in ('', '.') else '.')
