"""Running bin/obnam for the show and forget command tests."""

import os
import subprocess
import sys

OBNAM = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))), 'bin', 'obnam')


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


def snapshot(path):
    """Every file's bytes, by relative path."""
    result = {}
    for dirpath, _, files in os.walk(path):
        for name in files:
            full = os.path.join(dirpath, name)
            with open(full, 'rb') as f:
                result[os.path.relpath(full, path)] = f.read()
    return result


def disk_usage(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(dirpath, name))
    return total
