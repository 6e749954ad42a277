"""restore's second process (obnamlib.engine.side_process): it writes some
of the regular files, each whole (content, checksum check, metadata), while
the first process walks the generation and restores everything else.

A file goes to it only where nothing else waits on the file: it has one
name (a hard-linked one is linked to by later names) and its content is
in chunks.  Once a batch is full it is sent; the first process writes a
file itself while the second has BACKLOG batches to do, so the two share
the work whatever it is.  What the second process would have said
(errors, progress) comes back with each file, and the first process
says it in the walk's order (restorer._WalkOrder), as if it had written
the file itself.  A directory's metadata waits until the files in it are
written.  A file the second process did not answer for (it failed, or the
run was interrupted) is removed; the first process writes it again,
unless the run is ending.
"""

import collections

from obnamlib.engine.restore_reporting import CallingReporter
from obnamlib.engine.side_process import SideProcess

# The second process is started once the first has written this many
# files or bytes (a small restore does without).
SIDE_AFTER_FILES = 1024
SIDE_AFTER_BYTES = 64 * 1024 * 1024

# A batch is sent when it has this many files or bytes.
BATCH_FILES = 256
BATCH_BYTES = 16 * 1024 * 1024


class SideFiles:
    """The first process's end: offer() a file; answered() the files the
    second process wrote, and those given back to be written here."""

    def __init__(self, repo, fs, setup):
        """setup: what the second process needs to write into the target
        like the restorer does (Restorer.side_setup), or None."""
        root = fs.reopening()
        if root is None or setup is None:
            setup = None
        else:
            setup = dict(setup, root=root)
        self.side = SideProcess(repo, __name__, setup, what='restore')
        self.pending = []       # (path, md, chunk ids, place), gathered
        self.pending_bytes = 0
        self.here_files = 0     # written by the first process, before
        self.here_bytes = 0
        self.given = 0          # files offered and taken, in all
        self.given_back = []    # batches that could not be sent
        self.answered_upto = 0  # all files up to this one are answered

    def written_here(self, md):
        """Count a file the first process wrote (to know when a second
        one pays)."""
        self.here_files += 1
        self.here_bytes += md.st_size or 0

    def taking(self):
        """Whether the second process takes a file now."""
        if self.pending:
            return True
        if self.here_files < SIDE_AFTER_FILES and \
                self.here_bytes < SIDE_AFTER_BYTES:
            return False
        return self.side.usable()

    def offer(self, path, md, chunk_ids, place):
        """Add a file to the batch being gathered (taking() said yes);
        place: where what is said about it goes (WalkOrder.reserve)."""
        self.pending.append((path, md, chunk_ids, place))
        self.pending_bytes += md.st_size or 0
        self.given += 1
        if len(self.pending) >= BATCH_FILES or \
                self.pending_bytes >= BATCH_BYTES:
            self.send()

    def outstanding(self):
        """Whether files offered are not answered yet."""
        return self.answered_upto < self.given

    def send(self):
        """Send the batch gathered; if the process failed it comes back
        from answered()."""
        batch, self.pending, self.pending_bytes = self.pending, [], 0
        if not batch:
            return
        files = [(path, md, ids) for path, md, ids, _ in batch]
        if self.side.submit(files, kept=batch) is None:
            self.given_back.append(batch)

    def answered(self, wait=False):
        """[(results or None, batch)] in the order sent (wait: all of
        them, the batch being gathered sent first).  results None: the
        files are to be written here (what the second process may have
        made of them is removed)."""
        if wait:
            self.send()
        out = [(results, batch)
               for _, results, batch in self.side.done(wait)]
        out += [(None, batch) for batch in self.given_back]
        self.given_back = []
        self.answered_upto += sum(len(batch) for _, batch in out)
        return out

    def close(self, remove):
        """Stop the second process; remove(path) each file it was sent and
        did not answer for (it may have left part of it)."""
        unanswered = [item for batch in self.side.sent.values()
                      for item in batch]
        self.side.close()
        for path, _, _, _ in unanswered:
            remove(path)


def open_worker(repo, setup):
    return _Writer(repo, setup)


class _Writer:
    """The second process's end: each file of a batch restored as the
    first process would, what it would have said recorded."""

    def __init__(self, repo, setup):
        from obnamlib.engine import background_md5, restorer
        from obnamlib.vfs import factory
        self.recorder = _Recorder()
        self.restorer = restorer.Restorer(
            repo, None, factory.open_vfs(setup['root']), setup['target'],
            reporter=self.recorder,
            always_restore_setuid=setup['always_restore_setuid'],
            euid=setup['euid'])
        self.restorer.hasher = background_md5.new_hasher()

    def handle(self, files):
        """[(calls to the reporter, files counted, bytes, failed)]."""
        restorer, results = self.restorer, []
        upcoming = collections.deque((md, ids) for _, md, ids in files)
        restorer.fetcher.given = upcoming
        for path, md, ids in files:
            upcoming.popleft()
            stats = restorer.stats
            counted, fetched = stats.files, stats.bytes
            restorer.failed = False
            self.recorder.calls = []
            restorer.write_given(path, md, ids)
            results.append((self.recorder.calls, stats.files - counted,
                            stats.bytes - fetched, restorer.failed))
        return results

    def close(self):
        if self.restorer.hasher is not None:
            self.restorer.hasher.shutdown()


class _Recorder(CallingReporter):
    """A reporter that keeps the calls, for the first process to make in
    the walk's order."""

    def __init__(self):
        self.calls = []

    def call(self, name, args):
        self.calls.append((name, args))
