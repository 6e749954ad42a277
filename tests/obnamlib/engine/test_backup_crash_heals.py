"""Hourly backups heal after a crash: `obnam backup` SIGKILLed at random
points, then the next plain `obnam backup` (no force-lock, and
--lock-timeout=0 so any lock it had to wait for fails it) succeeds, and
every generation completed so far restores exactly.  The healing backup
reuses the chunks the killed one uploaded and removes the rest (#27):
after it no chunk file is unused, and fsck is clean at the end."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

import obnamlib.repo.interface as ri
from obnamlib.repo.fmt_6.chunk_journal import JOURNAL_NAME
from obnamlib.repo.fmt_6.chunk_store import parse_chunk_name
from tests.gpg_fixture import gpg_home  # noqa: F401
from tests.obnamlib.backup_helpers import (
    generation_manifest, live_manifest, open_repository)
from tests import paths

OBNAM = paths.OBNAM
KILLS = 30


def obnam_argv(tmp_path, *args, client='crashy', lock_timeout=0):
    return [sys.executable, OBNAM, '--no-default-configs', '--quiet',
            '--client-name=%s' % client, '--lock-timeout=%d' % lock_timeout,
            '--repository=%s' % (tmp_path / 'repo'),
            '--log=%s' % (tmp_path / ('obnam-%s.log' % client))] + \
        [str(a) for a in args]


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
    before that leave nothing to heal.  The quickest of three: one slowed
    by a busy machine would put every kill after the end of a backup."""
    times = []
    for _ in range(3):
        started = time.monotonic()
        result = subprocess.run(obnam_argv(tmp_path, 'genids'),
                                capture_output=True)
        assert result.returncode == 0, result.stderr
        times.append(time.monotonic() - started)
    return min(times)


def mutate(live, rng, round_number):
    for i in rng.sample(range(30), 5):
        (live / ('f%02d' % i)).write_bytes(rng.randbytes(rng.randrange(
            1, 200000)))
    (live / ('new%03d' % round_number)).write_bytes(rng.randbytes(50000))


def lock_files(repo_dir):
    return sorted(os.path.relpath(os.path.join(d, n), repo_dir)
                  for d, _, names in os.walk(repo_dir)
                  for n in names if n == 'lock')


def chunk_files(repo_dir):
    """{chunk file name: size}."""
    return {name: os.path.getsize(os.path.join(d, name))
            for d, _, names in os.walk(os.path.join(repo_dir, 'chunks'))
            for name in names if parse_chunk_name(name) is not None}


def chunks_in_use(repo_dir):
    repo, _ = open_repository(str(repo_dir))
    used = set()
    for gen in repo.get_generation_ids('crashy'):
        used |= {'%x' % c for c in repo.get_generation_chunk_ids(gen)}
    return used


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
    left_bytes = reused_bytes = 0
    repo_dir = tmp_path / 'repo'
    while kills < KILLS:
        round_number += 1
        assert round_number <= 4 * KILLS, 'the backups ended before kills'
        mutate(live, rng, round_number)
        manifest = live_manifest(live)
        before = chunk_files(repo_dir)
        # From about when the repository is open to the last backup's
        # end (a start-up as long as a whole backup must not put every
        # kill after it).
        code, err, taken = backup(tmp_path, live, kill_after=rng.uniform(
            0.9 * min(startup, last_run), max(startup, last_run)))
        if code is None:
            kills += 1
            left = lock_files(repo_dir)
            left_locks += bool(left)
            uploaded = chunk_files(repo_dir)
            # --lock-timeout=0: a lock it had to wait for would fail it, so
            # success means it did not wait (no timed assertion needed).
            code, err, taken = backup(tmp_path, live)
            assert code == 0, (left, err.decode())
            if set(left) - {'lock'}:    # the client list is not needed
                assert b'Removed stale lock ' in err, (left, err)
            killed_run = set(uploaded) - set(before)
            in_use = chunks_in_use(repo_dir)
            left_bytes += sum(uploaded[n] for n in killed_run)
            reused_bytes += sum(uploaded[n] for n in killed_run & in_use)
            # Nothing the killed run uploaded stays unused.
            assert set(chunk_files(repo_dir)) == in_use
        assert code == 0, err
        last_run = taken
        expected[newest_completed(tmp_path / 'repo')] = manifest
        assert lock_files(tmp_path / 'repo') in ([], ['lock'])

    assert left_locks >= KILLS // 4, left_locks
    # Late kills left chunks; the next runs used them instead of
    # uploading their content again.
    assert reused_bytes > 0, left_bytes
    result = subprocess.run(obnam_argv(tmp_path, 'fsck'), capture_output=True)
    assert result.returncode == 0, result.stdout + result.stderr
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


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_clients_next_backup_beside_another_clients_backup(tmp_path):
    """Client a is killed after uploading some chunks; then a's next backup
    (which reuses and removes what the killed run left) and b's backup of
    the same content run at once.  Both complete, each generation holds
    the live tree, and fsck is clean."""
    rng = random.Random(27)
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(24):
        (live / ('f%02d' % i)).write_bytes(rng.randbytes(300000))
    repo_dir = tmp_path / 'repo'
    child = subprocess.Popen(
        obnam_argv(tmp_path, '--checkpoint=1M', 'backup', live, client='a'),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while child.poll() is None and len(chunk_files(repo_dir)) < 8:
        time.sleep(0.01)
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL, 'the backup ended too soon'
    left = set(chunk_files(repo_dir))
    assert left
    both = [subprocess.Popen(
        obnam_argv(tmp_path, 'backup', live, client=client, lock_timeout=60),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for client in ('a', 'b')]
    for child in both:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
    repo, _ = open_repository(str(repo_dir))
    for client in ('a', 'b'):
        gen = repo.get_generation_ids(client)[-1]
        assert generation_manifest(repo, gen, live) == live_manifest(live)
    result = subprocess.run(obnam_argv(tmp_path, 'fsck', client='a'),
                            capture_output=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_killed_encrypted_backup_rerun_reuses_its_chunks(tmp_path, gpg_home):
    """The journal is encrypted like the client's trees; the rerun uploads
    only what the killed run had not, and leaves fsck clean."""
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'big').write_bytes(random.Random(5).randbytes(24 * 1024 * 1024))
    encrypted = ['--encrypt-with', gpg_home.keys['Alice'], '--gnupghome',
                 gpg_home.path]
    repo_dir = tmp_path / 'repo'
    child = subprocess.Popen(
        obnam_argv(tmp_path, *encrypted, 'backup', live),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True)
    while child.poll() is None and len(chunk_files(repo_dir)) < 10:
        time.sleep(0.01)
    # The whole process group, as a power cut would: a sealing helper
    # left alive would go on creating the chunks queued for it.
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL, 'the backup ended too soon'
    journals = [os.path.join(d, n) for d, _, names in os.walk(repo_dir)
                for n in names if n == JOURNAL_NAME]
    assert len(journals) == 1
    with open(journals[0], 'rb') as f:
        assert b'range' not in f.read()
    left = chunk_files(repo_dir)
    result = subprocess.run(obnam_argv(tmp_path, *encrypted, 'backup', live),
                            capture_output=True)
    assert result.returncode == 0, result.stderr
    after = chunk_files(repo_dir)
    # Every chunk the kill left whole is used, not uploaded again; one
    # being written at the kill (files are written in place) goes.
    assert len(after) == 24
    assert len(set(left) - set(after)) <= 1
    assert not any(os.path.exists(path) for path in journals)
    result = subprocess.run(obnam_argv(tmp_path, *encrypted, 'fsck'),
                            capture_output=True)
    assert result.returncode == 0, result.stdout + result.stderr
