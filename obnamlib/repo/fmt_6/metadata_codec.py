"""Encoding of file metadata as the FILE_METADATA value (format-6.md §7.5).

The fixed part packs the fields in one order; the presence flags use
another bit order, which is why both tables are spelled out here.
"""

import dataclasses
import operator
import struct

from obnamlib import errors
from obnamlib.repo.metadata import Metadata
from obnamlib.repo.metadata import encode_xattrs, decode_xattrs  # noqa: F401 (re-used name)

# Packing order of the fixed part after the flags word.
INT_FIELDS = ('st_mode', 'st_mtime_sec', 'st_mtime_nsec', 'st_atime_sec',
              'st_atime_nsec', 'st_nlink', 'st_size', 'st_uid', 'st_gid',
              'st_dev', 'st_ino', 'st_blocks')
STR_FIELDS = ('groupname', 'username', 'target', 'md5', 'xattr')

# Presence bit of each field: bit i set <=> field present.
FLAG_BITS = {
    'st_mode': 0, 'st_mtime_sec': 1, 'st_mtime_nsec': 2, 'st_nlink': 3,
    'st_size': 4, 'st_uid': 5, 'groupname': 6, 'username': 7, 'target': 8,
    'xattr': 9, 'st_blocks': 10, 'st_dev': 11, 'st_gid': 12, 'st_ino': 13,
    'st_atime_sec': 14, 'st_atime_nsec': 15, 'md5': 16,
}

_FIXED = struct.Struct('!QQqQqQQQQQQQQQQQQQ')
FIXED_SIZE = _FIXED.size   # 144
_SIGNED = ('st_mtime_sec', 'st_atime_sec')
# Fields that are 32 bits in struct stat: a larger value is damage, and
# would fail far from here (every stat.S_IS* test on a mode; chown(2) and
# FUSE on a uid or gid) with an OverflowError instead of naming the file.
_32_BIT_FIELDS = ('st_mode', 'st_uid', 'st_gid')
_LAST_32_BIT = 2 ** 32 - 1


def encode_metadata(metadata):
    """Metadata -> bytes.  Absent fields are 0/empty with their flag clear.
    Once per file of a backup: the fields are fetched in two calls, and a
    full stat (every integer present, none negative) skips the per-field
    checks (one sixth of the time a first backup spent on a file's tree
    entries went here)."""
    ints = _INTS(metadata)
    if None in ints or min(ints) < 0:
        flags, ints = _partial_ints(metadata)
    else:
        flags = _ALL_INT_FLAGS
    strings = []
    lengths = []
    for value, bit in zip(_STRS(metadata), _STR_FLAGS):
        if value is not None:
            flags |= bit
            if not value:
                value = b''
            elif value.__class__ is not bytes and \
                    not isinstance(value, bytes):
                raise _not_bytes(metadata)
            strings.append(value)
        lengths.append(len(value) if value else 0)
    return _FIXED.pack(flags, *ints, *lengths) + b''.join(strings)


_INTS = operator.attrgetter(*INT_FIELDS)
_STRS = operator.attrgetter(*STR_FIELDS)
_STR_FLAGS = tuple(1 << FLAG_BITS[name] for name in STR_FIELDS)
_ALL_INT_FLAGS = sum(1 << FLAG_BITS[name] for name in INT_FIELDS)


def _partial_ints(metadata):
    """(flags of the integers present, their packed values)."""
    flags = 0
    for name in INT_FIELDS:
        if getattr(metadata, name) is not None:
            flags |= 1 << FLAG_BITS[name]
    return flags, [_int_value(metadata, name) for name in INT_FIELDS]


def _not_bytes(metadata):
    for name in STR_FIELDS:
        value = getattr(metadata, name) or b''
        if not isinstance(value, bytes):
            return TypeError('metadata %s must be bytes, not %s'
                             % (name, type(value).__name__))
    return TypeError('metadata strings must be bytes')


def _int_value(metadata, name):
    value = getattr(metadata, name)
    if value is None:
        return 0
    if name not in _SIGNED and value < 0:
        # Format 6 has no sign for these; keep the low 64 bits as Obnam did.
        return value & 0xFFFFFFFFFFFFFFFF
    return value


def decode_metadata(data, what='file metadata', of_path=None):
    """bytes -> Metadata; RepositoryCorrupt if the value is malformed.
    of_path: the path whose metadata this is (the error then says
    `metadata of <path>`, made only when it is raised).  Once per file
    of a restore or listing: the fields present come from the flags
    word's layout, worked out once per flags word."""
    size = len(data)
    if size < FIXED_SIZE:
        raise _corrupt(what, of_path, 'metadata value has %d bytes, expected '
                       'at least %d' % (size, FIXED_SIZE))
    values = _FIXED.unpack_from(data)
    lengths = values[_FIRST_LENGTH:]
    if FIXED_SIZE + sum(lengths) != size:
        raise _corrupt(what, of_path,
                       'metadata string lengths do not match its size')
    ints_present, strs_present, checked = _layout(values[0])
    if ints_present is None:
        ints = values[1:_FIRST_LENGTH]
    else:
        ints = [value if present else None
                for value, present in zip(values[1:_FIRST_LENGTH],
                                          ints_present)]
    for index, name in checked:
        if ints[index] > _LAST_32_BIT:
            raise _corrupt(what, of_path, 'metadata %s %d is out of range'
                           % (name[len('st_'):], ints[index]))
    strs = []
    pos = FIXED_SIZE
    for present, length in zip(strs_present, lengths):
        strs.append(data[pos:pos + length] if present else None)
        pos += length
    return Metadata(*ints, *strs)


def _corrupt(what, of_path, reason):
    if of_path is not None:
        what = 'metadata of %r' % (of_path,)
    return errors.RepositoryCorrupt(what=what, reason=reason)


_FIRST_LENGTH = 1 + len(INT_FIELDS)     # in the unpacked fixed part

# Metadata(*ints, *strings) takes the fields in the packing order.
assert tuple(f.name for f in dataclasses.fields(Metadata)) == \
    INT_FIELDS + STR_FIELDS

# flags word (the known bits) -> its layout; a damaged repository may
# hold any word, so at most _LAYOUTS_KEPT are kept.
_LAYOUTS = {}
_LAYOUTS_KEPT = 4096
_KNOWN_FLAGS = sum(1 << bit for bit in FLAG_BITS.values())


def _layout(flags):
    """(per integer field whether present, or None if all are; per
    string field whether present; (index, name) of the 32-bit fields
    present) of a flags word."""
    flags &= _KNOWN_FLAGS
    layout = _LAYOUTS.get(flags)
    if layout is None:
        ints = tuple(bool(flags & (1 << FLAG_BITS[name]))
                     for name in INT_FIELDS)
        strs = tuple(bool(flags & (1 << FLAG_BITS[name]))
                     for name in STR_FIELDS)
        checked = tuple((INT_FIELDS.index(name), name)
                        for name in _32_BIT_FIELDS
                        if ints[INT_FIELDS.index(name)])
        layout = (None if all(ints) else ints), strs, checked
        if len(_LAYOUTS) < _LAYOUTS_KEPT:
            _LAYOUTS[flags] = layout
    return layout
