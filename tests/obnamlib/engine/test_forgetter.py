"""The forget engine against real format-6 repositories."""

import os

import pytest

from obnamlib import errors
from obnamlib.engine import forget_policy, forgetter
from obnamlib.repo import interface as ri

from tests.file_tree import disk_usage, snapshot
from tests.local_time import utc  # noqa: F401
from tests.obnamlib import show_helpers as h


@pytest.fixture
def path(tmp_path):
    return tmp_path / 'repo'


@pytest.fixture
def repo(path):
    r = h.open_repo(path, create=True)
    yield r
    r.close()


def hourly(repo, count, start=1433116800, client=h.CLIENT):
    """count generations an hour apart (ending on the hour), each with a
    file of its own and a shared one."""
    gens = []
    for i in range(count):
        files = h.tree({b'/home/liw/own': h.reg(b'own %d' % i),
                        b'/home/liw/shared': h.reg(b'shared')})
        gens.append(h.add_generation(repo, files, start + 3600 * i - 5,
                                     start + 3600 * i, client=client))
    return gens


def remove(repo, *args, **kwargs):
    repo.lock_everything()
    try:
        forgetter.remove_generations(repo, *args, **kwargs)
    except BaseException:
        repo.unlock_everything()
        raise


def test_policy_decisions_and_table(repo, utc):
    gens = hourly(repo, 5)
    decisions = forgetter.decide_by_policy(
        repo, h.CLIENT, forget_policy.parse('2h,1d'))
    assert [d.gen_id for d in decisions] == gens
    assert [d.line() for d in decisions] == [
        '%d\t2015-06-01 00:00:00 +0000\tforget' % gens[0],
        '%d\t2015-06-01 01:00:00 +0000\tforget' % gens[1],
        '%d\t2015-06-01 02:00:00 +0000\tforget' % gens[2],
        '%d\t2015-06-01 03:00:00 +0000\tkeep hourly 2/2' % gens[3],
        '%d\t2015-06-01 04:00:00 +0000\tkeep hourly 1/2, daily 1/1' % gens[4],
    ]


def test_remove_by_policy_frees_chunks_only_removed_generations_used(repo):
    gens = hourly(repo, 4)
    own_chunks = [repo.get_file_chunk_ids(g, b'/home/liw/own')[0]
                  for g in gens]
    shared = repo.get_file_chunk_ids(gens[0], b'/home/liw/shared')[0]
    decisions = forgetter.decide_by_policy(
        repo, h.CLIENT, forget_policy.parse('1h'))
    doomed = [d.gen_id for d in decisions if not d.keep]
    done = []
    remove(repo, h.CLIENT, doomed,
                                 progress=lambda i, n: done.append((i, n)))
    assert done == [(1, 3), (2, 3), (3, 3)]
    assert repo.get_generation_ids(h.CLIENT) == [gens[-1]]
    foo = repo.get_file_chunk_ids(gens[-1], b'/home/liw/foo')[0]
    assert set(repo.get_chunk_ids()) == {own_chunks[-1], shared, foo}
    assert repo.get_chunk_content(shared) == b'shared'
    assert repo.get_chunk_content(own_chunks[-1]) == b'own 3'


def test_removal_is_durable_and_unlocks(repo, path):
    gens = hourly(repo, 3)
    remove(repo, h.CLIENT, [gens[1]])
    other = h.open_repo(path)
    assert other.get_generation_ids(h.CLIENT) == [gens[0], gens[2]]
    other.lock_everything()      # nothing left locked
    other.unlock_everything()
    assert not any(name == 'lock' for _, _, files in os.walk(path)
                   for name in files)


def test_other_clients_chunks_survive(repo):
    mine = hourly(repo, 2)
    theirs = hourly(repo, 1, client='other')
    shared = repo.get_file_chunk_ids(mine[0], b'/home/liw/shared')[0]
    own0 = repo.get_file_chunk_ids(mine[0], b'/home/liw/own')[0]
    # the other client's only file "own 0" has the same content as mine[0]'s
    assert repo.get_file_chunk_ids(theirs[0], b'/home/liw/own') == [own0]
    remove(repo, h.CLIENT, mine)
    assert repo.get_generation_ids(h.CLIENT) == []
    assert repo.get_chunk_content(own0) == b'own 0'
    assert repo.get_chunk_content(shared) == b'shared'
    assert repo.get_generation_ids('other') == theirs


def test_decide_by_specs_resolves_all_first(repo, path):
    gens = hourly(repo, 3)
    before = snapshot(path)
    with pytest.raises(errors.RepositoryGenerationDoesNotExist) as info:
        forgetter.decide_by_specs(repo, h.CLIENT, ['%d' % gens[0], '999'])
    assert str(info.value) == ("R0B15DX: Cannot find requested generation "
                               "'999' for client havelock")
    assert snapshot(path) == before
    decisions, chosen, gone = forgetter.decide_by_specs(
        repo, h.CLIENT, ['latest', '%d' % gens[0], '%d' % gens[2]])
    assert (chosen, gone) == ([gens[2], gens[0]], [])
    assert [d.keep for d in decisions] == [False, True, False]
    assert decisions[1].line().endswith('\tkeep not named')


def test_a_generation_gone_already_is_skipped_and_named(repo, path):
    """The rerun of a forget killed after removing some of the named
    generations: those are reported, the rest are chosen; an id above
    any the client reached is still an error."""
    gens = hourly(repo, 3)
    remove(repo, h.CLIENT, [gens[0]])
    specs = ['%d' % gens[0], '%d' % gens[1]]
    decisions, chosen, gone = forgetter.decide_by_specs(repo, h.CLIENT, specs)
    assert (chosen, gone) == ([gens[1]], ['%d' % gens[0]])
    assert [d.gen_id for d in decisions] == gens[1:]
    named_twice = forgetter.decide_by_specs(repo, h.CLIENT, specs + specs)
    assert named_twice[1:] == (chosen, gone)    # said once, as chosen is
    beyond = '%d' % (int(gens[-1]) + 1000)
    with pytest.raises(errors.RepositoryGenerationDoesNotExist):
        forgetter.decide_by_specs(repo, h.CLIENT, [beyond])


def test_forgetting_big_data_shrinks_repository(repo, path):
    big = os.urandom(3 * 1024 * 1024)
    g1 = h.add_generation(repo, h.tree({b'/home/liw/big': h.reg(big)}), 1000)
    g2 = h.add_generation(repo, h.tree(), 2000)
    before = disk_usage(path)
    remove(repo, h.CLIENT, [g1])
    after = disk_usage(path)
    assert before - after >= len(big)
    assert repo.get_generation_ids(h.CLIENT) == [g2]
    assert repo.get_metadata(g2, b'/home/liw/foo').st_size == 6
    [chunk] = repo.get_file_chunk_ids(g2, b'/home/liw/foo')
    assert repo.get_chunk_content(chunk) == b'hello\n'


def test_failure_releases_locks(repo, path):
    gens = hourly(repo, 2)
    with pytest.raises(errors.ObnamError):
        remove(
            repo, h.CLIENT, [gens[0], gens[0]])     # second removal fails
    other = h.open_repo(path)
    other.lock_everything()
    other.unlock_everything()
    # the first removal was committed on its own
    assert other.get_generation_ids(h.CLIENT) == [gens[1]]


def test_end_time_falls_back_to_start(repo):
    [gen] = hourly(repo, 1)
    assert forgetter.end_time(repo, gen) == repo.get_generation_key(
        gen, ri.GEN_ENDED)


def test_as_of_ignores_later_generations(repo, utc):
    gens = hourly(repo, 5)
    decisions = forgetter.decide_by_policy(
        repo, h.CLIENT, forget_policy.parse('1h'),
        as_of=forgetter.end_time(repo, gens[2]))
    assert [d.reasons for d in decisions] == [
        [], [], ['hourly 1/1'], ['after --pretend-time'],
        ['after --pretend-time']]


def unindexed_user(repo, chunk_id, metadata):
    """A generation of client 'other' whose file /f uses chunk_id, written
    the way some writers did: without an index entry for 'other'."""
    repo.lock_client_list()
    repo.add_client('other')
    repo.commit_client_list()
    repo.lock_client('other')
    gen = repo.create_generation('other', now=5000)
    repo.set_metadata(gen, b'/f', metadata)
    repo.set_file_chunk_ids(gen, b'/f', [chunk_id])
    repo.commit_client('other', now=5001)
    return gen


def test_chunk_another_client_uses_without_index_entry_survives(repo):
    """Writers that did not index re-used chunks for their client leave
    only the first user's index entry; forget must still not delete it."""
    [mine] = hourly(repo, 1)
    shared = repo.get_file_chunk_ids(mine, b'/home/liw/shared')[0]
    unindexed_user(repo, shared, h.reg(b'shared')[0])
    remove(repo, h.CLIENT, [mine])
    assert repo.get_chunk_content(shared) == b'shared'
    assert shared in repo.get_chunk_ids()


def index_users(repo, chunk_id):
    _, triples = repo.get_chunk_index_entries()
    return sorted(client_id for _, cid, client_id in triples
                  if cid == chunk_id)


def test_shared_chunk_goes_when_its_last_user_forgets_it(repo):
    [mine] = hourly(repo, 1)
    [theirs] = hourly(repo, 1, client='other')
    shared = repo.get_file_chunk_ids(mine, b'/home/liw/shared')[0]
    ids = sorted([repo.get_client_id(h.CLIENT), repo.get_client_id('other')])
    assert index_users(repo, shared) == ids
    remove(repo, h.CLIENT, [mine])
    assert index_users(repo, shared) == [repo.get_client_id('other')]
    assert shared in repo.get_chunk_ids()
    remove(repo, 'other', [theirs])
    assert index_users(repo, shared) == []
    assert repo.get_chunk_ids() == []


def test_missing_index_entry_of_another_user_is_recorded(repo):
    [mine] = hourly(repo, 1)
    shared = repo.get_file_chunk_ids(mine, b'/home/liw/shared')[0]
    theirs = unindexed_user(repo, shared, h.reg(b'shared' * 50)[0])
    remove(repo, h.CLIENT, [mine])
    assert index_users(repo, shared) == [repo.get_client_id('other')]
    remove(repo, 'other', [theirs])
    assert repo.get_chunk_ids() == []


def test_forgetting_frees_btree_nodes(repo, path):
    """Nodes only the removed generations referenced are deleted."""
    gens = []
    for i in range(4):
        files = h.tree({b'/home/liw/g%d-%04d' % (i, n): h.reg(b'')
                        for n in range(400)})
        gens.append(h.add_generation(repo, files, 1000 * (i + 1)))
    client_dir = path / str(repo.get_client_id(h.CLIENT))

    def nodes():
        return sum(len(files)
                   for _, _, files in os.walk(client_dir / 'nodes'))
    before_nodes, before_bytes = nodes(), disk_usage(client_dir)
    remove(repo, h.CLIENT, gens[:3])
    assert nodes() < before_nodes
    assert disk_usage(client_dir) < before_bytes * 0.6
    assert len(repo.get_file_children(gens[3], b'/home/liw')) == 401
