"""The client list: client names -> client ids (format-6.md §7.1)."""

import os
import random

from obnamlib import larch
from obnamlib.repo.fmt_6 import forests, keys

TOPLEVEL = 'clientlist'

# The list is read without its lock, so another client's commit may remove
# a node a reader was about to read: the reader starts again from the new
# list, at most this many times in all (a node missing every time is
# damage).
READ_TRIES = 3


class ClientList:
    """Reads the newest tree; after start_changes(), edits a clone of it."""

    def __init__(self, fs, node_size=None, rng=None):
        self.fs = fs
        self.node_size = node_size
        self.rng = rng or random.SystemRandom()
        self.forest = None
        self.tree = None
        self.writable = False

    def _reader(self):
        if self.forest is None:
            self.forest = forests.open_forest(
                self.fs, TOPLEVEL, keys.CLIENTLIST_KEY_SIZE, self.node_size,
                allow_writes=False)
            self.tree = forests.newest_tree(self.forest)
        return self.tree

    def start_changes(self):
        self.forest = forests.open_forest(
            self.fs, TOPLEVEL, keys.CLIENTLIST_KEY_SIZE, self.node_size,
            allow_writes=True)
        self.tree = forests.start_changes(self.forest)
        self.writable = True
        self.changed = False

    def commit(self):
        """Write the changed list; an unchanged one is left as it was."""
        if self.changed:
            forests.keep_only_newest_tree(self.forest)
            self.forest.commit()
        self.discard()

    def discard(self):
        self.forest = self.tree = None
        self.writable = False

    def _read(self, lookup):
        """lookup(newest tree, or None if there is none), started again on
        a fresh copy of the list if a node vanished meanwhile (READ_TRIES).
        """
        for attempt in range(READ_TRIES):
            try:
                return lookup(self._reader())
            except larch.NodeMissing:
                if self.writable or attempt + 1 == READ_TRIES:
                    raise
                self.forest = self.tree = None

    def _entries(self):
        lo = b'\x00' * keys.CLIENTLIST_KEY_SIZE
        hi = b'\xff' * keys.CLIENTLIST_KEY_SIZE
        return self._read(lambda tree: [] if tree is None else list(
            tree.lookup_range(lo, hi)))

    def names(self):
        """Client names (str) in key order."""
        return [os.fsdecode(value) for key, value in self._entries()
                if key[-1] == keys.CLIENT_NAME]

    def ids(self):
        """{name: client id} of every client."""
        return {os.fsdecode(value): keys.parse_client_key(key)[1]
                for key, value in self._entries()
                if key[-1] == keys.CLIENT_NAME}

    def find(self, name):
        """Client id of `name` (str), or None."""
        return self._read(lambda tree: _find_in(tree, name))

    def key_id(self, name):
        return self._read(lambda tree: _key_id_in(tree, name))

    def add(self, name, key_id=''):
        """Add a client with a fresh random id; returns the id."""
        raw = os.fsencode(name)
        while True:
            client_id = self.rng.getrandbits(64)
            key = keys.client_key(raw, client_id, keys.CLIENT_NAME)
            try:
                self.tree.lookup(key)
            except KeyError:
                break
        self.changed = True
        self.tree.insert(key, raw)
        self.tree.insert(keys.client_key(raw, client_id, keys.CLIENT_KEYID),
                         os.fsencode(key_id or ''))
        return client_id

    def remove(self, name):
        client_id = self.find(name)
        raw = os.fsencode(name)
        self.changed = True
        self.tree.remove_range(keys.client_key(raw, client_id, 0),
                               keys.client_key(raw, client_id, 255))


def _find_in(tree, name):
    """Client id of `name` in a client list tree (or None)."""
    if tree is None:
        return None
    raw = os.fsencode(name)
    digest = keys.md5(raw)
    lo = digest + b'\x00' * 9
    hi = digest + b'\xff' * 9
    for key, value in tree.lookup_range(lo, hi):
        if key[-1] == keys.CLIENT_NAME and value == raw:
            return keys.parse_client_key(key)[1]
    return None


def _key_id_in(tree, name):
    client_id = _find_in(tree, name)
    if client_id is None:
        return None
    try:
        value = tree.lookup(keys.client_key(
            os.fsencode(name), client_id, keys.CLIENT_KEYID))
    except KeyError:
        return None
    return os.fsdecode(value) if value else None
