"""Chunk files an unfinished run of a client left (#27): the ones in its
journal's ranges (chunk_journal) that no index names.

Another client's running backup can refer to a chunk only through the
committed indexes or its own session, and a chunk id of this client's
journal is in no other client's session (ranges end before a chunk
someone else wrote; another run would have to draw its random start in
the unused tail of a range, odds of 4096 in 2^64 per run), so such a
chunk is this client's alone: its next run, holding the client's lock,
may reuse it or remove it.  One that a
generation newer than the journal uses was committed with the client and
only lacks its index entries (or its chunksums entry: a kill between
the two index commits).
"""

from obnamlib import errors


class Leftovers:
    """`unused`: no generation uses them; `used`: a newer generation does
    (they need index entries)."""

    def __init__(self, unused, used):
        self.unused = unused
        self.used = used


def find(chunks, indexes, journal, forest, used_elsewhere):
    """The leftovers of the journal's inherited ranges, now.  A journal
    whose newest generation is beyond the client's newest (damaged, or
    that generation was forgotten since) is checked against every
    generation: slower, but no used chunk is taken for a leftover.
    used_elsewhere(chunk_id): whether another client's generation uses
    it (asked only for a chunk in the chunklist that chunksums lacks)."""
    ranges = journal.leftover_ranges()
    if not ranges:
        return Leftovers([], [])
    numbers = forest.generation_ids()
    since = journal.newest if numbers and journal.newest <= max(numbers) \
        else -1
    newer = [forest.generation(number) for number in numbers
             if number > since]
    unused, used = [], []
    for chunk_ids in chunks.ids_in_ranges(ranges):
        for chunk_id in chunk_ids:
            if claimed(indexes, chunk_id, used_elsewhere):
                continue
            if any(gen.uses_chunk(chunk_id) for gen in newer):
                used.append(chunk_id)
            else:
                unused.append(chunk_id)
    return Leftovers(unused, used)


def claimed(indexes, chunk_id, used_elsewhere):
    """Whether a chunk belongs to someone: chunksums names a user, or it
    has a chunklist entry alone (what a kill between the two index
    commits leaves: chunklist first, format-6.md §10.2) and another
    client's generation uses it.  A chunklist-only chunk only this
    client could have left is a leftover; checking the others keeps a
    range that reaches another client's chunk (a damaged journal) from
    removing that client's data."""
    checksum = indexes.checksum(chunk_id)
    if checksum is None:
        return False
    return bool(indexes.users(checksum, chunk_id)) or used_elsewhere(chunk_id)


def contents(chunks, chunk_ids, batch=256):
    """(chunk id, content) of each chunk that reads back whole (read in
    batches where the storage can: SFTP); one that a kill cut short (it
    does not decrypt, or is gone) is left out."""
    for start in range(0, len(chunk_ids), batch):
        some = chunk_ids[start:start + batch]
        chunks.prefetch(some)
        for chunk_id in some:
            try:
                data = chunks.get(chunk_id)
            except (OSError, ValueError, errors.ObnamError) as e:
                errors.reraise_fatal(e)
                continue
            yield chunk_id, data
