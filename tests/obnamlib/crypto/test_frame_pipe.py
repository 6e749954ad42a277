"""Frames through a real pipe: messages with data of every awkward size
come out as they went in, in order."""

import os
import threading

import pytest

from obnamlib.crypto.frame_pipe import Channel, new_pipe

SIZES = [0, 1, 3, 65531, 65532, 65536, 65537, 1 << 20, 3 * (1 << 20) + 7]


def test_messages_and_data_arrive_whole_and_in_order():
    read_end, write_end = new_pipe()
    sender, receiver = Channel(write_end), Channel(read_end)
    sent = [(('m', i, size), [os.urandom(size), b'tail%d' % i])
            for i, size in enumerate(SIZES * 2)]

    def send_all():
        for message, parts in sent:
            sender.send(message, [memoryview(parts[0]), parts[1]])
        sender.close()
    thread = threading.Thread(target=send_all)
    thread.start()
    for message, parts in sent:
        assert receiver.recv() == message
        assert [receiver.frame(), receiver.frame()] == parts
    with pytest.raises(EOFError):
        receiver.recv()
    thread.join()
    receiver.close()


def test_poll_says_whether_a_frame_has_come():
    read_end, write_end = new_pipe()
    sender, receiver = Channel(write_end), Channel(read_end)
    assert not receiver.poll()
    sender.send(('one',))
    sender.send(('two',))
    assert receiver.poll(10)
    assert receiver.recv() == ('one',)
    assert receiver.poll()          # already read into the buffer
    assert receiver.recv() == ('two',)
    assert not receiver.poll()
    sender.close()
    receiver.close()


def test_held_messages_wait_and_then_arrive_as_they_were_sent():
    """Small held messages are written together, in order with the
    others, with the data they had when sent (the sender may reuse a
    buffer); an unheld send, a big held one, or flush() writes them."""
    read_end, write_end = new_pipe()
    sender, receiver = Channel(write_end), Channel(read_end)
    buf = bytearray(b'first')
    assert not sender.send(('a',), [memoryview(buf)], hold=True)
    buf[:] = b'later'
    assert not sender.send(('b',), [bytes(buf)], hold=True)
    assert not receiver.poll()
    assert sender.send(('c',))
    assert receiver.recv() == ('a',) and receiver.frame() == b'first'
    assert receiver.recv() == ('b',) and receiver.frame() == b'later'
    assert receiver.recv() == ('c',)
    assert not sender.send(('d',), [b'x'], hold=True)
    big = os.urandom(Channel.HOLD_BYTES)
    assert sender.send(('e',), [big], hold=True)
    assert receiver.recv() == ('d',) and receiver.frame() == b'x'
    assert receiver.recv() == ('e',) and receiver.frame() == big
    assert not sender.send(('f',), hold=True)
    sender.flush()
    assert receiver.poll(10) and receiver.recv() == ('f',)
    assert not receiver.poll()
    sender.close()
    receiver.close()


def test_held_messages_are_written_once_enough_are_held():
    read_end, write_end = new_pipe()
    sender, receiver = Channel(write_end), Channel(read_end)
    part = bytes(Channel.HOLD_BYTES // 4)
    written = [sender.send(('m', i), [part], hold=True) for i in range(4)]
    assert written == [False, False, False, True]
    for i in range(4):
        assert receiver.recv() == ('m', i) and receiver.frame() == part
    for i in range(Channel.HOLD_FRAMES):
        if sender.send(('n', i), hold=True):
            break
    assert 0 < i < Channel.HOLD_FRAMES
    assert [receiver.recv() for _ in range(i + 1)] == [
        ('n', j) for j in range(i + 1)]
    assert not receiver.poll()
    sender.close()
    receiver.close()
