"""Key layouts and file ids (format-6.md §7)."""

import hashlib
import struct

from obnamlib.repo.fmt_6 import keys
from obnamlib.repo.fmt_6.chunk_store import idpath, parse_chunk_name


def test_default_file_id_of_root():
    assert keys.default_file_id(b'/').hex() == '6666cd76d41d8cd9'


def test_default_file_id_uses_posix_dirname_and_basename():
    path = b'/tmp/x/data/file'
    assert keys.default_file_id(path) == (
        hashlib.md5(b'/tmp/x/data').digest()[:4] +
        hashlib.md5(b'file').digest()[:4])


def test_generation_main():
    assert keys.GEN_MAIN.hex() == 'd41d8cd99cb9ce5b'
    assert keys.gen_key(keys.GEN_ENDED) == (
        b'\x02' + bytes.fromhex('d41d8cd99cb9ce5b') + b'\x00' +
        struct.pack('!Q', 2))


def test_client_key():
    key = keys.client_key(b'havelock', 2467055675223742640, 1)
    assert len(key) == 25
    assert key == (hashlib.md5(b'havelock').digest() +
                   struct.pack('!Q', 2467055675223742640) + b'\x01')


def test_file_keys():
    fid = b'\x01' * 8
    assert keys.file_key(fid, keys.FILE_METADATA) == (
        b'\x00' + fid + b'\x03' + b'\x00' * 8)
    assert keys.file_key(fid, keys.FILE_CHUNKS, 2) == (
        b'\x00' + fid + b'\x01' + struct.pack('!Q', 2))
    lo, hi = keys.whole_file_range(fid)
    assert lo == b'\x00' + fid + b'\x00' * 9
    assert hi == b'\x00' + fid + b'\xff' * 9


def test_chunk_ref_key():
    fid = b'\xaa' * 8
    key = keys.chunk_ref_key(0xf9baf814f09fa488, fid)
    assert key == struct.pack('!BQB', 1, 0xf9baf814f09fa488, 0) + fid
    assert keys.chunk_id_of_ref(key) == 0xf9baf814f09fa488


def test_chunk_index_keys():
    checksum = hashlib.md5(b'x').hexdigest().encode()
    assert keys.chunklist_key(5) == struct.pack('!Q', 5)
    key = keys.chunksums_key(checksum, 5, 7)
    assert len(key) == 48
    assert keys.parse_chunksums_key(key) == (checksum, 5, 7)
    assert keys.content_checksum(b'x') == checksum


def test_chunk_idpath_matches_reference():
    assert idpath(0xf9baf814f09fa488) == 'chunks/1277/2680/1984/f9baf814f09fa488'
    assert idpath(3) == 'chunks/0/0/0/3'
    assert idpath(8192) == 'chunks/1/0/0/2000'


def test_parse_chunk_name():
    assert parse_chunk_name('f9baf814f09fa488') == 0xf9baf814f09fa488
    for name in ('lock', 'key', 'userkeys', 'tmpabc', '0x1', 'F00', '007'):
        assert parse_chunk_name(name) is None
