"""obnamlib.crypto.reply_ring: replies put by one thread come out whole and in
order for another, around the ring many times, with the writer waiting
for room that the reader releases."""

import mmap
import os
import queue
import threading

import pytest

from obnamlib.crypto import reply_ring

SIZE = 4096


def ring_pair(size=SIZE):
    shared = mmap.mmap(-1, size)
    return reply_ring.RingWriter(shared), reply_ring.RingReader(shared)


def reply(i):
    return bytes([i % 251]) * (1 + (i * 37) % (SIZE // 4))


def test_a_new_ring_is_shared_memory_of_the_size_asked():
    made = reply_ring.new_ring(8192)
    if made is None:
        pytest.skip('no memfd here')
    fd, shared = made
    try:
        assert len(shared) == 8192
        other = mmap.mmap(fd, 0)
        shared[:5] = b'hello'
        assert other[:5] == b'hello'
        other.close()
    finally:
        shared.close()
        os.close(fd)


def test_replies_go_around_the_ring_in_order_and_whole():
    writer, reader = ring_pair()
    sent = queue.Queue()
    count = 400     # about 50 times around

    def put_all():
        for i in range(count):
            sent.put(writer.put(reply(i)))

    thread = threading.Thread(target=put_all)
    thread.start()
    for i in range(count):
        start, end, mark = sent.get(timeout=60)
        data, release = reader.take(start, end, mark)
        assert data == reply(i)
        if release is not None:
            writer.release(release)
    thread.join(60)
    assert not thread.is_alive()
    assert reader.released > 0


def test_a_reply_that_does_not_fit_before_the_end_starts_at_zero():
    writer, reader = ring_pair()
    for i in range(3):
        writer.put(b'a' * 1024)
    assert writer.put(b'b' * 1000) == (3072, 4072, 4072)
    writer.release(4072)
    assert writer.put(b'c' * 1024) == (0, 1024, SIZE + 1024)
    assert writer.put(b'd' * 24) == (1024, 1048, SIZE + 1048)


def full_ring():
    writer, reader = ring_pair()
    for i in range(4):
        writer.put(bytes([i]) * 1024)
    return writer, reader


def test_a_full_ring_takes_no_more_until_released():
    writer, _ = full_ring()
    writer.stop()       # instead of waiting for room, it says so
    with pytest.raises(BrokenPipeError):
        writer.put(b'y')
    writer, reader = full_ring()
    writer.release(1024)
    assert writer.put(b'y' * 1024) == (0, 1024, SIZE + 1024)
    assert bytes(reader.shared[:1024]) == b'y' * 1024
    assert bytes(reader.shared[1024:2048]) == bytes([1]) * 1024


def test_a_ring_with_room_ignores_stop():
    writer, _ = ring_pair()
    writer.stop()
    assert writer.put(b'z' * 10) == (0, 10, 10)


def test_a_writer_waiting_for_room_gives_up_when_stopped():
    writer, _ = full_ring()
    failed = []
    waiting = threading.Event()
    wait = writer.changed.wait

    def wait_and_say_so():
        waiting.set()
        return wait()

    writer.changed.wait = wait_and_say_so

    def put_one_more():
        try:
            writer.put(b'y')
        except BrokenPipeError as e:
            failed.append(e)

    thread = threading.Thread(target=put_one_more)
    thread.start()
    assert waiting.wait(60)     # it waits for room ...
    writer.stop()               # ... until told to give up
    thread.join(60)
    assert len(failed) == 1


def test_the_reader_releases_every_eighth_of_the_ring():
    _, reader = ring_pair()
    assert reader.take(0, 100, 100)[1] is None
    assert reader.take(100, 511, 511)[1] is None
    assert reader.take(511, 512, 512) == (bytes(1), 512)   # SIZE // 8
    assert reader.take(512, 600, 600)[1] is None


def test_without_memfd_there_is_no_ring(monkeypatch):
    monkeypatch.delattr(os, 'memfd_create', raising=False)
    assert reply_ring.new_ring(8192) is None


def test_a_memfd_refused_gives_no_ring(monkeypatch):
    def refuse(name, flags=0):
        raise OSError(13, 'Permission denied')
    monkeypatch.setattr(os, 'memfd_create', refuse)
    assert reply_ring.new_ring(8192) is None


def test_only_replies_of_up_to_a_quarter_of_the_ring_go_in_it():
    writer, _ = ring_pair()
    assert writer.fits(SIZE // 4)
    assert not writer.fits(SIZE // 4 + 1)
