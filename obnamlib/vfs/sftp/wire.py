"""One connection's SFTP packets, pipelined: requests queued and written
together, replies read in large pieces and filed by request number."""

from obnamlib.vfs.sftp import codec
from obnamlib.vfs.sftp.limits import RECEIVE_SIZE, SEND_BATCH, SMALL_PAYLOAD


class Replies:
    """Where the wire delivers the replies to one SftpFS's requests."""

    def __init__(self):
        self.got = {}


class Wire:
    """One connection's SFTP packets, in both directions, over a channel
    that can `send` and `recv` (a paramiko Channel running the sftp
    subsystem, or the OpenSSH client's pipes): requests are queued and
    written together when a reply is awaited (one pipe write, and one SSH
    packet, for a whole batch instead of one per request); replies are
    read in large pieces and cut out of one buffer, each payload copied
    once.  Every SftpFS sharing the connection uses its wire, so request
    numbers stay unique.  `start` must come first."""

    def __init__(self, channel):
        self.channel = channel
        self.next_number = 1
        self.server_version = None
        self.routes = {}            # request number -> Replies or None
        self.outgoing = []
        self.outgoing_size = 0
        self.incoming = bytearray()

    def start(self):
        """Say which SFTP version we speak (INIT) and read the server's
        VERSION; ProtocolError if it answers anything else."""
        self._write(codec.init_packet())
        kind, _, msg = self._next_packet(has_number=False)
        if kind != codec.CMD_VERSION:
            raise codec.ProtocolError('Incompatible sftp protocol')
        self.server_version = msg.get_int()

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

    def _next_packet(self, has_number=True):
        """(type, request number, fields) of the next packet; VERSION,
        the only one without a request number, when not `has_number`."""
        buf = self.incoming
        self._fill(4)
        size = self._fill(4 + int.from_bytes(buf[:4], 'big'))
        if size < 9:
            raise codec.ProtocolError('Malformed SFTP reply')
        kind = buf[4]
        if not has_number:
            msg = codec.reply(bytes(buf[5:size]))
            del buf[:size]
            return kind, None, msg
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
