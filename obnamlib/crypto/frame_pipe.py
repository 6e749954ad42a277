"""Pipes between obnam and its helper processes, carrying frames: a
4-byte length, then that many bytes (a pickled message, or data that
goes with one).  A message and its data are written with one system
call; frames are read through a buffer, so that small ones cost no system
call each; the rest of a big one is read in large pieces and joined once
(its first bytes usually came with the buffer).  (The framing of
multiprocessing.connection costs four reads per message and a copy of
every byte through a BytesIO.)"""

import fcntl
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import traceback

# A pipe's room, if the kernel allows: a whole chunk, fewer wake-ups.
PIPE_BYTES = 1 << 20
_IOV_MAX = 512
_F_SETPIPE_SZ = getattr(fcntl, 'F_SETPIPE_SZ', 1031)


def start_child(module, args, pass_fds):
    """A helper process running module.serve(*args): this interpreter,
    isolated (-I: no environment or user site can change what runs), with
    the obnamlib this one was loaded from; pass_fds are inherited.
    OSError if it cannot be started."""
    import obnamlib
    package_parent = os.path.dirname(os.path.dirname(
        os.path.abspath(obnamlib.__file__)))
    boot = ('import sys; sys.path.insert(0, sys.argv[1]); '
            'from %s import serve; serve(*sys.argv[2:])' % module)
    return subprocess.Popen(
        [sys.executable, '-I', '-c', boot, package_parent] +
        [str(arg) for arg in args],
        pass_fds=pass_fds, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL)


def run_child(work, replies):
    """How a helper process runs work(): Ctrl-C is the parent's to
    handle (it stops us); log records have nowhere to go (without a
    handler Python would print warnings on the terminal, which is the
    parent's: it logs what it hears); an unexpected failure goes back as
    ('crashed', traceback) through the Channel `replies`.  The process
    then ends without the interpreter's teardown: nothing is buffered."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.getLogger().addHandler(logging.NullHandler())
    try:
        work()
    except (BrokenPipeError, EOFError):
        pass        # the parent stopped listening: nobody to tell
    except Exception:
        try:
            replies.send(('crashed', traceback.format_exc()))
        except OSError:
            pass
        os._exit(1)
    os._exit(0)


def new_pipe():
    """(read end, write end) of a new pipe with PIPE_BYTES of room."""
    read_end, write_end = os.pipe()
    try:
        fcntl.fcntl(write_end, _F_SETPIPE_SZ, PIPE_BYTES)
    except OSError:
        pass
    return read_end, write_end


class Channel:
    """One end of a pipe: send() on the write end, recv() and frame()
    on the read end."""

    BUFFER = 65536
    # Held messages (send's hold) are written once they reach this many
    # bytes or frames: a few system calls, and wake-ups of the reader,
    # for many small messages.
    HOLD_BYTES = 256 * 1024
    HOLD_FRAMES = 128

    def __init__(self, fd):
        self.fd = fd
        self.buf = b''
        self.pos = 0
        self.poller = None        # made at the first poll (once per chunk)
        self.held = []            # frames of held messages, not yet written
        self.held_bytes = 0

    def fileno(self):
        return self.fd

    def send(self, message, parts=(), hold=False):
        """Write a message and its parts, after any held ones.  hold: a
        small message may wait in this end until HOLD_BYTES are held or
        the next send without hold, or flush() (its parts are copied
        unless they are bytes: the caller may reuse its buffers).  True
        if something was written."""
        frames = []
        for data in [pickle.dumps(message)] + list(parts):
            if len(data) > 0x7fffffff:
                raise ValueError('a part of over 2 GiB')
            frames += [struct.pack('!I', len(data)), data]
        if hold:
            size = sum(len(frame) for frame in frames)
            if size < self.HOLD_BYTES:
                self.held += [frame if type(frame) is bytes else
                              bytes(frame) for frame in frames]
                self.held_bytes += size
                if self.held_bytes < self.HOLD_BYTES and \
                        len(self.held) < self.HOLD_FRAMES:
                    return False
                frames = []
        frames, self.held, self.held_bytes = self.held + frames, [], 0
        write_all(self.fd, frames)
        return True

    def flush(self):
        """Write the held messages, if any."""
        if self.held:
            frames, self.held, self.held_bytes = self.held, [], 0
            write_all(self.fd, frames)

    def recv(self):
        return pickle.loads(self.frame())

    def frame(self):
        self._fill(4)
        size, = struct.unpack_from('!I', self.buf, self.pos)
        self.pos += 4
        if len(self.buf) - self.pos >= size:
            data = self.buf[self.pos:self.pos + size]
            self.pos += size
            return data
        pieces = [self.buf[self.pos:]]
        got = len(pieces[0])
        self.buf, self.pos = b'', 0
        while got < size:
            more = os.read(self.fd, size - got)
            if not more:
                raise EOFError('the other end closed the pipe')
            pieces.append(more)
            got += len(more)
        return b''.join(pieces) if len(pieces) > 2 or pieces[0] \
            else pieces[1]

    def _fill(self, size):
        while len(self.buf) - self.pos < size:
            more = os.read(self.fd, self.BUFFER)
            if not more:
                raise EOFError('the other end closed the pipe')
            self.buf = self.buf[self.pos:] + more
            self.pos = 0

    def poll(self, timeout=0):
        """Whether a frame has started to arrive (waits up to timeout s)."""
        if self.pos < len(self.buf):
            return True
        if self.poller is None:
            self.poller = select.poll()
            self.poller.register(self.fd, select.POLLIN)
        return bool(self.poller.poll(timeout * 1000))

    def close(self):
        """Held messages are not written: flush() or send first."""
        os.close(self.fd)


def write_all(fd, frames):
    """os.writev until every byte of frames is written."""
    frames = [memoryview(frame).cast('B') for frame in frames]
    while frames:
        written = os.writev(fd, frames[:_IOV_MAX])
        while frames and written >= len(frames[0]):
            written -= len(frames[0])
            frames.pop(0)
        if written:
            frames[0] = frames[0][written:]
