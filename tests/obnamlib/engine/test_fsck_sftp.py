"""fsck over SFTP reads chunk files and B-tree nodes many per round trip,
and still names each damaged or missing chunk's file.  Against a real
OpenSSH sshd on 127.0.0.1; the round trips are what SftpFS counts."""

import os

import pytest

from obnamlib.larch.idpath import node_path
from obnamlib.engine import fsck_content, fsck_engine
from obnamlib.repo import fsck_checker
from obnamlib.repo import factory as repo_factory
from obnamlib.repo.fmt_6.chunk_store import idpath
from obnamlib.vfs.sftp.fs import SftpFS
from tests.obnamlib.restore_helpers import CLIENT, back_up
from tests.obnamlib.vfs.test_sftp import (  # noqa: F401 (a fixture)
    isolated_ssh_user, settings_for, shared_connection, shared_sshd)

SMALL_FILES = 128



def open_over_sftp(path, **settings):
    """(Repository on `path` through SftpFS, that SftpFS)."""
    sshd = shared_sshd()
    fs = SftpFS(sshd.url(str(path)), settings_for(sshd, 'openssh'),
                connection=shared_connection())
    repo = repo_factory.open_repository(vfs=fs, url=fs.url, lock_timeout=0,
                                        **settings)
    return repo, fs


def make_live(root):
    """SMALL_FILES one-chunk files and a compressible one of several
    chunks."""
    os.makedirs(root)
    for i in range(SMALL_FILES):
        with open(os.path.join(root, 'f%03d' % i), 'wb') as f:
            f.write(b'small file %d\n' % i * (i + 1))
    with open(os.path.join(root, 'big'), 'wb') as f:
        f.write(b''.join(b'line %05d\n' % i for i in range(2048)))


def chunk_files(repo_path):
    return sum(len(files) for _, _, files in
               os.walk(os.path.join(str(repo_path), 'chunks')))


def fsck_over_sftp(repo_path, ignore_chunks=False, **settings):
    """(problems, stats, round trips) of a full fsck."""
    repo, fs = open_over_sftp(repo_path, **settings)
    before = fs.round_trips
    fsck = fsck_engine.Fsck(repo, fsck_engine.FsckOptions(
        ignore_chunks=ignore_chunks))
    problems = fsck.run()
    return problems, fsck.stats, fs.round_trips - before


def round_trips_for_chunks(repo_path, **settings):
    """What reading the chunks added to a full fsck: (problems, stats,
    round trips beyond those of an fsck that reads no chunk)."""
    _, _, without = fsck_over_sftp(repo_path, ignore_chunks=True, **settings)
    problems, stats, with_chunks = fsck_over_sftp(repo_path, **settings)
    return problems, stats, with_chunks - without


def chunk_of(repo, gen, path, index=0):
    return repo.get_file_chunk_ids(gen, os.fsencode(path))[index]


def test_fsck_over_sftp_reads_many_chunks_per_round_trip(tmp_path):
    live = str(tmp_path / 'live')
    make_live(live)
    back_up(tmp_path / 'repo', live)
    chunks = chunk_files(tmp_path / 'repo')
    assert chunks > SMALL_FILES + 2
    problems, stats, round_trips = round_trips_for_chunks(tmp_path / 'repo')
    assert problems == []
    assert (stats.chunks, stats.chunk_reads) == (chunks, chunks)
    # One by one: two round trips per chunk file (266).  In windows of up
    # to 256 chunks: three per window.
    assert round_trips <= 6, round_trips      # 2 when measured


def test_fsck_over_sftp_names_the_file_of_a_deleted_chunk(tmp_path):
    live = str(tmp_path / 'live')
    make_live(live)
    repo, gen = back_up(tmp_path / 'repo', live)
    victim = chunk_of(repo, gen, live + '/f005')
    chunks = chunk_files(tmp_path / 'repo')
    os.remove(os.path.join(str(tmp_path / 'repo'), idpath(victim)))
    problems, stats, round_trips = round_trips_for_chunks(tmp_path / 'repo')
    where = '%s:%s: %s' % (CLIENT, repo.make_generation_spec(gen), live)
    assert problems == [
        '%s/f005: chunk %x does not exist' % (where, victim),
        'chunklist: chunk %x has no chunk file' % victim,
        'chunksums: chunk %x has no chunk file' % victim,
    ]
    assert stats.chunk_reads == chunks - 1
    assert round_trips <= 6, round_trips


def test_a_chunk_that_fails_its_batch_is_named_and_the_rest_read_once(
        tmp_path):
    """Deflate on: a garbled chunk file cannot be unwrapped, so the batch
    holding it fails and its chunks are read one by one."""
    live = str(tmp_path / 'live')
    make_live(live)
    repo, gen = back_up(tmp_path / 'repo', live, compress_with='deflate')
    victim = chunk_of(repo, gen, live + '/big', index=2)
    chunks = chunk_files(tmp_path / 'repo')
    big_chunks = len(repo.get_file_chunk_ids(gen, os.fsencode(live + '/big')))
    victim_file = os.path.join(str(tmp_path / 'repo'), idpath(victim))
    with open(victim_file, 'r+b') as f:
        f.seek(-8, os.SEEK_END)
        f.write(b'garbage!')
    problems, stats, _ = fsck_over_sftp(tmp_path / 'repo',
                                           compress_with='deflate')
    where = '%s:%s: %s' % (CLIENT, repo.make_generation_spec(gen), live)
    assert len(problems) == 1, problems
    assert problems[0].startswith('%s/big: chunk %x is corrupted: '
                                  % (where, victim)), problems
    # The big file's chunks after the damaged one are not needed.
    assert stats.chunk_reads == chunks - (big_chunks - 2)


def test_larch_check_reads_b_tree_nodes_in_batches(tmp_path):
    """Small nodes: the client's tree has dozens of them."""
    live = str(tmp_path / 'live')
    make_live(live)
    back_up(tmp_path / 'repo', live, node_size=4096)
    repo, fs = open_over_sftp(tmp_path / 'repo', node_size=4096)
    checker = fsck_checker.storage_checker_for(repo, fix=False)
    client_dir = str(repo.get_client_id(CLIENT))
    nodes = sum(len(files) for _, _, files in os.walk(
        os.path.join(str(tmp_path / 'repo'), client_dir, 'nodes')))
    before, opens = fs.round_trips, fs.requests['OPEN']
    assert checker.check_forests(shared=False) == []
    assert fs.requests['OPEN'] - opens >= nodes
    # One node at a time: 85 when measured (26 nodes); 33 in batches.
    assert fs.round_trips - before <= 40, (fs.round_trips - before, nodes)


def test_larch_check_over_sftp_names_a_missing_node(tmp_path):
    """The batch holding it fails; each node is then read alone."""
    live = str(tmp_path / 'live')
    make_live(live)
    _, gen = back_up(tmp_path / 'repo', live, node_size=4096)
    repo, _ = open_over_sftp(tmp_path / 'repo', node_size=4096)
    client_id = repo.get_client_id(CLIENT)
    forest = repo._open_client(CLIENT).forest
    root = forest.node_store.get(forest.trees[-1].root_id)
    assert len(root.children) > 2
    victim = root.children[1]
    os.remove(os.path.join(str(tmp_path / 'repo'), str(client_id),
                           node_path(victim)))
    repo, fs = open_over_sftp(tmp_path / 'repo', node_size=4096)
    checker = fsck_checker.storage_checker_for(repo, fix=False)
    assert checker.check_forests(shared=False) == [
        'client %s (forest %s): node %d (generations %s): node %d is '
        'missing' % (CLIENT, client_id, victim,
                     repo.make_generation_spec(gen), victim)]


# --- windows of the read-ahead ---------------------------------------------

def queued(size, chunk_ids):
    return fsck_content._QueuedFile('f', size, None, list(chunk_ids), b'', 0)


def test_read_ahead_windows_name_each_chunk_once_in_first_use_order():
    files = [queued(30, [5, 3, 9]), queued(10, [3]), queued(20, [9, 1])]
    ahead = fsck_content._ReadAhead(files)
    assert ahead.window_from(5) == [5, 3, 9, 1]
    assert ahead.window_from(3) == []       # hinted already
    assert ahead.window_from(1) == []
    assert ahead.window_from(7) == []       # not in the batch


def test_read_ahead_starts_where_the_reads_are_after_skipped_files():
    """Files verified in an earlier generation are skipped unread."""
    ahead = fsck_content._ReadAhead([queued(30, [5, 3, 9]),
                                    queued(20, [9, 1])])
    assert ahead.window_from(9) == [9, 1]
    assert ahead.window_from(5) == []


def test_read_ahead_windows_end_at_the_chunk_and_byte_limits(monkeypatch):
    monkeypatch.setattr(fsck_content, 'READ_AHEAD_CHUNKS', 3)
    monkeypatch.setattr(fsck_content, 'READ_AHEAD_BYTES', 100)
    ahead = fsck_content._ReadAhead([
        queued(8, range(4)),            # 2 bytes each
        queued(300, [10, 11]),          # 150 each: over the limit alone
        queued(40, [20, 21, 22])])
    assert ahead.window_from(0) == [0, 1, 2]
    assert ahead.window_from(3) == [3]
    assert ahead.window_from(10) == [10]
    assert ahead.window_from(11) == [11]
    assert ahead.window_from(20, skip={21}) == [20, 22]


def test_the_next_window_is_hinted_half_way_through_the_last(monkeypatch):
    monkeypatch.setattr(fsck_content, 'READ_AHEAD_CHUNKS', 4)
    ahead = fsck_content._ReadAhead([queued(100, range(10))])
    assert ahead.window_from(0) == [0, 1, 2, 3]
    assert ahead.window_from(1) == []
    assert ahead.window_from(2) == [4, 5, 6, 7]     # half-way: the next
    assert ahead.window_from(3) == []
    assert ahead.window_from(5) == []
    assert ahead.window_from(6) == [8, 9]
    assert ahead.window_from(8) == []
    assert ahead.window_from(9) == []               # nothing left
