"""Fmt6Checker's promise to fsck's walk: larch's exceptions leave it as
RepositoryCorrupt (the walk knows no format and never catches larch's)."""

import pytest

from obnamlib import errors, larch
from obnamlib.repo import fsck_checker
from tests.obnamlib import restore_helpers


def damaged(*args):
    raise larch.BadMetadata('chunklist', 'garbled')


@pytest.fixture
def checker(tmp_path):
    repo = restore_helpers.new_repository(tmp_path / 'repo')
    return fsck_checker.storage_checker_for(repo, fix=False)


def test_a_clean_repository_passes_the_storage_checks(checker):
    assert checker.check_format() == []
    assert checker.check_keys() == []
    assert checker.check_forests() == []
    assert checker.check_chunk_indexes({restore_helpers.CLIENT: set()}) == []


def test_larch_damage_leaves_the_checker_as_repository_corrupt(checker,
                                                               monkeypatch):
    monkeypatch.setattr(checker.repo.chunks, 'ids', damaged)
    with pytest.raises(errors.RepositoryCorrupt) as raised:
        checker.chunk_ids_on_disk()
    assert 'forest chunklist: bad metadata: garbled' in str(raised.value)
    assert isinstance(raised.value.__cause__, larch.Error)


def test_larch_damage_in_the_index_checks_is_repository_corrupt(checker,
                                                                 monkeypatch):
    monkeypatch.setattr(checker, 'chunk_ids_on_disk', lambda: {1})
    monkeypatch.setattr(checker, 'expected_checksum', damaged)
    # The streams break off at once: every chunk is looked up.
    monkeypatch.setattr(checker.repo.indexes, '_readers', damaged)
    with pytest.raises(errors.RepositoryCorrupt):
        checker.check_chunk_indexes({restore_helpers.CLIENT: {1}})


def test_an_unknown_format_has_no_checker():
    class Format7:
        format_name = '7'
        location = '/r'
    with pytest.raises(errors.UnknownRepositoryFormat):
        fsck_checker.storage_checker_for(Format7(), fix=False)
