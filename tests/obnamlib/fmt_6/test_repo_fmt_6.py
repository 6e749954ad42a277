"""Format 6 passes the Repository conformance suite on a local directory."""

import pytest

from obnamlib import repo_factory
from tests.gpg_fixture import gpg_home  # noqa: F401
from tests.obnamlib.repo_interface_conformance import RepositoryConformance


class TestFormat6Conformance(RepositoryConformance):

    def open_repo(self, path):
        return repo_factory.open_repository(url=str(path), create=True,
                                            node_size=4096, lock_timeout=0)


def test_damaged_node_is_reported_as_corruption(tmp_path):
    import os
    import pytest
    from obnamlib import errors
    from tests.obnamlib.repo_interface_conformance import dir_md
    url = str(tmp_path / 'repo')
    repo = repo_factory.open_repository(url=url, create=True, lock_timeout=0)
    repo.lock_client_list()
    repo.add_client('c')
    repo.commit_client_list()
    repo.lock_client('c')
    gen = repo.create_generation('c')
    repo.set_metadata(gen, b'/', dir_md())
    repo.commit_client('c')
    client_dir = os.path.join(url, str(repo.get_client_id('c')))
    for dirpath, _, names in os.walk(os.path.join(client_dir, 'nodes')):
        for name in names:
            with open(os.path.join(dirpath, name), 'r+b') as f:
                f.truncate(10)
    reader = repo_factory.open_repository(url=url)
    with pytest.raises(errors.RepositoryCorrupt) as e:
        reader.get_generation_ids('c')
    assert e.value.code == errors.RepositoryCorrupt.code


def test_locking_and_committing_without_changes_writes_nothing(tmp_path):
    from tests.obnamlib.repo_interface_conformance import dir_md
    from tests.obnamlib.test_repo_factory import _snapshot
    url = str(tmp_path / 'repo')
    repo = repo_factory.open_repository(url=url, create=True, lock_timeout=0)
    repo.lock_client_list()
    repo.add_client('c')
    repo.commit_client_list()
    repo.lock_client('c')
    gen = repo.create_generation('c')
    repo.set_metadata(gen, b'/', dir_md())
    repo.lock_chunk_indexes()
    repo.put_chunk_into_indexes(repo.put_chunk_content(b'x'), b'x', 'c')
    repo.commit_client('c')
    repo.commit_chunk_indexes()
    before = _snapshot(url)
    repo.lock_everything()
    repo.commit_everything()
    repo.lock_client('c')
    repo.commit_client('c')
    assert _snapshot(url) == before


class TestEncryptedFormat6Conformance(RepositoryConformance):
    """The same behaviour with compression and encryption underneath."""

    @pytest.fixture(autouse=True)
    def _keys(self, gpg_home):
        self.gpg_home = gpg_home

    def open_repo(self, path):
        return repo_factory.open_repository(
            url=str(path), create=True, node_size=4096, lock_timeout=0,
            compress_with='deflate', encrypt_with=self.gpg_home.keys['Alice'],
            gnupghome=self.gpg_home.path)
