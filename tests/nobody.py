"""Running this test's Python as the ordinary user `nobody`, for tests of
what a user without privileges meets (EACCES, setuid bits dropped)."""

import functools
import os
import subprocess
import sys

NOBODY = 65534
SETPRIV = '/usr/bin/setpriv'


def as_nobody(argv):
    """argv run as nobody with no supplementary groups (needs root)."""
    return [SETPRIV, '--reuid=%d' % NOBODY, '--regid=%d' % NOBODY,
            '--clear-groups'] + list(argv)


@functools.lru_cache(maxsize=None)
def why_python_cannot_run_as_nobody():
    """None if this Python can be started as nobody, else the reason: not
    root, no setpriv, or an interpreter nobody may not read (pyenv's and
    its venvs live below /root)."""
    if os.geteuid() != 0:
        return 'needs root to become an ordinary user'
    if not os.path.exists(SETPRIV):
        return 'needs %s to become an ordinary user' % SETPRIV
    probe = subprocess.run(as_nobody([sys.executable, '-c', 'pass']),
                           stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if probe.returncode != 0:
        return 'nobody cannot run %s: %s' % (
            sys.executable, probe.stderr.decode(errors='replace').strip())
    return None
