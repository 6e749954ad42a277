import struct

import pytest

from obnamlib import larch
from obnamlib.larch import errors
from obnamlib.larch.journal import Journal
from obnamlib.larch.refcounts import RefcountStore, encode_group, decode_group


def store(vfs=None):
    vfs = vfs or larch.MemoryFS()
    journal = Journal(vfs, 'f', True)
    return RefcountStore(journal, 'f'), journal, vfs


def test_missing_group_reads_as_zero():
    counts, _, _ = store()
    assert counts.get(5) == 0
    assert counts.get(100000) == 0


def test_group_file_layout():
    counts, journal, vfs = store()
    counts.set(1, 2)
    counts.set(32767, 65535)
    counts.set(32768 + 3, 7)
    counts.save()
    first = vfs.read_file('f/new/refcounts/refcounts-0')
    assert len(first) == 65546
    assert first[:10] == struct.pack('!QH', 0, 32768)
    assert first[12:14] == struct.pack('!H', 2)
    assert first[-2:] == struct.pack('!H', 65535)
    second = vfs.read_file('f/new/refcounts/refcounts-32768')
    assert second[:10] == struct.pack('!QH', 32768, 32768)
    assert second[16:18] == struct.pack('!H', 7)


def test_only_changed_groups_are_written():
    counts, journal, vfs = store()
    counts.get(70000)
    counts.incr(3)
    counts.save()
    assert journal.new_files == {'refcounts/refcounts-0'}


def test_counts_round_trip_through_journal():
    counts, journal, vfs = store()
    counts.incr(9)
    counts.incr(9)
    counts.save()
    again = RefcountStore(journal, 'f')
    assert again.get(9) == 2


def test_overflow_is_an_error():
    counts, _, _ = store()
    counts.set(4, 65535)
    with pytest.raises(errors.RefcountOverflow) as e:
        counts.incr(4)
    assert 'node 4' in str(e.value) and 'forest f' in str(e.value)


def test_corrupt_group_is_reported():
    counts, journal, vfs = store()
    vfs.write_file('f/refcounts/refcounts-0', b'\0' * 11)
    with pytest.raises(errors.BadRefcounts) as e:
        counts.get(1)
    assert 'refcounts/refcounts-0' in str(e.value)


def test_short_group_is_padded_with_zeros():
    data = struct.pack('!QH', 0, 2) + struct.pack('!HH', 1, 3)
    group = decode_group(data, 0, 'f')
    assert (group[0], group[1], group[2], len(group)) == (1, 3, 0, 32768)
    assert encode_group(0, group)[:14] == struct.pack('!QHHH', 0, 32768, 1, 3)
