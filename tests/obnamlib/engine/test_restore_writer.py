"""The restore's writing side: a regular file's content, part by part."""

import hashlib
import os

import pytest

import obnamlib.errors
import obnamlib.vfs.local
from obnamlib.engine import chunker, restore_writer


def test_file_content_leaves_zeros_as_holes_and_gets_its_size(tmp_path):
    fs = obnamlib.vfs.local.LocalFS('/')
    dest = os.fsencode(str(tmp_path / 'f'))
    pieces = [b'a' * 4096, bytes(1 << 20), b'b' * 10, bytes(1 << 20)]
    content = restore_writer.FileContent(fs, dest)
    content.write(pieces[:2])
    content.write(pieces[2:])
    digest = content.finish()
    data = b''.join(pieces)
    assert digest.digest() == hashlib.md5(data).digest()
    assert (tmp_path / 'f').read_bytes() == data
    assert os.stat(dest).st_blocks * 512 < 1 << 20


def test_an_empty_file_is_made_at_finish(tmp_path):
    content = restore_writer.FileContent(obnamlib.vfs.local.LocalFS('/'),
                                         os.fsencode(str(tmp_path / 'e')))
    content.finish()
    assert (tmp_path / 'e').read_bytes() == b''


def test_discard_removes_the_file_even_when_finished(tmp_path):
    dest = os.fsencode(str(tmp_path / 'f'))
    content = restore_writer.FileContent(obnamlib.vfs.local.LocalFS('/'),
                                         dest)
    content.write([b'data'])
    content.finish()
    assert content.discard() is None
    assert not os.path.exists(dest)


def test_discard_of_nothing_made_does_nothing(tmp_path):
    content = restore_writer.FileContent(
        obnamlib.vfs.local.LocalFS('/'), os.fsencode(str(tmp_path / 'f')))
    assert content.discard() is None


@pytest.mark.parametrize('data, zero', [
    (b'', True), (b'\0', True), (bytes(5000), True), (b'\0' * 10 + b'x', False),
    (b'x' + b'\0' * 10, False), (b'\0' * 5 + b'x' + b'\0' * 5, False)])
def test_all_zero(data, zero):
    assert chunker.is_all_zero(data) is zero


def test_a_failure_to_hash_is_raised_by_finish(tmp_path, monkeypatch):
    """The restorer handles a file's failures around finish(): a failure
    of the worker thread hashing the file must come from there, not from
    the digest asked for after it."""
    import concurrent.futures
    from obnamlib.engine import background_md5
    monkeypatch.setattr(background_md5, 'BACKGROUND_HASH_BYTES', 0)

    class Broken:
        def update(self, data):
            raise MemoryError('no room')

    with concurrent.futures.ThreadPoolExecutor(1) as hasher:
        content = restore_writer.FileContent(
            obnamlib.vfs.local.LocalFS('/'),
            os.fsencode(str(tmp_path / 'f')), hasher)
        content.digest.md5 = Broken()
        content.write([b'data'])
        with pytest.raises(MemoryError):
            content.finish()
