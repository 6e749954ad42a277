"""Finding objects by name pattern across generations (obnam find's engine)."""

import os

import pytest

from obnamlib.engine import finder
from tests.obnamlib import restore_helpers as rh


class NoContent:
    """A repository whose file content must not be read; counts lookups."""

    def __init__(self, repo):
        self.repo = repo
        self.lookups = 0

    def __getattr__(self, name):
        return getattr(self.repo, name)

    def get_metadata(self, gen_id, path):
        self.lookups += 1
        return self.repo.get_metadata(gen_id, path)

    def get_chunk_content(self, chunk_id):
        raise AssertionError('find read a chunk')

    def get_file_chunk_ids(self, gen_id, path):
        raise AssertionError('find read a chunk list')

    def get_file_data(self, gen_id, path):
        raise AssertionError('find read file data')


@pytest.fixture
def history(tmp_path):
    """Four generations: notes.txt is in the 1st, 2nd and 4th, not the
    3rd; (repo, gen ids, live directory as bytes)."""
    live = tmp_path / 'live'
    (live / 'docs' / 'old').mkdir(parents=True)
    (live / 'src').mkdir()
    (live / 'src' / 'main.py').write_bytes(b'print()')
    (live / 'docs' / 'old' / 'notes.txt').write_bytes(b'old notes')
    notes = live / 'notes.txt'
    gens = []
    for present in (True, True, False, True):
        if present:
            notes.write_bytes(os.urandom(100))
        elif notes.exists():
            notes.unlink()
        repo, gen = rh.back_up(tmp_path / 'repo', live)
        gens.append(gen)
    return NoContent(repo), gens, os.fsencode(str(live))


def found(repo, gens, *patterns):
    return list(finder.find(repo, gens,
                            [finder.Pattern(p) for p in patterns]))


def test_a_file_is_found_in_every_generation_that_holds_it(history):
    repo, gens, live = history
    notes = live + b'/notes.txt'
    result = found(repo, gens, live + b'/notes.txt')
    assert result == [(gens[0], notes), (gens[1], notes), (gens[3], notes)]


def test_a_basename_pattern_matches_anywhere(history):
    repo, gens, live = history
    result = found(repo, gens[2:3], b'*.txt')
    assert result == [(gens[2], live + b'/docs/old/notes.txt')]
    result = found(repo, gens[3:], b'notes.*')
    assert result == [(gens[3], live + b'/notes.txt'),
                      (gens[3], live + b'/docs/old/notes.txt')]


def test_a_basename_pattern_does_not_match_directories_above(history):
    repo, gens, live = history
    assert found(repo, gens[:1], b'old*') == [(gens[0], live + b'/docs/old')]


def test_a_path_pattern_matches_the_whole_path_and_star_crosses_slashes(
        history):
    repo, gens, live = history
    result = found(repo, gens[:1], live + b'/*.py')
    assert result == [(gens[0], live + b'/src/main.py')]
    assert found(repo, gens[:1], b'*/src/*.py') == \
        [(gens[0], live + b'/src/main.py')]


def test_a_path_pattern_not_from_the_root_matches_at_any_depth(history):
    """As written it could never match (paths are absolute): 'src/*.py'
    is '*/src/*.py', and 'old/' names the directory old anywhere."""
    repo, gens, live = history
    assert found(repo, gens[:1], b'src/*.py') == \
        [(gens[0], live + b'/src/main.py')]
    assert found(repo, gens[:1], b'old/') == [(gens[0], live + b'/docs/old')]
    assert found(repo, gens[:1], b'ocs/old') == []


def test_several_patterns_list_each_match_once_in_generation_order(history):
    repo, gens, live = history
    result = found(repo, gens[2:], b'*.py', live + b'/src/*', b'notes.txt')
    assert result == [
        (gens[2], live + b'/docs/old/notes.txt'),
        (gens[2], live + b'/src/main.py'),
        (gens[3], live + b'/notes.txt'),
        (gens[3], live + b'/docs/old/notes.txt'),
        (gens[3], live + b'/src/main.py'),
    ]


def test_nothing_matches(history):
    repo, gens, _ = history
    assert found(repo, gens, b'*.jpg') == []


def test_a_name_that_is_not_utf8(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    name = os.fsencode(str(live)) + b'/caf\xe9.txt'
    with open(name, 'wb') as f:
        f.write(b'x')
    repo = rh.new_repository(tmp_path / 'repo')
    gen = rh.store_tree(repo, str(live))
    assert found(repo, [gen], b'caf?.txt') == [(gen, name)]
    assert found(repo, [gen], b'caf\xe9*') == [(gen, name)]


def test_a_path_pattern_walks_only_below_its_literal_directory(history):
    repo, gens, live = history
    found(repo, gens[:1], live + b'/src/m*')
    below_src = repo.lookups
    repo.lookups = 0
    found(repo, gens[:1], b'm*')
    assert below_src == 2            # src, main.py
    assert repo.lookups > below_src


def test_each_object_s_metadata_is_looked_up_once(history):
    repo, gens, live = history
    everything = found(repo, gens[:1], b'*')
    assert (gens[0], live + b'/docs/old') in everything
    assert repo.lookups == len(everything)


def test_a_generation_without_the_directory_costs_no_walk(history):
    repo, gens, live = history
    assert found(repo, gens, b'/nowhere/*') == []
    assert repo.lookups == 0


@pytest.mark.parametrize('patterns, tops', [
    ([b'x'], [b'/']),
    ([b'/a/b/c*'], [b'/a/b']),
    ([b'/a/b/c'], [b'/a/b/c']),
    ([b'/a/b/'], [b'/a/b']),
    ([b'/a/*/c'], [b'/a']),
    ([b'/a*'], [b'/']),
    ([b'*/c'], [b'/']),
    ([b'a/b*'], [b'/']),
    ([b'/a/b/*', b'/a/*', b'/c/[xy]'], [b'/a', b'/c']),
    ([b'/ab/*', b'/a/*'], [b'/a', b'/ab']),
    ([b'/a/b/*', b'x'], [b'/']),
])
def test_walk_tops(patterns, tops):
    assert finder.walk_tops([finder.Pattern(p) for p in patterns]) == tops
