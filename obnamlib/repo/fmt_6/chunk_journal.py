"""A client's record of the chunk ids its unfinished run may have used (#27).

A run killed without any cleanup (SIGKILL, power loss) leaves chunk files
that nothing refers to, and its successor cannot know them from other
clients' chunks.  So before a backup hands a chunk id to storage it makes
sure the id lies in a range recorded here (a run's ids are consecutive
from a random start, chunk_store: one small write per RANGE_SIZE chunks).
Each commit of the chunk indexes rewrites the record with only the ranges
that still hold chunks no index names, and removes it when none are left.
A forget (or the removal of a backup's checkpoints) records the chunks
that its index commit frees: their files are deleted after that commit.

The record also holds the client forest's id counter from before the run
started a generation: a chunk of the record that a generation with a
higher id uses was committed with the client just before a kill stopped
the index commit.

The file is `<client-id>/chunks-in-progress`, filtered (encrypted) like the
client's trees.  Obnam 1.x and larch read a client directory only through
the forest's metadata, nodes and refcounts, so they never see it.  It is
written under the client's lock, or under the chunk indexes' lock at an
index commit: every run of the client takes that lock once after locking
the client, before it first reads the record, so it reads it whole.
"""

import itertools
import logging

from obnamlib import errors
from obnamlib.repo.fmt_6.keys import MAX_ID

JOURNAL_NAME = 'chunks-in-progress'
RANGE_SIZE = 4096


def range_from(chunk_id):
    """The range reserved when chunk_id is the first id outside the record."""
    return (chunk_id, min(chunk_id + RANGE_SIZE - 1, MAX_ID - 1))


class ChunkJournal:
    """The record of one client.  `inherited`: the ranges an earlier run
    left (and `newest`, the id counter its run started with); `ranges`:
    this object's own since the last index commit."""

    def __init__(self, fs, dirname):
        self.fs = fs
        self.path = dirname + '/' + JOURNAL_NAME
        self.newest_committed = 0
        self.inherited = self.newest = None   # read at the first need
        self.inherited_settled = False
        self.ranges = []
        self.on_disk = False

    def _load(self):
        if self.inherited is None:
            self.inherited, self.newest = self._read()

    def _read(self):
        try:
            text = self.fs.read_file(self.path)
        except FileNotFoundError:
            return [], 0
        except errors.ObnamError as e:
            errors.reraise_fatal(e)
            return self._unreadable(e)
        self.on_disk = True
        try:
            return parse(text)
        except ValueError as e:
            return self._unreadable(e)

    def _unreadable(self, error):
        """Torn by a crash mid-write, or damaged (no filter tag, does not
        decrypt): what it named is lost (left for fsck), but the run goes
        on and replaces it."""
        logging.warning('ignoring unreadable %s: %s', self.path, error)
        self.on_disk = True
        return [], 0

    def note_newest(self, last_id):
        """The client forest's id counter when it is locked, before a
        generation is started: every generation committed later has a
        higher id (format-6.md §7.3)."""
        self.newest_committed = last_id

    def covers(self, chunk_id):
        """Called per chunk put: the run's newest range, where its next
        id almost always lies, is looked at first, without a loop (4% of
        a first backup's main thread went to the loop's generator)."""
        ranges = self.ranges
        if ranges and ranges[-1][0] <= chunk_id <= ranges[-1][1]:
            return True
        self._load()
        return any(first <= chunk_id <= last for first, last in
                   itertools.chain(reversed(ranges), self.inherited))

    def reserve(self, chunk_id):
        """Record a range starting at chunk_id before it is written."""
        self._load()
        self.ranges.append(range_from(chunk_id))
        self._save()

    def note_removals(self, chunk_ids):
        """Chunk files the next index commit deletes once no index names
        them: a kill in between leaves them to the client's next run."""
        self._load()
        for chunk_id in sorted(chunk_ids):
            if self.ranges and self.ranges[-1][1] + 1 == chunk_id:
                self.ranges[-1] = (self.ranges[-1][0], chunk_id)
            else:
                self.ranges.append((chunk_id, chunk_id))
        self._save()

    def cut_before(self, chunk_id):
        """chunk_id belongs to someone else: end our range before it (the
        run goes on from a new random start, in a new range)."""
        if self.ranges and self.ranges[-1][0] <= chunk_id <= \
                self.ranges[-1][1]:
            first = self.ranges.pop()[0]
            if first < chunk_id:
                self.ranges.append((first, chunk_id - 1))
            self._save()

    def settle_inherited(self):
        """The inherited chunks are dealt with (indexed at the next index
        commit, or removed): that commit may drop their ranges."""
        self.inherited_settled = True

    def committed(self, unindexed):
        """An index commit: keep the ranges with chunks still unindexed
        (a file whose reading a checkpoint cut in two)."""
        self._load()
        self.ranges = [r for r in self.ranges
                       if any(r[0] <= c <= r[1] for c in unindexed)]
        if self.inherited_settled:
            self.inherited = []
            self.inherited_settled = False
        if self.ranges or self.inherited or self.on_disk:
            self._save()

    def leftover_ranges(self):
        """The ranges an earlier, unfinished run of the client left."""
        self._load()
        return list(self.inherited)

    def _save(self):
        ranges = self.inherited + self.ranges
        if not ranges:
            try:
                self.fs.remove(self.path)
            except FileNotFoundError:
                pass
            self.on_disk = False
            return
        if not self.on_disk:
            # Kept while the file stays: an older value only makes the
            # next run look at more generations.
            self.newest = self.newest_committed
        self.fs.write_file(self.path, format_record(self.newest, ranges))
        self.on_disk = True


def format_record(newest, ranges):
    lines = ['newest %d' % newest]
    lines += ['range %x %x' % (first, last) for first, last in ranges]
    return ('\n'.join(lines) + '\nend\n').encode('ascii')


def parse(text):
    """(ranges, newest generation); ValueError if incomplete or a range
    is no range of chunk ids."""
    lines = text.decode('ascii').split('\n')
    if lines[-2:] != ['end', ''] or not lines[0].startswith('newest '):
        raise ValueError('incomplete chunk record')
    newest = int(lines[0][len('newest '):])
    ranges = []
    for line in lines[1:-2]:
        word, first, last = line.split()
        if word != 'range':
            raise ValueError(line)
        first, last = int(first, 16), int(last, 16)
        if not 0 <= first <= last <= MAX_ID:
            raise ValueError(line)
        ranges.append((first, last))
    return ranges, newest
