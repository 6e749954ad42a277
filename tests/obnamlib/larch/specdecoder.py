"""An independent reader of larch forests, written from format-6.md only.

It shares no code with the larch package, so tests can check what our
writer put on disk against the spec. It reads plain (unfiltered) files via
a `read(path) -> bytes or None` and `listdir(path) -> list` pair.
"""

import configparser
import struct


class SpecError(Exception):
    pass


def idpath(i, top='nodes'):
    """Where node (or, with top='chunks', chunk) i is stored (§5.2)."""
    d = [(i >> (13 + 12 * k)) & 0xFFF for k in range(3)]
    return '%s/%d/%d/%d/%x' % (top, d[0], d[1], d[2], i)


def decode_node(data, key_size):
    magic, node_id, n = struct.unpack('!4sQI', data[:16])
    keys = [data[16 + i * key_size:16 + (i + 1) * key_size]
            for i in range(n)]
    pos = 16 + n * key_size
    if magic == b'ORBL':
        lens = struct.unpack('!%dI' % n, data[pos:pos + 4 * n])
        pos += 4 * n
        values = []
        for length in lens:
            values.append(data[pos:pos + length])
            pos += length
        if pos != len(data):
            raise SpecError('leaf %d: %d bytes, expected %d'
                            % (node_id, len(data), pos))
        return ('leaf', node_id, keys, values)
    if magic == b'ORBI':
        children = list(struct.unpack('!%dQ' % n, data[pos:pos + 8 * n]))
        if pos + 8 * n != len(data):
            raise SpecError('index %d: bad length' % node_id)
        return ('index', node_id, keys, children)
    raise SpecError('bad magic %r' % magic)


class SpecForest:
    """A forest as the spec describes it, with journal overlay."""

    def __init__(self, read, listdir):
        self._read_raw = read
        self._listdir_raw = listdir
        self.overlay = read('new/metadata') is not None
        meta = self.read('metadata')
        if meta is None:
            self.root_ids, self.last_id, self.key_size = [], 0, None
            self.node_size = None
            return
        cp = configparser.RawConfigParser()
        cp.read_string(meta.decode('ascii'))
        assert cp.get('metadata', 'format') == '1/1'
        roots = cp.get('metadata', 'root_ids').strip()
        self.root_ids = [int(r) for r in roots.split(',')] if roots else []
        self.last_id = int(cp.get('metadata', 'last_id'))
        self.key_size = int(cp.get('metadata', 'key_size'))
        self.node_size = int(cp.get('metadata', 'node_size'))

    def read(self, path):
        """path through the journal overlay of an interrupted commit."""
        if self.overlay:
            data = self._read_raw('new/' + path)
            if data is not None:
                return data
            if self._read_raw('delete/' + path) is not None:
                return None
        return self._read_raw(path)

    def node(self, node_id):
        data = self.read(idpath(node_id))
        if data is None:
            raise SpecError('node %d missing' % node_id)
        kind, stored, keys, rest = decode_node(data, self.key_size)
        if stored != node_id:
            raise SpecError('node %d says it is %d' % (node_id, stored))
        return kind, keys, rest, len(data)

    def tree_items(self, root_id):
        kind, keys, rest, _ = self.node(root_id)
        if kind != 'index':
            raise SpecError('root %d is a leaf' % root_id)
        out = []
        self._collect(root_id, out)
        return out

    def _collect(self, node_id, out):
        kind, keys, rest, _ = self.node(node_id)
        if kind == 'leaf':
            out.extend(zip(keys, rest))
        else:
            for child in rest:
                self._collect(child, out)

    def refcount(self, node_id):
        start = node_id - node_id % 32768
        data = self.read('refcounts/refcounts-%d' % start)
        if data is None:
            return 0
        got_start, count = struct.unpack('!QH', data[:10])
        assert got_start == start and count == 32768 and len(data) == 65546
        return struct.unpack('!H', data[10 + 2 * (node_id - start):][:2])[0]

    def node_files(self):
        ids = set()
        for top in ([''] + (['new/'] if self.overlay else [])):
            for a in self._ls(top + 'nodes'):
                for b in self._ls(top + 'nodes/' + a):
                    for c in self._ls(top + 'nodes/%s/%s' % (a, b)):
                        for name in self._ls(
                                top + 'nodes/%s/%s/%s' % (a, b, c)):
                            if not name.startswith('tmp'):
                                ids.add(int(name, 16))
        return {i for i in ids if self.read(idpath(i)) is not None}

    def _ls(self, path):
        return self._listdir_raw(path) or []

    def consistency_problems(self, node_size=None):
        """Spec invariants: reachability, refcounts, order, sizes."""
        problems = []
        refs = {}
        seen = set()
        stack = []
        for root in self.root_ids:
            refs[root] = refs.get(root, 0) + 1
            stack.append(root)
        while stack:
            node_id = stack.pop()
            if node_id in seen:
                continue
            seen.add(node_id)
            try:
                kind, keys, rest, size = self.node(node_id)
            except SpecError as e:
                problems.append(str(e))
                continue
            if node_size and size > node_size:
                problems.append('node %d too big: %d' % (node_id, size))
            if any(a >= b for a, b in zip(keys, keys[1:])):
                problems.append('node %d keys unsorted' % node_id)
            if node_id > self.last_id:
                problems.append('node %d above last_id' % node_id)
            if kind == 'index':
                for key, child in zip(keys, rest):
                    refs[child] = refs.get(child, 0) + 1
                    stack.append(child)
                    ckind, ckeys, _, _ = self.node(child)
                    if not ckeys or ckeys[0] != key:
                        problems.append('node %d: key for child %d is not '
                                        'its minimum' % (node_id, child))
        files = self.node_files()
        for node_id in sorted(files - seen):
            problems.append('node %d unreachable' % node_id)
        for node_id in sorted(seen | files):
            if self.refcount(node_id) != refs.get(node_id, 0):
                problems.append('node %d refcount %d, references %d' % (
                    node_id, self.refcount(node_id), refs.get(node_id, 0)))
        return problems


def from_vfs(vfs, dirname):
    """A SpecForest reading through a larch StorageFS (no filters)."""
    def read(path):
        try:
            return vfs.read_file(dirname + '/' + path)
        except FileNotFoundError:
            return None

    def listdir(path):
        try:
            return vfs.listdir(dirname + '/' + path)
        except FileNotFoundError:
            return None
    return SpecForest(read, listdir)


def from_files(read_file, listdir):
    return SpecForest(read_file, listdir)
