"""obnamlib.crypto.cipher_helper's inbox: the parent's releases of the reply
ring take effect as they come, and the end of the requests stops a reply
that waits for room in the ring."""

import mmap
import os
import threading

import pytest

from obnamlib.crypto import cipher_helper, reply_ring
from obnamlib.crypto.frame_pipe import Channel
from tests.obnamlib.mount_tables import local_fs_on


class ParentEnd(Channel):
    """The parent's end of the requests pipe, closed once however often
    close() is called."""

    closed = False

    def close(self):
        if not self.closed:
            self.closed = True
            super().close()


@pytest.fixture
def inbox_with_ring():
    """A function making (inbox, the parent's end, ring).  Afterwards the
    parents' ends are closed, the inboxes' reading threads end (they see
    the end of input), and only then their read ends are closed: a
    thread still reading a closed descriptor would read whatever pipe
    the next test gets under the same number."""
    read_ends, parents = [], []

    def make():
        read_end, write_end = os.pipe()
        read_ends.append(read_end)
        parents.append(ParentEnd(write_end))
        ring = reply_ring.RingWriter(mmap.mmap(-1, 4096))
        inbox = cipher_helper._Inbox(Channel(read_end), ring=ring)
        return inbox, parents[-1], ring

    yield make
    for parent in parents:
        parent.close()
    for thread in threading.enumerate():
        if thread.name == 'inbox':
            thread.join(60)
            assert not thread.is_alive()
    for fd in read_ends:
        os.close(fd)


def test_releases_reach_the_ring_and_are_not_work(inbox_with_ring):
    inbox, parent, ring = inbox_with_ring()
    parent.send(('release', 1234))
    parent.send(('sync',))
    assert inbox.get() == (('sync',), [])   # after the release, in order
    assert ring.released == 1234
    assert not inbox.items
    parent.close()


def test_work_queued_by_a_parent_that_died_is_dropped(inbox_with_ring):
    """The pipe ends without 'stop' (the parent was killed): no create
    still queued is made, so a killed run leaves no file it never knew."""
    inbox, parent, ring = inbox_with_ring()
    for i in range(3):
        parent.send(('create', 'chunks/%d' % i, None, 1), [b'data'])
        parent.send(('sync',))
    parent.close()
    for thread in threading.enumerate():
        if thread.name == 'inbox':
            thread.join(60)
    assert inbox.get() == (('stop',), [])
    assert not inbox.items
    assert inbox.bytes == 0


def test_the_end_of_requests_stops_the_ring(inbox_with_ring):
    inbox, parent, ring = inbox_with_ring()
    parent.send(('stop',))
    assert inbox.get() == (('stop',), [])
    assert ring.stopping
    inbox, parent, ring = inbox_with_ring()
    parent.close()      # end of input: the same
    assert inbox.get() == (('stop',), [])
    assert ring.stopping


def test_a_local_disk_creates_in_the_helpers_thread(tmp_path):
    assert cipher_helper._creators(local_fs_on(tmp_path, 'ext4')) is None


@pytest.mark.timeout(60)
def test_on_a_network_mount_the_helper_creates_files_together(tmp_path):
    fs = local_fs_on(tmp_path, 'nfs4')
    creators = cipher_helper._creators(fs)
    assert creators is not None
    together = threading.Barrier(4, timeout=20)
    create_file = fs.create_file

    def create_when_four_are_creating(path, data):
        if data != b'again':
            together.wait()     # broken (a failure) if one at a time
        create_file(path, data)
    fs.create_file = create_when_four_are_creating
    read_end, write_end = os.pipe()
    replies = Channel(read_end)
    server = cipher_helper._Server(fs, None, Channel(write_end),
                                   creators=creators)
    try:
        for i in range(8):
            server.create('f%d' % i, None, [b'part ', b'%d' % i])
        server.finish_creates()
        server.create('f0', None, [b'again'])      # the name is taken
        server.sync()
        assert replies.recv() == ('failed',)
        synced = replies.recv()
        assert synced[0] == 'synced'
        assert [path for path, _ in synced[1]] == ['f0']
        assert synced[1][0][1][:2] == ('os', 17)    # EEXIST
    finally:
        creators.shutdown()
        os.close(read_end)
        os.close(write_end)
    assert [(tmp_path / ('f%d' % i)).read_bytes() for i in range(8)] == \
        [b'part %d' % i for i in range(8)]
