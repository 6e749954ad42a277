"""The SFTP virtual filesystem: repositories and live data on another host.

Obnam 1.x over SFTP was slow because every operation waited for its reply.
Here one SSH connection serves the whole run, and requests are pipelined at
the SFTP level: a whole file is read with one OPEN, then FSTAT and 1 MiB
of READs in flight together; a file is written with one OPEN and every
WRITE plus the CLOSE in flight; a directory listing with attributes is one
READDIR round trip per ~100 entries; stats right after a listdir come from
it.  Reads and writes use the largest request OpenSSH's sftp-server
accepts.  Missing directories are made with every MKDIR of the chain in
flight.

Callers that know what comes next batch it: `read_files` and
`create_files` (many repository files in two or three round trips),
`prefetch` and `prefetch_listings` (a pull backup's small files and
directories), `set_attributes` (a restored file's owner, mode and times).

Consistency when the connection dies at any point (format-6.md OPEN-7):
`write_file` writes a temporary file (`tmp...`, a name larch ignores) and
renames it over the target with OpenSSH's `posix-rename@openssh.com`, so
readers see the old or the new file (three round trips: a node file must
never be seen half-written); `create_file` (chunks) and locks are
exclusive creates (SSH_FXF_EXCL) in two round trips, as on a local disk: a
chunk is referenced only after its create returned, so a cut connection
leaves at worst an unused chunk file, a temporary file and the locks
(removed by force-lock); every later call raises SftpConnectionLost.
Errors about repository files name them by sftp:// URL; SFTP's bare
"Failure" is checked against statvfs@openssh.com to report a full disk.

The packets themselves go through a `_Wire` per connection rather than
paramiko's SFTPClient: requests are queued and written together when a
reply is awaited (one pipe write and one SSH packet per batch), replies
are read in large pieces and each payload is copied once.  Restore of
mkcorpus 0.1 from sftp://: client CPU 1.8 -> 1.4 s, ssh child 0.75 ->
0.5 s, pipe reads ~45,000 -> ~2,000.

Every request and round trip is counted (`requests`, `round_trips`) and
logged when the object is closed or the program exits.

Paths: StorageFS methods take `str` paths relative to the URL's path; the
live-data methods take `bytes` paths, absolute on the server (relative ones
are taken relative to the URL's path).
"""

import atexit
import errno
import functools
import io
import logging
import os
import stat
import struct
import time
import uuid
import zlib
from collections import Counter, deque

import paramiko
from paramiko import sftp as proto
from paramiko.sftp_attr import SFTPAttributes

from obnamlib.errors import (LockFail, ObnamError, ObnamIOError,
                             ObnamSystemError)
from obnamlib.vfs import ssh_auth
from obnamlib.vfs.base import VirtualFileSystem


# OpenSSH's sftp-server accepts messages up to 256 KiB; leave room for the
# header of a WRITE.  Servers that return less per READ are handled.
CHUNK = 256 * 1024 - 1024
READ_AHEAD = 16           # READ requests in flight while streaming
FIRST_READS = 5           # READs sent with a whole-file read's FSTAT:
                          # a 1 MiB chunk and its filter header
READDIRS_IN_FLIGHT = 8    # OpenSSH sends up to 100 names per READDIR
EXCL_ATTEMPTS = 5         # exclusive creates racing with removals
WRITES_IN_FLIGHT = 32     # WRITE requests in flight before waiting
SMALL_PAYLOAD = 64 * 1024  # smaller WRITE data is sent with its header
SEND_BATCH = 256 * 1024   # queued requests are written at least this often
RECEIVE_SIZE = 256 * 1024  # bytes asked for per read from the connection
FILE_MODE = 0o600
PREFETCH_SIZE = CHUNK - 1  # prefetch reads files up to this size whole
_TRUNCATE = (proto.SFTP_FLAG_WRITE | proto.SFTP_FLAG_CREATE |
             proto.SFTP_FLAG_TRUNC)
_EXCLUSIVE = (proto.SFTP_FLAG_WRITE | proto.SFTP_FLAG_CREATE |
              proto.SFTP_FLAG_EXCL)
DIR_MODE = 0o700

log = logging.getLogger(__name__)

_REQUEST_NAMES = {value: name[4:] for name, value in vars(proto).items()
                  if name.startswith('CMD_') and isinstance(value, int)}


class int64(int):
    """An offset: packed as 64 bits (plain ints are 32-bit fields)."""


class InvalidPortError(ObnamError):
    code = 'R5914DX'
    msg = 'Invalid port number {port} in {url}: {error}'


class WrongURLSchemeError(ObnamError):
    code = 'RB8E98X'
    msg = 'SftpFS used with non-sftp URL: {url}'


class HardlinkError(ObnamError):
    code = 'R02C17X'
    msg = ('Cannot hardlink on SFTP; sorry\n'
           'The SFTP server does not offer the hardlink@openssh.com '
           'extension, so hard links cannot be restored there. Restore to '
           'a local directory instead.')


class SftpConnectionLost(ObnamError):
    """Every later call fails too: callers must not treat it per file."""
    code = 'R305A1X'
    msg = 'Lost the SSH connection to {hostname}: {reason}'
    fatal = True


class SftpUrl:
    """sftp://[USER@]HOST[:PORT]/PATH, PATH absolute; /~/ = home-relative."""

    def __init__(self, url):
        self.url = url
        prefix = 'sftp://'
        if not url.startswith(prefix):
            raise WrongURLSchemeError(url=url)
        rest = url[len(prefix):]
        netloc, slash, path = rest.partition('/')
        self.user, self.host, self.port = _parse_netloc(netloc, url)
        path = slash + path
        if path in ('', '/~', '/~/') or path.startswith('/~/'):
            self.home_relative = True
            self.path = path[3:]
        else:
            self.home_relative = False
            self.path = path


def _parse_netloc(netloc, url):
    user, at, hostport = netloc.rpartition('@')
    user = user if at else None
    if hostport.startswith('['):
        host, _, after = hostport[1:].partition(']')
        port = after[1:] if after.startswith(':') else after
    else:
        host, _, port = hostport.partition(':')
    if not host:
        raise WrongURLSchemeError(url=url)
    return user or None, host, _parse_port(port, url)


def _parse_port(port, url):
    if port == '':
        return None
    if not port.isdigit():
        raise InvalidPortError(port=port, url=url, error='not a number')
    number = int(port)
    if not 0 < number < 65536:
        raise InvalidPortError(port=port, url=url,
                               error='must be between 1 and 65535')
    return number


class _Replies:
    """Where the wire delivers the replies to one SftpFS's requests."""

    def __init__(self):
        self.got = {}


class _Wire:
    """One connection's SFTP packets, in both directions, without
    paramiko's per-packet costs: requests are queued and written together
    when a reply is awaited (one pipe write, and one SSH packet, for a
    whole batch instead of one per request); replies are read in large
    pieces and cut out of one buffer, each payload copied once (paramiko
    reads the length and the body separately, grows the body by
    concatenation and copies it twice more).  Every SftpFS sharing the
    connection uses its wire, so request numbers stay unique."""

    def __init__(self, sftp):
        self.channel = sftp.sock
        self.next_number = sftp.request_number
        self.routes = {}            # request number -> _Replies or None
        self.outgoing = []
        self.outgoing_size = 0
        self.incoming = bytearray()

    def number(self, replies):
        """A new request number; its reply goes to `replies` (None: drop)."""
        num = self.next_number
        self.next_number += 1
        self.routes[num] = replies
        return num

    def queue(self, head, payload=None):
        """Send later (at the next flush); a large payload goes now, after
        what was queued, without being copied into the queue."""
        self.outgoing.append(head)
        self.outgoing_size += len(head)
        if payload and len(payload) > SMALL_PAYLOAD:
            self.flush()
            self._write(payload)
            return
        if payload:
            self.outgoing.append(payload)
            self.outgoing_size += len(payload)
        if self.outgoing_size >= SEND_BATCH:
            self.flush()

    def flush(self):
        if self.outgoing:
            data = b''.join(self.outgoing)
            self.outgoing = []
            self.outgoing_size = 0
            self._write(data)

    def _write(self, data):
        view = memoryview(data)
        while view:
            sent = self.channel.send(view)
            if sent <= 0:
                raise EOFError('the SSH connection is closed')
            view = view[sent:]

    def receive_one(self):
        """Read one reply and file it with the SftpFS that asked."""
        kind, num, msg = self._next_packet()
        replies = self.routes.pop(num, None)
        if replies is not None:
            replies.got[num] = (kind, msg)

    def _next_packet(self):
        buf = self.incoming
        self._fill(4)
        size = self._fill(4 + int.from_bytes(buf[:4], 'big'))
        if size < 9:
            raise paramiko.SSHException('Malformed SFTP reply')
        kind = buf[4]
        num = int.from_bytes(buf[5:9], 'big')
        with memoryview(buf) as view:
            if kind == proto.CMD_DATA:
                end = 13 + int.from_bytes(buf[9:13], 'big')
                if size < 13 or end > size:
                    raise paramiko.SSHException('Malformed SFTP reply')
                msg = _DataReply(bytes(view[13:end]))
            else:
                msg = paramiko.Message(bytes(view[9:size]))
        del buf[:size]
        return kind, num, msg

    def _fill(self, size):
        """Have at least `size` bytes buffered; returns `size`."""
        buf = self.incoming
        while len(buf) < size:
            piece = self.channel.recv(max(RECEIVE_SIZE, size - len(buf)))
            if not piece:
                raise EOFError('the SSH connection was closed')
            buf += piece
        return size


class _DataReply:
    """A DATA reply's payload, already cut out (read as paramiko's
    Message would be: one string)."""

    __slots__ = ('data',)

    def __init__(self, data):
        self.data = data

    def get_string(self):
        return self.data


def _wire_of(connection):
    """The connection's wire, made on first use (shared by every SftpFS
    on it)."""
    wire = getattr(connection, 'obnam_wire', None)
    if wire is None:
        wire = _Wire(connection.sftp)
        connection.obnam_wire = wire
    return wire


def _live_errors(error_class, arg=0):
    """Live-data calls (bytes paths) raise `error_class` for OSErrors.

    StorageFS calls (str paths) keep plain OSErrors: larch relies on them.
    `arg` is the position of the path the error is about.
    """
    def decorate(method):
        @functools.wraps(method)
        def wrapper(self, *args, **kwargs):
            try:
                return method(self, *args, **kwargs)
            except OSError as e:
                path = args[arg]
                if isinstance(path, str):
                    raise
                raise error_class(filename=path, errno=e.errno,
                                  strerror=e.strerror) from e
        return wrapper
    return decorate


def _stream_errors(method):
    """An open file's OSErrors become ObnamIOError about its path."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except OSError as e:
            raise ObnamIOError(filename=self.path, errno=e.errno,
                               strerror=e.strerror) from e
    return wrapper


def _fs_path(path):
    return path if isinstance(path, str) else os.fsdecode(path)


def _status_error(msg, name):
    """The exception an SFTP STATUS reply stands for, or None if OK."""
    code = msg.get_int()
    text = msg.get_string().decode('utf-8', 'replace')
    if code == proto.SFTP_OK:
        return None
    if code == proto.SFTP_EOF:
        return EOFError(text)
    if code == proto.SFTP_NO_SUCH_FILE:
        return FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    if code == proto.SFTP_PERMISSION_DENIED:
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
    if code == proto.SFTP_OP_UNSUPPORTED:
        return OSError(errno.ENOTSUP, 'Operation not supported by the SFTP '
                       'server', name)
    return OSError(errno.EIO, 'SFTP server failure (%s; the protocol gives '
                   'no reason: a full disk, a quota or an existing file)' %
                   text, name)


class RemoteStat:
    """What lstat/scandir return: os.stat_result's fields, from SFTP v3
    attributes, plus the owner and group names the server itself shows
    (`st_username`, `st_groupname`: bytes, or None when not known)."""

    __slots__ = ('st_mode', 'st_ino', 'st_dev', 'st_nlink', 'st_uid',
                 'st_gid', 'st_size', 'st_atime', 'st_mtime', 'st_ctime',
                 'st_atime_ns', 'st_mtime_ns', 'st_ctime_ns', 'st_blocks',
                 'st_blksize', 'st_rdev', 'st_username', 'st_groupname')

    def __init__(self, attrs, path, longname=None):
        mtime = _signed32(attrs.st_mtime or 0)
        atime = _signed32(attrs.st_atime or 0)
        nlink, self.st_username, self.st_groupname = _ls_fields(longname)
        self.st_mode = attrs.st_mode or 0
        self.st_ino = _fake_inode(path)
        self.st_dev = 0
        self.st_nlink = nlink or 1
        self.st_uid = attrs.st_uid or 0
        self.st_gid = attrs.st_gid or 0
        self.st_size = attrs.st_size or 0
        self.st_atime, self.st_mtime, self.st_ctime = atime, mtime, mtime
        self.st_atime_ns = atime * 10**9
        self.st_mtime_ns = self.st_ctime_ns = mtime * 10**9
        self.st_blocks = (self.st_size + 511) // 512
        self.st_blksize = 4096
        self.st_rdev = 0

    def __repr__(self):
        return 'RemoteStat(mode=%o, size=%d, mtime=%d)' % (
            self.st_mode, self.st_size, self.st_mtime)


def _ls_fields(longname):
    """(link count, owner, group) from an `ls -l` style line: SFTP v3
    attributes have neither.  OpenSSH fills the names in from the server's
    user database; numbers mean it had no name.  None when not known."""
    fields = (longname or b'').split(None, 4)
    if len(fields) < 5:
        return None, None, None
    nlink = int(fields[1]) if fields[1].isdigit() else None
    owner, group = (None if name.isdigit() else name for name in fields[2:4])
    return nlink, owner, group


def _same_attrs(a, b):
    """Does a listing's entry still describe what LSTAT just returned?"""
    return all(getattr(a, field) == getattr(b, field) for field in
               ('st_mode', 'st_uid', 'st_gid', 'st_size', 'st_mtime'))


def _signed32(value):
    """SFTP v3 times are 32 bits; read them as the signed time_t they were."""
    value &= 0xffffffff
    return value - (1 << 32) if value >= (1 << 31) else value


def _fake_inode(path):
    """SFTP has no inode numbers; a stable one per path keeps callers sane."""
    return zlib.crc32(path) | (zlib.adler32(path) << 32)


def _join(base, rel):
    if not rel:
        return base
    if base.endswith(b'/'):
        return base + rel
    return base + b'/' + rel


def _clean_rel(path):
    """A StorageFS path as bytes, without empty or '.' components."""
    if isinstance(path, str):
        path = path.encode('utf-8', 'surrogateescape')
    return b'/'.join(p for p in path.split(b'/') if p not in (b'', b'.'))


class SftpFS(VirtualFileSystem):
    """A VFS on an SFTP server, through one SSH connection."""

    def __init__(self, url, settings=None, connection=None):
        super().__init__(url)
        self.url = url
        self.parsed = SftpUrl(url)
        self.settings = {} if settings is None else settings
        self.target = ssh_auth.SshTarget(
            self.parsed.host, self.parsed.port, self.parsed.user,
            self.settings)
        self.delay = _setting_int(self.settings, 'sftp-delay') / 1000.0
        self._replies = _Replies()
        # Requests sent, by SFTP message name, and the times we waited for
        # the server: the cost model of every operation (logged at close).
        self.requests = Counter()
        self.round_trips = 0
        self._sent_since_wait = False
        atexit.register(self.log_requests)
        self._dead = None
        self._known_dirs = set()
        self._listed = (None, {})     # lstat's last parent listing
        self._fresh_listing = None    # listdir's, until the next request
        self._prefetched = {}         # path -> content or error (prefetch)
        self._prefetched_dirs = {}    # path -> scandir result or error
        self._has_posix_rename = True
        self._has_lsetstat = True
        # A connection handed in stays open when this object is closed.
        self.owns_connection = connection is None
        self.connection = connection or ssh_auth.open_sftp(self.target)
        self.wire = _wire_of(self.connection)
        try:
            self.root_bytes = self._resolve_root(self.parsed)
        except BaseException:
            self.close()
            raise
        self.root = os.fsdecode(self.root_bytes)

    # Files up to this size are worth a prefetch() (backup_engine batches
    # them); a VFS without prefetch has none.
    prefetch_size = PREFETCH_SIZE

    def __repr__(self):
        return 'SftpFS(%r)' % self.url

    # --- plumbing ---------------------------------------------------------

    def _resolve_root(self, parsed):
        path = _clean_rel(parsed.path)
        if not parsed.home_relative:
            return b'/' + path
        return _join(self.realpath(b'.'), path)

    def path_of(self, url):
        """The absolute server path (bytes) of another URL on this server.

        For pull backups: the live-data methods take these paths.
        """
        parsed = SftpUrl(url)
        if (parsed.host, parsed.port, parsed.user) != (
                self.parsed.host, self.parsed.port, self.parsed.user):
            raise ObnamSystemError(
                filename=url, errno=errno.EXDEV,
                strerror='all sftp:// roots of a run must be on the same '
                         'server as %s' % self.url)
        return self._resolve_root(parsed)

    def _lost(self, error):
        reason = str(error).rstrip(': ') or type(error).__name__
        last = getattr(self.connection, 'stderr_lines', None)
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
        copied into a paramiko Message, whose bytes coercion would first
        format the whole message into an error text.
        """
        self._check_alive()
        self._fresh_listing = None
        self.requests[args[0] if kind == proto.CMD_EXTENDED
                      else _REQUEST_NAMES.get(kind, kind)] += 1
        self._sent_since_wait = True
        num = self.wire.number(self._replies if collect else None)
        body = _encode(num, args)
        if payload is not None:
            body += struct.pack('>I', len(payload))
        length = len(body) + 1 + (len(payload) if payload is not None else 0)
        try:
            self.wire.queue(struct.pack('>IB', length, kind) + body, payload)
        except (EOFError, OSError, paramiko.SSHException) as e:
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
        except (EOFError, OSError, paramiko.SSHException) as e:
            raise self._lost(e)
        kind, msg = got.pop(num)
        if kind == proto.CMD_STATUS:
            error = _status_error(msg, self._error_name(path))
            if error is not None:
                raise error
        return kind, msg

    def _error_name(self, path):
        """The file an error is about: a repository file (str path) as
        sftp://HOST/ABSOLUTE-PATH, for people to find it; live data as
        given (callers put it in their own errors)."""
        if path is None:
            return None
        if isinstance(path, str):
            return self.url_of(self._abs(path))
        return _fs_path(path)

    def url_of(self, full):
        """The sftp:// URL of an absolute server path (bytes)."""
        parsed = self.parsed
        host = '[%s]' % parsed.host if ':' in parsed.host else parsed.host
        return 'sftp://%s%s%s%s' % (
            parsed.user + '@' if parsed.user else '', host,
            ':%d' % parsed.port if parsed.port else '', os.fsdecode(full))

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
            _, msg = self._call(proto.CMD_EXTENDED, 'statvfs@openssh.com',
                                os.path.dirname(full))
        except OSError:
            return False        # not OpenSSH: cannot tell
        fields = [msg.get_int64() for _ in range(8)]
        frsize, bavail, favail = fields[1], fields[4], fields[7]
        return bavail * frsize < CHUNK or favail == 0

    def _abs(self, path):
        """Server path for a StorageFS (relative) or live-data path."""
        if isinstance(path, bytes) and path.startswith(b'/'):
            return path
        return _join(self.root_bytes, _clean_rel(path))

    # --- basic operations -------------------------------------------------

    def realpath(self, path):
        kind, msg = self._call(proto.CMD_REALPATH, path, path=path)
        msg.get_int()
        return msg.get_string()

    def _attrs(self, kind, full, path):
        _, msg = self._call(kind, full, path=path)
        return SFTPAttributes._from_msg(msg)

    @_live_errors(ObnamSystemError)
    def lstat(self, path):
        """Like scandir's entries, with owner names and link count: those
        come only in a directory listing, so the parent is listed (once
        per directory while its entries match)."""
        full = self._abs(path)
        attrs = self._attrs(proto.CMD_LSTAT, full, path)
        return RemoteStat(attrs, full, self._longname(full, attrs))

    def _longname(self, full, attrs):
        parent, name = os.path.split(full)
        if not name:
            parent, name = full, b'.'   # the root's own entry
        for fresh in (False, True):
            if fresh or self._listed[0] != parent:
                try:
                    entries = self._read_dir(parent, parent, dots=True)
                except OSError:
                    return None         # e.g. a parent we may not list
                self._listed = (parent, {n: (a, longname)
                                         for n, a, longname in entries})
            entry = self._listed[1].get(name)
            if entry is not None and _same_attrs(entry[0], attrs):
                return entry[1]
        return None

    def stat(self, path):
        full = self._abs(path)
        return RemoteStat(self._attrs(proto.CMD_STAT, full, path), full)

    @_live_errors(ObnamSystemError)
    def exists(self, path):
        full = self._abs(path)
        known, attrs = self._listed_attrs(full)
        if known:
            return attrs is not None
        return self._exists_abs(full)

    @_live_errors(ObnamSystemError)
    def isdir(self, path):
        known, attrs = self._listed_attrs(self._abs(path))
        if known:
            return attrs is not None and stat.S_ISDIR(attrs.st_mode or 0)
        try:
            return stat.S_ISDIR(self.stat(path).st_mode)
        except FileNotFoundError:
            return False

    def _open(self, full, flags, path, mode=FILE_MODE):
        _, msg = self._wait(self._send_open(full, flags, mode), path)
        return msg.get_binary()

    def _send_open(self, full, flags, mode=FILE_MODE):
        attrs = SFTPAttributes()
        if flags & proto.SFTP_FLAG_CREATE:
            attrs.st_mode = mode
        return self._send(proto.CMD_OPEN, full, flags, attrs)

    def _close_handle(self, handle, wait=False):
        num = self._send(proto.CMD_CLOSE, handle, collect=wait)
        if wait:
            return num
        return None

    # --- directory listing ------------------------------------------------

    def _read_dir(self, full, path, dots=False):
        """[(name, SFTPAttributes, longname)] of `full`, without . and ..
        unless `dots`."""
        result = self._read_dirs([full], [path], dots)[0]
        if isinstance(result, Exception):
            raise result
        return result

    def _read_dirs(self, fulls, paths, dots=False):
        """Several listings with all requests in flight together: every
        OPENDIR, then READDIRs for every handle (OpenSSH sends up to 100
        names each) until each says EOF.  For each: the entries, or the
        OSError."""
        opens = [self._send(proto.CMD_OPENDIR, full) for full in fulls]
        results = [[] for _ in fulls]
        active = []
        for i, num in enumerate(opens):
            try:
                _, msg = self._wait(num, paths[i])
                active.append((i, msg.get_binary()))
            except OSError as e:
                results[i] = e
        per_handle = READDIRS_IN_FLIGHT if len(fulls) == 1 else 2
        while active:
            sent = [(i, handle, [self._send(proto.CMD_READDIR, handle)
                                 for _ in range(per_handle)])
                    for i, handle in active]
            done = [(i, handle) for i, handle, nums in sent
                    if self._collect_names(nums, results, i, paths[i])]
            for _, handle in done:
                self._close_handle(handle)
            active = [(i, handle) for i, handle, _ in sent
                      if (i, handle) not in done]
            per_handle = READDIRS_IN_FLIGHT
        if dots:
            return results
        return [r if isinstance(r, Exception) else
                [entry for entry in r if entry[0] not in (b'.', b'..')]
                for r in results]

    def _collect_names(self, nums, results, i, path):
        """Add the READDIR replies to results[i]; True once it is done."""
        done = False
        for num in nums:
            try:
                _, msg = self._wait(num, path)
            except EOFError:
                done = True
                continue
            except OSError as e:
                results[i] = e
                done = True
                continue
            if not done and not isinstance(results[i], Exception):
                results[i].extend(_names_from(msg))
        return done

    def listdir(self, path):
        """Names; their attributes (which came along) answer the next
        isdir/exists of each, as long as nothing else is sent meanwhile:
        walking a tree with listdir + isdir costs no round trip per stat."""
        full = self._abs(path)
        entries = self._read_dir(full, path)
        self._fresh_listing = (full, {n: a for n, a, _ in entries})
        return [n.decode('utf-8', 'surrogateescape') for n, _, _ in entries]

    def _listed_attrs(self, full):
        """(known, attrs) of `full` from the listing just made: attrs None
        if it was not there.  Each entry answers once (a caller polling a
        path must see the server again)."""
        listing = self._fresh_listing
        parent, name = os.path.split(full)
        if listing is None or listing[0] != parent or not name:
            return False, None
        entries = listing[1]
        if name not in entries:     # absent when listed: say so once
            self._fresh_listing = None
            return True, None
        attrs = entries[name]
        if attrs is None or stat.S_ISLNK(attrs.st_mode or 0):
            return False, None      # answered already, or a link: ask
        entries[name] = None        # each entry answers once
        return True, attrs

    @_live_errors(ObnamSystemError)
    def scandir(self, path):
        listing = self._prefetched_dirs.pop(path, None)
        if listing is None:
            full = self._abs(path)
            listing = _scan_entries(full, self._read_dir(full, path))
        if isinstance(listing, Exception):
            raise listing
        return listing

    def prefetch_listings(self, paths):
        """List these directories now, together (two round trips for
        directories of up to 100 entries), for the scandir calls that
        follow (each once); an error is raised by its scandir."""
        fulls = [self._abs(path) for path in paths]
        self._prefetched_dirs.update(
            (path, result if isinstance(result, Exception) else
             _scan_entries(full, result))
            for path, full, result in zip(
                paths, fulls, self._read_dirs(fulls, paths)))

    # --- whole files (StorageFS) ------------------------------------------

    def read_file(self, path):
        return self.read_files([path])[0]

    def read_files(self, paths):
        """The contents of several whole files, in three round trips.

        Every OPEN is in flight at once, then every FSTAT and first READ,
        then the rest of the larger files.  For callers that know what they
        will read next (restoring a file's chunks, B-tree nodes); raises
        like read_file (FileNotFoundError) for the first file that fails.
        """
        opened = self._open_for_reading(paths)
        handles = [r if isinstance(r, bytes) else None for r in opened]
        error = next((r for r in opened if isinstance(r, Exception)), None)
        try:
            if error is not None:
                raise error
            data = self._read_handles(paths, handles)
        finally:
            for handle in handles:
                if handle is not None:
                    self._close_handle(handle)
        self.bytes_read += sum(len(d) for d in data)
        return data

    def _read_handles(self, paths, handles):
        """Every FSTAT and FIRST_READS READs in flight; then the rest of
        every larger file, together.  (READs past the end cost the server
        a short EOF reply, but no round trip.)"""
        first = FIRST_READS
        sent = [(self._send(proto.CMD_FSTAT, handle),
                 [(offset, self._send(proto.CMD_READ, handle, int64(offset),
                                      CHUNK))
                  for offset in range(0, first * CHUNK, CHUNK)])
                for handle in handles]
        sizes, data = [], []
        for path, (fstat, reads) in zip(paths, sent):
            _, msg = self._wait(fstat, path)
            sizes.append(SFTPAttributes._from_msg(msg).st_size or 0)
            data.append(_collect_reads(self, reads, _Pieces(), path))
        rest = [_send_reads(self, handle, len(got), size)
                for handle, got, size in zip(handles, data, sizes)]
        for path, handle, got, size, reads in zip(paths, handles, data,
                                                  sizes, rest):
            if reads:
                _collect_reads(self, reads, got, path)
                _read_more(self, handle, path, got, size)
        return [bytes(got) for got in data]

    def write_file(self, path, data):
        full = self._abs(path)
        tmp = self._write_temp(full, data, path)
        try:
            self._replace(tmp, full, path)
        except SftpConnectionLost:
            raise
        except BaseException:
            self._remove_quietly(tmp)
            raise
        self.bytes_written += len(data)

    def create_file(self, path, data):
        """Create `path` holding `data`; FileExistsError if it exists.

        Exclusive (SSH_FXF_EXCL) and two round trips: the OPEN, then every
        WRITE and the CLOSE.  Like an exclusive create on a local disk (and
        Obnam 1.x's chunk writes), a connection lost in the middle can leave
        a short file; chunk files are referenced only after this returns,
        so such a file is an unused chunk, as after any crash.  A failed
        write with the connection alive removes the file again.
        """
        full = self._abs(path)
        handle = self._open_exclusive(full, path)
        try:
            self._write_and_close(handle, data, full, path)
        except SftpConnectionLost:
            raise
        except BaseException:
            self._remove_quietly(full)
            raise
        self.bytes_written += len(data)

    def _write_and_close(self, handle, data, full, path):
        """Every WRITE of `data` and the CLOSE in flight at once."""
        self._wait_writes(self._send_writes(handle, data), full, path)

    def _send_writes(self, handle, data):
        nums = [self._send(proto.CMD_WRITE, handle, int64(offset),
                           payload=data[offset:offset + CHUNK])
                for offset in range(0, len(data), CHUNK)]
        nums.append(self._close_handle(handle, wait=True))
        return nums

    def create_files(self, items):
        """create_file for several (path, data) at once, in two round
        trips (three if directories are missing): every OPEN in flight,
        then every WRITE and CLOSE.  For a caller storing many chunks
        together.  Returns, per item, None or the FileExistsError; any
        other error is raised once every reply came (files created by the
        call before it stay: unused chunks, as after a crash)."""
        paths = [path for path, _ in items]
        fulls = [self._abs(path) for path in paths]
        opened = self._open_many_exclusive(fulls, paths)
        writes = [(i, self._send_writes(handle, items[i][1]))
                  for i, handle in enumerate(opened)
                  if isinstance(handle, bytes)]
        error = next((r for r in opened if isinstance(r, Exception) and
                      not isinstance(r, FileExistsError)), None)
        for i, nums in writes:
            try:
                self._wait_writes(nums, fulls[i], paths[i])
                self.bytes_written += len(items[i][1])
            except OSError as e:
                self._remove_quietly(fulls[i])
                error = error or e
        if error is not None:
            raise error
        return [r if isinstance(r, FileExistsError) else None
                for r in opened]

    def _open_many_exclusive(self, fulls, paths):
        """Per file: its handle from an exclusive OPEN, or the OSError
        (FileExistsError if it exists); missing directories are made."""
        opened = self._collect(
            [self._send_open(full, _EXCLUSIVE) for full in fulls], paths)
        missing = [i for i, r in enumerate(opened)
                   if isinstance(r, FileNotFoundError)]
        if missing:
            dirs = sorted({os.path.dirname(fulls[i]) for i in missing})
            mkdirs = [(d, self._send_mkdirs(self._missing_chain(d)))
                      for d in dirs]
            retries = [self._send_open(fulls[i], _EXCLUSIVE)
                       for i in missing]
            for d, sent in mkdirs:
                self._wait_mkdirs(sent, d, d)
            for i, result in zip(missing, self._collect(
                    retries, [paths[i] for i in missing])):
                opened[i] = result
        for i, result in enumerate(opened):
            if isinstance(result, OSError) and result.errno == errno.EIO \
                    and self._exists_abs(fulls[i]):
                opened[i] = FileExistsError(
                    errno.EEXIST, os.strerror(errno.EEXIST),
                    self._error_name(paths[i]))
        return opened

    def _open_for_reading(self, paths):
        """Every OPEN in flight: per path its handle or the OSError."""
        return self._collect([self._send_open(self._abs(path),
                                              proto.SFTP_FLAG_READ)
                              for path in paths], paths)

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

    def _write_temp(self, full, data, path):
        """Write `data` to a new temporary file beside `full`; its name."""
        tmp = _temp_name(full)
        handle = self._create_making_parents(tmp, path, _TRUNCATE)
        try:
            self._write_and_close(handle, data, full, path)
        except SftpConnectionLost:
            raise
        except BaseException:
            self._remove_quietly(tmp)
            raise
        return tmp

    def _create_making_parents(self, full, path, flags):
        """Open a file for writing; if its directory is missing, make it
        and retry in the same round trip."""
        try:
            return self._open(full, flags, path)
        except FileNotFoundError:
            dirname = os.path.dirname(full)
            sent = self._send_mkdirs(self._missing_chain(dirname))
            num = self._send_open(full, flags)
            self._wait_mkdirs(sent, dirname, path)
            _, msg = self._wait(num, path)
            return msg.get_binary()

    def _replace(self, old, new, path):
        if self._has_posix_rename:
            try:
                self._call(proto.CMD_EXTENDED, 'posix-rename@openssh.com',
                           old, new, path=path)
                return
            except OSError as e:
                if e.errno != errno.ENOTSUP:
                    raise
                log.warning('SFTP server lacks posix-rename: replacing '
                            'files is not atomic')
                self._has_posix_rename = False
        try:
            self._call(proto.CMD_REMOVE, new, path=path)
        except FileNotFoundError:
            pass
        self._call(proto.CMD_RENAME, old, new, path=path)

    def _remove_quietly(self, full):
        try:
            if self._dead is None:
                self._call(proto.CMD_REMOVE, full)
        except (OSError, ObnamError):
            pass

    # --- StorageFS, the rest ----------------------------------------------

    @_live_errors(ObnamSystemError)
    def makedirs(self, path):
        self._makedirs_abs(self._abs(path), path)

    def _makedirs_abs(self, full, path):
        """Make `full` and its missing parents: all MKDIRs in flight."""
        chain = self._missing_chain(full)
        if chain:
            self._wait_mkdirs(self._send_mkdirs(chain), full, path)

    def _missing_chain(self, full):
        """`full` and its ancestors not known to exist, top down."""
        chain = []
        while full not in self._known_dirs and full not in (b'', b'/'):
            chain.append(full)
            full = os.path.dirname(full)
        return chain[::-1]

    def _send_mkdirs(self, chain):
        attrs = SFTPAttributes()
        attrs.st_mode = DIR_MODE
        return [(d, self._send(proto.CMD_MKDIR, d, attrs)) for d in chain]

    def _wait_mkdirs(self, sent, full, path):
        """Existing directories fail harmlessly; only `full` must be one."""
        first_error = last_error = None
        for dirname, num in sent:
            try:
                self._wait(num, path)
                last_error = None
            except OSError as e:
                last_error = e
                if e.errno != errno.EIO and first_error is None:
                    first_error = e
        if last_error is not None:
            if last_error.errno != errno.EIO:
                raise first_error or last_error
            attrs = self._attrs(proto.CMD_STAT, full, path)
            if not stat.S_ISDIR(attrs.st_mode or 0):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST),
                                      _fs_path(path))
        self._known_dirs.update(dirname for dirname, _ in sent)

    def _mkdir_abs(self, full, mode, path):
        attrs = SFTPAttributes()
        attrs.st_mode = mode
        self._call(proto.CMD_MKDIR, full, attrs, path=path)

    @_live_errors(ObnamSystemError)
    def mkdir(self, path, mode=0o777):
        full = self._abs(path)
        try:
            self._mkdir_abs(full, mode, path)
        except OSError as e:
            if e.errno == errno.EIO and self._exists_abs(full):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST),
                                      _fs_path(path))
            raise
        self._known_dirs.add(full)

    def _exists_abs(self, full):
        try:
            self._attrs(proto.CMD_LSTAT, full, full)
        except FileNotFoundError:
            return False
        return True

    @_live_errors(ObnamSystemError)
    def remove(self, path):
        self._call(proto.CMD_REMOVE, self._abs(path), path=path)

    @_live_errors(ObnamSystemError)
    def rmdir(self, path):
        full = self._abs(path)
        try:
            self._call(proto.CMD_RMDIR, full, path=path)
        except OSError as e:
            if e.errno == errno.EIO and self._read_dir(full, path):
                raise OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY),
                              _fs_path(path))
            raise
        self._known_dirs.discard(full)

    def rename(self, old, new):
        full_old, full_new = self._abs(old), self._abs(new)
        try:
            self._replace(full_old, full_new, old)
        except FileNotFoundError:
            self._makedirs_abs(os.path.dirname(full_new), new)
            self._replace(full_old, full_new, old)

    # --- locks --------------------------------------------------------------

    def lock(self, path, content=b''):
        """Create `path` exclusively (SSH_FXF_EXCL); LockFail if it exists."""
        full = self._abs(path)
        try:
            handle = self._open_exclusive(full, path)
        except FileExistsError:
            raise LockFail(lock_name=_fs_path(path),
                           reason='it already exists')
        self._write_and_close(handle, bytes(content), full, path)

    def _open_exclusive(self, full, path):
        """Open a new file with SSH_FXF_EXCL; FileExistsError if it exists.

        The server says only "Failure" when the file exists; if it is gone
        by the time we look (its holder just released a lock), try again.
        """
        for attempt in range(EXCL_ATTEMPTS):
            try:
                return self._create_making_parents(full, path, _EXCLUSIVE)
            except OSError as e:
                if e.errno != errno.EIO:
                    raise
                if self._exists_abs(full):
                    raise FileExistsError(errno.EEXIST,
                                          os.strerror(errno.EEXIST),
                                          _fs_path(path))
                failure = e
        raise failure

    def unlock(self, path):
        self.remove(path)

    # --- live data ----------------------------------------------------------

    @_live_errors(ObnamSystemError)
    def readlink(self, path):
        _, msg = self._call(proto.CMD_READLINK, self._abs(path), path=path)
        msg.get_int()
        return msg.get_string()

    @_live_errors(ObnamIOError)
    def open_read(self, path):
        prefetched = self._prefetched.pop(path, None)
        if isinstance(prefetched, Exception):
            raise prefetched
        if prefetched is not None:
            return io.BytesIO(prefetched)
        full = self._abs(path)
        handle = self._open(full, proto.SFTP_FLAG_READ, path)
        return _PipelinedReader(self, handle, path)

    def prefetch(self, paths):
        """Read these files now, for the open_read calls that follow: every
        OPEN in flight, then two READs each (data and EOF), in two round
        trips for all.  For small files (up to PREFETCH_SIZE): a larger or
        growing one is left to open_read's stream; an error is raised by
        its open_read.  Replaces what an earlier call fetched."""
        self._prefetched = {}
        handles = []
        for path, result in zip(paths, self._open_for_reading(paths)):
            if isinstance(result, bytes):
                handles.append((path, result))
            else:
                self._prefetched[path] = result
        reads = [(path, handle,
                  self._send(proto.CMD_READ, handle, int64(0), CHUNK),
                  self._send(proto.CMD_READ, handle, int64(CHUNK), CHUNK))
                 for path, handle in handles]
        results = [(path, [self._data_or_error(num, path)
                           for num in (first, second)])
                   for path, _, first, second in reads]
        for _, handle in handles:
            self._close_handle(handle)
        for path, (data, more) in results:
            for result in (data, more):
                if isinstance(result, OSError):
                    self._prefetched[path] = result
            if path not in self._prefetched and len(data) < CHUNK and \
                    not more:
                self._prefetched[path] = data

    def _data_or_error(self, num, path):
        try:
            return _data_or_eof(self, num, path)
        except OSError as e:
            return e

    @_live_errors(ObnamIOError)
    def open_write(self, path, mode=FILE_MODE):
        full = self._abs(path)
        flags = _TRUNCATE
        return _PipelinedWriter(self, self._open(full, flags, path, mode),
                                path, full)

    def llistxattr(self, path):
        """SFTP (OpenSSH) has no extended attributes: there are none."""
        return []

    @_live_errors(ObnamSystemError)
    def lgetxattr(self, path, name):
        raise OSError(errno.ENOTSUP, 'SFTP has no extended attributes',
                      _fs_path(path))

    @_live_errors(ObnamSystemError)
    def lsetxattr(self, path, name, value):
        raise OSError(errno.ENOTSUP, 'SFTP has no extended attributes',
                      _fs_path(path))

    def _setstat(self, path, attrs, follow):
        full = self._abs(path)
        if not follow and self._has_lsetstat:
            try:
                self._call(proto.CMD_EXTENDED, 'lsetstat@openssh.com', full,
                           attrs, path=path)
                return
            except OSError as e:
                if e.errno != errno.ENOTSUP:
                    raise
                self._has_lsetstat = False
        if not follow and stat.S_ISLNK(
                self._attrs(proto.CMD_LSTAT, full, path).st_mode or 0):
            return      # the server can only change the link's target
        self._call(proto.CMD_SETSTAT, full, attrs, path=path)

    @_live_errors(ObnamSystemError)
    def lchown(self, path, uid, gid):
        self._setstat(path, self._owner_attrs(path, uid, gid), follow=False)

    def _owner_attrs(self, path, uid, gid):
        """SFTP sets both ids or neither: -1 means the current one."""
        if uid == -1 or gid == -1:
            st = self._attrs(proto.CMD_LSTAT, self._abs(path), path)
            uid = st.st_uid if uid == -1 else uid
            gid = st.st_gid if gid == -1 else gid
        attrs = SFTPAttributes()
        attrs.st_uid, attrs.st_gid = uid, gid
        return attrs

    @_live_errors(ObnamSystemError)
    def chmod(self, path, mode):
        self._setstat(path, _mode_attrs(mode), follow=True)

    @_live_errors(ObnamSystemError)
    def lutimes(self, path, atime_ns, mtime_ns):
        self._setstat(path, _times_attrs(atime_ns, mtime_ns), follow=False)

    def set_attributes(self, path, owner=None, mode=None, times=None):
        """lchown(*owner), chmod(mode) and lutimes(*times) of one path, in
        that order (the server keeps it), with the requests in flight
        together: restoring a file's metadata in one round trip.  Returns
        {'owner'|'mode'|'times': ObnamSystemError} for those that failed."""
        steps = [(name, args) for name, args in
                 (('owner', owner), ('mode', mode), ('times', times))
                 if args is not None]
        if self._has_lsetstat:
            failures = self._set_pipelined(path, steps)
            if not any(e.errno == errno.ENOTSUP for e in failures.values()):
                return failures
            self._has_lsetstat = False      # not OpenSSH: one at a time
        return self._set_one_by_one(path, steps)

    def _set_pipelined(self, path, steps):
        full = self._abs(path)
        failures, sent = {}, []
        for name, args in steps:
            try:
                attrs, follow = self._step_attrs(path, name, args)
            except ObnamSystemError as e:
                failures[name] = e
                continue
            kind = ((proto.CMD_SETSTAT,) if follow else
                    (proto.CMD_EXTENDED, 'lsetstat@openssh.com'))
            sent.append((name, self._send(*kind, full, attrs)))
        for name, num in sent:
            try:
                self._wait(num, path)
            except OSError as e:
                failures[name] = ObnamSystemError(
                    filename=path, errno=e.errno, strerror=e.strerror)
        return failures

    def _step_attrs(self, path, name, args):
        if name == 'owner':
            try:
                return self._owner_attrs(path, *args), False
            except OSError as e:
                raise ObnamSystemError(filename=path, errno=e.errno,
                                       strerror=e.strerror)
        if name == 'mode':
            return _mode_attrs(args), True
        return _times_attrs(*args), False

    def _set_one_by_one(self, path, steps):
        calls = {'owner': self.lchown, 'mode': self.chmod,
                 'times': self.lutimes}
        failures = {}
        for name, args in steps:
            try:
                calls[name](path, *(args if name != 'mode' else (args,)))
            except ObnamSystemError as e:
                failures[name] = e
        return failures

    @_live_errors(ObnamSystemError, arg=1)
    def symlink(self, target, path):
        # OpenSSH's server takes the arguments in the opposite order to the
        # SFTP draft: target first, as paramiko sends them.
        self._call(proto.CMD_SYMLINK, target, self._abs(path), path=path)

    @_live_errors(ObnamSystemError, arg=1)
    def link(self, existing, new):
        try:
            self._call(proto.CMD_EXTENDED, 'hardlink@openssh.com',
                       self._abs(existing), self._abs(new), path=new)
        except OSError as e:
            if e.errno == errno.ENOTSUP:
                raise HardlinkError()
            raise

    @_live_errors(ObnamSystemError)
    def mknod(self, path, mode, device=0):
        raise OSError(errno.ENOTSUP, 'SFTP cannot create device files or '
                      'FIFOs', _fs_path(path))

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
            except (EOFError, OSError, paramiko.SSHException):
                pass
            if self.owns_connection:
                try:
                    self.connection.close()
                except (OSError, EOFError, paramiko.SSHException):
                    pass
            self.connection = None
            self._dead = 'connection closed'


def _mode_attrs(mode):
    attrs = SFTPAttributes()
    attrs.st_mode = mode
    return attrs


def _times_attrs(atime_ns, mtime_ns):
    """SFTP v3 times: whole seconds, 32 bits."""
    attrs = SFTPAttributes()
    attrs.st_atime = (atime_ns // 10**9) & 0xffffffff
    attrs.st_mtime = (mtime_ns // 10**9) & 0xffffffff
    return attrs


def _encode(num, args):
    """The fields of an SFTP request, packed as paramiko packs them
    (without a paramiko Message per request: thousands per restore)."""
    parts = [_UINT32.pack(num)]
    for item in args:
        if isinstance(item, int64):
            parts.append(_UINT64.pack(item))
        elif isinstance(item, int):
            parts.append(_UINT32.pack(item))
        elif isinstance(item, SFTPAttributes):
            parts.append(_encode_attrs(item))
        else:
            if isinstance(item, str):
                item = item.encode('utf-8')
            parts.append(_UINT32.pack(len(item)))
            parts.append(item)
    return b''.join(parts)


_UINT32 = struct.Struct('>I')
_UINT64 = struct.Struct('>Q')
_NO_ATTRS = _UINT32.pack(0)


def _encode_attrs(attrs):
    if (attrs.st_size is None and attrs.st_uid is None and
            attrs.st_mode is None and attrs.st_atime is None and
            not attrs.attr):
        return _NO_ATTRS
    msg = paramiko.Message()
    attrs._pack(msg)
    return msg.asbytes()


def _setting_int(settings, name):
    try:
        return int(settings[name] or 0)
    except (KeyError, TypeError, ValueError):
        return 0


def _temp_name(full):
    return _join(os.path.dirname(full),
                 b'tmp' + uuid.uuid4().hex[:16].encode('ascii'))


def _scan_entries(full, raw):
    """scandir's sorted (name, RemoteStat) list from _read_dir entries."""
    entries = [(name, RemoteStat(attrs, _join(full, name), longname))
               for name, attrs, longname in raw]
    entries.sort(key=lambda entry: entry[0])
    return entries


def _names_from(msg):
    """(filename, attrs, longname) from an SSH_FXP_NAME reply."""
    count = msg.get_int()
    result = []
    for _ in range(count):
        name = msg.get_string()
        longname = msg.get_string()
        result.append((name, SFTPAttributes._from_msg(msg), longname))
    return result


def _data_or_eof(fs, num, path):
    try:
        _, msg = fs._wait(num, path)
    except EOFError:
        return b''
    return msg.get_string()


def _send_reads(fs, handle, start, size):
    """READs for [start, size) in flight: [(offset, request number)]."""
    return [(offset, fs._send(proto.CMD_READ, handle, int64(offset),
                              min(CHUNK, size - offset)))
            for offset in range(start, size, CHUNK)]


class _Pieces:
    """A file's content as the READ replies brought it, joined once at
    the end (no copy at all when one reply held the whole file)."""

    __slots__ = ('pieces', 'size')

    def __init__(self):
        self.pieces = []
        self.size = 0

    def __len__(self):
        return self.size

    def __iadd__(self, piece):
        self.pieces.append(piece)
        self.size += len(piece)
        return self

    def __bytes__(self):
        return b''.join(self.pieces)


def _collect_reads(fs, reads, data, path):
    """Append the replies that continue `data` (_Pieces); after a short
    or empty one the rest are out of step and only drained."""
    in_step = True
    for offset, num in reads:
        piece = _data_or_eof(fs, num, path)
        if in_step and offset == len(data) and piece:
            data += piece
            in_step = len(piece) == CHUNK
        else:
            in_step = False
    return data


def _read_more(fs, handle, path, data, size):
    """Complete `data` up to `size` bytes (a server sending less per READ
    than asked, or a file that grew): round after round until EOF."""
    while len(data) < size:
        before = len(data)
        _collect_reads(fs, _send_reads(fs, handle, before, size), data, path)
        if len(data) == before:
            break
    return data


class _PipelinedReader:
    """A read-only file that keeps up to READ_AHEAD requests in flight.

    The window starts at two requests (a small file's data and its EOF in
    one round trip) and doubles with every full reply, like TCP slow start.
    """

    def __init__(self, fs, handle, path):
        self.fs = fs
        self.handle = handle
        self.path = path
        self.pos = 0            # offset of the first byte not yet received
        self.next_offset = 0    # offset of the next READ to send
        self.pending = deque()
        self.buffer = bytearray()
        self.eof = False
        self.window = 2

    def _fill(self):
        while len(self.pending) < self.window and not self.eof:
            num = self.fs._send(proto.CMD_READ, self.handle,
                                int64(self.next_offset), CHUNK)
            self.pending.append((self.next_offset, num))
            self.next_offset += CHUNK

    def _receive_one(self):
        offset, num = self.pending.popleft()
        piece = _data_or_eof(self.fs, num, self.path)
        if offset != self.pos:
            return      # after a short read: this one is out of step
        if not piece:
            self.eof = True
            return
        self.buffer += piece
        self.pos += len(piece)
        if len(piece) < CHUNK:
            self._after_short_read()
        else:
            self.window = min(READ_AHEAD, self.window * 2)

    def _after_short_read(self):
        """A short reply is the end of the file if the request after it
        got EOF (a small file: one round trip); otherwise the server sends
        less per READ, so drop the requests in flight and ask again from
        here."""
        following = []
        while self.pending:
            _, num = self.pending.popleft()
            following.append(_data_or_eof(self.fs, num, self.path))
        if following and not following[0]:
            self.eof = True
        self.next_offset = self.pos

    @_stream_errors
    def read(self, size=-1):
        while (size < 0 or len(self.buffer) < size) and not self.eof:
            self._fill()
            self._receive_one()
        if size < 0:
            size = len(self.buffer)
        result = bytes(self.buffer[:size])
        del self.buffer[:size]
        return result

    def close(self):
        if self.handle is None:
            return
        while self.pending:
            _, num = self.pending.popleft()
            try:
                _data_or_eof(self.fs, num, self.path)
            except OSError:
                pass
        self.fs._close_handle(self.handle)
        self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _PipelinedWriter:
    """A write-only file with up to WRITES_IN_FLIGHT requests in flight."""

    def __init__(self, fs, handle, path, full):
        self.fs = fs
        self.handle = handle
        self.path = path
        self.full = full        # the path on the server
        self.offset = 0         # where the buffer starts in the file
        self.buffer = bytearray()
        self.pending = deque()

    @_stream_errors
    def write(self, data):
        self.buffer += data
        while len(self.buffer) >= CHUNK:
            self._send(bytes(self.buffer[:CHUNK]))
            del self.buffer[:CHUNK]
        return len(data)

    @_stream_errors
    def seek(self, pos, whence=os.SEEK_SET):
        """Move to `pos` (leaving a hole, for sparse files)."""
        self._flush()
        if whence == os.SEEK_CUR:
            pos += self.offset
        elif whence != os.SEEK_SET:
            raise OSError(errno.EINVAL, 'only SEEK_SET and SEEK_CUR')
        self.offset = pos
        return pos

    def tell(self):
        return self.offset + len(self.buffer)

    @_stream_errors
    def truncate(self, size=None):
        """Set the file's size (in order with the writes before it)."""
        self._flush()
        attrs = SFTPAttributes()
        attrs.st_size = self.offset if size is None else size
        self.pending.append(self.fs._send(proto.CMD_FSETSTAT, self.handle,
                                          attrs))
        return attrs.st_size

    def _flush(self):
        if self.buffer:
            self._send(bytes(self.buffer))
            self.buffer.clear()

    def _send(self, piece):
        num = self.fs._send(proto.CMD_WRITE, self.handle, int64(self.offset),
                            payload=piece)
        self.pending.append(num)
        self.offset += len(piece)
        if len(self.pending) > WRITES_IN_FLIGHT:
            self.fs._wait_writes([self.pending.popleft()], self.full,
                                 self.path)

    @_stream_errors
    def close(self):
        if self.handle is None:
            return
        try:
            self._flush()
            nums = list(self.pending)
            self.pending.clear()
        finally:
            close = self.fs._close_handle(self.handle, wait=True)
            self.handle = None
        self.fs._wait_writes(nums + [close], self.full, self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
