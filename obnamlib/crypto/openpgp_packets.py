"""OpenPGP packet framing (RFC 4880 §4.2): reading old- and new-format
headers, including partial body lengths that gpg writes for streams, and
writing new-format headers with definite lengths."""

import struct

from obnamlib import errors

# Packet tags used by symmetric encryption.
PKESK = 1
SKESK = 3
COMPRESSED = 8
SED = 9
MARKER = 10
LITERAL = 11
TRUST = 12
SEIPD = 18
MDC = 19
AEAD = 20


class OpenPgpFormatError(errors.ObnamError):
    code = 'REFFF4X'
    msg = 'Malformed OpenPGP data: {reason}'


def _need(data, pos, count):
    if pos + count > len(data):
        raise OpenPgpFormatError(reason='packet is cut short')


def _old_header(data, pos, first):
    tag = (first >> 2) & 0x0f
    kind = first & 3
    if kind == 3:       # indeterminate: to the end of the data
        return tag, data[pos:], len(data)
    size = (1, 2, 4)[kind]
    _need(data, pos, size)
    length = int.from_bytes(data[pos:pos + size], 'big')
    pos += size
    _need(data, pos, length)
    return tag, data[pos:pos + length], pos + length


def _new_length(data, pos):
    """(length, is_partial, new pos) of one new-format length field."""
    _need(data, pos, 1)
    first = data[pos]
    if first < 192:
        return first, False, pos + 1
    if first < 224:
        _need(data, pos, 2)
        return ((first - 192) << 8) + data[pos + 1] + 192, False, pos + 2
    if first == 255:
        _need(data, pos, 5)
        return struct.unpack('!I', data[pos + 1:pos + 5])[0], False, pos + 5
    return 1 << (first & 0x1f), True, pos + 1


def _new_header(data, pos, first):
    tag = first & 0x3f
    length, partial, pos = _new_length(data, pos)
    _need(data, pos, length)
    if not partial:     # one definite length: every object obnam writes
        return tag, data[pos:pos + length], pos + length
    parts = [data[pos:pos + length]]
    pos += length
    while partial:
        length, partial, pos = _new_length(data, pos)
        _need(data, pos, length)
        parts.append(data[pos:pos + length])
        pos += length
    return tag, b''.join(parts), pos


def read_packet(data, pos=0):
    """(tag, body, position after the packet) of the packet at `pos`."""
    _need(data, pos, 1)
    first = data[pos]
    if not first & 0x80:
        raise OpenPgpFormatError(reason='no packet header at offset %d' % pos)
    if first & 0x40:
        return _new_header(data, pos + 1, first)
    return _old_header(data, pos + 1, first)


def iter_packets(data):
    """Every (tag, body) in `data`, in order."""
    pos = 0
    while pos < len(data):
        tag, body, pos = read_packet(data, pos)
        yield tag, body


def header(tag, length):
    """A new-format header with a definite length."""
    first = bytes([0xc0 | tag])
    if length < 192:
        return first + bytes([length])
    if length < 8384:
        length -= 192
        return first + bytes([(length >> 8) + 192, length & 0xff])
    return first + b'\xff' + struct.pack('!I', length)


def packet(tag, body):
    return header(tag, len(body)) + body
