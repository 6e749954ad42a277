"""Issue 4 "must show": a repository written through our format-6 code is
decoded by a reader written from format-6.md alone — its own tag-chain
strip, refcount check and key layouts here, and the node decoder of
tests/obnamlib/larch/specdecoder.py (which shares no code with larch); nothing from
obnamlib.repo.fmt_6 or larch is imported by the reader below."""

import configparser
import hashlib
import os
import posixpath
import stat
import struct
import zlib

import pytest

from obnamlib.repo import factory as repo_factory
from obnamlib.repo.metadata import Metadata
from tests.obnamlib.larch.specdecoder import decode_node, idpath

NODE_SIZE = 2048     # small nodes: several levels, splits and sharing


# --- the independent reader (format-6.md §3, §5, §7, §8) -------------------

def strip_tags(data):
    while True:
        tag, sep, rest = data.partition(b'\0')
        assert sep, 'no tag chain'
        if tag == b'':
            return rest
        assert tag == b'deflate', tag
        data = zlib.decompress(rest)


class SpecForest:

    def __init__(self, repo, dirname, key_size):
        self.dir = os.path.join(repo, dirname)
        self.key_size = key_size
        ini = configparser.ConfigParser()
        ini.read_string(strip_tags(self.read('metadata')).decode('ascii'))
        meta = ini['metadata']
        assert meta['format'] == '1/1'
        assert int(meta['key_size']) == key_size
        self.last_id = int(meta['last_id'])
        ids = meta['root_ids'].strip()
        self.root_ids = [int(x) for x in ids.split(',')] if ids else []
        self.nodes = {}

    def read(self, rel):
        with open(os.path.join(self.dir, rel), 'rb') as f:
            return f.read()

    def node(self, i):
        if i not in self.nodes:
            data = strip_tags(self.read(idpath(i)))
            assert len(data) <= NODE_SIZE
            kind, node_id, keys, rest = decode_node(data, self.key_size)
            assert node_id == i
            assert keys == sorted(keys) and len(set(keys)) == len(keys)
            self.nodes[i] = (kind, keys, rest)
        return self.nodes[i]

    def items(self, root_id):
        """Every (key, value) of a tree, in order; checks index keys."""
        kind, _, _ = self.node(root_id)
        assert kind == 'index', 'root must be an index node'
        out = []

        def visit(i):
            kind, keys, rest = self.node(i)
            if kind == 'leaf':
                out.extend(zip(keys, rest))
                return keys[0] if keys else None
            for key, kid in zip(keys, rest):
                assert visit(kid) == key, 'index key is not subtree minimum'
            return keys[0] if keys else None
        visit(root_id)
        return out

    def check_refcounts(self):
        expected = {}
        for root in self.root_ids:
            expected[root] = expected.get(root, 0) + 1
        seen = set()
        pending = list(self.root_ids)
        while pending:
            i = pending.pop()
            if i in seen:
                continue
            seen.add(i)
            kind, _, rest = self.node(i)
            if kind == 'index':
                for kid in rest:
                    expected[kid] = expected.get(kid, 0) + 1
                    pending.append(kid)
        stored = {}
        refdir = os.path.join(self.dir, 'refcounts')
        for name in os.listdir(refdir):
            data = strip_tags(self.read(os.path.join('refcounts', name)))
            start, count = struct.unpack('!QH', data[:10])
            assert name == 'refcounts-%d' % start and count == 32768
            values = struct.unpack('!%dH' % count, data[10:])
            for offset, value in enumerate(values):
                if value:
                    stored[start + offset] = value
        # a root has refcount 1 even though nothing points at it
        assert stored == expected
        on_disk = set()
        for dirpath, _, names in os.walk(os.path.join(self.dir, 'nodes')):
            on_disk |= {int(n, 16) for n in names}
        assert on_disk == seen, 'unreachable or missing node files'
        assert max(on_disk) <= self.last_id


def md5(data):
    return hashlib.md5(data).digest()


def default_id(path):
    return md5(posixpath.dirname(path))[:4] + md5(posixpath.basename(path))[:4]


FLAGS = {'st_mode': 0, 'st_mtime_sec': 1, 'st_mtime_nsec': 2, 'st_nlink': 3,
         'st_size': 4, 'st_uid': 5, 'groupname': 6, 'username': 7,
         'target': 8, 'xattr': 9, 'st_blocks': 10, 'st_dev': 11,
         'st_gid': 12, 'st_ino': 13, 'st_atime_sec': 14,
         'st_atime_nsec': 15, 'md5': 16}
INTS = ['st_mode', 'st_mtime_sec', 'st_mtime_nsec', 'st_atime_sec',
        'st_atime_nsec', 'st_nlink', 'st_size', 'st_uid', 'st_gid', 'st_dev',
        'st_ino', 'st_blocks']
STRS = ['groupname', 'username', 'target', 'md5', 'xattr']


def decode_md(value):
    fixed = struct.unpack('!QQqQqQQQQQQQQQQQQQ', value[:144])
    flags, result, pos = fixed[0], {}, 144
    for name, v in zip(INTS, fixed[1:13]):
        if flags >> FLAGS[name] & 1:
            result[name] = v
    for name, length in zip(STRS, fixed[13:]):
        if flags >> FLAGS[name] & 1:
            result[name] = value[pos:pos + length]
        pos += length
    assert pos == len(value)
    return result


class SpecRepository:

    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, 'metadata', 'format'), 'rb') as f:
            assert f.read().splitlines()[0].strip() == b'6'

    def client_id(self, name):
        forest = SpecForest(self.path, 'clientlist', 25)
        forest.check_refcounts()
        assert len(forest.root_ids) == 1, 'client list keeps one tree'
        for key, value in forest.items(forest.root_ids[-1]):
            digest, client_id, subkey = struct.unpack('!16sQB', key)
            if subkey == 0 and value == name:
                assert digest == md5(name)
                return client_id
        raise KeyError(name)

    def generations(self, client_id):
        """[(gen id, {key: value})] in tree order."""
        forest = SpecForest(self.path, str(client_id), 18)
        forest.check_refcounts()
        gens = []
        for root in forest.root_ids:
            tree = dict(forest.items(root))
            gen_key = (b'\x02' + default_id(b'generation') + b'\x00' +
                       struct.pack('!Q', 0))
            gens.append((struct.unpack('!Q', tree[gen_key])[0], tree))
        return gens

    def chunk(self, chunk_id):
        with open(os.path.join(self.path, idpath(chunk_id, 'chunks')),
                  'rb') as f:
            return strip_tags(f.read())

    def chunk_index(self):
        chunklist = SpecForest(self.path, 'chunklist', 8)
        chunksums = SpecForest(self.path, 'chunksums', 48)
        for forest in (chunklist, chunksums):
            forest.check_refcounts()
            assert len(forest.root_ids) == 1
        listing = {struct.unpack('!Q', k)[0]: v
                   for k, v in chunklist.items(chunklist.root_ids[0])}
        sums = [struct.unpack('!32sQQ', k)
                for k, _ in chunksums.items(chunksums.root_ids[0])]
        return listing, sums


def key(prefix, main, subtype, subkey):
    if isinstance(subkey, int):
        subkey = struct.pack('!Q', subkey)
    return struct.pack('!B8sB8s', prefix, main, subtype, subkey)


def resolve(tree, path):
    lo = key(0, default_id(path), 0, b'\0' * 8)
    hi = key(0, default_id(path), 0, b'\xff' * 8)
    found = [k[10:] for k, v in tree.items() if lo <= k <= hi and v == path]
    assert len(found) == 1, path
    file_id = found[0]
    assert tree[key(0, file_id, 0, file_id)] == path
    return file_id


def read_generation(repo, tree):
    """{path: (metadata dict, content or None)} by walking from '/'."""
    result = {}
    pending = [b'/']
    while pending:
        path = pending.pop()
        file_id = resolve(tree, path)
        md = decode_md(tree[key(0, file_id, 3, 0)])
        lo, hi = key(0, file_id, 1, 0), key(0, file_id, 1, b'\xff' * 8)
        chunk_ids = []
        for k in sorted(k for k in tree if lo <= k <= hi):
            value = tree[k]
            chunk_ids.extend(struct.unpack('!%dQ' % (len(value) // 8), value))
            assert tree[key(1, struct.pack('!Q', chunk_ids[-1]), 0,
                            file_id)] == b''
        content = b''.join(repo.chunk(c) for c in chunk_ids) \
            if stat.S_ISREG(md['st_mode']) else None
        result[path] = (md, content)
        lo, hi = key(0, file_id, 4, 0), key(0, file_id, 4, b'\xff' * 8)
        for k in (k for k in tree if lo <= k <= hi):
            child = posixpath.join(path, tree[k])
            assert resolve(tree, child) == k[10:]
            pending.append(child)
    return result


# --- writing with our code ------------------------------------------------------

def md_for(kind, size=0, **extra):
    modes = {'dir': stat.S_IFDIR | 0o755, 'file': stat.S_IFREG | 0o644,
             'link': stat.S_IFLNK | 0o777, 'fifo': stat.S_IFIFO | 0o600}
    md = Metadata(st_mode=modes[kind], st_mtime_sec=1400000000,
                  st_mtime_nsec=123, st_atime_sec=1400000001, st_atime_nsec=5,
                  st_nlink=1, st_size=size, st_uid=1000, st_gid=1000,
                  st_dev=1, st_ino=size + 1, st_blocks=0, username=b'u',
                  groupname=b'g', target=b'')
    return md.copy(**extra)


def write_generation(repo, files, now, vanished=()):
    repo.lock_client('spec')
    gen = repo.create_generation('spec', now=now)
    for path in vanished:
        repo.remove_file(gen, path)
    new_chunks = []
    for path, (kind, content, extra) in sorted(files.items()):
        if content is None:
            repo.set_metadata(gen, path, md_for(kind, **extra))
            continue
        ids = []
        for i in range(0, len(content), 100):
            piece = content[i:i + 100]
            found = repo.find_chunk_ids_by_content(piece)
            if found:
                ids.append(found[0])
            else:
                ids.append(repo.put_chunk_content(piece))
                new_chunks.append((ids[-1], piece))
        repo.set_metadata(gen, path, md_for(kind, len(content),
                                            md5=md5(content), **extra))
        repo.set_file_chunk_ids(gen, path, ids)
    repo.lock_chunk_indexes()
    for chunk_id, piece in new_chunks:
        repo.put_chunk_into_indexes(chunk_id, piece, 'spec')
    repo.commit_client('spec', now=now + 1)
    repo.commit_chunk_indexes()


def make_files(n, salt):
    files = {b'/': ('dir', None, {}), b'/home': ('dir', None, {}),
             b'/home/big': ('dir', None, {})}
    for i in range(n):
        files[b'/home/big/f%04d' % i] = (
            'file', (b'%s-%d;' % (salt, i % 7)) * (i % 60), {})
    files[b'/home/link'] = ('link', None, {'target': b'big/f0001'})
    files[b'/home/fifo'] = ('fifo', None, {})
    files[b'/home/\xff\xfe name'] = ('file', b'non-utf8 name', {
        'xattr': b'\0' * 7 + b'\x02a\0\0\0\0\0\0\0\0\x01b'})
    return files


@pytest.mark.parametrize('compress', [False, True])
def test_independent_reader_finds_everything(tmp_path, compress):
    url = str(tmp_path / 'repo')
    repo = repo_factory.open_repository(
        url=url, create=True, node_size=NODE_SIZE, lock_timeout=0,
        compress_with='deflate' if compress else 'none')
    repo.lock_client_list()
    repo.add_client('spec')
    repo.commit_client_list()
    gen1 = make_files(300, b'one')
    write_generation(repo, gen1, 1000)
    gen2 = dict(make_files(250, b'two'))
    del gen2[b'/home/fifo']
    write_generation(repo, gen2, 2000, vanished=set(gen1) - set(gen2))
    repo.close()

    spec = SpecRepository(url)
    client_id = spec.client_id(b'spec')
    assert os.path.isdir(os.path.join(url, str(client_id)))
    gens = spec.generations(client_id)
    assert len(gens) == 2 and gens[0][0] < gens[1][0]
    for (gen_id, tree), files, now in zip(gens, (gen1, gen2), (1000, 2000)):
        gen_main = default_id(b'generation')
        assert tree[key(2, gen_main, 0, 1)] == struct.pack('!Q', now)
        assert tree[key(2, gen_main, 0, 2)] == struct.pack('!Q', now + 1)
        found = read_generation(spec, tree)
        assert set(found) == set(files)
        for path, (kind, content, extra) in files.items():
            md, data = found[path]
            expected = md_for(kind, len(content or b''), **extra)
            for name in FLAGS:
                if name != 'md5':
                    assert md.get(name) == getattr(expected, name), (path, name)
            if content is not None:
                assert data == content
                assert md['md5'] == md5(content)
            else:
                assert 'md5' not in md
    listing, sums = spec.chunk_index()
    for checksum, chunk_id, cid in sums:
        assert cid == client_id
        assert listing[chunk_id] == checksum
        assert hashlib.md5(spec.chunk(chunk_id)).hexdigest().encode() == \
            checksum
    # every chunk file is indexed and each content is stored once
    stored = set()
    for dirpath, _, names in os.walk(os.path.join(url, 'chunks')):
        stored |= {int(n, 16) for n in names}
    assert stored == set(listing)
    contents = [spec.chunk(c) for c in stored]
    assert len(contents) == len(set(contents))
