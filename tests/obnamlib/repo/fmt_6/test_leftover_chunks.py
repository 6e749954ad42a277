"""What a run killed without cleanup left: its chunk journal, the next
run's reuse and removal of its chunks (chunk_journal, leftover_chunks)."""

import os

import pytest

from obnamlib.repo import factory as repo_factory
from obnamlib.repo.fmt_6 import chunk_journal, forget_marker
from obnamlib.repo.fmt_6.chunk_journal import ChunkJournal
from obnamlib.repo.fmt_6.chunk_store import idpath
from tests.obnamlib.repo_interface_conformance import file_md
from tests.obnamlib.restore_helpers import new_repository

CLIENT = 'killed'


def open_repo(path):
    return repo_factory.open_repository(url=str(path), lock_timeout=0)


class Starts:
    """An rng whose randint gives the listed chunk id starts in turn."""

    def __init__(self, *starts):
        self.starts = list(starts)

    def randint(self, lo, hi):
        return self.starts.pop(0)


def killed_run(path, contents, commit_client=False, starts=()):
    """A backup of CLIENT that stores contents as new chunks (maybe
    committing the client, not the indexes) and dies without any cleanup:
    its locks are forced open afterwards.  Returns the chunk ids."""
    repo = open_repo(path)
    if starts:
        repo.chunks.rng = Starts(*starts)
    repo.lock_client(CLIENT)
    gen = repo.create_generation(CLIENT)
    ids = [repo.put_chunk_content(data) for data in contents]
    if commit_client:
        repo.set_metadata(gen, b'/f', file_md())
        repo.set_file_chunk_ids(gen, b'/f', ids)
        repo.commit_client(CLIENT)
    repo.chunks.close()         # the files are written, as by a kill later
    open_repo(path).force_locks()
    return ids


def new_repository_with_client_b(path):
    repo = new_repository(path, CLIENT)
    repo.lock_client_list()
    repo.add_client('b')
    repo.commit_client_list()
    repo.close()


def journal_path(repo, client=CLIENT):
    return '%d/%s' % (repo.get_client_id(client), chunk_journal.JOURNAL_NAME)


def journal_of(path, client=CLIENT):
    repo = open_repo(path)
    return ChunkJournal(repo.fs, str(repo.get_client_id(client)))


def next_run(path, files):
    """The client's next backup: {path: [contents]} stored with dedup as
    the engine does; returns (repo, chunk ids per path, reused count)."""
    repo = open_repo(path)
    repo.lock_client(CLIENT)
    reused = repo.reuse_leftover_chunks(CLIENT)
    gen = repo.create_generation(CLIENT)
    stored = {}
    for name, contents in files.items():
        ids = []
        for data in contents:
            found = repo.find_chunk_ids_by_content(data)
            ids.append(found[0] if found else repo.put_chunk_content(data))
        repo.set_metadata(gen, name, file_md())
        repo.set_file_chunk_ids(gen, name, ids)
        stored[name] = ids
    repo.lock_chunk_indexes()
    for name, ids in stored.items():
        for chunk_id, data in zip(ids, files[name]):
            if repo.chunks.wrote(chunk_id):
                repo.put_chunk_into_indexes(chunk_id, data, CLIENT)
    removed = repo.remove_leftover_chunks(CLIENT)
    repo.commit_client(CLIENT)
    repo.commit_chunk_indexes()
    return repo, stored, reused, removed


def index_entries(repo):
    chunklist, chunksums = repo.get_chunk_index_entries()
    return ({chunk_id for chunk_id, _ in chunklist},
            {chunk_id for _, chunk_id, _ in chunksums})


def test_the_journal_names_the_ids_before_their_files_exist(tmp_path):
    new_repository(tmp_path, CLIENT).close()
    ids = killed_run(tmp_path, [b'a', b'b'], starts=[0x70000])
    assert ids == [0x70000, 0x70001]
    assert journal_of(tmp_path).leftover_ranges() == [
        (0x70000, 0x70000 + chunk_journal.RANGE_SIZE - 1)]


def test_the_next_run_reuses_what_it_needs_and_removes_the_rest(tmp_path):
    new_repository(tmp_path, CLIENT).close()
    a, b, c = killed_run(tmp_path, [b'a', b'b', b'c'])
    repo, stored, reused, removed = next_run(tmp_path, {b'/f': [b'a', b'c'],
                                                        b'/g': [b'new']})
    assert (reused, removed) == (3, 1)
    assert stored[b'/f'] == [a, c]             # not uploaded again
    repo = open_repo(tmp_path)
    new = stored[b'/g'][0]
    assert sorted(repo.get_chunk_ids()) == sorted([a, c, new])
    assert index_entries(repo) == ({a, c, new}, {a, c, new})
    assert not os.path.exists(os.path.join(
        str(tmp_path), str(repo.get_client_id(CLIENT)),
        chunk_journal.JOURNAL_NAME))


def next_run_keeps_and_indexes(tmp_path, ids):
    """The next run reuses and removes nothing; the committed chunks ids
    (holding b'x', b'y') stay and are in both indexes."""
    _, _, reused, removed = next_run(tmp_path, {b'/g': [b'z']})
    assert (reused, removed) == (0, 0)
    repo = open_repo(tmp_path)
    listed, summed = index_entries(repo)
    assert set(ids) <= listed and set(ids) <= summed
    assert [repo.get_chunk_content(i) for i in ids] == [b'x', b'y']


def test_chunks_a_committed_generation_uses_get_their_index_entries(
        tmp_path):
    """A kill between the client's commit and the indexes' commit."""
    new_repository(tmp_path, CLIENT).close()
    ids = killed_run(tmp_path, [b'x', b'y'], commit_client=True)
    assert index_entries(open_repo(tmp_path)) == (set(), set())
    next_run_keeps_and_indexes(tmp_path, ids)


def test_a_journal_claiming_a_newer_generation_keeps_committed_chunks(
        tmp_path):
    """A damaged journal whose newest generation is beyond the client's:
    the chunks a committed generation uses stay and get their entries."""
    new_repository(tmp_path, CLIENT).close()
    ids = killed_run(tmp_path, [b'x', b'y'], commit_client=True)
    repo = open_repo(tmp_path)
    path = journal_path(repo)
    record = repo.fs.read_file(path).split(b'\n', 1)[1]
    repo.fs.write_file(path, b'newest 999999999\n' + record)
    next_run_keeps_and_indexes(tmp_path, ids)


def test_another_clients_running_backup_keeps_its_chunks(tmp_path):
    """Client B stores the same content as A's killed run, uncommitted,
    while A's next run reuses and removes A's leftovers; B then commits."""
    new_repository_with_client_b(tmp_path)
    a_ids = killed_run(tmp_path, [b'same', b'only a'])
    other = open_repo(tmp_path)
    other.lock_client('b')
    gen = other.create_generation('b')
    b_id = other.put_chunk_content(b'same')
    other.set_metadata(gen, b'/b', file_md())
    other.set_file_chunk_ids(gen, b'/b', [b_id])
    other.chunks.flush()
    _, stored, _, removed = next_run(tmp_path, {b'/f': [b'other']})
    assert removed == 2
    assert other.has_chunk(b_id)
    other.lock_chunk_indexes()
    other.put_chunk_into_indexes(b_id, b'same', 'b')
    other.commit_client('b')
    other.commit_chunk_indexes()
    repo = open_repo(tmp_path)
    assert sorted(repo.get_chunk_ids()) == sorted([b_id] + stored[b'/f'])
    assert not set(a_ids) & set(repo.get_chunk_ids())
    gen = repo.get_generation_ids('b')[-1]
    assert repo.get_chunk_content(repo.get_file_chunk_ids(gen, b'/b')[0]) \
        == b'same'


def test_a_range_ends_before_a_chunk_someone_else_wrote(tmp_path):
    new_repository(tmp_path, CLIENT).close()
    repo = open_repo(tmp_path)
    repo.fs.makedirs(idpath(0x90002).rsplit('/', 1)[0])
    repo.fs.create_file(idpath(0x90002), b'not ours')
    killed_run(tmp_path, [b'1', b'2', b'3'], starts=[0x90000, 0x50000])
    ranges = journal_of(tmp_path).leftover_ranges()
    assert ranges[0] == (0x90000, 0x90001)
    assert ranges[1][0] == 0x50000
    assert all(not first <= 0x90002 <= last for first, last in ranges)


def test_a_torn_journal_is_ignored_and_replaced(tmp_path):
    new_repository(tmp_path, CLIENT).close()
    repo = open_repo(tmp_path)
    path = journal_path(repo)
    repo.fs.write_file(path, b'newest 3\nrange 10 ')
    assert journal_of(tmp_path).leftover_ranges() == []
    next_run(tmp_path, {b'/f': [b'x']})
    assert not repo.fs.exists(path)


def test_the_record_reads_back_as_written():
    ranges = [(1, 0x1000), (0xfffffffffffff000, 0xfffffffffffffffe)]
    text = chunk_journal.format_record(42, ranges)
    assert chunk_journal.parse(text) == (ranges, 42)


def test_a_forget_marker_is_placed_once(tmp_path):
    repo = new_repository(tmp_path, CLIENT)
    client_id = repo.get_client_id(CLIENT)
    assert forget_marker.place(repo.fs, client_id) is False
    assert forget_marker.place(repo.fs, client_id) is True
    forget_marker.take_away(repo.fs, client_id)
    assert not repo.fs.exists(forget_marker.marker_path(client_id))


def test_a_chunk_the_kill_cut_short_is_not_reused_but_removed(tmp_path):
    new_repository(tmp_path, CLIENT).close()
    whole, cut = killed_run(tmp_path, [b'whole', b'cut short'])
    with open(os.path.join(str(tmp_path), idpath(cut)), 'r+b') as f:
        f.truncate(0)
    repo, stored, reused, removed = next_run(
        tmp_path, {b'/f': [b'whole', b'cut short']})
    assert (reused, removed) == (1, 1)
    assert stored[b'/f'][0] == whole and stored[b'/f'][1] != cut
    repo = open_repo(tmp_path)
    assert [repo.get_chunk_content(c) for c in stored[b'/f']] == \
        [b'whole', b'cut short']
    assert cut not in repo.get_chunk_ids()


def committed_chunk_of_b(tmp_path):
    """Client b's chunk b'of b', indexed, in a committed generation."""
    new_repository_with_client_b(tmp_path)
    other = open_repo(tmp_path)
    other.lock_client('b')
    other.lock_chunk_indexes()
    b_id = other.put_chunk_content(b'of b')
    other.put_chunk_into_indexes(b_id, b'of b', 'b')
    other.set_file_chunk_ids(other.create_generation('b'), b'/b', [b_id])
    other.commit_client('b')
    other.commit_chunk_indexes()
    return b_id


def test_a_journal_naming_every_id_removes_only_its_clients_leftovers(
        tmp_path):
    """A damaged or hostile journal whose range covers every chunk id:
    the next run finishes (no listing of 2^51 directories), keeps the
    chunk another client's indexes name, and removes the leftovers."""
    b_id = committed_chunk_of_b(tmp_path)
    a_ids = killed_run(tmp_path, [b'left', b'over'])
    repo = open_repo(tmp_path)
    path = journal_path(repo)
    repo.fs.write_file(path, b'newest 0\nrange 0 ffffffffffffffff\nend\n')
    _, stored, _, removed = next_run(tmp_path, {b'/f': [b'new']})
    assert removed == 2
    repo = open_repo(tmp_path)
    assert sorted(repo.get_chunk_ids()) == sorted([b_id] + stored[b'/f'])
    assert repo.get_chunk_content(b_id) == b'of b'
    assert not set(a_ids) & set(repo.get_chunk_ids())
    assert not repo.fs.exists(path)


def test_a_journal_range_over_another_clients_half_indexed_chunk_keeps_it(
        tmp_path, monkeypatch):
    """Another client was killed between its two index commits: its
    chunk has a chunklist entry and no chunksums user, but its committed
    generation uses it.  A (damaged) journal of ours that covers it must
    not remove it."""
    from obnamlib.repo.fmt_6 import chunk_indexes
    b_id = committed_chunk_of_b(tmp_path)
    users = chunk_indexes.ChunkIndexes.users
    monkeypatch.setattr(
        chunk_indexes.ChunkIndexes, 'users',
        lambda self, checksum, chunk_id:
        [] if chunk_id == b_id else users(self, checksum, chunk_id))
    killed_run(tmp_path, [b'left', b'over'])
    repo = open_repo(tmp_path)
    repo.fs.write_file(journal_path(repo),
                       b'newest 0\nrange 0 ffffffffffffffff\nend\n')
    _, _, _, removed = next_run(tmp_path, {b'/f': [b'new']})
    assert removed == 2
    assert open_repo(tmp_path).get_chunk_content(b_id) == b'of b'


def test_a_record_with_no_range_of_chunk_ids_is_unreadable():
    for line in (b'range -5 10', b'range 10 5', b'range 0 1ffffffffffffffff',
                 b'range 1', b'span 1 2'):
        with pytest.raises(ValueError):
            chunk_journal.parse(b'newest 3\n' + line + b'\nend\n')


def test_a_record_without_its_newest_generation_is_unreadable():
    for first in (b'newest ', b'newest x', b'newest 3 4'):
        with pytest.raises(ValueError):
            chunk_journal.parse(first + b'\nrange 1 2\nend\n')


def test_a_journal_that_is_no_filtered_file_is_ignored_and_removed(
        tmp_path):
    """Garbage on disk (no filter tag): the next run goes on, leaving
    the killed run's chunks for fsck, and replaces the record."""
    new_repository(tmp_path, CLIENT).close()
    a_ids = killed_run(tmp_path, [b'left'])
    repo = open_repo(tmp_path)
    path = journal_path(repo)
    with open(os.path.join(str(tmp_path), path), 'wb') as f:
        f.write(b'\xff\xfe garbage \x00')
    assert journal_of(tmp_path).leftover_ranges() == []
    _, stored, reused, removed = next_run(tmp_path, {b'/f': [b'left']})
    assert (reused, removed) == (0, 0)
    assert stored[b'/f'] != a_ids
    assert not repo.fs.exists(path)
