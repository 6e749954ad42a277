"""Backup and restore, encrypted to a key this machine's gpg makes with
its own defaults: rsa3072 with Debian 12's gpg 2.2.40, ed25519 + cv25519
with Debian 13's gpg 2.4.7.  And with gpg 2.3 or later told to write OCB
(`force-ocb`, what upstream GnuPG 2.4 does to keys advertising AEAD):
obnam's key files are still PKESK v3 + SEIPD v1, which Obnam 1.x and
gpg 1.4 read."""

import os

import pytest

import obnamlib.vfs.local
from obnamlib.engine import backup_engine
from obnamlib.cli import backup_progress
from obnamlib.crypto import gpg, openpgp_packets
from obnamlib.repo import factory as repo_factory
from tests.gpg_fixture import GpgHome
from tests.obnamlib import gpg24_tree
from tests.file_tree import facts
from tests.obnamlib.restore_helpers import restore_latest


@pytest.fixture(scope='module')
def default_home():
    home = GpgHome('gd')
    home.generate_key('Dora', 'default')
    yield home
    home.cleanup()


@pytest.fixture(scope='module')
def ocb_home():
    home = GpgHome('go')
    if home.version() < (2, 3):
        home.cleanup()
        pytest.skip('gpg %s cannot write OCB' % '.'.join(
            map(str, home.version())))
    with open(os.path.join(home.path, 'gpg.conf'), 'w') as f:
        f.write('force-ocb\n')
    home.generate_key('Olga', 'default')
    yield home
    home.cleanup()


def _shape(data):
    return [(tag, body[0]) for tag, body in
            openpgp_packets.iter_packets(data)]


def _backup(repo_dir, live, home, keyid):
    repo = repo_factory.open_repository(
        url=str(repo_dir), create=True, lock_timeout=0,
        gnupghome=home.path, encrypt_with=keyid)
    try:
        progress = backup_progress.BackupProgress()
        backup_engine.BackupEngine(
            repo, obnamlib.vfs.local.LocalFS('/'),
            backup_engine.BackupOptions('host', key_id=keyid), progress,
            repo_io=repo.fs).run([os.fsencode(str(live))])
        assert progress.errors == []
    finally:
        repo.close()


def _round_trip(home, keyid, tmp_path):
    live = tmp_path / 'live'
    gpg24_tree.make(str(live))
    repo_dir = tmp_path / 'repo'
    _backup(repo_dir, live, home, keyid)
    keys = sorted(repo_dir.glob('*/key'))
    assert len(keys) == 5
    for key in keys:
        shape = _shape(key.read_bytes())
        assert shape[-1] == (openpgp_packets.SEIPD, 1)
        assert set(shape[:-1]) == {(openpgp_packets.PKESK, 3)}
        assert len(gpg.decrypt(key.read_bytes(), home.path)) == 64
    for way, settings in (('agent', {'encrypt_with': keyid}), ('gpg', {})):
        target = tmp_path / way
        restore_latest(repo_dir, 'host', target, gnupghome=home.path,
                       **settings)
        assert facts(str(target) + str(live)) == facts(str(live))


def test_round_trip_with_a_key_of_gpg_defaults(default_home, tmp_path):
    keyid = default_home.keys['Dora']
    _round_trip(default_home, keyid, tmp_path)


def test_round_trip_while_gpg_writes_ocb(ocb_home, tmp_path):
    keyid = ocb_home.keys['Olga']
    # the setting bites: gpg itself writes an AEAD packet here
    written = gpg.run(['--no-textmode', '--trust-model', 'always', '-e',
                       '-r', keyid], b'x' * 64, gnupghome=ocb_home.path)
    assert _shape(written)[-1] == (openpgp_packets.AEAD, 1)
    _round_trip(ocb_home, keyid, tmp_path)
