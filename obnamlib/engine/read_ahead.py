"""Prefetch hints for the engines that read files' chunks in a walk's
order (restore, verify, cat): which chunk calls for the next hint, the
chunk ids one hint names, and the one loop that reads them (HintedContent).

A hint (`repo.prefetch_chunks`) names at most READ_AHEAD_CHUNKS chunks
and about READ_AHEAD_BYTES of data (estimated from the files' sizes);
the next one goes out half-way through the last, so reading ahead never
runs dry.  Over SFTP a hint turns two round trips per small file into a
few per window.  A repository whose hints do nothing (not
PREFETCHES_CHUNKS: a plain one in memory) is given none, and nothing is
looked at ahead for them.
"""

from obnamlib.repo.interface import PREFETCHES_CHUNKS

# One prefetch hint names at most this many chunks (a small file has one)
# and about this much data (estimated from the files' sizes).
READ_AHEAD_CHUNKS = 64
READ_AHEAD_BYTES = 16 * 1024 * 1024
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


class HintedContent:
    """Regular files' content of generation `gen_id` of `repo`, piece by
    piece (the data stored in the tree, or each chunk), with a prefetch
    hint before every chunk the schedule calls one for: the rest of the
    file, then what add_upcoming(window) adds (the files a walk reaches
    next; restore, verify).  The one copy of that loop for every engine
    that reads files' content in order.  Without PREFETCHES_CHUNKS the
    chunks are read without hints (self.hints None)."""

    def __init__(self, repo, gen_id, add_upcoming=None):
        self.repo = repo
        self.gen = gen_id
        self.add_upcoming = add_upcoming
        self.hints = (HintSchedule()
                      if PREFETCHES_CHUNKS in repo.capabilities else None)

    def content(self, path, md, chunk_ids=None):
        """The content of path (metadata md); chunk_ids, if the caller
        already has them, says it is in chunks and which."""
        if chunk_ids is None:
            in_tree, chunk_ids = self.repo.get_file_content(self.gen, path)
            if in_tree is not None:
                yield in_tree
                return
        if self.hints is None:
            yield from map(self.repo.get_chunk_content, chunk_ids)
            return
        for i, chunk_id in enumerate(chunk_ids):
            if self.hints.due(chunk_id):
                self._hint(md, chunk_ids, i)
            yield self.repo.get_chunk_content(chunk_id)

    def _hint(self, md, chunk_ids, start):
        window = self.hints.window(chunk_ids[start])
        window.add(chunk_ids[start:], chunk_size_guess(md, chunk_ids))
        if self.add_upcoming is not None:
            self.add_upcoming(window)
        self.hints.sent(window)
        if window.chunk_ids:
            self.repo.prefetch_chunks(window.chunk_ids)
