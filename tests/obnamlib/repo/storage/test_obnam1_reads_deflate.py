"""Chunk files written with --compress-with=deflate decode the way Obnam
1.x reads them (format-6.md §3.3, §3.4): split at the first NUL, an empty
tag ends the chain, `deflate` is plain zlib of any level.  The tags are
per file, so a repository may hold compressed and stored chunk files side
by side: Obnam 1.18+ writes such repositories itself, and every 1.x reader
looks only at each file's own tags.  The reader here shares no code with
obnamlib."""

import os
import random
import subprocess
import sys
import zlib

from tests.paths import OBNAM


def obnam1_unwrap(data):
    """An unencrypted filtered file as Obnam 1.x's filter hook undoes it;
    also the tags it met."""
    tags = []
    while True:
        tag, sep, rest = data.partition(b'\0')
        assert sep, 'no filter tag'
        if tag == b'':
            return rest, tags
        assert tag == b'deflate', 'unknown filter %r' % tag
        tags.append(tag)
        data = whole_zlib_stream(rest)


def whole_zlib_stream(data):
    """zlib.decompress, and the file holds exactly one RFC 1950 stream."""
    assert (data[0] & 0x0f) == 8 and (data[0] * 256 + data[1]) % 31 == 0
    stream = zlib.decompressobj()
    out = stream.decompress(data)
    assert stream.eof and stream.unused_data == b''
    assert zlib.decompress(data) == out
    return out


def chunk_files(repo):
    top = os.path.join(repo, 'chunks')
    for dirname, _, names in os.walk(top):
        for name in names:
            with open(os.path.join(dirname, name), 'rb') as f:
                yield f.read()


def obnam(tmp_path, *args):
    argv = [sys.executable, OBNAM, '--no-default-configs', '--quiet',
            '--log=none', '--client-name=one', '--lock-timeout=0',
            '--repository=%s' % (tmp_path / 'repo')] + list(args)
    result = subprocess.run(argv, capture_output=True,
                            env=dict(os.environ, LC_ALL='C.UTF-8'))
    assert result.returncode == 0, result.stderr


def backup(tmp_path, live, *options):
    obnam(tmp_path, *options, 'backup', str(live))


def test_a_deflate_backup_mixes_compressed_and_stored_chunks(tmp_path):
    rng = random.Random(30)
    contents = {
        'log.txt': b''.join(b'%d GET /index.html 200\n' % i
                            for i in range(120000)),   # several chunks
        'photo.raw': rng.randbytes(2 * 1024 * 1024 + 5),
        'small.txt': b'hello, obnam 1.x\n' * 40,
        'small.bin': rng.randbytes(3000),
        'empty': b'',
    }
    live = tmp_path / 'live'
    live.mkdir()
    for name, data in contents.items():
        (live / name).write_bytes(data)
    backup(tmp_path, live, '--compress-with=deflate')
    # a second client without compression adds to the same repository
    (live / 'later.txt').write_bytes(b'written uncompressed\n' * 500)
    backup(tmp_path, live, '--compress-with=none')

    payloads = {}
    for data in chunk_files(tmp_path / 'repo'):
        payload, tags = obnam1_unwrap(data)
        payloads[payload] = tags
    text = contents['log.txt']
    text_chunks = [p for p in payloads if p in text]
    assert text_chunks and all(payloads[p] == [b'deflate']
                               for p in text_chunks)
    assert payloads[contents['small.txt']] == [b'deflate']
    assert payloads[contents['small.bin']] == []
    random_chunks = [p for p in payloads if p in contents['photo.raw']]
    assert b''.join(sorted(random_chunks, key=contents['photo.raw'].index)) \
        == contents['photo.raw']
    assert all(payloads[p] == [] for p in random_chunks)
    assert payloads[b'written uncompressed\n' * 500] == []

    # and obnam reads the mixed repository back whole
    obnam(tmp_path, 'restore', '--to', str(tmp_path / 'restored'))
    restored = tmp_path / 'restored' / str(live).lstrip('/')
    for name in list(contents) + ['later.txt']:
        assert (restored / name).read_bytes() == (live / name).read_bytes()


def test_every_filtered_file_of_a_deflate_repository_decodes(tmp_path):
    """B-tree nodes, metadata and refcounts too (they compress well)."""
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(50):
        (live / ('f%d' % i)).write_bytes(b'file %d\n' % i * (i + 1))
    backup(tmp_path, live, '--compress-with=deflate')
    compressed = 0
    for dirname, _, names in os.walk(tmp_path / 'repo'):
        for name in names:
            path = os.path.join(dirname, name)
            if name in ('key', 'userkeys', 'lock', 'format'):
                continue
            with open(path, 'rb') as f:
                _, tags = obnam1_unwrap(f.read())
            compressed += tags == [b'deflate']
    assert compressed > 50
