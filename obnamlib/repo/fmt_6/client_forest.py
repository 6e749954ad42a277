"""One client's forest: its generations, each a tree (format-6.md §7.3)."""

import random

from obnamlib.repo.fmt_6 import forests, keys
from obnamlib.repo.fmt_6.client_tree import GenerationTree


class ClientForest:
    """Generations of one client, oldest first."""

    def __init__(self, fs, client_id, node_size=None, allow_writes=False,
                 rng=None):
        self.client_id = client_id
        self.dirname = str(client_id)
        self.rng = rng or random.SystemRandom()
        self.writable = allow_writes
        if allow_writes:
            cache, start = forests.CLIENT_CACHE_NODES, None
        else:
            cache, start = (forests.READER_CACHE_NODES,
                            forests.READER_START_NODES)
        self.forest = forests.open_forest(fs, self.dirname,
                                          keys.CLIENT_KEY_SIZE, node_size,
                                          allow_writes, cache, start)
        self.wrappers = {}        # id(tree) -> GenerationTree (trees live as long as the forest)
        self.gen_numbers = {}     # id(tree) -> generation id (or None)
        self.created = []         # generation ids created in this session
        self.changed = False      # set by the repository before any change
        self.by_number = None     # generation id -> tree, filled on demand
        self.unsearched = []      # trees whose id by_number lacks, oldest first

    def _wrap(self, tree):
        wrapper = self.wrappers.get(id(tree))
        if wrapper is None or wrapper.tree is not tree:
            wrapper = GenerationTree(tree, self.rng)
            self.wrappers[id(tree)] = (wrapper)
        return wrapper

    def _number(self, tree):
        key = id(tree)
        if key not in self.gen_numbers:
            self.gen_numbers[key] = self._wrap(tree).get_gen_value(keys.GEN_ID)
        return self.gen_numbers[key]

    def last_id(self):
        """The forest's id counter: every generation id so far was taken
        from it, so none was above it (format-6.md §7.3)."""
        return self.forest.last_id

    def generation_ids(self):
        """Ids in tree order; trees without GEN_ID are skipped."""
        numbers = (self._number(tree) for tree in self.forest.trees)
        return [n for n in numbers if n is not None]

    def generation(self, gen_number):
        """The GenerationTree of a generation id, or None.  Every file
        operation asks, so each tree's id is read once; the trees are
        searched newest first and only until the id is found (a backup
        asks for the newest, and a client may have hundreds)."""
        tree = self._tree(gen_number)
        return None if tree is None else self._wrap(tree)

    def _tree(self, gen_number):
        if self.by_number is None:
            self.by_number = {}
            self.unsearched = list(self.forest.trees)
        tree = self.by_number.get(gen_number)
        while tree is None and self.unsearched:
            candidate = self.unsearched.pop()
            number = self._number(candidate)
            self.by_number.setdefault(number, candidate)
            if number == gen_number:
                tree = candidate
        return tree

    def newest_generation_id(self):
        """The id of the newest tree that has one (None if none has),
        without reading the older trees' ids."""
        for tree in reversed(self.forest.trees):
            number = self._number(tree)
            if number is not None:
                return number
        return None

    def create_generation(self, started):
        """Clone the newest tree; its id is the next counter value (§7.3)."""
        old = self.forest.trees[-1] if self.forest.trees else None
        tree = self.forest.new_tree(old)
        gen_number = self.forest.new_id()
        gen = self._wrap(tree)
        gen.clear_gen_values()
        gen.set_gen_value(keys.GEN_ID, gen_number)
        gen.set_gen_value(keys.GEN_STARTED, int(started))
        self.gen_numbers[id(tree)] = gen_number
        self.created.append(gen_number)
        self.by_number = None
        return gen_number

    def remove_generation(self, gen_number):
        """Remove the tree generation() gives for the id (the newest, if
        a damaged forest has the id twice)."""
        tree = self._tree(gen_number)
        if tree is None:
            return False
        self.forest.remove_tree(tree)
        self.wrappers.pop(id(tree), None)
        self.gen_numbers.pop(id(tree), None)
        self.by_number = None
        return True

    def commit(self, ended):
        """Set GEN_ENDED of this session's generations (unless set) and
        commit the forest (unless nothing changed)."""
        if not self.changed:
            return
        for gen_number in self.created:
            gen = self.generation(gen_number)
            if gen is not None and gen.get_gen_value(keys.GEN_ENDED) is None:
                gen.set_gen_value(keys.GEN_ENDED, int(ended))
        self.forest.commit()
        self.created = []
        self.changed = False
        self.by_number = None
