"""The benchmark's steps, and running one step of one tool.

A tool that is not installed, whose repository cannot be created, or whose
first backup failed is marked broken: its later steps are recorded as
skipped, with the reason, and every other tool carries on.
"""

import os
import shutil
import sys

from lib_measure import (CommandFailed, Measurement, drop_page_cache,
                         read_into_page_cache, run_measured, run_quietly,
                         tree_bytes)

# (key for --steps, label in tables and JSON), in the order they run.
STEPS = (
    ('first', 'first backup'),
    ('nochange', 'no-change backup'),
    ('mutate', 'backup after mutate'),
    ('restore', 'full restore'),
    ('check', 'check'),
    ('verify', 'check, verify data'),
)
STEP_KEYS = tuple(key for key, _ in STEPS)
LABELS = dict(STEPS, init='create repository')   # init: failures only
COMMANDS_NOTE = ('check: obnam fsck, borg check, restic check --read-data; '
                 'verify: borg check --verify-data')


class ToolRun:
    """One tool in one mode through the steps."""

    def __init__(self, tool, workdir, setup_error=None, restore_dir=None,
                 cold=False):
        self.tool = tool
        self.workdir = workdir
        # Restores go here (a tmpfs by default): on ext4, creating files
        # right after another tool's restore was deleted costs kernel time
        # that would be charged to whichever tool restores next.
        self.restore_dir = restore_dir or workdir
        self.cold = cold          # drop the page cache, do not warm it
        self.broken = None
        self.results = {}
        self.corpus = None        # the tree the steps back up
        if setup_error:
            self.results['init'] = Measurement(None, error=setup_error)
            self.broken = setup_error.splitlines()[0]

    def prepare(self):
        """Create the repository; mark the tool broken if that fails."""
        if self.broken:
            return
        if shutil.which(self.tool.program) is None:
            self.broken = '%s is not installed' % self.tool.program
            return
        argv = self.tool.init_command()
        if argv is None:
            return
        try:
            run_quietly(argv, env=self.tool.env)
        except CommandFailed as e:
            self.results['init'] = Measurement(argv, error=str(e))
            self.broken = 'creating the repository failed: %s' % (
                str(e).splitlines()[0])

    def run(self, step, corpus):
        """Run one step; record and return its Measurement."""
        self.corpus = corpus
        if self.broken:
            result = Measurement(None, error='skipped: %s' % self.broken)
        else:
            result = self._attempt(step, corpus)
            if step == 'first' and result.error:
                self.broken = 'its first backup failed'
        self.results[step] = result
        return result

    def _attempt(self, step, corpus):
        argv = None
        try:
            if step in ('first', 'nochange', 'mutate'):
                argv = self.tool.backup_command(corpus)
                return self._measure(argv)
            if step == 'restore':
                return self._restore()
            if step == 'check':
                argv = self.tool.check_command()
                return self._measure(argv)
            if step == 'verify':
                argv = self.tool.verify_command()
                if argv is None and 'check' in self.results:
                    return Measurement(None, same_as='check')
                argv = argv or self.tool.check_command()
                return self._measure(argv)
            raise ValueError('unknown step %r' % step)
        except CommandFailed as e:
            return Measurement(argv, error=str(e))
        except Exception as e:     # a bug or a setup surprise: report it
            return Measurement(argv, error='%s: %s' % (type(e).__name__, e))

    def _restore(self):
        target = os.path.join(self.restore_dir, self.tool.mode,
                              self.tool.name + '-restore')
        os.makedirs(target)
        try:
            argv, cwd = self.tool.restore_command(target)
            try:
                result = self._measure(argv, cwd)
            except CommandFailed as e:
                return Measurement(argv, error=str(e))
            result.restored_bytes = tree_bytes(target)
            return result
        finally:
            shutil.rmtree(target, ignore_errors=True)

    def _measure(self, argv, cwd=None):
        # Write back, untimed, what earlier commands left dirty (the
        # mutated corpus, another tool's repository or deleted restore):
        # obnam ends a backup with syncfs, borg and restic fsync, and each
        # must pay for its own writes only.  Then, also untimed, bring
        # every tool the same page cache: warm, corpus and repository
        # read in (obnam and borg drop what they read, restic does not,
        # so each tool would otherwise find the cache as the tool before
        # it left it), or cold, the whole cache dropped (--cold).
        os.sync()
        if self.cold:
            drop_page_cache()
        else:
            read_into_page_cache(*[tree for tree in (
                self.corpus, self.tool.repo_path) if tree])
        server = self.tool.server
        before = server.server_cpu_seconds() if server else None
        wall, cpu, rss = run_measured(argv, env=self.tool.env, cwd=cwd)
        spent = server.server_cpu_seconds() - before if server else None
        return Measurement(argv, wall, cpu, rss, tree_bytes(
            self.tool.repo_path), spent)


def progress(mode, tool, step, result, round_number=None):
    """One line on stderr as each step finishes: the run takes a while."""
    if result.error:
        what = result.error.splitlines()[0]
    elif result.same_as:
        what = '(same as %s)' % result.same_as
    else:
        what = '%.2f s' % result.wall
    where = mode if round_number is None else '%s, round %d' % (
        mode, round_number)
    sys.stderr.write('[%s] %s %s: %s\n' % (where, tool, LABELS[step], what))
    sys.stderr.flush()
