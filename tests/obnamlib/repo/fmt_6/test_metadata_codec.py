"""FILE_METADATA values byte by byte (format-6.md §7.5)."""

import hashlib
import stat
import struct

import hypothesis
import hypothesis.strategies as st
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


# --- the cached layouts against the field-by-field decoding -------------

def decoded_field_by_field(data, what='file metadata'):
    """decode_metadata as it was before the layouts were cached: each
    field's flag tested in turn."""
    if len(data) < codec.FIXED_SIZE:
        raise errors.RepositoryCorrupt(
            what=what, reason='metadata value has %d bytes, expected at '
            'least %d' % (len(data), codec.FIXED_SIZE))
    values = struct.unpack_from('!QQqQqQQQQQQQQQQQQQ', data)
    flags = values[0]
    ints = values[1:1 + len(codec.INT_FIELDS)]
    lengths = values[1 + len(codec.INT_FIELDS):]
    if codec.FIXED_SIZE + sum(lengths) != len(data):
        raise errors.RepositoryCorrupt(
            what=what, reason='metadata string lengths do not match its size')
    fields = {}
    for name, value in zip(codec.INT_FIELDS, ints):
        if flags & (1 << codec.FLAG_BITS[name]):
            fields[name] = value
    for name in ('st_mode', 'st_uid', 'st_gid'):
        if fields.get(name, 0) > 2 ** 32 - 1:
            raise errors.RepositoryCorrupt(
                what=what, reason='metadata %s %d is out of range'
                % (name[len('st_'):], fields[name]))
    pos = codec.FIXED_SIZE
    for name, length in zip(codec.STR_FIELDS, lengths):
        if flags & (1 << codec.FLAG_BITS[name]):
            fields[name] = data[pos:pos + length]
        pos += length
    return Metadata(**fields)


def outcome(decode, data, **kwargs):
    try:
        return 'ok', decode(data, **kwargs)
    except errors.RepositoryCorrupt as e:
        return type(e), str(e)


_SIGNED_AT = {codec.INT_FIELDS.index(n) for n in ('st_mtime_sec',
                                                  'st_atime_sec')}


@hypothesis.settings(max_examples=250, deadline=None)
@hypothesis.given(
    flags=st.one_of(st.integers(0, 2 ** 17 - 1),
                    st.integers(0, 2 ** 64 - 1)),
    ints=st.lists(st.one_of(st.integers(0, 2 ** 32 + 1),
                            st.integers(0, 2 ** 63 - 1)),
                  min_size=12, max_size=12),
    strings=st.lists(st.binary(max_size=6), min_size=5, max_size=5),
    damage=st.sampled_from(['none', 'short', 'long', 'truncated']))
def test_decoding_with_cached_layouts_is_the_field_by_field_result(
        flags, ints, strings, damage):
    ints = [-v if i in _SIGNED_AT and v % 3 == 0 else v
            for i, v in enumerate(ints)]
    lengths = [len(s) for s in strings]
    data = struct.pack('!QQqQqQQQQQQQQQQQQQ', flags, *ints, *lengths) + \
        b''.join(strings)
    if damage == 'short':
        data = data[:-1]
    elif damage == 'long':
        data += b'x'
    elif damage == 'truncated':
        data = data[:codec.FIXED_SIZE - 1]
    for _ in range(2):      # the second time from the kept layout
        assert outcome(codec.decode_metadata, data, what='file /x') == \
            outcome(decoded_field_by_field, data, what='file /x')
    assert outcome(codec.decode_metadata, data, of_path=b'/p') == \
        outcome(decoded_field_by_field, data, what="metadata of b'/p'")


def test_layouts_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(codec, '_LAYOUTS', {})
    monkeypatch.setattr(codec, '_LAYOUTS_KEPT', 3)
    for flags in range(10):
        data = struct.pack('!QQqQqQQQQQQQQQQQQQ', flags, *[0] * 17)
        assert codec.decode_metadata(data) == decoded_field_by_field(data)
    assert sorted(codec._LAYOUTS) == [0, 1, 2]
