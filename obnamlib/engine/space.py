"""How much room a client's generations take (`obnam space`).

Per generation: the file data it holds (what `generations` shows), the
bytes of the chunk files it uses as stored (after compression and
encryption) and of those only it uses: what forgetting just that
generation frees (chunk_usage, the code `forget --pretend` uses).  For
the repository: every chunk file, and the file data of every
generation of every client, whose quotient is what de-duplication and
compression save.  Read-only; B-tree node files are not counted.
"""

from obnamlib.engine import chunk_usage, listing


class GenerationSpace:
    """One generation's numbers (sizes in bytes)."""

    def __init__(self, gen_id, spec, started, ended, data_bytes,
                 stored_bytes, unique_bytes):
        self.gen_id = gen_id
        self.spec = spec
        self.started = started
        self.ended = ended
        self.data_bytes = data_bytes
        self.stored_bytes = stored_bytes
        self.unique_bytes = unique_bytes


class SpaceReport:
    """`generations`: GenerationSpace of the client's generations, oldest
    first; the rest is about the whole repository."""

    def __init__(self, client_name, generations, chunk_bytes, chunk_count,
                 generations_bytes, generation_count, client_count):
        self.client_name = client_name
        self.generations = generations
        self.chunk_bytes = chunk_bytes
        self.chunk_count = chunk_count
        self.generations_bytes = generations_bytes
        self.generation_count = generation_count
        self.client_count = client_count

    @property
    def ratio(self):
        """File data per stored chunk byte; None with no chunk bytes."""
        if not self.chunk_bytes:
            return None
        return self.generations_bytes / self.chunk_bytes


def measure(repo, client_name):
    """The SpaceReport of the client in repo (changes nothing)."""
    sizes = repo.get_chunk_sizes()
    usage = chunk_usage.ChunkUsage(repo, client_name)
    data = {int(gen_id): counts[1] for gen_id, counts, _
            in listing.generation_counts(repo, usage.gen_ids)}
    generations = [
        _generation_space(repo, usage, sizes, gen_id, data[int(gen_id)])
        for gen_id in usage.gen_ids]
    generations_bytes, generation_count = _all_generations_data(repo)
    return SpaceReport(client_name, generations, sum(sizes.values()),
                       len(sizes), generations_bytes, generation_count,
                       len(repo.get_client_names()))


def _generation_space(repo, usage, sizes, gen_id, data_bytes):
    started, ended = listing.generation_times(repo, gen_id)
    return GenerationSpace(
        gen_id, repo.make_generation_spec(gen_id), started, ended,
        data_bytes, _bytes_of(sizes, usage.chunks_of(gen_id)),
        _bytes_of(sizes, usage.freed_by_removing_only(gen_id)))


def _bytes_of(sizes, chunk_ids):
    return sum(sizes.get(chunk_id, 0) for chunk_id in chunk_ids)


def _all_generations_data(repo):
    """(file data bytes of every generation of every client, how many
    generations)."""
    total = count = 0
    for client in repo.get_client_names():
        gen_ids = repo.get_generation_ids(client)
        for _, counts, _ in listing.generation_counts(repo, gen_ids):
            total += counts[1]
            count += 1
    return total, count
