"""Storage-level checks of a format-6 repository, for fsck.

What the Repository API cannot see: the format marker, the encryption key
files, the larch forests themselves (nodes, refcounts, journal), and
whether the chunk indexes agree with the chunk files and with what the
clients' generations use.  The walk over generations and files is
format-neutral and lives in obnamlib.engine.fsck_engine, which hands back the
chunks each client uses so that the index checks can run last.

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

    # --- locks ------------------------------------------------------------

    def lock(self):
        """Take every lock file without opening forests for writing: that
        would finish or roll back an interrupted commit before we saw it."""
        dirs = ['.'] + list(CHUNK_DIRS) + [str(cid) for cid in
                                           self._client_ids().values()]
        self.repo.locks.lock(dirs)
        self.locked = dirs

    def unlock(self):
        if self.locked:
            self.repo.locks.unlock(self.locked)
            self.locked = []

    # --- checks before the generation walk --------------------------------

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

    def check_keys(self):
        """In an encrypted repository every toplevel has a key we can open."""
        fs = self.repo.fs
        key_store = getattr(fs, 'keys', None)
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
        return larch.fsck.check_forest(dirname, vfs=self.repo.fs,
                                       key_size=key_size, fix=self.fix,
                                       node_size=self.repo.node_size,
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

    def expected_checksum(self, chunk_id):
        """MD5 hex (bytes) the chunk indexes record for a chunk, or None."""
        try:
            return self.repo.indexes.checksum(chunk_id)
        except (larch.Error, errors.ObnamError):
            return None

    def changed_paths(self, client_name, gen_id):
        """Paths whose entries in this generation differ from the client's
        generation checked just before, sorted; or None for "check every
        path" (the first generation checked, or a tree that cannot be
        read node by node).

        A new generation is a copy-on-write clone: nodes it shares with
        the previous one are skipped unread, and the leaves that differ
        are compared entry by entry, so only what changed is checked
        again.  Each tree's node ids are kept only until the next."""
        tree = forest = None
        try:
            tree = self.repo._generation(gen_id).tree
            forest = self.repo._open_client(client_name).forest
            previous = self._previous_root.get(client_name)
            if previous is None:
                return None
            changed = _changed_entries(forest, previous, tree.root_id)
            return sorted(self._paths_of(tree, changed))
        except Exception:   # damage: larch's check and the walk say what
            return None
        finally:
            if tree is not None:
                self._previous_root[client_name] = tree.root_id

    def _paths_of(self, tree, entries):
        paths = set()
        file_ids = set()
        for key, value in entries:
            prefix, main, subtype, subkey = keys.parse_tree_key(key)
            if prefix != keys.PREFIX_FS:
                continue
            if subtype == keys.FILE_NAME:
                paths.add(value)
            elif subtype == keys.DIR_CONTENTS:
                file_ids.update((main, subkey))
            else:
                file_ids.add(main)
        for file_id in file_ids:
            path = tree.lookup(keys.file_key(file_id, keys.FILE_NAME,
                                             file_id))
            paths.add(path)
        return paths

    def release_generation(self, gen_id):
        """fsck visits each generation once: drop the paths the repository
        remembered while walking it (up to 100,000 per generation)."""
        try:
            generation = self.repo._generation(gen_id)
        except (larch.Error, errors.ObnamError):
            return
        ids = getattr(generation, 'ids', None)
        if ids is not None:
            ids.clear()

    @staticmethod
    def chunk_sort_key(chunk_id):
        """Chunks read in the order of their file names: nearly sequential
        on a disk that lays out a directory's files together."""
        return idpath(chunk_id)

    def chunk_ids_on_disk(self):
        if not hasattr(self, '_on_disk'):
            self._on_disk = set(self.repo.chunks.ids())
        return self._on_disk

    # --- checks after the walk -----------------------------------------------

    def check_chunk_indexes(self, used_by_client, remove_unused=False,
                            report_unused=True):
        """Indexes against chunk files and against the clients' use.

        used_by_client: client name -> set of chunk ids its checked
        generations use (None for a client that was not checked).  The
        indexes are streamed and looked up, never held in memory whole."""
        on_disk = self.chunk_ids_on_disk()
        id_to_name = {cid: name for name, cid in self._client_ids().items()}
        problems = []
        for key, _ in self._index_entries(CHUNKLIST):
            chunk_id = keys.unpack_u64(key)
            if chunk_id not in on_disk:
                problems.append('chunklist: chunk %x has no chunk file'
                                % chunk_id)
        unlisted = self._used_but_unlisted(used_by_client, on_disk)
        recorded = set()    # (chunk id, client id) of unlisted chunks only
        for key, _ in self._index_entries(CHUNKSUMS):
            checksum, chunk_id, client_id = keys.parse_chunksums_key(key)
            if chunk_id in unlisted:
                recorded.add((chunk_id, client_id))
            problems.extend(self._chunksums_entry_problems(
                checksum, chunk_id, client_id, on_disk, id_to_name))
        problems.extend(self._use_problems(used_by_client, on_disk,
                                           unlisted, recorded))
        if report_unused:
            problems.extend(self._unused(used_by_client, on_disk,
                                         remove_unused))
        return problems

    def _index_entries(self, which):
        """(key, value) of one chunk index in key order, streamed; it
        stops where the index cannot be read (larch's check says why)."""
        indexes = self.repo.indexes
        try:
            list_tree, sums_tree = indexes._readers()
            tree, key_size = ((list_tree, keys.CHUNKLIST_KEY_SIZE)
                              if which == CHUNKLIST else
                              (sums_tree, keys.CHUNKSUMS_KEY_SIZE))
            if tree is None:
                return
            yield from tree.iter_range(b'\0' * key_size, b'\xff' * key_size)
        except (larch.Error, errors.ObnamError):
            return

    def _used_but_unlisted(self, used_by_client, on_disk):
        """Chunks in use and on disk that chunklist has no entry for."""
        unlisted = set()
        for used in used_by_client.values():
            for chunk_id in used or ():
                if chunk_id in on_disk and \
                        self.expected_checksum(chunk_id) is None:
                    unlisted.add(chunk_id)
        return unlisted

    def _chunksums_entry_problems(self, checksum, chunk_id, client_id,
                                  on_disk, id_to_name):
        where = 'chunksums: chunk %x' % chunk_id
        if chunk_id not in on_disk:
            yield '%s has no chunk file' % where
        if client_id not in id_to_name:
            yield '%s is recorded for client id %d, which is not in the ' \
                  'client list' % (where, client_id)
        listed = self.expected_checksum(chunk_id)
        if listed is not None and listed != checksum:
            yield '%s has checksum %s, but chunklist says %s' % (
                where, checksum.decode('ascii', 'replace'),
                listed.decode('ascii', 'replace'))

    def _use_problems(self, used_by_client, on_disk, unlisted, recorded):
        ids = self._client_ids()
        problems = []
        missing = []
        for name in sorted(used_by_client):
            used = used_by_client[name]
            if used is None or name not in ids:
                continue
            client_id = ids[name]
            for chunk_id in sorted(used):
                if chunk_id not in on_disk:
                    continue    # reported by the walk, with the file's path
                if chunk_id in unlisted:
                    has_entry = (chunk_id, client_id) in recorded
                else:
                    has_entry = self._has_chunksums_entry(chunk_id, client_id)
                if not has_entry:
                    problems.append(self._mark(
                        'chunksums: client %s uses chunk %x, but has no '
                        'entry for it' % (name, chunk_id)))
                    missing.append((chunk_id, client_id))
                elif chunk_id in unlisted:
                    problems.append(self._mark(
                        'chunklist: chunk %x used by client %s has no entry'
                        % (chunk_id, name)))
                    missing.append((chunk_id, client_id))
        if self.fix and missing:
            self._add_index_entries(missing)
        return problems

    def _has_chunksums_entry(self, chunk_id, client_id):
        checksum = self.expected_checksum(chunk_id)
        try:
            return client_id in self.repo.indexes.users(checksum, chunk_id)
        except (larch.Error, errors.ObnamError):
            return False

    def _add_index_entries(self, missing):
        indexes = self.repo.indexes
        indexes.start_changes()
        try:
            for chunk_id, client_id in missing:
                data = self.repo.chunks.get(chunk_id)
                indexes.add(chunk_id, keys.content_checksum(data), client_id)
            indexes.commit()
        except BaseException:
            indexes.discard()
            raise

    def _unused(self, used_by_client, on_disk, remove):
        used = set()
        for chunk_ids in used_by_client.values():
            used |= chunk_ids or set()
        unused = sorted(on_disk - used)
        if remove and unused:
            self._remove_chunks(unused)
        suffix = '; deleting' if remove else ''
        return ['chunk %x not used by anyone%s' % (chunk_id, suffix)
                for chunk_id in unused]

    def _remove_chunks(self, chunk_ids):
        """Index entries first, then the files (format-6.md §10.2)."""
        doomed = set(chunk_ids)
        uses = [keys.parse_chunksums_key(key) for key, _ in
                self._index_entries(CHUNKSUMS)
                if keys.parse_chunksums_key(key)[1] in doomed]
        indexes = self.repo.indexes
        indexes.start_changes()
        try:
            for checksum, chunk_id, client_id in uses:
                indexes.remove_use(chunk_id, checksum, client_id)
            for chunk_id in doomed:
                key = keys.chunklist_key(chunk_id)
                try:
                    indexes.list_tree.lookup(key)
                except KeyError:
                    continue
                indexes.changed = True
                indexes.list_tree.remove(key)
            indexes.commit()
        except BaseException:
            indexes.discard()
            raise
        for chunk_id in doomed:
            self.repo.chunks.remove(chunk_id)
        self._on_disk = self.chunk_ids_on_disk() - doomed

    # --- helpers -------------------------------------------------------------

    def _mark(self, text):
        return text + (' [fixed]' if self.fix else '')

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
    node = store.get(root_id)
    while not node.is_leaf:
        node = store.get(node.children[0])
        depth += 1
        if depth > larch_tree.MAX_DEPTH:
            raise larch_errors.TreeLoops(store.dirname, node.id)
    ids = {root_id}
    level = [root_id]
    for _ in range(depth):
        children = []
        for node_id in level:
            children.extend(store.get(node_id).children)
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
        node = store.get(node_id)
        if node.is_leaf:
            yield from zip(node.keys, node.values)
        else:
            stack.extend(reversed(node.children))
