"""Node encoding, byte for byte as larch 1.x (format-6.md 5.3)."""

import struct
from itertools import accumulate

from . import errors
from .nodes import LeafNode, IndexNode, HEADER_SIZE

LEAF_MAGIC = b'ORBL'
INDEX_MAGIC = b'ORBI'
_HEADER = struct.Struct('!4sQI')


def encode_leaf(node):
    keys, values = node.keys, node.values
    n = len(keys)
    parts = [_HEADER.pack(LEAF_MAGIC, node.id, n)]
    parts.extend(keys)
    parts.append(struct.pack('!%dI' % n, *map(len, values)))
    parts.extend(values)
    return b''.join(parts)


def encode_index(node):
    n = len(node.keys)
    parts = [_HEADER.pack(INDEX_MAGIC, node.id, n)]
    parts.extend(node.keys)
    parts.append(struct.pack('!%dQ' % n, *node.children))
    return b''.join(parts)


def encode(node):
    return encode_leaf(node) if node.is_leaf else encode_index(node)


def peek_kind(data):
    """'leaf', 'index' or None, from the first bytes of an encoded node."""
    magic = bytes(data[:4])
    if magic == LEAF_MAGIC:
        return 'leaf'
    if magic == INDEX_MAGIC:
        return 'index'
    return None


def decode(data, key_size, dirname, node_id):
    """Decode a node file's payload; check it against its expected id."""
    if len(data) < HEADER_SIZE:
        raise errors.NodeCorrupt(
            dirname, node_id, 'only %d bytes, shorter than a node header'
            % len(data))
    magic, stored_id, n = _HEADER.unpack_from(data, 0)
    if stored_id != node_id:
        raise errors.NodeCorrupt(
            dirname, node_id, 'file says it is node %d' % stored_id)
    keys_end = HEADER_SIZE + n * key_size
    if magic == LEAF_MAGIC:
        return _decode_leaf(data, key_size, dirname, node_id, n, keys_end)
    if magic == INDEX_MAGIC:
        return _decode_index(data, key_size, dirname, node_id, n, keys_end)
    raise errors.NodeCorrupt(dirname, node_id, 'unknown magic %r' % magic)


def _keys(data, key_size, keys_end):
    return [data[i:i + key_size]
            for i in range(HEADER_SIZE, keys_end, key_size)]


def _decode_leaf(data, key_size, dirname, node_id, n, keys_end):
    lens_end = keys_end + 4 * n
    if len(data) < lens_end:
        raise errors.NodeCorrupt(
            dirname, node_id, 'truncated: %d bytes for %d pairs'
            % (len(data), n))
    lengths = struct.unpack_from('!%dI' % n, data, keys_end)
    total = lens_end + sum(lengths)
    if len(data) != total:
        raise errors.NodeCorrupt(
            dirname, node_id, 'leaf has %d bytes, its header implies %d'
            % (len(data), total))
    ends = list(accumulate(lengths, initial=lens_end))
    values = [data[a:b] for a, b in zip(ends, ends[1:])]
    return LeafNode(node_id, _keys(data, key_size, keys_end), values,
                    len(data))


def _decode_index(data, key_size, dirname, node_id, n, keys_end):
    total = keys_end + 8 * n
    if len(data) != total:
        raise errors.NodeCorrupt(
            dirname, node_id, 'index node has %d bytes, its header implies %d'
            % (len(data), total))
    children = list(struct.unpack_from('!%dQ' % n, data, keys_end))
    return IndexNode(node_id, _keys(data, key_size, keys_end), children)
