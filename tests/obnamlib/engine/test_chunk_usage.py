"""What forget frees: the prediction (forget --pretend, space) against
what a real forget then removes, measured on the repository's chunks/
directory (the sum of its files' sizes before and after)."""

import os
import shutil

import pytest

from obnamlib.engine import chunk_usage, forget_policy, forgetter, space
from obnamlib.repo import factory as repo_factory

from tests.file_tree import disk_usage
from tests.obnamlib import show_helpers as h
from tests.obnamlib.engine.test_forget_crash import DyingFS, Killed
from tests.obnamlib.repo.fmt_6 import test_leftover_chunks as leftovers

START = 1433116800


def chunk_bytes(path):
    return disk_usage(os.path.join(str(path), 'chunks'))


def files_of_a(i):
    """Generation i of client a: a file of its own, one shared with the
    next or previous generation, one in every generation, and (i < 2)
    one that client b holds too."""
    files = {b'/own': h.reg(b'own %d ' % i * (50 + 40 * i)),
             b'/pair': h.reg(b'pair %d ' % (i // 2) * 300),
             b'/common': h.reg(b'common ' * 200)}
    if i < 2:
        files[b'/with-b'] = h.reg(b'b shares %d ' % i * 400)
    return h.tree(files)


@pytest.fixture
def path(tmp_path):
    """Client a: four generations; client b: one, sharing a chunk with
    a's first generation."""
    path = tmp_path / 'repo'
    repo = h.open_repo(path, create=True)
    for i in range(4):
        h.add_generation(repo, files_of_a(i), START + 3600 * i, client='a')
    h.add_generation(repo, h.tree({b'/x': h.reg(b'b shares 0 ' * 400),
                                   b'/y': h.reg(b'b alone ' * 100)}),
                     START, client='b')
    repo.close()
    return path


def gens_of(path, client='a'):
    return h.open_repo(path).get_generation_ids(client)


def predict(path, client, gen_ids):
    """forget --pretend's numbers (no locks)."""
    repo = h.open_repo(path)
    try:
        return chunk_usage.predict_freed(repo, client, gen_ids)
    finally:
        repo.close()


def forget(path, client, gen_ids):
    """A real forget; returns (what it says it freed, chunks/ shrinkage)."""
    before = chunk_bytes(path)
    repo = h.open_repo(path)
    freed = chunk_usage.Freed(repo)
    repo.lock_everything()
    forgetter.remove_generations(repo, client, gen_ids, freed=freed)
    repo.close()
    return freed, before - chunk_bytes(path)


def assert_prediction_holds(path, client, gen_ids):
    predicted = predict(path, client, gen_ids)
    freed, shrunk = forget(path, client, gen_ids)
    assert predicted.total == shrunk == freed.total
    assert predicted.by_generation == freed.by_generation
    assert predicted.leftovers == freed.leftovers
    return predicted


def size_of_file_chunks(path, gen_id, filename):
    repo = h.open_repo(path)
    chunk_ids = repo.get_file_chunk_ids(gen_id, filename)
    return sum(repo.get_chunk_sizes(chunk_ids).values())


@pytest.mark.parametrize('order', [[0], [1], [0, 1], [1, 0], [3, 1],
                                   [0, 1, 2, 3], [3, 2, 1, 0]])
def test_pretend_total_is_what_forget_frees(path, order):
    gens = gens_of(path)
    predicted = assert_prediction_holds(path, 'a', [gens[i] for i in order])
    assert predicted.total > 0
    assert h.open_repo(path).get_generation_ids('b')     # b untouched


def test_shared_chunks_are_not_counted(path):
    """Forgetting a's first generation frees its own file only: the pair
    file is in the second generation, the common one in all, and client
    b holds the with-b file."""
    gens = gens_of(path)
    own = size_of_file_chunks(path, gens[0], b'/own')
    predicted = assert_prediction_holds(path, 'a', gens[:1])
    assert predicted.by_generation == {int(gens[0]): own}
    b_gen = gens_of(path, 'b')[0]
    repo = h.open_repo(path)
    [chunk] = repo.get_file_chunk_ids(b_gen, b'/x')
    assert repo.get_chunk_content(chunk) == b'b shares 0 ' * 400


def test_the_last_user_of_a_pair_frees_it(path):
    gens = gens_of(path)
    pair = size_of_file_chunks(path, gens[0], b'/pair')
    own = [size_of_file_chunks(path, g, b'/own') for g in gens[:2]]
    with_b_1 = size_of_file_chunks(path, gens[1], b'/with-b')
    predicted = assert_prediction_holds(path, 'a', gens[:2])
    assert predicted.by_generation == {
        int(gens[0]): own[0], int(gens[1]): own[1] + pair + with_b_1}


def test_an_index_entry_of_another_client_keeps_a_chunk(path):
    """Client b is recorded as a user of a's first own file although no
    generation of b uses it (what an old writer may leave): forget keeps
    the file, and says so beforehand."""
    gens = gens_of(path)
    repo = h.open_repo(path)
    [chunk] = repo.get_file_chunk_ids(gens[0], b'/own')
    repo.lock_chunk_indexes()
    repo.put_chunk_into_indexes(chunk, None, 'b')
    repo.commit_chunk_indexes()
    predicted = assert_prediction_holds(path, 'a', gens[:1])
    assert predicted.total == 0
    assert h.open_repo(path).has_chunk(chunk)


def test_a_chunk_another_client_uses_without_an_index_entry_is_kept(path):
    """Client b's generation uses a chunk the indexes record only for a
    (a writer that did not index re-used chunks): forget records b first
    and keeps the chunk, and says so beforehand."""
    gens = gens_of(path)
    repo = h.open_repo(path)
    [chunk] = repo.get_file_chunk_ids(gens[0], b'/with-b')
    repo.lock_chunk_indexes()
    repo.remove_chunk_from_indexes(chunk, 'b')
    repo.commit_chunk_indexes()
    assert h.open_repo(path).get_chunk_index_users([chunk]) == {chunk: {'a'}}
    own = size_of_file_chunks(path, gens[0], b'/own')
    predicted = assert_prediction_holds(path, 'a', gens[:1])
    assert predicted.total == own
    assert h.open_repo(path).has_chunk(chunk)


def test_space_unique_bytes_are_what_forgetting_it_alone_frees(
        path, tmp_path):
    repo = h.open_repo(path)
    report = space.measure(repo, 'a')
    repo.close()
    assert [g.unique_bytes > 0 for g in report.generations] == [True] * 4
    for gen in report.generations:
        copy = shutil.copytree(path, tmp_path / ('copy%d' % gen.gen_id))
        _, shrunk = forget(copy, 'a', [gen.gen_id])
        assert gen.unique_bytes == shrunk


def test_space_totals(path):
    repo = h.open_repo(path)
    report = space.measure(repo, 'a')
    sizes = repo.get_chunk_sizes()
    assert report.chunk_bytes == chunk_bytes(path) == sum(sizes.values())
    assert report.chunk_count == len(sizes) == len(repo.get_chunk_ids())
    assert (report.generation_count, report.client_count) == (5, 2)
    first = report.generations[0]
    assert first.stored_bytes == sum(
        size_of_file_chunks(path, first.gen_id, name)
        for name in (b'/home/liw/foo', b'/own', b'/pair', b'/common',
                     b'/with-b'))


def test_leftovers_of_a_killed_backup_count(tmp_path):
    path = tmp_path / 'repo'
    leftovers.new_repository_with_client_b(path)
    repo = h.open_repo(path)
    h.add_generation(repo, h.tree({b'/f': h.reg(b'kept')}), START,
                     client=leftovers.CLIENT)
    repo.close()
    leftovers.killed_run(path, [b'lost one', b'lost two'])
    [gen] = gens_of(path, leftovers.CLIENT)
    predicted = assert_prediction_holds(path, leftovers.CLIENT, [gen])
    assert predicted.leftovers > 0


def template_for_kills(path):
    """Three generations of a and one of b, as in the fixture."""
    repo = h.open_repo(path, create=True)
    for i in range(3):
        h.add_generation(repo, files_of_a(i), START + 3600 * i, client='a')
    h.add_generation(repo, h.tree({b'/x': h.reg(b'b shares 0 ' * 400)}),
                     START, client='b')
    repo.close()


def killed_forget(path, limit):
    """forget --keep=1h of client a, killed at the limit-th change; the
    locks are forced open after it.  Whether the kill came."""
    plain = h.open_repo(path)
    fs = DyingFS(plain.fs, limit)
    repo = repo_factory.open_repository(url=str(path), repo_fs=fs,
                                        lock_timeout=0)
    try:
        repo.lock_everything()
        decisions = forgetter.decide_by_policy(
            repo, 'a', forget_policy.parse('1h'))
        forgetter.remove_generations(
            repo, 'a', [d.gen_id for d in decisions if not d.keep])
    except Killed:
        h.open_repo(path).force_locks()
        return True
    repo.close()
    return False


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_after_a_killed_forget_the_next_one_frees_what_it_said(tmp_path):
    """Killed at every change it makes, a forget leaves index entries and
    chunk files behind; the rerun's prediction counts them."""
    template = tmp_path / 'template'
    template_for_kills(template)
    limit = 1
    with_leftovers = 0
    while True:
        path = shutil.copytree(template, tmp_path / ('k%d' % limit))
        if not killed_forget(path, limit):
            break
        gens = gens_of(path)
        predicted = assert_prediction_holds(path, 'a', gens[:-1])
        with_leftovers += predicted.leftovers > 0
        shutil.rmtree(path)
        limit += 1
    assert limit > 10 and with_leftovers > 0
