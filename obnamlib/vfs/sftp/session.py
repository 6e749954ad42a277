"""The request plumbing every SftpFS method uses: one object's share of
a connection, its requests counted, its errors named by URL."""

import atexit
import errno
import logging
import os
import time
from collections import Counter

from obnamlib.errors import ObnamSystemError
from obnamlib.vfs.base import VirtualFileSystem
from obnamlib.vfs.sftp import codec, ssh_auth
from obnamlib.vfs.sftp.errors import SftpConnectionLost, status_error
from obnamlib.vfs.sftp.limits import CHUNK, FILE_MODE
from obnamlib.vfs.sftp.url import SftpUrl, clean_rel, fs_path, join
from obnamlib.vfs.sftp.wire import Replies

log = logging.getLogger('obnamlib.vfs.sftp')

WIRE_ERRORS = ssh_auth.CONNECTION_ERRORS


class SftpSession(VirtualFileSystem):
    """Sending requests and waiting for their replies on a connection
    (shared or owned), with a root directory on the server."""

    def __init__(self, url, settings=None, connection=None):
        super().__init__(url)
        self.url = url
        self.parsed = SftpUrl(url)
        self.settings = {} if settings is None else settings
        self.target = ssh_auth.SshTarget(
            self.parsed.host, self.parsed.port, self.parsed.user,
            self.settings)
        self.delay = _setting_int(self.settings, 'sftp-delay') / 1000.0
        self._replies = Replies()
        # Requests sent, by SFTP message name, and the times we waited for
        # the server: the cost model of every operation (logged at close).
        self.requests = Counter()
        self.round_trips = 0
        self._sent_since_wait = False
        atexit.register(self.log_requests)
        self._dead = None
        self._fresh_listing = None    # listdir's, until the next request
        # A connection handed in stays open when this object is closed.
        self.owns_connection = connection is None
        self.connection = connection or ssh_auth.open_sftp(self.target)
        self.wire = self.connection.wire    # shared by all its users
        try:
            self.root_bytes = self._resolve_root(self.parsed)
        except BaseException:
            self.close()
            raise
        self.root = os.fsdecode(self.root_bytes)

    def __repr__(self):
        return 'SftpFS(%r)' % self.url

    def reopening(self):
        """A second process connects by itself with the same settings;
        it never asks the user (not run on a terminal: ssh's BatchMode),
        so where that would be needed it fails and the first process
        does the work."""
        return self.url, ssh_auth.connection_settings(self.settings)

    # --- paths --------------------------------------------------------------

    def _resolve_root(self, parsed):
        path = clean_rel(parsed.path)
        if not parsed.home_relative:
            return b'/' + path
        return join(self.realpath(b'.'), path)

    def path_of(self, url):
        """The absolute server path (bytes) of another URL on this server.

        For pull backups: the live-data methods take these paths.
        """
        parsed = SftpUrl(url)
        if not parsed.same_server(self.parsed):
            raise ObnamSystemError(
                filename=url, errno=errno.EXDEV,
                strerror='all sftp:// roots of a run must be on the same '
                         'server as %s' % self.url)
        return self._resolve_root(parsed)

    def url_of(self, full):
        """The sftp:// URL of an absolute server path (bytes)."""
        return self.parsed.url_of(full)

    def _abs(self, path):
        """Server path for a StorageFS (relative) or live-data path."""
        if isinstance(path, bytes) and path.startswith(b'/'):
            return path
        return join(self.root_bytes, clean_rel(path))

    def _error_name(self, path):
        """The file an error is about: a repository file (str path) as
        sftp://HOST/ABSOLUTE-PATH, for people to find it; live data as
        given (callers put it in their own errors)."""
        if path is None:
            return None
        if isinstance(path, str):
            return self.url_of(self._abs(path))
        return fs_path(path)

    # --- requests and replies ---------------------------------------------

    def _lost(self, error):
        reason = str(error).rstrip(': ') or type(error).__name__
        last = self.connection.stderr_lines
        if last:
            reason = '%s (%s)' % (reason, last[-1])
        self._dead = reason.replace('\n', ' ')
        return SftpConnectionLost(hostname=self.target.hostname,
                                  reason=self._dead)

    def _check_alive(self):
        if self._dead is not None:
            raise SftpConnectionLost(hostname=self.target.hostname,
                                     reason=self._dead)

    def _send(self, kind, *args, collect=True, payload=None):
        """Send one request without waiting; returns its number.

        `payload` (WRITE data) goes out after the other fields without being
        copied.
        """
        self._check_alive()
        self._fresh_listing = None
        self.requests[args[0] if kind == codec.CMD_EXTENDED
                      else codec.REQUEST_NAMES.get(kind, kind)] += 1
        self._sent_since_wait = True
        num = self.wire.number(self._replies if collect else None)
        try:
            self.wire.queue(codec.packet(kind, num, args, payload), payload)
        except WIRE_ERRORS as e:
            raise self._lost(e)
        return num

    def _wait(self, num, path=None):
        """The (kind, msg) reply of request `num`; raise if it's an error."""
        got = self._replies.got
        if num not in got and self._sent_since_wait:
            # The first wait after sending: the rest of what was sent
            # together comes back in the same round trip.  --sftp-delay
            # makes each cost what it would on a slow network.
            self.round_trips += 1
            self._sent_since_wait = False
            if self.delay:
                time.sleep(self.delay)
        try:
            if num not in got:
                self.wire.flush()
            while num not in got:
                self._check_alive()
                self.wire.receive_one()
        except WIRE_ERRORS as e:
            raise self._lost(e)
        kind, msg = got.pop(num)
        if kind == codec.CMD_STATUS:
            error = status_error(msg, self._error_name(path))
            if error is not None:
                raise error
        return kind, msg

    def _call(self, kind, *args, path=None):
        return self._wait(self._send(kind, *args), path)

    def _wait_all(self, nums, path=None):
        """Wait for every request; raise the first error after all came."""
        first = None
        for num in nums:
            try:
                self._wait(num, path)
            except SftpConnectionLost:
                raise
            except Exception as e:
                first = first or e
        if first is not None:
            raise first

    def _wait_writes(self, nums, full, path):
        """_wait_all for the WRITEs (and CLOSE) of file `full`.

        SFTP v3 reports a full disk as a bare "Failure"; then the server's
        statvfs@openssh.com tells whether the file system is full, and the
        error says so (ENOSPC, naming the file on the server).
        """
        try:
            self._wait_all(nums, path)
        except OSError as e:
            if e.errno != errno.EIO or not self._is_full(full):
                raise
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC),
                          self.url_of(full)) from e

    def _is_full(self, full):
        """Has the file system holding `full` less room than one WRITE?"""
        try:
            _, msg = self._call(codec.CMD_EXTENDED, 'statvfs@openssh.com',
                                os.path.dirname(full))
        except OSError:
            return False        # not OpenSSH: cannot tell
        fields = [msg.get_int64() for _ in range(8)]
        frsize, bavail, favail = fields[1], fields[4], fields[7]
        return bavail * frsize < CHUNK or favail == 0

    # --- requests every part needs ----------------------------------------

    def realpath(self, path):
        kind, msg = self._call(codec.CMD_REALPATH, path, path=path)
        msg.get_int()
        return msg.get_string()

    def _attrs(self, kind, full, path):
        _, msg = self._call(kind, full, path=path)
        return codec.read_attrs(msg)

    def _exists_abs(self, full):
        try:
            self._attrs(codec.CMD_LSTAT, full, full)
        except FileNotFoundError:
            return False
        return True

    def _open(self, full, flags, path, mode=FILE_MODE):
        _, msg = self._wait(self._send_open(full, flags, mode), path)
        return msg.get_binary()

    def _send_open(self, full, flags, mode=FILE_MODE):
        if flags & codec.SFTP_FLAG_CREATE:
            attrs = codec.attrs(st_mode=mode)
        else:
            attrs = codec.attrs()
        return self._send(codec.CMD_OPEN, full, flags, attrs)

    def _close_handle(self, handle, wait=False):
        num = self._send(codec.CMD_CLOSE, handle, collect=wait)
        if wait:
            return num
        return None

    def _collect(self, nums, paths):
        """HANDLE replies: the handle (bytes) or the OSError, per request."""
        results = []
        for num, path in zip(nums, paths):
            try:
                _, msg = self._wait(num, path)
                results.append(msg.get_binary())
            except OSError as e:
                results.append(e)
        return results

    # --- the end ------------------------------------------------------------

    def log_requests(self):
        """Log what this object cost (at close, or at exit if the caller
        never closes it, as repositories do not close their storage)."""
        atexit.unregister(self.log_requests)
        log.info('SFTP %s: %d round trips; requests: %s', self.url,
                 self.round_trips, ', '.join(
                     '%s %d' % item for item in
                     sorted(self.requests.items())) or 'none')

    def close(self):
        if self.connection is not None:
            self.log_requests()
            try:
                self.wire.flush()       # requests nobody waits for
            except WIRE_ERRORS:
                pass
            if self.owns_connection:
                try:
                    self.connection.close()
                except WIRE_ERRORS:
                    pass
            self.connection = None
            self._dead = 'connection closed'


def _setting_int(settings, name):
    try:
        return int(settings[name] or 0)
    except (KeyError, TypeError, ValueError):
        return 0
