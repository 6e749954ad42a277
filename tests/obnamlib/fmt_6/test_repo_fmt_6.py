"""Format 6 passes the Repository conformance suite on a local directory."""

from obnamlib import repo_factory
from tests.obnamlib.repo_interface_conformance import RepositoryConformance


class TestFormat6Conformance(RepositoryConformance):

    def open_repo(self, path):
        return repo_factory.open_repository(url=str(path), create=True,
                                            node_size=4096, lock_timeout=0)
