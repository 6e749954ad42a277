"""Repositories over sftp:// against a real OpenSSH sshd on 127.0.0.1.

The Repository conformance suite runs on a format-6 repository reached
through SftpFS; the command-line tests back up to and pull from sftp://.
"""

import pytest

from obnamlib import repo_factory
from obnamlib.vfs_sftp import SftpFS
from tests.obnamlib.repo_interface_conformance import RepositoryConformance
from tests.obnamlib.test_vfs_sftp import settings_for, shared_sshd


@pytest.fixture(autouse=True)
def isolated_ssh_user(tmp_path, monkeypatch):
    """No agent, no ~/.ssh of the person running the tests."""
    monkeypatch.delenv('SSH_AUTH_SOCK', raising=False)
    home = tmp_path / 'home'
    home.mkdir(exist_ok=True)
    monkeypatch.setenv('HOME', str(home))


class TestFormat6OverSftp(RepositoryConformance):
    """Two Repository objects on one path are two SSH connections."""

    @pytest.fixture(autouse=True)
    def _close_connections(self):
        self.opened = []
        yield
        for fs in self.opened:
            fs.close()

    def open_repo(self, path):
        sshd = shared_sshd()
        url = sshd.url(str(path))
        settings = settings_for(sshd, 'paramiko')
        fs = SftpFS(url, settings)
        self.opened.append(fs)
        return repo_factory.open_repository(
            settings, vfs=fs, url=url, create=True, node_size=4096,
            lock_timeout=0)
