"""Format 6 passes the Repository conformance suite on a local directory."""

from obnamlib.fmt_6.repo_fmt_6 import RepositoryFormat6
from tests.obnamlib.fmt_6.storage import LockingLocalFS
from tests.obnamlib.repo_interface_conformance import RepositoryConformance


class TestFormat6Conformance(RepositoryConformance):

    def open_repo(self, path):
        return RepositoryFormat6(LockingLocalFS(str(path)), node_size=4096,
                                 lock_timeout=0)
