"""obnamlib.crypto.cipher_helper's inbox: the parent's releases of the reply
ring take effect as they come, and the end of the requests stops a reply
that waits for room in the ring."""

import mmap
import os

import pytest

from obnamlib.crypto import cipher_helper, reply_ring
from obnamlib.crypto.frame_pipe import Channel


@pytest.fixture
def inbox_with_ring():
    """A function making (inbox, the parent's end, ring); every pipe is
    closed afterwards."""
    fds = []

    def make():
        read_end, write_end = os.pipe()
        fds.append(read_end)
        ring = reply_ring.RingWriter(mmap.mmap(-1, 4096))
        inbox = cipher_helper._Inbox(Channel(read_end), ring=ring)
        return inbox, Channel(write_end), ring

    yield make
    for fd in fds:
        os.close(fd)


def test_releases_reach_the_ring_and_are_not_work(inbox_with_ring):
    inbox, parent, ring = inbox_with_ring()
    parent.send(('release', 1234))
    parent.send(('sync',))
    assert inbox.get() == (('sync',), [])   # after the release, in order
    assert ring.released == 1234
    assert not inbox.items
    parent.close()


def test_the_end_of_requests_stops_the_ring(inbox_with_ring):
    inbox, parent, ring = inbox_with_ring()
    parent.send(('stop',))
    assert inbox.get() == (('stop',), [])
    assert ring.stopping
    inbox, parent, ring = inbox_with_ring()
    parent.close()      # end of input: the same
    assert inbox.get() == (('stop',), [])
    assert ring.stopping
