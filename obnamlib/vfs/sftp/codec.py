"""SFTP v3 messages as bytes: request fields packed, replies read."""

import struct

import paramiko
from paramiko import sftp as proto
from paramiko.sftp import (  # noqa: F401 (the names callers use)
    CMD_CLOSE, CMD_DATA, CMD_EXTENDED, CMD_FSETSTAT, CMD_FSTAT, CMD_LSTAT,
    CMD_MKDIR, CMD_OPEN, CMD_OPENDIR, CMD_READ, CMD_READDIR, CMD_READLINK,
    CMD_REALPATH, CMD_REMOVE, CMD_RENAME, CMD_RMDIR, CMD_SETSTAT, CMD_STAT,
    CMD_STATUS, CMD_SYMLINK, CMD_WRITE, SFTP_EOF, SFTP_FLAG_CREATE,
    SFTP_FLAG_EXCL, SFTP_FLAG_READ, SFTP_FLAG_TRUNC, SFTP_FLAG_WRITE,
    SFTP_NO_SUCH_FILE, SFTP_OK, SFTP_OP_UNSUPPORTED, SFTP_PERMISSION_DENIED)
from paramiko.sftp_attr import SFTPAttributes

TRUNCATE = SFTP_FLAG_WRITE | SFTP_FLAG_CREATE | SFTP_FLAG_TRUNC
EXCLUSIVE = SFTP_FLAG_WRITE | SFTP_FLAG_CREATE | SFTP_FLAG_EXCL

REQUEST_NAMES = {value: name[4:] for name, value in vars(proto).items()
                 if name.startswith('CMD_') and isinstance(value, int)}

ProtocolError = paramiko.SSHException


class int64(int):
    """An offset: packed as 64 bits (plain ints are 32-bit fields)."""


def attrs(**fields):
    """Attributes to send: only the given fields (st_mode, st_uid...)."""
    result = SFTPAttributes()
    for name, value in fields.items():
        setattr(result, name, value)
    return result


def read_attrs(msg):
    """The attributes that come next in a reply."""
    return SFTPAttributes._from_msg(msg)


def reply(body):
    """A reply's fields after its request number, to read in order."""
    return paramiko.Message(body)


def encode(num, args):
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


def packet(kind, num, args, payload=None):
    """A request packet's bytes, without `payload` (WRITE data), which
    the caller sends after them uncopied."""
    body = encode(num, args)
    if payload is not None:
        body += _UINT32.pack(len(payload))
    length = len(body) + 1 + (len(payload) if payload is not None else 0)
    return struct.pack('>IB', length, kind) + body


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


def names_from(msg):
    """(filename, attrs, longname) from an SSH_FXP_NAME reply."""
    count = msg.get_int()
    result = []
    for _ in range(count):
        name = msg.get_string()
        longname = msg.get_string()
        result.append((name, read_attrs(msg), longname))
    return result


class DataReply:
    """A DATA reply's payload, already cut out (read as a reply would
    be: one string)."""

    __slots__ = ('data',)

    def __init__(self, data):
        self.data = data

    def get_string(self):
        return self.data
