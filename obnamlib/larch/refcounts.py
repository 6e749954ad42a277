"""Node reference counts, in groups of 32768 ids (format-6.md 5.4).

Counts live in memory as one `array('H')` per group; a group is read on
first use and written whole, at commit, only if it changed.
"""

import array
import struct
import sys

from . import errors

GROUP_BITS = 15
GROUP_SIZE = 1 << GROUP_BITS
_MASK = GROUP_SIZE - 1
_HEAD = struct.Struct('!QH')
MAX_COUNT = 65535


def group_path(start):
    return 'refcounts/refcounts-%d' % start


def encode_group(start, counts):
    big = array.array('H', counts)
    if sys.byteorder == 'little':
        big.byteswap()
    return _HEAD.pack(start, len(counts)) + big.tobytes()


def decode_group(data, start, dirname):
    path = group_path(start)
    if len(data) < _HEAD.size:
        raise errors.BadRefcounts(dirname, path, 'too short')
    stored_start, count = _HEAD.unpack_from(data, 0)
    if stored_start != start:
        raise errors.BadRefcounts(
            dirname, path, 'says it starts at %d' % stored_start)
    body = data[_HEAD.size:]
    if len(body) != 2 * count or count > GROUP_SIZE:
        raise errors.BadRefcounts(
            dirname, path, '%d bytes for %d counts' % (len(body), count))
    counts = array.array('H')
    counts.frombytes(body)
    if sys.byteorder == 'little':
        counts.byteswap()
    counts.extend([0] * (GROUP_SIZE - count))
    return counts


class RefcountStore:

    def __init__(self, journal, dirname):
        self.journal = journal
        self.dirname = dirname
        self.groups = {}
        self.dirty = set()

    def _group(self, number):
        counts = self.groups.get(number)
        if counts is None:
            start = number << GROUP_BITS
            try:
                data = self.journal.read(group_path(start))
            except FileNotFoundError:
                counts = array.array('H', bytes(2 * GROUP_SIZE))
            else:
                counts = decode_group(data, start, self.dirname)
            self.groups[number] = counts
        return counts

    def get(self, node_id):
        counts = self.groups.get(node_id >> GROUP_BITS)
        if counts is None:
            counts = self._group(node_id >> GROUP_BITS)
        return counts[node_id & _MASK]

    def set(self, node_id, value):
        number = node_id >> GROUP_BITS
        if value > MAX_COUNT:
            raise errors.RefcountOverflow(self.dirname, node_id)
        self._group(number)[node_id & _MASK] = value
        self.dirty.add(number)

    def incr(self, node_id):
        number = node_id >> GROUP_BITS
        counts = self.groups.get(number)
        if counts is None:
            counts = self._group(number)
        value = counts[node_id & _MASK] + 1
        if value > MAX_COUNT:
            raise errors.RefcountOverflow(self.dirname, node_id)
        counts[node_id & _MASK] = value
        self.dirty.add(number)

    def group_starts_on_disk(self):
        """Start ids of the refcount group files that exist."""
        starts = []
        for name in self.journal.listdir('refcounts'):
            if name.startswith('refcounts-'):
                try:
                    starts.append(int(name[len('refcounts-'):]))
                except ValueError:
                    pass
        return sorted(starts)

    def save(self):
        """Write every changed group into the journal."""
        for number in sorted(self.dirty):
            start = number << GROUP_BITS
            self.journal.write(group_path(start),
                               encode_group(start, self.groups[number]))
        self.dirty = set()
