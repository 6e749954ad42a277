"""fsck's second process (obnamlib.engine.side_process): it checks the
contents of some of fsck's batches of files (obnamlib.engine.fsck_content)
while the first one walks the generations and checks the other batches.
It writes nothing.  What it finds comes back as the batch's problem
lines and what the first process remembers of a batch (chunks verified,
chunks found damaged, files verified, counters)."""

from obnamlib.engine.side_process import SideProcess


class SideCheck(SideProcess):
    """fsck's end of its second process."""

    def __init__(self, repo):
        super().__init__(repo, __name__, setup={}, what='fsck')

    def submit(self, files, epoch):
        """Send a batch (fsck_content's queued files; epoch: how many
        generations began before it); done() gives the files back."""
        return super().submit((epoch, files), kept=files)


def open_worker(repo, setup):
    return _Checker(repo)


class _Checker:
    """The second process's end: batches checked as the first process
    would, generation by generation."""

    def __init__(self, repo):
        from obnamlib.engine import fsck_content, fsck_stats
        from obnamlib.repo.fsck_checker import storage_checker_for
        self.content = fsck_content.ContentCheck(
            repo, storage_checker_for(repo, False), fsck_stats.FsckStats(),
            report=None, checking=lambda text: None, counted=lambda: None)
        self.epoch = 0

    def handle(self, payload):
        batch_epoch, files = payload
        while self.epoch < batch_epoch:
            self.content.next_generation()
            self.epoch += 1
        return self.content.check_batch(files)

    def close(self):
        self.content.close()
