"""Storage-level checks of a format-6 repository, for fsck.

What the Repository API cannot see: the format marker, the encryption key
files, the larch forests themselves (nodes, refcounts, journal), and
whether the chunk indexes agree with the chunk files and with what the
clients' generations use.  The walk over generations and files is
format-neutral and lives in obnamlib.engine.fsck_engine, which hands back the
chunks each client uses so that the index checks (fsck_indexes) can run
last.  Every public method reports larch's exceptions as RepositoryCorrupt
(damage.reporting_damage), as the Repository API does: the walk knows
no format and never meets them.

For speed the checker also tells the walk what format 6 knows: which
paths of a generation changed since the one checked before, and in what
order chunk files lie on disk.  The forests are checked through the
repository's own read-only forest objects, so the walk finds the nodes
already decoded (each node is read once while the caches hold them).
"""

import re

from obnamlib import larch
import obnamlib.larch.fsck
from obnamlib.larch import errors as larch_errors
from obnamlib.larch import tree as larch_tree

from obnamlib import errors
from obnamlib.repo.fmt_6 import keys
from obnamlib.repo.fmt_6.chunk_indexes import CHUNKLIST, CHUNKSUMS
from obnamlib.repo.fmt_6.chunk_indexes import TOPLEVELS as CHUNK_DIRS
from obnamlib.repo.fmt_6.chunk_store import idpath
from obnamlib.repo.fmt_6.client_forest import ClientForest
from obnamlib.repo.fmt_6.damage import reporting_damage
from obnamlib.repo.fmt_6.fsck_indexes import ChunkIndexCheck

CLIENTLIST = 'clientlist'
SHARED_FORESTS = ((CLIENTLIST, keys.CLIENTLIST_KEY_SIZE),
                  (CHUNKLIST, keys.CHUNKLIST_KEY_SIZE),
                  (CHUNKSUMS, keys.CHUNKSUMS_KEY_SIZE))
_TREES = re.compile(r'\(trees ([0-9,]+|none)\)')
_HEX_KEY = re.compile(r'^([0-9a-f]{2}){8,}$')


class Fmt6Checker:
    """Checks one open RepositoryFormat6 (see the module docstring)."""

    def __init__(self, repo, fix=False):
        self.repo = repo
        self.fix = fix
        self.locked = []
        self._previous_root = {}    # client name -> root id last checked
        self._on_disk = None        # chunk ids of the chunk files

    # --- locks ------------------------------------------------------------

    @reporting_damage
    def lock(self):
        """Take every lock file without opening forests for writing: that
        would finish or roll back an interrupted commit before we saw it."""
        dirs = ['.'] + list(CHUNK_DIRS) + [str(cid) for cid in
                                           self._client_ids().values()]
        self.repo.locks.lock(dirs)
        self.locked = dirs

    @reporting_damage
    def unlock(self):
        if self.locked:
            self.repo.locks.unlock(self.locked)
            self.locked = []

    # --- checks before the generation walk --------------------------------

    @reporting_damage
    def check_format(self):
        try:
            text = self.repo.fs.read_raw('metadata/format')
        except FileNotFoundError:
            return ['metadata/format is missing']
        first = text.split(b'\n', 1)[0].strip()
        if first != b'6':
            return ['metadata/format says %r, not 6' % first.decode(
                'ascii', 'replace')]
        return []

    @reporting_damage
    def check_keys(self):
        """In an encrypted repository every toplevel has a key we can open."""
        fs = self.repo.fs
        key_store = fs.keys
        toplevels = [CLIENTLIST] + list(CHUNK_DIRS) + [
            str(cid) for cid in self._client_ids().values()]
        present = [t for t in toplevels if fs.exists(t + '/key')]
        if not present:
            return []
        problems = []
        for toplevel in toplevels:
            if not fs.isdir(toplevel):
                continue
            for name in ('key', 'userkeys'):
                if not fs.exists('%s/%s' % (toplevel, name)):
                    problems.append('%s: encryption file %s is missing'
                                    % (self._toplevel_name(toplevel), name))
            if key_store is not None and fs.exists(toplevel + '/key'):
                problems.extend(self._key_opens(key_store, toplevel))
        return problems

    def _key_opens(self, key_store, toplevel):
        try:
            key = key_store.symmetric_key(toplevel)
        except errors.ObnamError as e:
            return ['%s: cannot open its encryption key: %s'
                    % (self._toplevel_name(toplevel), e.first_line())]
        if not _HEX_KEY.match(key or ''):
            return ['%s: its key file does not hold a key (format-6.md '
                    '§4.1: hex text)' % self._toplevel_name(toplevel)]
        return []

    @reporting_damage
    def check_forests(self, shared=True, per_client=True,
                      ignore_clients=()):
        problems = []
        if shared:
            for dirname, key_size in SHARED_FORESTS:
                problems.extend(self._check_forest(dirname, key_size))
        if per_client:
            for name, client_id in sorted(self._client_ids().items()):
                if name in ignore_clients:
                    continue
                found = self._check_forest(str(client_id),
                                           keys.CLIENT_KEY_SIZE)
                problems.extend(self._name_generations(name, client_id,
                                                       found))
        return problems

    def _check_forest(self, dirname, key_size):
        if not self.repo.fs.isdir(dirname):
            return []
        # Node sizes are judged by the forest's own (stored) node size,
        # as Obnam 1.x did, not by this run's --node-size.
        return larch.fsck.check_forest(dirname, vfs=self.repo.fs,
                                       key_size=key_size, fix=self.fix,
                                       reader=self._reader_of(dirname))

    def _reader_of(self, dirname):
        """The repository's own read-only forest for dirname, or None.

        Checking through it leaves the nodes in its cache, so the walk over
        generations and the index checks that follow read each node once
        (as long as the forest fits in the cache).  When it cannot be
        opened, larch's check opens the forest itself and says why."""
        if self.fix:
            return None
        try:
            if dirname == CLIENTLIST:
                self.repo.client_list._reader()
                return self.repo.client_list.forest
            if dirname in (CHUNKLIST, CHUNKSUMS):
                indexes = self.repo.indexes
                indexes._readers()
                return (indexes.list_forest if dirname == CHUNKLIST
                        else indexes.sums_forest)
            for name, client_id in self._client_ids().items():
                if str(client_id) == dirname:
                    return self.repo._open_client(name).forest
        except Exception:   # storage filters raise their own errors
            return None
        return None

    def _name_generations(self, client_name, client_id, problems):
        """Say 'client C' and generation ids instead of directory and roots."""
        if not problems:
            return problems
        roots = self._generation_of_roots(client_id)

        def generations(match):
            ids = [roots.get(int(r), 'root %s' % r)
                   for r in match.group(1).split(',') if r != 'none']
            return '(generations %s)' % (', '.join(map(str, ids)) or 'none')

        prefix = 'forest %s' % client_id
        named = 'client %s (forest %s)' % (client_name, client_id)
        return [_TREES.sub(generations, p.replace(prefix, named, 1))
                for p in problems]

    def _generation_of_roots(self, client_id):
        try:
            forest = ClientForest(self.repo.fs, client_id, self.repo.node_size)
            return {tree.root_id: forest._number(tree)
                    for tree in forest.forest.trees}
        except (larch.Error, errors.ObnamError):
            return {}

    # --- what the walk needs ------------------------------------------------

    @reporting_damage
    def expected_checksum(self, chunk_id):
        """MD5 hex (bytes) the chunk indexes record for a chunk, or None."""
        try:
            return self.repo.indexes.checksum(chunk_id)
        except (larch.Error, errors.ObnamError):
            return None

    @reporting_damage
    def changed_paths(self, client_name, gen_id):
        """Paths whose entries in this generation differ from the client's
        generation checked just before, sorted; or None for "check every
        path" (the first generation checked, or a tree that cannot be
        read node by node).

        A new generation is a copy-on-write clone: nodes it shares with
        the previous one are skipped unread, and the leaves that differ
        are compared entry by entry, so only what changed is checked
        again.  Each tree's node ids are kept only until the next.  The
        file ids found with the paths are handed to the generation, so
        that checking them looks nothing up by name: a name's slot is
        anywhere in the tree, the rest of a file near its neighbours'."""
        tree = forest = None
        try:
            generation = self.repo._generation(gen_id)
            tree = generation.tree
            forest = self.repo._open_client(client_name).forest
            previous = self._previous_root.get(client_name)
            if previous is None:
                return None
            changed = _changed_entries(forest, previous, tree.root_id)
            found = self._paths_of(tree, changed)
            for path, file_id in found.items():
                generation.ids.setdefault(path, file_id)
            return sorted(found)
        except Exception:   # damage: larch's check and the walk say what
            return None
        finally:
            if tree is not None:
                self._previous_root[client_name] = tree.root_id

    def _paths_of(self, tree, entries):
        """path -> file id of the files the entries belong to."""
        paths = {}
        file_ids = set()
        for key, value in entries:
            prefix, main, subtype, subkey = keys.parse_tree_key(key)
            if prefix != keys.PREFIX_FS:
                continue
            if subtype == keys.FILE_NAME:
                paths[value] = subkey
            elif subtype == keys.DIR_CONTENTS:
                file_ids.update((main, subkey))
            else:
                file_ids.add(main)
        for file_id in sorted(file_ids):    # in key order
            path = tree.lookup(keys.file_key(file_id, keys.FILE_NAME,
                                             file_id))
            paths.setdefault(path, file_id)
        return paths

    @reporting_damage
    def walked_past(self, gen_id, paths):
        """The walk is done with these files (no directories among them):
        the repository need not remember their ids, which it learnt from
        their directory's listing (about 250 bytes a file).  A
        directory's id stays: client_tree needs the ids above a listing
        to see a listing that loops."""
        try:
            generation = self.repo._generation(gen_id)
        except (larch.Error, errors.ObnamError):
            return
        generation.forget(paths)

    @reporting_damage
    def release_generation(self, gen_id):
        """fsck visits each generation once: drop the paths the repository
        remembered while walking it (up to 100,000 per generation)."""
        try:
            generation = self.repo._generation(gen_id)
        except (larch.Error, errors.ObnamError):
            return
        generation.ids.clear()

    @staticmethod
    def chunk_sort_key(chunk_id):
        """Chunks read in the order of their file names: nearly sequential
        on a disk that lays out a directory's files together."""
        return idpath(chunk_id)

    @reporting_damage
    def chunk_ids_on_disk(self):
        if self._on_disk is None:
            self._on_disk = set(self.repo.chunks.ids())
        return self._on_disk

    # --- checks after the walk -----------------------------------------------

    @reporting_damage
    def check_chunk_indexes(self, used_by_client, remove_unused=False,
                            report_unused=True):
        """Indexes against chunk files and against the clients' use
        (obnamlib.repo.fmt_6.fsck_indexes)."""
        check = ChunkIndexCheck(self.repo, self.fix, self.chunk_ids_on_disk(),
                                self._client_ids(), self.expected_checksum)
        problems = check.run(used_by_client, remove_unused, report_unused)
        self._on_disk = check.on_disk
        return problems

    # --- helpers -------------------------------------------------------------

    def _client_ids(self):
        try:
            return self.repo.client_list.ids()
        except (larch.Error, errors.ObnamError):
            return {}

    def _toplevel_name(self, toplevel):
        for name, cid in self._client_ids().items():
            if str(cid) == toplevel:
                return 'client %s (%s)' % (name, toplevel)
        return toplevel


def _changed_entries(forest, old_root, new_root):
    """(key, value) pairs of the new tree that the old one lacks or has
    with another value.  Nodes both trees reach hold the same entries in
    both, so they are left out of both sides of the comparison."""
    store = forest.node_store
    old_nodes = _node_ids(store, old_root)
    new_nodes = _node_ids(store, new_root)
    old_entries = _entries(store, old_root, new_nodes)
    current = next(old_entries, None)
    changed = []
    for key, value in _entries(store, new_root, old_nodes):
        while current is not None and current[0] < key:
            current = next(old_entries, None)
        if current is None or current != (key, value):
            changed.append((key, value))
    return changed


def _node_ids(store, root_id):
    """Ids of every node of a tree; leaves are not read (a larch tree
    has all its leaves at the same depth).  A node met twice is a loop
    (TreeLoops): a damaged tree must not make fsck spin."""
    depth = 0
    node = store.peek(root_id)
    while not node.is_leaf:
        node = store.peek(node.children[0])
        depth += 1
        if depth > larch_tree.MAX_DEPTH:
            raise larch_errors.TreeLoops(store.dirname, node.id)
    ids = {root_id}
    level = [root_id]
    for _ in range(depth):
        children = []
        for node_id in level:
            children.extend(store.peek(node_id).children)
        if not ids.isdisjoint(children) or len(set(children)) < len(children):
            raise larch_errors.TreeLoops(store.dirname, level[0])
        ids.update(children)
        level = children
    return ids


def _entries(store, root_id, skip):
    """(key, value) pairs of a tree in key order, leaving out the nodes
    in skip."""
    stack = [root_id]
    seen = set()
    while stack:
        node_id = stack.pop()
        if node_id in skip:
            continue
        if node_id in seen:
            raise larch_errors.TreeLoops(store.dirname, node_id)
        seen.add(node_id)
        node = store.peek(node_id)
        if node.is_leaf:
            yield from zip(node.keys, node.values)
        else:
            stack.extend(reversed(node.children))
