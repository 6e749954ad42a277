"""restore's second process (obnamlib.engine.side_process): it writes some
of the regular files, each whole (content, checksum check, metadata), while
the first process walks the generation and restores everything else.

A file goes to it only where nothing else waits on the file: it has one
name (a hard-linked one is linked to by later names) and its content is
in chunks.  Where it goes is decided when the restore first looks at it
(claim: reading ahead, or when the walk gets there), so the first process
reads ahead only the chunks it will write itself; batches are claimed
while fewer than BACKLOG wait, else the first process writes the file
itself, so the two share the work whatever it is.  What the second
process would have said (errors, progress) comes back with each file,
and the first process says it in the walk's order
(restore_reporting.WalkOrder), as if it had written the file itself.
A directory's metadata waits until the files in it are written.  A file
the second process did not answer for (it failed, or the run was
interrupted) is removed; the first process writes it again, unless the
run is ending.
"""

from obnamlib.engine.side_process import BACKLOG, SideProcess
from obnamlib.vfs.base import LOCAL_FILES

# The second process is started once the first has written this many
# files or bytes (a small restore does without).
SIDE_AFTER_FILES = 1024
SIDE_AFTER_BYTES = 64 * 1024 * 1024

# The second process's end (a module of its own: it imports the restorer,
# which imports this one).
WORKER = 'obnamlib.engine.restore_side_worker'

# A batch is sent when it has this many files or bytes.
BATCH_FILES = 256
BATCH_BYTES = 16 * 1024 * 1024


class SideFiles:
    """The first process's end: claim() a file when the restore first
    looks at it, offer() it when the walk gets there; answered() the
    files the second process wrote, and those given back to be written
    here."""

    def __init__(self, repo, fs, setup):
        """setup: what the second process needs to write into the target
        like the restorer does (Restorer.side_setup), or None."""
        target = fs.reopening()
        if target is None or setup is None or \
                LOCAL_FILES not in fs.capabilities:
            setup = None
        else:
            setup = dict(setup, target_fs=target)
        self.side = SideProcess(repo, WORKER, setup, what='restore')
        self.here_files = 0     # written by the first process, before
        self.here_bytes = 0
        self.claiming = None    # [number, files, bytes] of the open batch
        self.claimed = {}       # batch number -> files claimed for it
        self.opened = 0         # batches opened, in all (numbered from 1)
        self.passed = 0         # batches sent, or left behind by the walk
        self.pending = []       # (path, md, chunk ids, place), offered
        self.pending_batch = None
        self.given = 0          # files offered, in all
        self.given_back = []    # batches that could not be sent
        self.answered_upto = 0  # all files up to this one are answered

    def may_share(self):
        """Whether the second process may take files in this restore."""
        return self.side.may_run()

    def written_here(self, md):
        """Count a file the first process wrote (to know when a second
        one pays)."""
        self.here_files += 1
        self.here_bytes += md.st_size or 0

    def claim(self, md):
        """Whether the second process is to write this file (then the
        first does not read its chunks ahead): its batch's number, or
        None.  Batches are opened while fewer than BACKLOG wait."""
        if self.claiming is None and not self._open_batch():
            return None
        batch = self.claiming
        batch[1] += 1
        batch[2] += md.st_size or 0
        self.claimed[batch[0]] = batch[1]
        if batch[1] >= BATCH_FILES or batch[2] >= BATCH_BYTES:
            self.claiming = None
        return batch[0]

    def _open_batch(self):
        if self.here_files < SIDE_AFTER_FILES and \
                self.here_bytes < SIDE_AFTER_BYTES:
            return False
        if not self.side.usable() or \
                len(self.side.sent) + self.opened - self.passed >= BACKLOG:
            return False
        self.opened += 1
        self.claiming = [self.opened, 0, 0]
        return True

    def offer(self, path, md, chunk_ids, place, batch):
        """Hand over a file claimed for batch (the walk is there); place:
        where what is said about it goes (WalkOrder.reserve).  A batch
        goes when its last file is offered (or a later batch's)."""
        if self.pending and self.pending_batch != batch:
            self.send()
        self.passed = max(self.passed, batch - 1)
        self.pending_batch = batch
        self.pending.append((path, md, chunk_ids, place))
        self.given += 1
        closed = self.claiming is None or self.claiming[0] != batch
        if closed and len(self.pending) >= self.claimed.get(batch, 0):
            self.send()

    def outstanding(self):
        """Whether files offered are not answered yet."""
        return self.answered_upto < self.given

    def send(self):
        """Send the batch offered; if the process failed it comes back
        from answered()."""
        batch, self.pending = self.pending, []
        if not batch:
            return
        self.passed = max(self.passed, self.pending_batch)
        self.claimed.pop(self.pending_batch, None)
        files = [(path, md, ids) for path, md, ids, _ in batch]
        if self.side.submit(files, kept=batch) is None:
            self.given_back.append(batch)

    def answered(self, wait=False):
        """[(results or None, batch)] in the order sent (wait: all of
        them, the files offered and not sent yet sent first).  results
        None: the files are to be written here (what the second process
        may have made of them is to be removed)."""
        if wait:
            self.send()
            self.claiming = None
            self.claimed.clear()
            self.passed = self.opened
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
