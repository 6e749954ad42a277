"""One connection's SFTP packets, pipelined: requests queued and written
together, replies read in large pieces and filed by request number."""

from obnamlib.vfs.sftp import codec
from obnamlib.vfs.sftp.limits import RECEIVE_SIZE, SEND_BATCH, SMALL_PAYLOAD


class Replies:
    """Where the wire delivers the replies to one SftpFS's requests."""

    def __init__(self):
        self.got = {}


class Wire:
    """One connection's SFTP packets, in both directions, without
    paramiko's per-packet costs: requests are queued and written together
    when a reply is awaited (one pipe write, and one SSH packet, for a
    whole batch instead of one per request); replies are read in large
    pieces and cut out of one buffer, each payload copied once (paramiko
    reads the length and the body separately, grows the body by
    concatenation and copies it twice more).  Every SftpFS sharing the
    connection uses its wire, so request numbers stay unique."""

    def __init__(self, sftp):
        self.channel = sftp.sock
        self.next_number = sftp.request_number
        self.routes = {}            # request number -> Replies or None
        self.outgoing = []
        self.outgoing_size = 0
        self.incoming = bytearray()

    def number(self, replies):
        """A new request number; its reply goes to `replies` (None: drop)."""
        num = self.next_number
        self.next_number += 1
        self.routes[num] = replies
        return num

    def queue(self, head, payload=None):
        """Send later (at the next flush); a large payload goes now, after
        what was queued, without being copied into the queue."""
        self.outgoing.append(head)
        self.outgoing_size += len(head)
        if payload and len(payload) > SMALL_PAYLOAD:
            self.flush()
            self._write(payload)
            return
        if payload:
            self.outgoing.append(payload)
            self.outgoing_size += len(payload)
        if self.outgoing_size >= SEND_BATCH:
            self.flush()

    def flush(self):
        if self.outgoing:
            data = b''.join(self.outgoing)
            self.outgoing = []
            self.outgoing_size = 0
            self._write(data)

    def _write(self, data):
        view = memoryview(data)
        while view:
            sent = self.channel.send(view)
            if sent <= 0:
                raise EOFError('the SSH connection is closed')
            view = view[sent:]

    def receive_one(self):
        """Read one reply and file it with the SftpFS that asked."""
        kind, num, msg = self._next_packet()
        replies = self.routes.pop(num, None)
        if replies is not None:
            replies.got[num] = (kind, msg)

    def _next_packet(self):
        buf = self.incoming
        self._fill(4)
        size = self._fill(4 + int.from_bytes(buf[:4], 'big'))
        if size < 9:
            raise codec.ProtocolError('Malformed SFTP reply')
        kind = buf[4]
        num = int.from_bytes(buf[5:9], 'big')
        with memoryview(buf) as view:
            if kind == codec.CMD_DATA:
                end = 13 + int.from_bytes(buf[9:13], 'big')
                if size < 13 or end > size:
                    raise codec.ProtocolError('Malformed SFTP reply')
                msg = codec.DataReply(bytes(view[13:end]))
            else:
                msg = codec.reply(bytes(view[9:size]))
        del buf[:size]
        return kind, num, msg

    def _fill(self, size):
        """Have at least `size` bytes buffered; returns `size`."""
        buf = self.incoming
        while len(buf) < size:
            piece = self.channel.recv(max(RECEIVE_SIZE, size - len(buf)))
            if not piece:
                raise EOFError('the SSH connection was closed')
            buf += piece
        return size


def wire_of(connection):
    """The connection's wire, made on first use (shared by every SftpFS
    on it)."""
    wire = getattr(connection, 'obnam_wire', None)
    if wire is None:
        wire = Wire(connection.sftp)
        connection.obnam_wire = wire
    return wire
