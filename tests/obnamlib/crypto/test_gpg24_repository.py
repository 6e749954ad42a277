"""A repository whose every OpenPGP message GnuPG 2.4.7 wrote with OCB
(tests/data/gpg24/repo, made by tests/data/gpg24/make-repo: `key` files
PKESK v3 + AEAD, `userkeys` and data files SKESK v5 + AEAD, to a key gpg
2.4.7 made with its defaults) is restored byte for byte, its keys
decrypted in process through gpg-agent or by this machine's gpg; and
what obnam adds to it is plain RFC 4880 again."""

import os
import shutil
import subprocess

import pytest

from obnamlib.crypto import openpgp_packets
from obnamlib.repo import factory as repo_factory
from obnamlib.repo.storage import toplevel_keys
from tests.gpg_fixture import GpgHome
from tests.obnamlib import gpg24_tree
from tests.file_tree import facts
from tests.obnamlib.restore_helpers import restore_latest
from tests import paths

DATA = os.path.join(paths.DATA, 'gpg24')
FINGERPRINT = open(os.path.join(DATA, 'fingerprint')).read().strip()


@pytest.fixture(scope='module')
def home():
    """This machine's gpg holding the gpg-2.4.7-made key, agent running."""
    home = GpgHome('g5')
    home.gpg('--import', os.path.join(DATA, 'secret-key.gpg'))
    subprocess.run(['gpg-connect-agent', '--homedir', home.path, '/bye'],
                   capture_output=True, check=True)
    yield home
    home.cleanup()


@pytest.fixture
def repo_dir(tmp_path):
    path = tmp_path / 'repo'
    shutil.copytree(os.path.join(DATA, 'repo'), str(path), symlinks=True)
    return path


def _shape(data):
    return [(tag, body[0]) for tag, body in
            openpgp_packets.iter_packets(data)]


def test_the_fixture_is_what_gpg_2_4_writes_with_ocb(repo_dir):
    tops = [name for name in os.listdir(str(repo_dir))
            if (repo_dir / name / 'key').exists()]
    assert len(tops) == 5
    for top in tops:
        assert _shape((repo_dir / top / 'key').read_bytes()) == [
            (openpgp_packets.PKESK, 3), (openpgp_packets.AEAD, 1)]
        assert _shape((repo_dir / top / 'userkeys').read_bytes()) == [
            (openpgp_packets.SKESK, 5), (openpgp_packets.AEAD, 1)]
    chunk = next(p for p in (repo_dir / 'chunks').rglob('*')
                 if p.is_file() and p.name not in ('key', 'userkeys'))
    raw = chunk.read_bytes()
    assert raw.startswith(b'encrypt1\0')
    assert _shape(raw[9:]) == [(openpgp_packets.SKESK, 5),
                               (openpgp_packets.AEAD, 1)]


def _restore(repo_dir, home, target, clients=('gpg24',), **settings):
    repo = repo_factory.open_repository(url=str(repo_dir),
                                        gnupghome=home.path, **settings)
    try:
        assert sorted(repo.get_client_names()) == list(clients)
    finally:
        repo.close()
    restore_latest(repo_dir, 'gpg24', target, gnupghome=home.path,
                   **settings)


def _restored_tree(target):
    """The restored live tree: the backup's root kept its full path."""
    found = [dirpath for dirpath, _, names in os.walk(str(target))
             if 'hello.txt' in names]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize('way', ['gpg-agent', 'gpg'])
def test_restored_byte_for_byte(repo_dir, home, tmp_path, monkeypatch, way):
    if way == 'gpg':    # the agent path off: this machine's gpg decrypts
        monkeypatch.setattr(toplevel_keys.gpg_agent, 'decrypt_many',
                            lambda messages, *a, **k: [None] * len(messages))
        settings = {}
    else:               # every key in process: gpg must not be asked
        def no_gpg(*args, **kwargs):
            raise AssertionError('gpg asked to decrypt a key')
        monkeypatch.setattr(toplevel_keys.gpg, 'decrypt_many', no_gpg)
        monkeypatch.setattr(toplevel_keys.gpg, 'decrypt', no_gpg)
        # the agent path needs --encrypt-with's secret-key listing
        settings = {'encrypt_with': FINGERPRINT}
    target = tmp_path / 'target'
    _restore(repo_dir, home, target, **settings)
    expected = tmp_path / 'expected'
    gpg24_tree.make(str(expected))
    assert facts(_restored_tree(target)) == facts(str(expected))


def test_continued_by_obnam_in_rfc_4880_packets(repo_dir, home, tmp_path):
    """A new client's toplevel and the files obnam rewrites there are
    SKESK v4 / PKESK v3 and SEIPD v1 (what Obnam 1.x with gpg 1.4 reads);
    the old ones still read."""
    repo = repo_factory.open_repository(
        url=str(repo_dir), gnupghome=home.path, encrypt_with=FINGERPRINT,
        lock_timeout=0)
    try:
        repo.lock_client_list()
        repo.add_client('newcomer', FINGERPRINT)
        repo.commit_client_list()
        repo.lock_client('newcomer')
        repo.create_generation('newcomer')
        repo.commit_client('newcomer')
        newdir = repo_dir / str(repo.get_client_id('newcomer'))
    finally:
        repo.close()
    assert _shape((newdir / 'key').read_bytes()) == [
        (openpgp_packets.PKESK, 3), (openpgp_packets.SEIPD, 1)]
    assert _shape((newdir / 'userkeys').read_bytes()) == [
        (openpgp_packets.SKESK, 4), (openpgp_packets.SEIPD, 1)]
    new_files = [p for p in (repo_dir / 'clientlist').rglob('*')
                 if p.is_file() and p.name not in ('key', 'userkeys')
                 and p.read_bytes().startswith(b'encrypt1\0')
                 and _shape(p.read_bytes()[9:])[0][1] == 4]
    assert new_files
    for path in new_files:
        assert _shape(path.read_bytes()[9:]) == [
            (openpgp_packets.SKESK, 4), (openpgp_packets.SEIPD, 1)]
    target = tmp_path / 'target'
    _restore(repo_dir, home, target, clients=['gpg24', 'newcomer'])
    expected = tmp_path / 'expected'
    gpg24_tree.make(str(expected))
    assert facts(_restored_tree(target)) == facts(str(expected))
