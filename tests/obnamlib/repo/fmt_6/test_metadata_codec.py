"""FILE_METADATA values byte by byte (format-6.md §7.5)."""

import hashlib
import stat
import struct

import pytest

from obnamlib import errors
from obnamlib.repo.fmt_6 import metadata_codec as codec
from obnamlib.repo.metadata import Metadata, FIELDS


def full(**changes):
    md = Metadata(st_mode=stat.S_IFREG | 0o4755, st_mtime_sec=1389119779,
                  st_mtime_nsec=821127248, st_atime_sec=-1, st_atime_nsec=2,
                  st_nlink=3, st_size=4096, st_uid=1000, st_gid=1001,
                  st_dev=2049, st_ino=77, st_blocks=8, groupname=b'grp',
                  username=b'usr', target=b'', md5=hashlib.md5(b'').digest(),
                  xattr=None)
    return md.copy(**changes)


def test_regular_file_flags_and_layout():
    data = codec.encode_metadata(full())
    fixed = struct.unpack('!QQqQqQQQQQQQQQQQQQ', data[:144])
    assert fixed[0] == 0x01fdff          # observed: all ints, names, target, md5
    assert fixed[1:13] == (stat.S_IFREG | 0o4755, 1389119779, 821127248, -1,
                           2, 3, 4096, 1000, 1001, 2049, 77, 8)
    assert fixed[13:] == (3, 3, 0, 16, 0)
    assert data[144:] == b'grpusr' + hashlib.md5(b'').digest()


def test_non_regular_without_md5_has_observed_flags():
    data = codec.encode_metadata(full(md5=None))
    assert struct.unpack('!Q', data[:8])[0] == 0x00fdff


def test_xattr_sets_bit_9():
    md = full(xattr=codec.encode_xattrs([(b'user.foo', b'some value')]))
    data = codec.encode_metadata(md)
    assert struct.unpack('!Q', data[:8])[0] == 0x01ffff
    assert codec.decode_metadata(data) == md


def test_placeholder_directory_has_only_mode():
    md = Metadata(st_mode=stat.S_IFDIR | 0o777)
    data = codec.encode_metadata(md)
    assert data == struct.pack('!QQ', 1, stat.S_IFDIR | 0o777) + b'\0' * 128
    assert codec.decode_metadata(data) == md


@pytest.mark.parametrize('name', FIELDS)
def test_each_field_alone_round_trips(name):
    value = b'v\0x' if name in codec.STR_FIELDS else 5
    md = Metadata(**{name: value})
    data = codec.encode_metadata(md)
    flags = struct.unpack('!Q', data[:8])[0]
    assert flags == 1 << codec.FLAG_BITS[name]
    assert codec.decode_metadata(data) == md


def test_empty_string_differs_from_absent():
    assert codec.decode_metadata(codec.encode_metadata(
        Metadata(target=b''))).target == b''
    assert codec.decode_metadata(codec.encode_metadata(
        Metadata())).target is None


def test_unknown_flag_bits_ignored():
    data = bytearray(codec.encode_metadata(full()))
    data[0:8] = struct.pack('!Q', 0x01fdff | (1 << 18) | (1 << 21))
    assert codec.decode_metadata(bytes(data)) == full()


def test_negative_mtime():
    md = full(st_mtime_sec=-86400 * 365 * 20)
    assert codec.decode_metadata(codec.encode_metadata(md)) == md


def test_truncated_value_is_corruption():
    data = codec.encode_metadata(full())
    with pytest.raises(errors.RepositoryCorrupt):
        codec.decode_metadata(data[:100])
    with pytest.raises(errors.RepositoryCorrupt):
        codec.decode_metadata(data[:-1])


def test_a_mode_beyond_32_bits_is_corruption_not_an_overflow():
    """A damaged mode would make every stat.S_IS* test raise OverflowError
    (ls, restore, verify); it is the repository's damage instead."""
    data = bytearray(codec.encode_metadata(full()))
    data[8:16] = struct.pack('!Q', 2 ** 40 | stat.S_IFREG)   # st_mode
    with pytest.raises(errors.RepositoryCorrupt) as e:
        codec.decode_metadata(bytes(data), what='file /x')
    assert 'mode %d is out of range' % (2 ** 40 | stat.S_IFREG) in str(e.value)
    data[8:16] = struct.pack('!Q', 2 ** 32 - 1)              # still 32 bits
    assert codec.decode_metadata(bytes(data)).st_mode == 2 ** 32 - 1


@pytest.mark.parametrize('name', ['st_uid', 'st_gid'])
def test_an_owner_id_beyond_32_bits_is_corruption(name):
    """uid_t and gid_t are 32 bits: chown(2) and FUSE would fail on more,
    far from the file; ls and verify report it as the mode."""
    data = bytearray(codec.encode_metadata(full()))
    offset = 8 + 8 * codec.INT_FIELDS.index(name)
    data[offset:offset + 8] = struct.pack('!Q', 2 ** 32)
    with pytest.raises(errors.RepositoryCorrupt) as e:
        codec.decode_metadata(bytes(data), what='file /x')
    assert '%s %d is out of range' % (name[3:], 2 ** 32) in str(e.value)
    assert 'file /x' in str(e.value)
    data[offset:offset + 8] = struct.pack('!Q', 2 ** 32 - 1)
    assert getattr(codec.decode_metadata(bytes(data)), name) == 2 ** 32 - 1


def test_xattr_blob_example_from_spec():
    blob = codec.encode_xattrs([(b'user.foo', b'some value')])
    assert blob == (struct.pack('!Q', 9) + b'user.foo\0' +
                    struct.pack('!Q', 10) + b'some value')
    assert codec.decode_xattrs(blob) == [(b'user.foo', b'some value')]
    assert codec.encode_xattrs([]) is None
    assert codec.decode_xattrs(None) == []


def test_several_xattrs():
    pairs = [(b'user.a', b''), (b'user.b', b'\0\1'), (b'security.x', b'y')]
    assert codec.decode_xattrs(codec.encode_xattrs(pairs)) == pairs


def test_a_negative_unsigned_field_keeps_its_low_64_bits():
    """The path for a stat with a negative field (not the full-stat fast
    path): the format has no sign there, as Obnam 1.x stored it."""
    data = codec.encode_metadata(full(st_ino=-2))
    fixed = struct.unpack('!QQqQqQQQQQQQQQQQQQ', data[:144])
    assert fixed[11] == 2 ** 64 - 2
    assert fixed[0] == 0x01fdff


def test_a_string_field_that_is_not_bytes_is_refused_by_name():
    with pytest.raises(TypeError) as e:
        codec.encode_metadata(full(username='usr'))
    assert 'metadata username must be bytes, not str' in str(e.value)
