"""Running bin/obnam for the show and forget command tests."""

import os
import subprocess
import sys

from tests.file_tree import disk_usage, snapshot  # noqa: F401 (re-export)
from tests import paths

OBNAM = paths.OBNAM


def run(repo, *args, client='havelock', tz='Europe/Helsinki', config=None,
        tmp_path=None):
    argv = [sys.executable, OBNAM, '--no-default-configs',
            '--client-name=%s' % client, '--lock-timeout=0']
    if config is not None:
        path = tmp_path / 'obnam.conf'
        path.write_text(config)
        argv += ['--config', str(path)]
    if repo is not None:
        argv.append('--repository=%s' % repo)
    argv += [str(a) for a in args]
    return subprocess.run(argv, capture_output=True,
                          env=dict(os.environ, LC_ALL='C.UTF-8', TZ=tz))
