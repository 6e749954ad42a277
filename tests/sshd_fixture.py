"""The `sshd` fixture: a throwaway OpenSSH server on 127.0.0.1 of the
test module's own (tests.sshd_server).  Use it with

    from tests.sshd_fixture import sshd  # noqa: F401
"""

import pytest

from tests.sshd_server import SshdServer


@pytest.fixture(scope='module')
def sshd():
    with SshdServer() as server:
        yield server
