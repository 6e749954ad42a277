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
