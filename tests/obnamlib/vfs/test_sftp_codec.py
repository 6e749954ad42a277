"""The SFTP v3 codec and the wire, without a server: the bytes they
send and how they read what comes back."""

import pathlib

import pytest

from obnamlib.vfs.sftp import codec
from obnamlib.vfs.sftp.wire import Replies, Wire

PACKAGE = pathlib.Path(codec.__file__).parent


class _Channel:
    """A channel that records what is sent and replies with `incoming`
    (then nothing: the connection closed)."""

    def __init__(self, incoming=b''):
        self.sent = bytearray()
        self.incoming = bytearray(incoming)

    def send(self, data):
        self.sent += data
        return len(data)

    def recv(self, size):
        piece = bytes(self.incoming[:size])
        del self.incoming[:size]
        return piece


def _packet(kind, body):
    return (len(body) + 1).to_bytes(4, 'big') + bytes([kind]) + body


def _data_packet(num, data, declared=None, extra=b''):
    declared = len(data) if declared is None else declared
    body = num.to_bytes(4, 'big') + declared.to_bytes(4, 'big') + data + extra
    return _packet(codec.CMD_DATA, body)


def test_start_sends_init_for_version_3_and_reads_the_servers_version():
    version = _packet(codec.CMD_VERSION, (3).to_bytes(4, 'big') +
                      b'\0\0\0\x04name\0\0\0\x011')
    channel = _Channel(version)
    wire = Wire(channel)
    wire.start()
    assert bytes(channel.sent) == b'\0\0\0\x05\x01\0\0\0\x03'
    assert wire.server_version == 3
    assert wire.number(None) == 1


def test_start_refuses_a_server_that_answers_init_otherwise():
    status = _packet(codec.CMD_STATUS, bytes(12))
    with pytest.raises(codec.ProtocolError) as info:
        Wire(_Channel(status)).start()
    assert str(info.value) == 'Incompatible sftp protocol'


def test_start_on_a_closed_connection_is_eof():
    with pytest.raises(EOFError):
        Wire(_Channel()).start()


def test_a_data_reply_gives_exactly_the_bytes_it_declares():
    wire = Wire(_Channel())
    wire.incoming += _data_packet(7, b'content', extra=b'\x01')
    kind, num, msg = wire._next_packet()
    assert (kind, num, msg.get_string()) == (103, 7, b'content')
    wire.incoming += _data_packet(8, b'short', declared=9)
    with pytest.raises(codec.ProtocolError) as info:
        wire._next_packet()
    assert str(info.value) == 'Malformed SFTP reply'


def test_replies_reach_whoever_asked_in_any_order():
    channel = _Channel()
    wire = Wire(channel)
    mine, theirs = Replies(), Replies()
    first, second = wire.number(mine), wire.number(theirs)
    channel.incoming += _packet(codec.CMD_HANDLE, second.to_bytes(4, 'big') +
                                b'\0\0\0\x02h2')
    channel.incoming += _packet(codec.CMD_HANDLE, first.to_bytes(4, 'big') +
                                b'\0\0\0\x02h1')
    wire.receive_one()
    wire.receive_one()
    assert theirs.got[second][1].get_binary() == b'h2'
    assert mine.got[first][1].get_binary() == b'h1'


def test_a_request_is_packed_field_by_field():
    data = codec.packet(codec.CMD_READ, 9, [b'hd', codec.int64(2**33), 512])
    assert data == (b'\0\0\0\x17' + b'\x05' + b'\0\0\0\x09' +
                    b'\0\0\0\x02hd' + (2**33).to_bytes(8, 'big') +
                    b'\0\0\x02\x00')


def test_a_write_header_counts_the_payload_sent_after_it():
    head = codec.packet(codec.CMD_WRITE, 1, [b'h', codec.int64(0)],
                        payload=b'x' * 100)
    assert int.from_bytes(head[:4], 'big') + 4 == len(head) + 100
    assert head[-4:] == (100).to_bytes(4, 'big')


@pytest.mark.parametrize('fields', [
    {}, {'st_mode': 0o100644}, {'st_uid': 1000, 'st_gid': 100},
    {'st_atime': 1, 'st_mtime': 0xffffffff}, {'st_size': 2**40},
    {'st_size': 5, 'st_uid': 0, 'st_gid': 0, 'st_mode': 0o700,
     'st_atime': 3, 'st_mtime': 4, 'extended': [(b'a@b', b'v')]}])
def test_attributes_read_back_as_written(fields):
    attrs = codec.read_attrs(codec.reply(codec.attrs(**fields).encode()))
    for name in codec.Attrs.FIELDS:
        assert getattr(attrs, name) == fields.get(
            name, () if name == 'extended' else None)


def test_attributes_send_only_whole_pairs():
    """uid without gid (or atime without mtime) cannot be sent alone."""
    assert codec.attrs(st_uid=5).encode() == bytes(4)
    assert codec.attrs(st_mtime=5).encode() == bytes(4)


@pytest.mark.parametrize('body, read', [
    (b'\0\0\0\x09abc', 'get_string'), (b'\0\0\0', 'get_int'),
    (b'\0\0\0\0\0\0\0', 'get_int64')])
def test_a_reply_shorter_than_its_fields_is_malformed(body, read):
    msg = codec.reply(body)
    with pytest.raises(codec.ProtocolError):
        getattr(msg, read)()


def test_an_unknown_attribute_is_refused():
    with pytest.raises(TypeError):
        codec.attrs(st_ino=5)


def test_only_ssh_paramiko_uses_paramiko():
    """The codec, the wire and SftpFS need nothing from paramiko: only
    its own transport does (with its public API)."""
    users = sorted(path.name for path in PACKAGE.glob('*.py')
                   if 'import paramiko' in path.read_text() or
                   'from paramiko' in path.read_text())
    assert users == ['ssh_paramiko.py']
