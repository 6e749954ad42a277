"""SIGKILL a backup at random points: earlier generations never suffer,
and the next run completes and reads back exactly (cli.md §6.1, §6.7,
format-6.md §5.5, §10.2)."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

import obnamlib.repo.interface as ri
from tests.obnamlib.backup_helpers import (
    generation_manifest, live_manifest, open_repository)
from tests import paths

SOURCE_ROOT = paths.CHECKOUT

RUNNER = r'''
import os, sys
sys.path.insert(0, %(root)r)
from tests.obnamlib.backup_helpers import open_repository, live_fs
from obnamlib.engine import backup_engine
from obnamlib.cli import backup_progress
repo, storage = open_repository(sys.argv[1])
options = backup_engine.BackupOptions(
    'crashy', chunk_size=4096, checkpoint=65536)
engine = backup_engine.BackupEngine(
    repo, live_fs(), options, backup_progress.BackupProgress(),
    repo_io=storage)
engine.run([os.fsencode(sys.argv[2])])
print('done')
''' % {'root': SOURCE_ROOT}


def run_backup(repo_dir, live, kill_after=None):
    """Run a backup in a child; SIGKILL it after kill_after seconds.
    Returns True if it completed."""
    child = subprocess.Popen(
        [sys.executable, '-c', RUNNER, str(repo_dir), str(live)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        child.wait(timeout=kill_after if kill_after is not None else 300)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGKILL)
        assert kill_after is not None, 'a backup took over 5 minutes'
    out, err = child.communicate()
    if child.returncode == 0:
        assert out == b'done\n'
        return True
    assert child.returncode == -signal.SIGKILL, err.decode()
    return False


def mutate(live, rng, round_number):
    """Some new and changed files so every run has work to do."""
    for i in rng.sample(range(40), 6):
        (live / ('f%02d' % i)).write_bytes(rng.randbytes(rng.randrange(
            1, 30000)))
    (live / ('new%03d' % round_number)).write_bytes(rng.randbytes(9000))


def completed_generations(repo):
    return [g for g in repo.get_generation_ids('crashy')
            if repo.get_generation_key(g, ri.GEN_IS_CHECKPOINT) == 0]


def read_everything(repo, gen, root):
    """Read every entry and chunk of a (checkpoint) generation."""
    pending = [root]
    while pending:
        path = pending.pop()
        md = repo.get_metadata(gen, path)
        if md.isdir():
            pending.extend(os.path.join(path, n)
                           for n in repo.get_file_children(gen, path))
        elif md.isreg():
            for chunk_id in repo.get_file_chunk_ids(gen, path):
                repo.get_chunk_content(chunk_id)


@pytest.mark.slow
def test_sigkill_at_random_points_never_harms_committed_generations(
        tmp_path):
    rng = random.Random(4711)
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'sub').mkdir()
    for i in range(40):
        (live / ('f%02d' % i)).write_bytes(rng.randbytes(rng.randrange(
            0, 20000)))
    repo_dir = tmp_path / 'repo'
    started = time.monotonic()
    assert run_backup(repo_dir, live)
    full_run = time.monotonic() - started
    expected = {}           # completed generation -> manifest
    repo, _ = open_repository(str(repo_dir))
    expected[completed_generations(repo)[-1]] = live_manifest(live)

    kills = 0
    round_number = 0
    while kills < 50:
        round_number += 1
        mutate(live, rng, round_number)
        manifest = live_manifest(live)
        if run_backup(repo_dir, live, kill_after=rng.uniform(
                0.0, full_run * 1.2)):
            repo, _ = open_repository(str(repo_dir))
            expected[completed_generations(repo)[-1]] = manifest
            continue
        kills += 1
        repo, _ = open_repository(str(repo_dir))
        repo.force_locks()
        repo, _ = open_repository(str(repo_dir))
        gens = repo.get_generation_ids('crashy')
        assert set(expected) <= set(gens)
        # The first and the newest completed generations every time (all
        # of them at the end); the newest checkpoint must be readable.
        for gen in sorted(expected)[:1] + sorted(expected)[-2:]:
            assert generation_manifest(repo, gen, live) == expected[gen]
        checkpoints = [g for g in gens if g not in expected]
        if checkpoints:
            read_everything(repo, checkpoints[-1], os.fsencode(live))

    assert run_backup(repo_dir, live)
    repo, _ = open_repository(str(repo_dir))
    final = completed_generations(repo)[-1]
    assert generation_manifest(repo, final, live) == live_manifest(live)
    for gen, gen_manifest in expected.items():
        assert generation_manifest(repo, gen, live) == gen_manifest
