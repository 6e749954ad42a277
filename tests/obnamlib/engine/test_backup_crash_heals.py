"""Hourly backups heal after a crash: `obnam backup` SIGKILLed at random
points, then the next plain `obnam backup` (no force-lock, and
--lock-timeout=0 so any lock it had to wait for fails it) succeeds, and
every generation completed so far restores exactly."""

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

OBNAM = paths.OBNAM
KILLS = 30


def obnam_argv(tmp_path, *args):
    return [sys.executable, OBNAM, '--no-default-configs', '--quiet',
            '--client-name=crashy', '--lock-timeout=0',
            '--repository=%s' % (tmp_path / 'repo'),
            '--log=%s' % (tmp_path / 'obnam.log')] + [str(a) for a in args]


def backup(tmp_path, live, kill_after=None):
    """Run obnam backup; SIGKILL it after kill_after seconds.  (exit code
    or None if killed, stderr, seconds taken)."""
    started = time.monotonic()
    child = subprocess.Popen(
        obnam_argv(tmp_path, '--checkpoint=256K', 'backup', live),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        child.wait(timeout=kill_after if kill_after is not None else 120)
    except subprocess.TimeoutExpired:
        assert kill_after is not None, 'a backup took over two minutes'
        child.send_signal(signal.SIGKILL)
    _, err = child.communicate()
    taken = time.monotonic() - started
    if child.returncode == -signal.SIGKILL:
        return None, err, taken
    return child.returncode, err, taken


def starting_time(tmp_path):
    """How long obnam takes to start and open the repository: kills
    before that leave nothing to heal."""
    started = time.monotonic()
    result = subprocess.run(obnam_argv(tmp_path, 'genids'),
                            capture_output=True)
    assert result.returncode == 0, result.stderr
    return time.monotonic() - started


def mutate(live, rng, round_number):
    for i in rng.sample(range(30), 5):
        (live / ('f%02d' % i)).write_bytes(rng.randbytes(rng.randrange(
            1, 200000)))
    (live / ('new%03d' % round_number)).write_bytes(rng.randbytes(50000))


def lock_files(repo_dir):
    return sorted(os.path.relpath(os.path.join(d, n), repo_dir)
                  for d, _, names in os.walk(repo_dir)
                  for n in names if n == 'lock')


def newest_completed(repo_dir):
    repo, _ = open_repository(str(repo_dir))
    gens = [g for g in repo.get_generation_ids('crashy')
            if repo.get_generation_key(g, ri.GEN_IS_CHECKPOINT) == 0]
    return gens[-1]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_next_backup_after_sigkill_heals_without_force_lock(tmp_path):
    rng = random.Random(2711)
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(30):
        (live / ('f%02d' % i)).write_bytes(rng.randbytes(rng.randrange(
            0, 200000)))
    code, err, last_run = backup(tmp_path, live)
    assert code == 0, err
    expected = {newest_completed(tmp_path / 'repo'): live_manifest(live)}
    startup = starting_time(tmp_path)

    kills = left_locks = 0
    round_number = 0
    while kills < KILLS:
        round_number += 1
        assert round_number <= 4 * KILLS, 'the backups ended before kills'
        mutate(live, rng, round_number)
        manifest = live_manifest(live)
        code, err, taken = backup(tmp_path, live, kill_after=rng.uniform(
            startup * 0.9, max(startup, last_run)))
        if code is None:
            kills += 1
            left = lock_files(tmp_path / 'repo')
            left_locks += bool(left)
            # --lock-timeout=0: a lock it had to wait for would fail it, so
            # success means it did not wait (no timed assertion needed).
            code, err, taken = backup(tmp_path, live)
            assert code == 0, (left, err.decode())
            if set(left) - {'lock'}:    # the client list is not needed
                assert b'Removed stale lock ' in err, (left, err)
        assert code == 0, err
        last_run = taken
        expected[newest_completed(tmp_path / 'repo')] = manifest
        assert lock_files(tmp_path / 'repo') in ([], ['lock'])

    assert left_locks >= KILLS // 4, left_locks
    repo, _ = open_repository(str(tmp_path / 'repo'))
    for gen, gen_manifest in sorted(expected.items()):
        assert generation_manifest(repo, gen, live) == gen_manifest
    for gen in (min(expected), max(expected)):
        target = tmp_path / ('restored-%d' % gen)
        result = subprocess.run(
            obnam_argv(tmp_path, 'restore', '--generation=%d' % gen,
                       '--to', target), capture_output=True)
        assert result.returncode == 0, result.stderr
        restored = str(target) + str(live)
        assert {path[len(os.fsencode(restored)):]: facts[2:5]
                for path, facts in live_manifest(restored).items()
                if facts[2] is not None} == \
            {path[len(os.fsencode(str(live))):]: facts[2:5]
             for path, facts in expected[gen].items()
             if facts[2] is not None}
