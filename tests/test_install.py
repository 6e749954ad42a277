"""`pip install .` into a fresh venv gives a working `obnam` command, with
the newest releases of obnam's dependencies from the package index: on the
oldest Python obnam supports and on the newest ones found (pyenv's; none is
ever downloaded).  Then a backup and restore round trip with the installed
command, run outside the checkout so that only the venv's obnamlib is seen.

Slow (a venv and a download of cryptography, paramiko and PyYAML each), so
it skips, saying why, where there is no such Python or no package index.
"""

import glob
import os
import shutil
import subprocess
import time

import pytest

from obnamlib.version import __version__
from tests.file_tree import facts

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME_LIMIT = 300

pytestmark = [pytest.mark.slow, pytest.mark.timeout(TIME_LIMIT)]


def pyenv_python(version):
    """The newest pyenv interpreter of `version` (e.g. '3.10'), or None."""
    root = os.environ.get('PYENV_ROOT', os.path.expanduser('~/.pyenv'))
    found = glob.glob(os.path.join(root, 'versions', version + '.*', 'bin',
                                   'python3'))
    found = [p for p in found if os.access(p, os.X_OK)]
    found.sort(key=lambda p: [int(x) for x in
                              p.split('/')[-3].split('.') if x.isdigit()])
    return found[-1] if found else None


class Deadline:
    """The test's time limit, shared out among its subprocesses."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        left = self.end - time.monotonic()
        if left <= 0:
            pytest.fail('over the time limit of %d s' % TIME_LIMIT)
        return left


def run(argv, deadline, env, cwd, check=True):
    p = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=deadline.left())
    if check and p.returncode != 0:
        pytest.fail('%s exited %d:\n%s%s' % (
            ' '.join(map(str, argv)), p.returncode,
            p.stdout.decode(errors='replace'),
            p.stderr.decode(errors='replace')))
    return p


def source_copy(target):
    """What pip needs to build obnam, away from the checkout's build
    products (build/, *.egg-info) and byte code."""
    os.mkdir(target)
    for name in ('pyproject.toml', 'README'):
        shutil.copy(os.path.join(CHECKOUT, name), target)
    shutil.copytree(os.path.join(CHECKOUT, 'obnamlib'),
                    os.path.join(target, 'obnamlib'),
                    ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    shutil.copytree(os.path.join(CHECKOUT, 'doc'),      # the manual pages
                    os.path.join(target, 'doc'))
    return target


def make_tree(root):
    """A small directory tree: files, an empty file, a subdirectory, a
    symlink, an executable; returns its file_tree.facts."""
    os.makedirs(os.path.join(root, 'sub', 'deeper'))
    files = {
        'a.txt': b'hello\n',
        'empty': b'',
        'sub/b.bin': bytes(range(256)) * 400,
        'sub/deeper/c': b'c' * 70000,
    }
    for rel, data in files.items():
        with open(os.path.join(root, rel), 'wb') as f:
            f.write(data)
    os.chmod(os.path.join(root, 'a.txt'), 0o750)
    os.symlink('a.txt', os.path.join(root, 'link'))
    return facts(root)


@pytest.mark.parametrize('version', ['3.10', '3.13', '3.14'])
def test_pip_install_into_a_venv_gives_a_working_obnam(tmp_path, version):
    deadline = Deadline(TIME_LIMIT - 10)
    python = pyenv_python(version)
    if python is None:
        pytest.skip('no Python %s from pyenv on this machine' % version)
    env = {'PATH': '/usr/bin:/bin', 'HOME': str(tmp_path / 'home'),
           'LC_ALL': 'C.UTF-8'}
    for name in ('PIP_INDEX_URL', 'PIP_EXTRA_INDEX_URL', 'PIP_FIND_LINKS',
                 'PIP_CERT', 'PIP_CONFIG_FILE', 'PIP_DEFAULT_TIMEOUT',
                 'PIP_CACHE_DIR', 'XDG_CACHE_HOME', 'PYENV_ROOT',
                 'http_proxy', 'https_proxy', 'no_proxy',
                 'HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY'):
        if name in os.environ:
            env[name] = os.environ[name]
    if 'PIP_CACHE_DIR' not in env and 'XDG_CACHE_HOME' not in env:
        env['PIP_CACHE_DIR'] = os.path.expanduser('~/.cache/pip')
    os.mkdir(env['HOME'])
    venv = tmp_path / 'venv'
    run([python, '-m', 'venv', str(venv)], deadline, env, tmp_path)
    vpython = str(venv / 'bin' / 'python')

    probe = run([vpython, '-m', 'pip', 'download', '--no-deps', '-q',
                 '--only-binary=:all:', '-d', str(tmp_path / 'probe'),
                 'PyYAML'], deadline, env, tmp_path, check=False)
    if probe.returncode != 0:
        pytest.skip('no package index reachable for pip: %s' %
                    probe.stderr.decode(errors='replace').strip()[-300:])

    source = source_copy(str(tmp_path / 'source'))
    run([vpython, '-m', 'pip', 'install', '-q', source], deadline, env,
        tmp_path)

    # The venv's own obnamlib, the hard dependencies, nothing obsolete.
    where = run([vpython, '-c', 'import importlib.util as u, obnamlib; '
                 'print(obnamlib.__file__); '
                 'print([m for m in ("yaml", "cryptography", "paramiko", '
                 '"cliapp", "gnupg", "ttystatus") '
                 'if u.find_spec(m) is not None])'],
                deadline, env, tmp_path)
    lines = where.stdout.decode().splitlines()
    assert lines[0].startswith(str(venv) + '/')
    assert lines[1] == "['yaml', 'cryptography', 'paramiko']"

    obnam = str(venv / 'bin' / 'obnam')
    version_run = run([obnam, '--version'], deadline, env, tmp_path)
    assert (version_run.stdout, version_run.stderr) == (
        (__version__ + '\n').encode(), b'')

    live = str(tmp_path / 'live')
    before = make_tree(live)
    repo = str(tmp_path / 'repo')
    common = [obnam, '--no-default-configs', '--log=none', '-r', repo,
              '--client-name=venvtest']
    run(common + ['backup', live], deadline, env, tmp_path)
    restored = str(tmp_path / 'restored')
    run(common + ['restore', '--to', restored], deadline, env, tmp_path)
    assert facts(restored + live) == before
