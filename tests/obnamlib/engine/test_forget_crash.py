"""A forget killed at any moment leaves every kept generation whole.

The storage is wrapped so that the N-th change to the repository kills
the "process": that change and everything after it never happen, and no
clean-up code can write either (as with SIGKILL or a power cut).  For
every N up to the number of changes a whole forget makes, a fresh copy of
the same repository is forgotten and killed, the locks are forced open
(as `force-lock` would), and every generation the policy keeps must still
be listed and readable in full.
"""

import os
import shutil
import tempfile

import pytest

from obnamlib.engine import forget_policy, forgetter
from obnamlib.repo import factory as repo_factory

from tests.obnamlib import show_helpers as h

MUTATORS = ('write_file', 'create_file', 'write_raw', 'remove', 'rmdir',
            'rename', 'makedirs', 'lock', 'unlock')


class Killed(BaseException):
    """The process died here."""


class DyingFS:
    """Forwards to a StorageFS until the limit-th change, then dies."""

    def __init__(self, fs, limit):
        self._fs = fs
        self._limit = limit
        self.changes = 0
        self.dead = False

    def __getattr__(self, name):
        target = getattr(self._fs, name)
        if not callable(target):
            return target

        def call(*args, **kwargs):
            if self.dead:
                raise Killed()
            if name in MUTATORS:
                self.changes += 1
                if self.changes == self._limit:
                    self.dead = True
                    raise Killed()
            return target(*args, **kwargs)
        return call


@pytest.fixture(scope='module')
def scratch():
    """Many small repository copies: in memory where we can (fast)."""
    base = '/dev/shm' if os.access('/dev/shm', os.W_OK) else None
    path = tempfile.mkdtemp(prefix='obnam-forget-crash-', dir=base)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope='module')
def template(scratch):
    """Three generations an hour apart; files of their own and shared.
    The policy keeps the newest, so the forget makes two removals: every
    step of a removal and of the change from one removal to the next."""
    path = os.path.join(scratch, 'template')
    repo = h.open_repo(path, create=True)
    for i in range(3):
        files = h.tree({b'/home/liw/own': h.reg(b'own %d' % i * 100),
                        b'/home/liw/shared': h.reg(b'shared' * 50),
                        b'/home/liw/d%d' % (i % 2): h.dir_(),
                        b'/home/liw/d%d/x' % (i % 2): h.reg(b'x%d' % i)})
        h.add_generation(repo, files, 1433116800 + 3600 * i - 5,
                         1433116800 + 3600 * i)
    repo.close()
    return path


def forget_with_limit(path, limit):
    plain = h.open_repo(path)
    fs = DyingFS(plain.fs, limit)
    repo = repo_factory.open_repository(url=str(path), repo_fs=fs,
                                        lock_timeout=0)
    policy = forget_policy.parse('1h')
    try:
        repo.lock_everything()
        decisions = forgetter.decide_by_policy(repo, h.CLIENT, policy)
        doomed = [d.gen_id for d in decisions if not d.keep]
        forgetter.remove_generations(repo, h.CLIENT, doomed)
    except Killed:
        return fs.changes, True
    repo.close()
    return fs.changes, False


def contents_of_generation(repo, gen):
    """{path: (metadata, content)} of everything in the generation."""
    from obnamlib.engine import listing
    result = {}
    for path, md in listing.walk(repo, gen, b'/'):
        data = b''.join(repo.get_chunk_content(c)
                        for c in repo.get_file_chunk_ids(gen, path))
        result[path] = (md, data)
    return result


@pytest.mark.slow
def test_forget_killed_anywhere_keeps_kept_generations(template, scratch):
    reference = h.open_repo(template)
    all_gens = reference.get_generation_ids(h.CLIENT)
    kept = [int(g) for g in all_gens[-1:]]
    expected = {int(g): contents_of_generation(reference, g)
                for g in all_gens[-1:]}

    total, killed = forget_with_limit(
        shutil.copytree(template, os.path.join(scratch, 'full')), 0)
    assert not killed and total > 10
    partly_done = 0
    for limit in range(1, total + 1):
        path = shutil.copytree(template, os.path.join(scratch, 'k%d' % limit))
        _, killed = forget_with_limit(path, limit)
        assert killed
        repo = h.open_repo(path)
        repo.force_locks()
        repo = h.open_repo(path)
        gens = {int(g): g for g in repo.get_generation_ids(h.CLIENT)}
        assert set(kept) <= set(gens), limit
        partly_done += len(gens) == 2
        for number in kept:
            assert contents_of_generation(repo, gens[number]) == \
                expected[number], limit
        shutil.rmtree(path)
    assert partly_done > 0      # some kills came between the two removals


def unused_chunks(repo):
    """(chunk files, index entries) of chunks no generation uses."""
    used = set()
    for gen in repo.get_generation_ids(h.CLIENT):
        used |= repo.get_generation_chunk_ids(gen)
    chunklist, chunksums = repo.get_chunk_index_entries()
    indexed = {c for c, _ in chunklist} | {c for _, c, _ in chunksums}
    return set(repo.get_chunk_ids()) - used, indexed - used


@pytest.mark.slow
def test_forget_killed_anywhere_then_rerun_leaves_no_unused_chunk(
        template, scratch):
    """The rerun (its marker tells it an earlier forget was killed) frees
    what the killed one had dropped from the generations only."""
    total, _ = forget_with_limit(
        shutil.copytree(template, os.path.join(scratch, 'rerun-full')), 0)
    left_before_rerun = 0
    for limit in range(1, total + 1):
        path = shutil.copytree(template,
                               os.path.join(scratch, 'rerun%d' % limit))
        forget_with_limit(path, limit)
        h.open_repo(path).force_locks()
        left_before_rerun += unused_chunks(h.open_repo(path)) != (set(), set())
        _, killed = forget_with_limit(path, None)
        assert not killed
        assert unused_chunks(h.open_repo(path)) == (set(), set()), limit
        shutil.rmtree(path)
    assert left_before_rerun > 0     # some kills left something to free
