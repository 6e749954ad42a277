"""SFTP v3 (draft-ietf-secsh-filexfer-02) messages as bytes: request
fields packed, reply fields read, file attributes both ways.

Our own codec, on purpose: the packets go over a channel opened with
paramiko's public API (or the OpenSSH client's pipes), and nothing here
depends on paramiko's SFTP client or its private state.
"""

import struct

# Message types.
CMD_INIT, CMD_VERSION = 1, 2
CMD_OPEN, CMD_CLOSE, CMD_READ, CMD_WRITE = 3, 4, 5, 6
CMD_LSTAT, CMD_FSTAT, CMD_SETSTAT, CMD_FSETSTAT = 7, 8, 9, 10
CMD_OPENDIR, CMD_READDIR, CMD_REMOVE, CMD_MKDIR, CMD_RMDIR = 11, 12, 13, 14, 15
CMD_REALPATH, CMD_STAT, CMD_RENAME, CMD_READLINK, CMD_SYMLINK = (
    16, 17, 18, 19, 20)
CMD_STATUS, CMD_HANDLE, CMD_DATA, CMD_NAME, CMD_ATTRS = 101, 102, 103, 104, 105
CMD_EXTENDED, CMD_EXTENDED_REPLY = 200, 201

# The names requests are counted (and logged) by.
REQUEST_NAMES = {
    value: name[4:] for name, value in list(globals().items())
    if name.startswith('CMD_')}

# STATUS codes.
SFTP_OK, SFTP_EOF, SFTP_NO_SUCH_FILE, SFTP_PERMISSION_DENIED = 0, 1, 2, 3
SFTP_FAILURE, SFTP_BAD_MESSAGE, SFTP_NO_CONNECTION = 4, 5, 6
SFTP_CONNECTION_LOST, SFTP_OP_UNSUPPORTED = 7, 8

# OPEN flags.
SFTP_FLAG_READ, SFTP_FLAG_WRITE, SFTP_FLAG_APPEND = 0x1, 0x2, 0x4
SFTP_FLAG_CREATE, SFTP_FLAG_TRUNC, SFTP_FLAG_EXCL = 0x8, 0x10, 0x20
TRUNCATE = SFTP_FLAG_WRITE | SFTP_FLAG_CREATE | SFTP_FLAG_TRUNC
EXCLUSIVE = SFTP_FLAG_WRITE | SFTP_FLAG_CREATE | SFTP_FLAG_EXCL

VERSION = 3

# Which fields an attribute block carries.
_ATTR_SIZE, _ATTR_UIDGID, _ATTR_PERMISSIONS = 0x1, 0x2, 0x4
_ATTR_ACMODTIME, _ATTR_EXTENDED = 0x8, 0x80000000

_UINT32 = struct.Struct('>I')
_UINT64 = struct.Struct('>Q')


class ProtocolError(Exception):
    """The server sent something SFTP v3 does not allow."""


class int64(int):
    """An offset: packed as 64 bits (plain ints are 32-bit fields)."""


class Attrs:
    """An SFTP v3 attribute block: the fields the server sent (None for
    those it left out), or the fields to change (only those given)."""

    FIELDS = ('st_size', 'st_uid', 'st_gid', 'st_mode', 'st_atime',
              'st_mtime', 'extended')
    # What a block without the field says (class attributes: reading a
    # reply sets only what it carries, thousands of times per listing).
    st_size = st_uid = st_gid = st_mode = st_atime = st_mtime = None
    extended = ()       # (name, value) pairs

    def __init__(self, **fields):
        for name, value in fields.items():
            if name not in self.FIELDS:
                raise TypeError('no SFTP attribute %r' % name)
            setattr(self, name, value)

    def __repr__(self):
        return 'Attrs(%s)' % ', '.join(
            '%s=%r' % (name, getattr(self, name)) for name in self.FIELDS
            if getattr(self, name) not in (None, ()))

    def encode(self):
        """The attribute block: uid and gid only together, as are the
        times (the protocol has one flag for each pair)."""
        flags, fields = 0, []
        if self.st_size is not None:
            flags |= _ATTR_SIZE
            fields.append(_UINT64.pack(self.st_size))
        if self.st_uid is not None and self.st_gid is not None:
            flags |= _ATTR_UIDGID
            fields.append(_UINT32.pack(self.st_uid) +
                          _UINT32.pack(self.st_gid))
        if self.st_mode is not None:
            flags |= _ATTR_PERMISSIONS
            fields.append(_UINT32.pack(self.st_mode))
        if self.st_atime is not None and self.st_mtime is not None:
            flags |= _ATTR_ACMODTIME
            fields.append(_UINT32.pack(int(self.st_atime)) +
                          _UINT32.pack(int(self.st_mtime)))
        if self.extended:
            flags |= _ATTR_EXTENDED
            fields.append(_UINT32.pack(len(self.extended)))
            fields.extend(_string(part) for pair in self.extended
                          for part in pair)
        return _UINT32.pack(flags) + b''.join(fields)

    @classmethod
    def read(cls, reply):
        """The attribute block that comes next in `reply`."""
        attrs = cls.__new__(cls)
        flags = reply.get_int()
        if flags & _ATTR_SIZE:
            attrs.st_size = reply.get_int64()
        if flags & _ATTR_UIDGID:
            attrs.st_uid, attrs.st_gid = reply.get_int(), reply.get_int()
        if flags & _ATTR_PERMISSIONS:
            attrs.st_mode = reply.get_int()
        if flags & _ATTR_ACMODTIME:
            attrs.st_atime, attrs.st_mtime = reply.get_int(), reply.get_int()
        if flags & _ATTR_EXTENDED:
            attrs.extended = [(reply.get_string(), reply.get_string())
                              for _ in range(reply.get_int())]
        return attrs


def attrs(**fields):
    """Attributes to send: only the given fields (st_mode, st_uid...)."""
    return Attrs(**fields)


def read_attrs(reply):
    """The attributes that come next in a reply."""
    return Attrs.read(reply)


class Reply:
    """A reply's fields after its request number, read in order."""

    __slots__ = ('body', 'pos')

    def __init__(self, body):
        self.body = body
        self.pos = 0

    def get_int(self):
        pos = self.pos
        self.pos = pos + 4
        try:
            return _UINT32.unpack_from(self.body, pos)[0]
        except struct.error:
            raise ProtocolError('Malformed SFTP reply') from None

    def get_int64(self):
        pos = self.pos
        self.pos = pos + 8
        try:
            return _UINT64.unpack_from(self.body, pos)[0]
        except struct.error:
            raise ProtocolError('Malformed SFTP reply') from None

    def get_string(self):
        start = self.pos + 4
        end = start + self.get_int()
        if end > len(self.body):
            raise ProtocolError('Malformed SFTP reply')
        self.pos = end
        return self.body[start:end]

    get_binary = get_string


def reply(body):
    """A reply's fields after its request number, to read in order."""
    return Reply(body)


class DataReply:
    """A DATA reply's payload, already cut out (read as a reply would
    be: one string)."""

    __slots__ = ('data',)

    def __init__(self, data):
        self.data = data

    def get_string(self):
        return self.data


def _string(item):
    if isinstance(item, str):
        item = item.encode('utf-8')
    return _UINT32.pack(len(item)) + item


def encode(num, args):
    """The fields of an SFTP request after its type: the request number,
    then each argument (int64, int, Attrs, or a str/bytes string)."""
    parts = [_UINT32.pack(num)]
    for item in args:
        if isinstance(item, int64):
            parts.append(_UINT64.pack(item))
        elif isinstance(item, int):
            parts.append(_UINT32.pack(item))
        elif isinstance(item, Attrs):
            parts.append(item.encode())
        else:
            parts.append(_string(item))
    return b''.join(parts)


def packet(kind, num, args, payload=None):
    """A request packet's bytes, without `payload` (WRITE data), which
    the caller sends after them uncopied."""
    body = encode(num, args)
    if payload is not None:
        body += _UINT32.pack(len(payload))
    length = len(body) + 1 + (len(payload) if payload is not None else 0)
    return struct.pack('>IB', length, kind) + body


def init_packet():
    """The client's first packet: INIT with the version it speaks."""
    return struct.pack('>IBI', 5, CMD_INIT, VERSION)


def names_from(reply):
    """(filename, attrs, longname) from an SSH_FXP_NAME reply."""
    count = reply.get_int()
    result = []
    for _ in range(count):
        name = reply.get_string()
        longname = reply.get_string()
        result.append((name, read_attrs(reply), longname))
    return result
