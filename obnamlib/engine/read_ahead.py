"""Prefetch hints for the engines that read files' chunks in a walk's
order (restore, verify): which chunk calls for the next hint, and the
chunk ids one hint names.

A hint (`repo.prefetch_chunks`) names at most READ_AHEAD_CHUNKS chunks
and about READ_AHEAD_BYTES of data (estimated from the files' sizes);
the next one goes out half-way through the last, so reading ahead never
runs dry.  Over SFTP a hint turns two round trips per small file into a
few per window.
"""

# One prefetch hint names at most this many chunks (a small file has one)
# and about this much data (estimated from the files' sizes).
READ_AHEAD_CHUNKS = 64
READ_AHEAD_BYTES = 32 * 1024 * 1024
READ_AHEAD_NAMES = 1024     # names looked at for one hint, at most


class HintSchedule:
    """When reading a chunk calls for a new prefetch hint: at a chunk no
    hint named, and at the middle of the last hint, so that the next one
    goes out before this one runs dry (restore, verify)."""

    def __init__(self):
        self.hinted = set()       # chunk ids of the last two hints
        self.last = set()         # of the last one
        self.refill_at = None

    def due(self, chunk_id):
        return chunk_id not in self.hinted or chunk_id == self.refill_at

    def window(self, chunk_id):
        """An empty window for the hint due at chunk_id: at a refill it
        skips what the last hint named."""
        return ReadAheadWindow(skip=self.last if chunk_id in self.hinted
                               else ())

    def sent(self, window):
        ids = window.chunk_ids
        self.hinted = window.seen
        self.last = set(ids)
        self.refill_at = ids[len(ids) // 2] if ids else None


class ReadAheadWindow:
    """The chunk ids of one prefetch hint, without repeats, in order."""

    def __init__(self, skip=()):
        self.chunk_ids = []
        self.seen = set(skip)     # named by the hint before: not again
        self.bytes = 0

    def full(self):
        return (len(self.chunk_ids) >= READ_AHEAD_CHUNKS or
                self.bytes >= READ_AHEAD_BYTES)

    def add(self, chunk_ids, chunk_size):
        for chunk_id in chunk_ids:
            if self.full():
                return
            if chunk_id not in self.seen:
                self.seen.add(chunk_id)
                self.chunk_ids.append(chunk_id)
                self.bytes += chunk_size


def chunk_size_guess(md, chunk_ids):
    """A chunk's size, guessed from the file's size (the last one may be
    short)."""
    if not chunk_ids or not md.st_size:
        return 0
    return -(-md.st_size // len(chunk_ids))
