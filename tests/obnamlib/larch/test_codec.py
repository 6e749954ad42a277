import struct

import pytest

from obnamlib.larch import codec, errors
from obnamlib.larch.nodes import LeafNode, IndexNode, leaf_size, index_size


def test_leaf_encoding_is_byte_exact():
    node = LeafNode(7, [b'ab', b'cd'], [b'', b'xyz'], 0)
    assert codec.encode(node) == (
        b'ORBL' + struct.pack('!QI', 7, 2) + b'abcd'
        + struct.pack('!II', 0, 3) + b'xyz')
    assert len(codec.encode(node)) == leaf_size(2, node.values)


def test_index_encoding_is_byte_exact():
    node = IndexNode(9, [b'ab', b'cd'], [3, 2 ** 64 - 2])
    assert codec.encode(node) == (
        b'ORBI' + struct.pack('!QI', 9, 2) + b'abcd'
        + struct.pack('!QQ', 3, 2 ** 64 - 2))
    assert len(codec.encode(node)) == index_size(2, 2)


def test_round_trip():
    leaf = LeafNode(5, [b'k1', b'k2'], [b'v' * 300, b''], 0)
    data = codec.encode(leaf)
    back = codec.decode(data, 2, 'f', 5)
    assert (back.keys, back.values, back.size) == (
        leaf.keys, leaf.values, len(data))
    index = IndexNode(6, [b'k1'], [5])
    back = codec.decode(codec.encode(index), 2, 'f', 6)
    assert (back.keys, back.children, back.is_leaf) == ([b'k1'], [5], False)


def test_empty_index_node():
    data = codec.encode(IndexNode(1, [], []))
    assert data == b'ORBI' + struct.pack('!QI', 1, 0)
    assert codec.decode(data, 4, 'f', 1).keys == []


@pytest.mark.parametrize('data,reason', [
    (b'ORBL\0\0', 'shorter than a node header'),
    (b'XXXX' + struct.pack('!QI', 5, 0), 'unknown magic'),
    (b'ORBL' + struct.pack('!QI', 6, 0), 'file says it is node 6'),
    (b'ORBL' + struct.pack('!QI', 5, 1) + b'ab', 'truncated'),
    (b'ORBL' + struct.pack('!QI', 5, 1) + b'ab' + struct.pack('!I', 9)
     + b'short', 'its header implies'),
    (b'ORBI' + struct.pack('!QI', 5, 1) + b'ab' + b'\0' * 7,
     'its header implies'),
])
def test_garbage_is_reported_with_forest_and_node(data, reason):
    with pytest.raises(errors.NodeCorrupt) as e:
        codec.decode(data, 2, 'the/forest', 5)
    assert 'the/forest' in str(e.value)
    assert 'node 5' in str(e.value)
    assert reason in str(e.value)
    assert isinstance(e.value, errors.Error)


def test_peek_kind():
    assert codec.peek_kind(b'ORBLxxxx') == 'leaf'
    assert codec.peek_kind(b'ORBIxxxx') == 'index'
    assert codec.peek_kind(b'ORB') is None
