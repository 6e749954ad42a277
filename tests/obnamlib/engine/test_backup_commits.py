"""A backup run's commits against a real format-6 repository: removing
the run's checkpoints goes the way forget removes generations."""

from obnamlib.cli import backup_progress
from obnamlib.engine import backup_chunks, backup_commits, backup_engine
from obnamlib.repo import interface as ri

from tests.obnamlib import show_helpers as h
from tests.obnamlib.show_helpers import repo  # noqa: F401 (fixture)
from tests.obnamlib.engine.test_forgetter import index_users, unindexed_user


def start_run(repo):
    """GenerationCommits of a run of h.CLIENT, begun, with RunChunks."""
    options = backup_engine.BackupOptions(
        h.CLIENT, chunk_size=4096, checkpoint=1, now=lambda: 1500000000)
    progress = backup_progress.BackupProgress(on_error=lambda line: None)
    chunks = backup_chunks.RunChunks(repo, options, progress)
    commits = backup_commits.GenerationCommits(repo, options, progress,
                                               chunks)
    commits.begin()
    return commits


def back_up(commits, path, content):
    md, _ = h.reg(content)
    chunk_id, _ = commits.chunks.store(content)
    commits.repo.set_metadata(commits.gen, path, md)
    commits.repo.set_file_chunk_ids(commits.gen, path, [chunk_id])
    return chunk_id


def test_checkpoint_removal_keeps_a_chunk_another_client_uses_unindexed(
        repo, tmp_path):
    """A file the run backed up before a checkpoint and no longer has at
    its end: the checkpoint alone held the chunk for this client, and
    another client whose writer did not index re-used chunks uses it."""
    commits = start_run(repo)
    shared = back_up(commits, b'/gone', b'shared content')
    commits.maybe_checkpoint()
    [checkpoint] = commits.checkpoints
    repo.remove_file(commits.gen, b'/gone')
    back_up(commits, b'/stays', b'other content')
    commits.finish()
    theirs = unindexed_user(repo, shared, h.reg(b'shared content')[0])
    assert index_users(repo, shared) == [repo.get_client_id(h.CLIENT)]

    commits.remove_checkpoints()

    assert repo.get_generation_ids(h.CLIENT) == [commits.gen]
    assert repo.get_generation_key(commits.gen, ri.GEN_IS_CHECKPOINT) == 0
    assert checkpoint != commits.gen
    assert index_users(repo, shared) == [repo.get_client_id('other')]
    assert shared in repo.get_chunk_ids()
    reopened = h.open_repo(tmp_path / 'repo')
    try:
        [chunk_id] = reopened.get_file_chunk_ids(theirs, b'/f')
        assert reopened.get_chunk_content(chunk_id) == b'shared content'
    finally:
        reopened.close()


def test_checkpoint_removal_sweeps_what_a_killed_forget_left(repo):
    """Like a forget, it finds a killed forget's marker and drops the
    index entries no generation of the client uses; it takes its own
    marker away with its commit."""
    old = h.add_generation(
        repo, h.tree({b'/home/liw/old': h.reg(b'old content')}), 1000)
    [old_chunk] = repo.get_file_chunk_ids(old, b'/home/liw/old')
    repo.lock_everything()
    repo.begin_forget(h.CLIENT)
    repo.remove_generation(old)
    repo.commit_client(h.CLIENT)
    repo.unlock_everything()
    assert old_chunk in repo.find_forget_leftovers(h.CLIENT)[0]
    commits = start_run(repo)
    back_up(commits, b'/first', b'first content')
    commits.maybe_checkpoint()
    back_up(commits, b'/second', b'second content')
    commits.finish()

    commits.remove_checkpoints()

    assert repo.find_forget_leftovers(h.CLIENT) == ([], [])
    assert old_chunk not in repo.get_chunk_ids()
    assert sorted(repo.get_chunk_ids()) == sorted(
        repo.get_generation_chunk_ids(commits.gen))


def test_checkpoint_removal_reads_no_other_generation_when_none_drops(
        repo, monkeypatch):
    """Every chunk of the checkpoints is in the run's last generation:
    nothing is looked up in other clients' or older generations."""
    theirs = h.add_generation(
        repo, h.tree({b'/f': h.reg(b'their content')}), 1000, client='other')
    older = h.add_generation(
        repo, h.tree({b'/home/liw/old': h.reg(b'old content')}), 2000)
    commits = start_run(repo)
    back_up(commits, b'/first', b'first content')
    commits.maybe_checkpoint()
    [checkpoint] = commits.checkpoints
    back_up(commits, b'/second', b'second content')
    commits.finish()
    read = []
    real = repo.get_generation_chunk_ids
    monkeypatch.setattr(repo, 'get_generation_chunk_ids',
                        lambda gen_id: read.append(gen_id) or real(gen_id))

    commits.remove_checkpoints()

    assert repo.get_generation_ids(h.CLIENT) == [older, commits.gen]
    assert sorted(read) == sorted([checkpoint, commits.gen])
    assert theirs not in read and older not in read
    for gen in (theirs, older, commits.gen):
        for path in (b'/f', b'/home/liw/old', b'/first', b'/second'):
            if repo.file_exists(gen, path):
                [chunk_id] = repo.get_file_chunk_ids(gen, path)
                assert chunk_id in repo.get_chunk_ids()
