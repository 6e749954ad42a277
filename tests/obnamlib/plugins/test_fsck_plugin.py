"""The fsck command: clean on what Obnam 1.x wrote, and loud about damage
to the encryption keys (the one kind of file only encrypted repositories
have; tests/obnamlib/test_fsck_injection.py covers the rest)."""

import os
import shutil
import subprocess
import tarfile

import pytest

from tests.gpg_fixture import reference_gpg_home  # noqa: F401
from tests.obnamlib.fmt_6.reference_repos import ENCRYPTED, IN_TREE, REFERENCE

OBNAM = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'bin',
                     'obnam')


def fsck(repo, gnupghome, *args):
    env = dict(os.environ, GNUPGHOME=gnupghome)
    return subprocess.run(
        [OBNAM, '--no-default-configs', '-r', str(repo), '--lock-timeout=0',
         'fsck'] + list(args), capture_output=True, env=env)


@pytest.fixture(scope='module')
def reference_repos(tmp_path_factory):
    base = tmp_path_factory.mktemp('ref')
    repos = {}
    for name in (ENCRYPTED, IN_TREE):
        dest = base / name
        with tarfile.open(os.path.join(REFERENCE, name + '.tar.xz')) as tar:
            tar.extractall(dest)
        repos[name] = dest / 'repo'
    return repos


@pytest.mark.parametrize('name', [ENCRYPTED, IN_TREE])
def test_obnam_1_reference_repositories_are_clean(reference_repos,
                                                   reference_gpg_home, name):
    result = fsck(reference_repos[name], reference_gpg_home.path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b''
    assert result.stdout.endswith(b': no problems\n')
    assert b'1 client(s), 2 generation(s)' in result.stdout


def delete(path, other):
    os.remove(path)


def truncate(path, other):
    os.truncate(path, os.path.getsize(path) // 2)


def flip(path, other):
    with open(path, 'r+b') as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x10
        f.seek(0)
        f.write(data)


def swap(path, other):
    os.rename(path, path + '.x')
    os.rename(other, path)
    os.rename(path + '.x', other)


@pytest.mark.parametrize('fault', [delete, truncate, flip, swap])
@pytest.mark.parametrize('toplevel', ['clientlist', 'chunks', 'client'])
def test_damaged_key_files_are_reported(reference_repos, reference_gpg_home,
                                        tmp_path, fault, toplevel):
    repo = tmp_path / 'repo'
    shutil.copytree(reference_repos[ENCRYPTED], repo)
    client_dir = [n for n in os.listdir(repo) if n.isdigit()][0]
    name = client_dir if toplevel == 'client' else toplevel
    other = 'chunksums' if toplevel != 'chunksums' else 'chunklist'
    fault(str(repo / name / 'key'), str(repo / other / 'key'))
    result = fsck(repo, reference_gpg_home.path)
    assert result.returncode == 1
    assert result.stderr.startswith(b''), result.stderr
    lines = result.stderr.decode().splitlines()
    assert lines[-1].startswith('ERROR: ') and 'problem(s) that remain' in \
        lines[-1]
    shown = 'client havelock' if toplevel == 'client' else toplevel
    assert any(shown in line for line in lines[:-1]), lines
