"""Which generations use which chunks, and what removing some would free.

One answer for `forget --pretend` (what each forgotten generation would
free), `forget --output-format=json` (what it did free) and `space`
(what only one generation holds), so that the three agree.

A chunk file goes when the generation removed last used it, no other
generation of the client uses it, no other client's generation does
(forgetter._SharedChunkGuard makes sure of that), and the indexes name
no other user (an entry a killed forget or a killed backup of another
client left keeps it too).  Removing a generation also drops and writes
B-tree node files; those are not counted: only chunk files are.
"""

import collections


def other_clients_chunks(repo, client_name):
    """{chunk id: one other client whose generations use it}."""
    users = {}
    for other in repo.get_client_names():
        if other != client_name:
            for gen_id in repo.get_generation_ids(other):
                for chunk_id in repo.get_generation_chunk_ids(gen_id):
                    users.setdefault(chunk_id, other)
    return users


class ChunkUsage:
    """The chunks each generation of a client uses and the chunks other
    clients' generations use, read once (read-only)."""

    def __init__(self, repo, client_name):
        self.repo = repo
        self.client_name = client_name
        self.gen_ids = repo.get_generation_ids(client_name)
        self.by_generation = {
            int(gen_id): repo.get_generation_chunk_ids(gen_id)
            for gen_id in self.gen_ids}
        self.elsewhere = other_clients_chunks(repo, client_name)
        self.counts = collections.Counter()   # generations of the client
        for chunk_ids in self.by_generation.values():
            self.counts.update(chunk_ids)

    def chunks_of(self, gen_id):
        return self.by_generation[int(gen_id)]

    def freed_by_removing_only(self, gen_id):
        """The chunk ids that removing just this generation frees (what
        only it holds), leftovers of killed runs aside."""
        return self.released(c for c in self.chunks_of(gen_id)
                             if self.counts[c] == 1)

    def freed_by_removing(self, gen_ids, freed=None):
        """The chunk ids that removing gen_ids in this order frees, a set
        per generation.  freed: chunk ids gone already (not counted
        again)."""
        counts = collections.Counter(self.counts)
        freed = set(freed or ())
        result = []
        for gen_id in gen_ids:
            chunk_ids = self.chunks_of(gen_id)
            counts.subtract(chunk_ids)
            now = self.released(
                c for c in chunk_ids if counts[c] <= 0 and c not in freed)
            freed |= now
            result.append(now)
        return result

    def released(self, chunk_ids):
        """Of chunks no generation of the client uses any more, those the
        repository lets go: no other client's generation uses them and
        the indexes name no other user."""
        candidates = [c for c in chunk_ids if c not in self.elsewhere]
        if not candidates:
            return set()
        users = self.repo.get_chunk_index_users(candidates)
        mine = {self.client_name}
        return {c for c in candidates if c in users and users[c] <= mine}


def leftovers_to_free(usage):
    """The chunk ids a forget of the client frees before it removes a
    generation: what a killed forget or a killed backup of the client
    left (Repository.find_forget_leftovers)."""
    stale, unused_files = usage.repo.find_forget_leftovers(usage.client_name)
    return set(unused_files) | usage.released(
        c for c in stale if c not in unused_files)


class Freed:
    """Bytes of chunk files a forget frees (or would): per removed
    generation and for the leftovers of killed runs.  Sizes are looked
    up when noted, while the files are still there."""

    def __init__(self, repo):
        self.repo = repo
        self.leftovers = 0
        self.by_generation = {}

    def size_of(self, chunk_ids):
        chunk_ids = list(chunk_ids)
        if not chunk_ids:
            return 0
        return sum(self.repo.get_chunk_sizes(chunk_ids).values())

    def note_leftovers(self, chunk_ids):
        self.leftovers += self.size_of(chunk_ids)

    def note_generation(self, gen_id, chunk_ids):
        self.by_generation[int(gen_id)] = self.size_of(chunk_ids)

    def of_generation(self, gen_id):
        """Bytes the generation's removal freed; None if not removed."""
        return self.by_generation.get(int(gen_id))

    @property
    def total(self):
        return self.leftovers + sum(self.by_generation.values())


def predict_freed(repo, client_name, gen_ids):
    """A Freed for removing gen_ids in this order, changing nothing."""
    usage = ChunkUsage(repo, client_name)
    freed = Freed(repo)
    leftovers = leftovers_to_free(usage)
    freed.note_leftovers(leftovers)
    for gen_id, chunk_ids in zip(
            gen_ids, usage.freed_by_removing(gen_ids, leftovers)):
        freed.note_generation(gen_id, chunk_ids)
    return freed
