"""ClientSessions: the generation asked for last is kept, and forgotten
whenever the client's generations may change."""

import pytest

from obnamlib import errors
from obnamlib.repo.fmt_6 import client_forest
from obnamlib.repo.fmt_6.gen_id import GenId
from tests.obnamlib.repo_interface_conformance import dir_md, file_md
from tests.obnamlib.restore_helpers import new_repository


def backed_up(repo, client, *paths):
    """A committed generation of client with a directory / and paths."""
    repo.lock_client(client)
    gen = repo.create_generation(client)
    repo.set_metadata(gen, b'/', dir_md())
    for path in paths:
        repo.set_metadata(gen, path, file_md())
    repo.commit_client(client)
    return repo.get_generation_ids(client)[-1]


def count_lookups(monkeypatch):
    """The generation numbers ClientForest.generation is asked for."""
    asked = []
    real = client_forest.ClientForest.generation

    def generation(self, gen_number):
        asked.append(gen_number)
        return real(self, gen_number)
    monkeypatch.setattr(client_forest.ClientForest, 'generation', generation)
    return asked


def test_a_generation_is_looked_up_once_for_many_calls(tmp_path,
                                                       monkeypatch):
    repo = new_repository(tmp_path / 'repo', 'c')
    gen = backed_up(repo, 'c', b'/a', b'/b')
    asked = count_lookups(monkeypatch)
    for path in (b'/', b'/a', b'/b'):
        assert repo.file_exists(gen, path)
        assert repo.get_metadata(gen, path) is not None
    assert repo.get_file_children(gen, b'/') == [b'a', b'b']
    assert asked == [int(gen)]


def test_a_plain_number_is_looked_up_each_time(tmp_path, monkeypatch):
    repo = new_repository(tmp_path / 'repo', 'c')
    gen = backed_up(repo, 'c', b'/a')
    asked = count_lookups(monkeypatch)
    repo.get_metadata(int(gen), b'/')
    repo.get_metadata(int(gen), b'/a')
    assert asked == [int(gen)] * 2


def test_a_removed_generation_is_gone_at_once(tmp_path):
    repo = new_repository(tmp_path / 'repo', 'c')
    old = backed_up(repo, 'c', b'/a')
    assert repo.file_exists(old, b'/a')
    repo.lock_client('c')
    assert repo.file_exists(old, b'/a')
    repo.remove_generation(old)
    with pytest.raises(errors.RepositoryGenerationDoesNotExist):
        repo.get_metadata(old, b'/')
    repo.commit_client('c')
    with pytest.raises(errors.RepositoryGenerationDoesNotExist):
        repo.file_exists(old, b'/a')


def test_a_new_generation_and_a_commit_are_seen(tmp_path):
    repo = new_repository(tmp_path / 'repo', 'c')
    first = backed_up(repo, 'c', b'/a')
    assert not repo.file_exists(first, b'/b')
    second = backed_up(repo, 'c', b'/a', b'/b')
    assert repo.file_exists(second, b'/b')
    assert not repo.file_exists(first, b'/b')
    repo.lock_client('c')
    repo.set_metadata(second, b'/c', file_md())
    assert repo.file_exists(second, b'/c')
    repo.unlock_client('c')
    assert not repo.file_exists(second, b'/c')


def test_the_kept_generation_keeps_its_client_the_last_used(tmp_path):
    """A plain number means the client used last, also when the last
    call was answered from what was kept."""
    repo = new_repository(tmp_path / 'repo', 'c')
    repo.lock_client_list()
    repo.add_client('d')
    repo.commit_client_list()
    of_c = backed_up(repo, 'c', b'/only-in-c')
    of_d = backed_up(repo, 'd', b'/only-in-d')
    assert int(of_c) == int(of_d)
    assert repo.file_exists(of_c, b'/only-in-c')
    repo.get_generation_ids('d')            # d is used last
    assert repo.file_exists(int(of_c), b'/only-in-d')
    assert repo.file_exists(of_c, b'/only-in-c')    # kept: c used last
    assert repo.file_exists(int(of_c), b'/only-in-c')
