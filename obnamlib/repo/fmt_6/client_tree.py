"""The files of one generation: one larch tree of a client (format-6.md §7.2).

Paths are absolute bytes.  A path is found through its default file id
slot; its own random file id then keys its metadata, chunk list, directory
listing and in-tree data.  Resolved ids are cached, because a backup or
restore asks about the same directory over and over.  A listing's ids
are taken for its children's ids, but not one that is the directory's own
or an ancestor's: a damaged listing naming those would make every walk
endless (/d/x/x/x/...).  Such a child is looked up by its name instead,
and where that finds nothing it is RepositoryCorrupt ("the tree loops").
"""

import posixpath
import random
import struct

from obnamlib import errors
from obnamlib.repo.fmt_6 import keys
from obnamlib.repo.fmt_6.metadata_codec import decode_metadata, encode_metadata
from obnamlib.repo.metadata import Metadata

ROOT = b'/'
ID_CACHE_LIMIT = 100000
MAX_START = 2 ** 64 - 2 ** 40     # room to count up from a random start
# New file ids are known to be unused in blocks of this many (one range
# query per block instead of one per new file).
ID_BLOCK = 4096
_U64 = struct.Struct('!Q')


def _chunk_ids_in(values):
    """The chunk ids of a file's FILE_CHUNKS values, in order."""
    result = []
    for value in values:
        if len(value) % 8:
            raise errors.RepositoryCorrupt(
                what='chunk list of a file',
                reason='%d bytes, not a multiple of 8' % len(value))
        result.extend(struct.unpack('!%dQ' % (len(value) // 8), value))
    return result


# Where a tree key (keys.tree_key) holds its subtype.
_SUBTYPE_AT = 1 + 8


def _shown(path):
    return path.decode('utf-8', 'backslashreplace')


def join_path(dirname, basename):
    if dirname.endswith(b'/'):
        return dirname + basename
    return dirname + b'/' + basename


class GenerationTree:
    """File operations on one generation's tree (reading or, if the forest
    allows, writing)."""

    def __init__(self, tree, rng=None):
        self.tree = tree
        self.rng = rng or random.SystemRandom()
        self.ids = {}             # path -> file id (8 bytes)
        self.next_chunk_index = {}  # file id -> next FILE_CHUNKS subkey
        self.fresh = set()        # ids created here that have no chunks yet
        self.last_miss = None     # (path, ids taken in its slot)
        self.next_file_id = None
        self.free_until = None    # ids next_file_id..this are unused
        # Ids of names made here: everything below them was made here
        # too, so it is in self.ids (cleared with it; see forget).
        self.created = set()
        self.loops = {}           # child path -> its looping listing's path

    # --- resolving paths -------------------------------------------------

    def file_id(self, path):
        """The path's file id, or None if the path is not in the tree."""
        file_id = self.ids.get(path)
        if file_id is None:
            file_id = self._lookup_file_id(path)
            if file_id is not None:
                self._remember(path, file_id)
            elif path in self.loops:
                raise errors.RepositoryCorrupt(
                    what='generation tree', reason=(
                        'directory %s lists itself or a directory above it '
                        'as %s: the tree loops' % (
                            _shown(self.loops[path]),
                            _shown(posixpath.basename(path)))))
        return file_id

    def _lookup_file_id(self, path):
        taken = set()
        for key, value in self.tree.lookup_range(*keys.name_slot_range(path)):
            if value == path:
                return key[-8:]
            taken.add(key[-8:])
        self.last_miss = (path, taken)
        return None

    def _remember(self, path, file_id):
        if len(self.ids) >= ID_CACHE_LIMIT:
            self._forget_ids()
        self.ids[path] = file_id

    def forget(self, paths):
        """Drop the remembered ids of these paths (a reader that is done
        with them, as fsck's walk).  Use this, not self.ids: below a
        directory made here, a path missing from self.ids is taken to be
        absent, so the made ones are forgotten too (looked up again)."""
        for path in paths:
            self.ids.pop(path, None)
        self.created.clear()

    def _forget_ids(self):
        self.ids.clear()
        self.fresh.clear()
        self.created.clear()

    def exists(self, path):
        return self.file_id(path) is not None

    # --- reading -------------------------------------------------------

    def _value(self, key):
        try:
            return self.tree.lookup(key)
        except KeyError:
            return None

    def get_metadata(self, path):
        """Metadata, or None if the path is absent.  A name without metadata
        (an unfinished checkpoint) gives an empty Metadata."""
        file_id = self.file_id(path)
        if file_id is None:
            return None
        value = self._value(keys.file_key(file_id, keys.FILE_METADATA))
        if value is None:
            return Metadata()
        return decode_metadata(value, of_path=path)

    def children(self, path):
        """Basenames in the directory, sorted bytewise ([] if not a dir)."""
        file_id = self.file_id(path)
        if file_id is None:
            return None
        pairs = self.tree.lookup_range(*keys.file_range(file_id,
                                                        keys.DIR_CONTENTS))
        above = self._ids_above(path, file_id)
        names = []
        for key, basename in pairs:
            names.append(basename)
            child_id = key[-8:]
            child = join_path(path, basename)
            if child_id in above:
                self.loops[child] = path
            elif child not in self.ids:
                self._remember(child, child_id)
        return sorted(names)

    def _ids_above(self, path, file_id):
        """The file ids of path and of its ancestors that are known (a
        loop can only go through known ids: every other path is looked
        up by name)."""
        ids = {file_id}
        parent = keys.parent_path(path)
        while parent != path:
            ancestor = self.ids.get(parent)
            if ancestor is not None:
                ids.add(ancestor)
            path, parent = parent, keys.parent_path(parent)
        return ids

    def chunk_ids(self, path):
        file_id = self.file_id(path)
        if file_id is None:
            return None
        return self._chunk_ids_of(file_id)

    def _chunk_ids_of(self, file_id):
        return _chunk_ids_in(
            value for _, value in self.tree.lookup_range(
                *keys.file_range(file_id, keys.FILE_CHUNKS)))

    def content(self, path):
        """(file_data, None) or, without it, (None, chunk_ids) of path,
        from one walk of the file's keys from its chunk list to its data
        (a restore's look per file instead of two); None if absent."""
        file_id = self.file_id(path)
        if file_id is None:
            return None
        data_key = keys.file_key(file_id, keys.FILE_DATA)
        chunk_lists = []
        for key, value in self.tree.lookup_range(
                keys.file_key(file_id, keys.FILE_CHUNKS, keys.MIN_SUBKEY),
                data_key):
            if key == data_key:
                return value, None
            if key[_SUBTYPE_AT] == keys.FILE_CHUNKS:
                chunk_lists.append(value)
        return None, _chunk_ids_in(chunk_lists)

    def file_data(self, path):
        file_id = self.file_id(path)
        if file_id is None:
            return None
        return self._value(keys.file_key(file_id, keys.FILE_DATA))

    def chunk_ids_in_use(self):
        """Every chunk id this generation references (prefix-1 keys)."""
        return {keys.chunk_id_of_ref(key) for key, _ in
                self.tree.lookup_range(*keys.all_chunk_refs_range())}

    def uses_chunk(self, chunk_id):
        return not self.tree.range_is_empty(*keys.chunk_ref_range(chunk_id))

    # --- generation metadata --------------------------------------------

    def get_gen_value(self, subkey):
        value = self._value(keys.gen_key(subkey))
        if value is None or len(value) != 8:
            return None
        return _U64.unpack(value)[0]

    def set_gen_value(self, subkey, value):
        if value is None:
            self.remove_gen_value(subkey)
        else:
            self.tree.insert(keys.gen_key(subkey), _U64.pack(int(value)))

    def remove_gen_value(self, subkey):
        key = keys.gen_key(subkey)
        if self._value(key) is not None:
            self.tree.remove(key)

    def clear_gen_values(self):
        self.tree.remove_range(*keys.gen_range())

    # --- writing -------------------------------------------------------

    def set_metadata(self, path, metadata):
        """Add or replace a path's metadata; missing ancestors are created
        as names without metadata (record theirs later)."""
        file_id = self._ensure_name(path)
        if not metadata.isdir():
            self.created.discard(file_id)   # it has no children: memory
        self.tree.insert(keys.file_key(file_id, keys.FILE_NAME, file_id), path)
        self.tree.insert(keys.file_key(file_id, keys.FILE_METADATA),
                         encode_metadata(metadata))

    def _ensure_name(self, path):
        """File id of path, creating its name entries (and those of missing
        ancestors) if needed.  Iterative: trees may be very deep."""
        file_id = self.ids.get(path)
        if file_id is not None:
            return file_id
        if path != ROOT:
            parent_id = self.ids.get(keys.parent_path(path))
            if parent_id is not None and parent_id in self.created:
                # A first backup's every file: a new directory holds
                # only what was made here, and that is in self.ids.
                return self._create_name(path, parent_id, ())
        missing = []
        current = path
        while True:
            file_id = self.file_id(current)
            if file_id is not None:
                break
            missing.append(current)
            if current == ROOT:
                break
            current = keys.parent_path(current)
        for name in reversed(missing):
            file_id = self._create_name(name)
        return file_id

    def _create_name(self, path, parent_id=None, taken=None):
        """A new name entry for path (absent from the tree).  taken: the
        ids in its slot, if known; parent_id: its directory's id, if
        known."""
        slot = keys.default_file_id(path)
        if taken is None:
            if self.last_miss is not None and self.last_miss[0] == path:
                taken = self.last_miss[1]
            else:
                taken = {key[-8:] for key, _ in self.tree.lookup_range(
                    *keys.file_range(slot, keys.FILE_NAME))}
        self.last_miss = None
        file_id = self._new_file_id(taken)
        self._slot_used(slot)
        insert = self.tree.insert
        insert(keys.file_key(slot, keys.FILE_NAME, file_id), path)
        if path != ROOT:
            if parent_id is None:
                parent_id = self.file_id(keys.parent_path(path))
            insert(keys.file_key(parent_id, keys.DIR_CONTENTS, file_id),
                   path[path.rfind(b'/') + 1:])
        self._remember(path, file_id)
        self.fresh.add(file_id)
        self.created.add(file_id)
        return file_id

    def _new_file_id(self, taken):
        """A file id unused in this tree.

        Obnam drew each id at random; readers only need uniqueness.  We
        draw a random start once and count up from it, so the files of one
        run get neighbouring keys: their metadata, chunk lists and listings
        fill a few leaves instead of touching every leaf of the tree, and a
        later walk in the same order reads the tree sequentially.  The
        tree is asked once per ID_BLOCK ids whether they are all unused,
        not once per file."""
        while True:
            number = self.next_file_id
            if number is None or number > MAX_START:
                number = self.rng.randint(1, MAX_START)
                self.free_until = None
            self.next_file_id = number + 1
            file_id = _U64.pack(number)
            if file_id in taken:
                continue
            if self.free_until is not None and number <= self.free_until:
                return file_id
            if self._block_is_free(number):
                return file_id
            self.next_file_id = None     # ran into an older run's ids

    def _block_is_free(self, number):
        """Whether no key belongs to the ids number..number+ID_BLOCK-1;
        if so they are handed out without asking again."""
        last = number + ID_BLOCK - 1
        if not self.tree.range_is_empty(
                keys.whole_file_range(_U64.pack(number))[0],
                keys.whole_file_range(_U64.pack(last))[1]):
            return False
        self.free_until = last
        return True

    def _slot_used(self, slot):
        """A name slot's key is in the ids' key space: one among the ids
        still to be handed out ends the free block."""
        if self.free_until is not None and \
                self.next_file_id <= _U64.unpack(slot)[0] <= self.free_until:
            self.free_until = None

    def set_chunk_ids(self, path, chunk_ids):
        """Replace the file's chunk list and its chunk references."""
        file_id = self._ensure_name(path)
        if file_id in self.fresh:
            self.fresh.discard(file_id)
            old = []
        else:
            old = self._chunk_ids_of(file_id)
        if old:
            self.tree.remove_range(*keys.file_range(file_id, keys.FILE_CHUNKS))
            for chunk_id in set(old):
                ref = keys.chunk_ref_key(chunk_id, file_id)
                self.tree.remove_range(ref, ref)    # tolerate a missing one
        self.next_chunk_index[file_id] = 0
        self._append(file_id, chunk_ids)

    def append_chunk_ids(self, path, chunk_ids):
        """Add chunk ids at the end of the file's chunk list."""
        file_id = self._ensure_name(path)
        self.fresh.discard(file_id)
        if file_id not in self.next_chunk_index:
            self.next_chunk_index[file_id] = self.tree.count_range(
                *keys.file_range(file_id, keys.FILE_CHUNKS))
        self._append(file_id, chunk_ids)

    def _append(self, file_id, chunk_ids):
        index = self.next_chunk_index[file_id]
        for chunk_id in chunk_ids:
            self.tree.insert(keys.file_key(file_id, keys.FILE_CHUNKS, index),
                             _U64.pack(chunk_id))
            self.tree.insert(keys.chunk_ref_key(chunk_id, file_id), b'')
            index += 1
        self.next_chunk_index[file_id] = index

    def set_file_data(self, path, data):
        """In-tree content (only for tests of the old reading path)."""
        file_id = self._ensure_name(path)
        self.fresh.discard(file_id)
        self.tree.insert(keys.file_key(file_id, keys.FILE_DATA), data)

    def remove(self, path):
        """Remove path and everything below it.  Returns False if absent."""
        file_id = self.file_id(path)
        if file_id is None:
            return False
        pending = [(path, file_id)]
        while pending:
            current, current_id = pending.pop()
            for key, basename in self.tree.lookup_range(
                    *keys.file_range(current_id, keys.DIR_CONTENTS)):
                pending.append((join_path(current, basename), key[-8:]))
            self._remove_entries(current, current_id)
        if path != ROOT:
            parent_id = self.file_id(keys.parent_path(path))
            if parent_id is not None:
                link = keys.file_key(parent_id, keys.DIR_CONTENTS, file_id)
                if self._value(link) is not None:
                    self.tree.remove(link)
        self._forget_ids()
        self.last_miss = None
        return True

    def _remove_entries(self, path, file_id):
        for chunk_id in set(self._chunk_ids_of(file_id)):
            ref = keys.chunk_ref_key(chunk_id, file_id)
            if self._value(ref) is not None:
                self.tree.remove(ref)
        self.tree.remove_range(*keys.whole_file_range(file_id))
        name_key = keys.file_key(keys.default_file_id(path), keys.FILE_NAME,
                                 file_id)
        if self._value(name_key) is not None:
            self.tree.remove(name_key)
        self.next_chunk_index.pop(file_id, None)

