"""The second process's end of restore's second process
(obnamlib.engine.restore_side): each file of a batch is restored as the
first process would restore it, and what it would have said is recorded
for the first process to say in the walk's order."""

import collections

from obnamlib.engine import background_md5, restorer
from obnamlib.engine.restore_reporting import CallingReporter
from obnamlib.vfs import factory


def open_worker(repo, setup):
    return _Writer(repo, setup)


class _Writer:
    """The second process's end: each file of a batch restored as the
    first process would, what it would have said recorded."""

    def __init__(self, repo, setup):
        self.recorder = _Recorder()
        self.restorer = restorer.Restorer(
            repo, None, factory.open_vfs(*setup['target_fs']),
            setup['target'],
            reporter=self.recorder,
            always_restore_setuid=setup['always_restore_setuid'],
            euid=setup['euid'])
        self.restorer.hasher = background_md5.new_hasher()

    def handle(self, files):
        """[(calls to the reporter, files counted, bytes, failed)]."""
        restorer, results = self.restorer, []
        upcoming = collections.deque((md, ids) for _, md, ids in files)
        restorer.will_write(upcoming)
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
