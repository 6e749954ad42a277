"""Encrypted backups and the key commands as people run them (cli.md
§5.15, Obnam's 0060-encryption scenarios): real gpg, throwaway homes."""

import os
import subprocess
import sys

import pytest

from obnamlib.crypto import gpg
from tests.gpg_fixture import GpgHome
from tests import paths

OBNAM = paths.OBNAM
PLANT = 'PLANTEDsecretXYZ'


@pytest.fixture(scope='module')
def homes():
    """Alice's home (her secret key, Bob's public key) and Bob's (his
    secret key only)."""
    alice, bob = GpgHome('ga'), GpgHome('gb')
    alice.generate_key('Alice')
    bob.generate_key('Bob')
    alice.gpg('--import', input=bob.export_public('Bob'))
    alice.keys['Bob'] = bob.keys['Bob']
    yield alice, bob
    alice.cleanup()
    bob.cleanup()


def obnam(tmp_path, home, client, *args):
    argv = [sys.executable, OBNAM, '--no-default-configs', '--quiet',
            '--client-name=%s' % client, '--lock-timeout=0',
            '--repository=%s' % (tmp_path / 'repo'),
            '--gnupghome=%s' % home.path,
            '--log', str(tmp_path / 'obnam.log'), '--log-level=debug']
    argv += [str(a) for a in args]
    return subprocess.run(argv, capture_output=True, text=True,
                          env=dict(os.environ, LC_ALL='C.UTF-8'))


def ok(result):
    assert result.returncode == 0, result.stderr
    return result.stdout


def keyid(home, name):
    return home.keys[name][-16:]


def make_live(path, text):
    path.mkdir()
    (path / ('file-' + PLANT)).write_text(text + PLANT * 3)
    (path / 'sub').mkdir()
    (path / 'sub' / 'big').write_bytes(os.urandom(3000) + PLANT.encode())
    return path


def read_tree(root):
    found = {}
    for dirpath, _, names in os.walk(str(root)):
        for name in names:
            full = os.path.join(dirpath, name)
            found[os.path.relpath(full, str(root))] = open(full, 'rb').read()
    return found


def test_not_in_use_warns_and_exits_0(tmp_path, homes):
    alice, _ = homes
    for command in ('client-keys', 'list-keys', 'list-toplevels', 'add-key',
                    'remove-key', 'remove-client'):
        result = obnam(tmp_path, alice, 'c1', command)
        assert result.returncode == 0
        assert result.stdout == ('Warning: Encryption not in use.\n'
                                 '(Use --encrypt-with to set key.)\n')


def test_encrypted_backup_holds_no_plaintext(tmp_path, homes):
    alice, _ = homes
    live = make_live(tmp_path / 'live', 'hello')
    try:
        os.setxattr(str(live / 'sub' / 'big'), 'user.' + PLANT,
                    PLANT.encode())
    except OSError:
        pass        # no user xattrs on this file system
    enc = '--encrypt-with=%s' % alice.keys['Alice']
    ok(obnam(tmp_path, alice, 'c1', enc, '--compress-with=deflate',
             'backup', live))
    for dirpath, _, names in os.walk(str(tmp_path / 'repo')):
        assert PLANT not in dirpath
        for name in names:
            assert PLANT not in name
            data = open(os.path.join(dirpath, name), 'rb').read()
            assert PLANT.encode() not in data, os.path.join(dirpath, name)
    ok(obnam(tmp_path, alice, 'c1', enc, 'restore', '--to', tmp_path / 'out'))
    assert read_tree(tmp_path / 'out' / str(live).lstrip('/')) == \
        read_tree(live)


def test_mixing_errors_write_nothing(tmp_path, homes):
    alice, _ = homes
    live = make_live(tmp_path / 'live', 'x')
    ok(obnam(tmp_path, alice, 'c1', 'backup', live))
    before = read_tree(tmp_path / 'repo')
    result = obnam(tmp_path, alice, 'c1',
                   '--encrypt-with=%s' % alice.keys['Alice'], 'backup', live)
    assert result.returncode == 1
    assert result.stderr.startswith('ERROR: R')
    assert 'not encrypted' in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert read_tree(tmp_path / 'repo') == before


def test_unknown_secret_key_is_R0C79EX(tmp_path, homes):
    alice, _ = homes
    live = make_live(tmp_path / 'live', 'x')
    result = obnam(tmp_path, alice, 'c1', '--encrypt-with=%s' %
                   alice.keys['Bob'], 'backup', live)
    assert result.returncode == 1
    assert result.stderr == (
        'ERROR: R0C79EX: GnuPG home %s has no secret key %s; import it '
        '(gpg --import), or point --gnupghome at the keyring that has it\n'
        % (alice.path, alice.keys['Bob']))
    assert not (tmp_path / 'repo' / 'clientlist').exists()


def test_keys_of_two_clients(tmp_path, homes):
    alice, bob = homes
    a_enc = '--encrypt-with=%s' % alice.keys['Alice']
    b_enc = '--encrypt-with=%s' % bob.keys['Bob']
    live_a = make_live(tmp_path / 'a', 'alice data')
    live_b = make_live(tmp_path / 'b', 'bob data')
    ok(obnam(tmp_path, alice, 'c1', a_enc, 'backup', live_a))

    # Bob's key cannot open the shared toplevels yet.
    result = obnam(tmp_path, bob, 'c2', b_enc, 'backup', live_b)
    assert result.returncode == 1
    assert result.stderr.startswith(
        'ERROR: R0C79EX: Cannot decrypt the repository key clientlist/key: '
        'it is encrypted for key ')
    assert ('and GnuPG home %s has no secret key for it' % bob.path) in \
        result.stderr and result.stderr.count('\n') == 1

    assert obnam(tmp_path, alice, 'c1', a_enc, 'add-key').returncode == 1
    ok(obnam(tmp_path, alice, 'c1', a_enc,
             '--keyid=%s' % alice.keys['Bob'], 'add-key'))
    ok(obnam(tmp_path, bob, 'c2', b_enc, 'backup', live_b))
    ok(obnam(tmp_path, bob, 'c2', b_enc, 'restore', '--to', tmp_path / 'rb'))
    assert read_tree(tmp_path / 'rb' / str(live_b).lstrip('/')) == \
        read_tree(live_b)
    ok(obnam(tmp_path, alice, 'c1', a_enc, 'restore', '--to',
             tmp_path / 'ra'))
    assert read_tree(tmp_path / 'ra' / str(live_a).lstrip('/')) == \
        read_tree(live_a)

    # Bob cannot read Alice's client directory.
    result = obnam(tmp_path, bob, 'c1', b_enc, 'restore', '--to',
                   tmp_path / 'rx')
    assert result.returncode == 1
    assert 'R0C79EX' in result.stderr

    client_ids = sorted(name for name in os.listdir(str(tmp_path / 'repo'))
                        if name.isdigit())
    alice_id, bob_id = keyid(alice, 'Alice'), keyid(alice, 'Bob')
    listing = ok(obnam(tmp_path, alice, 'c1', a_enc, 'list-toplevels'))
    lines = listing.splitlines()
    for shared in ('chunklist', 'chunks', 'chunksums', 'clientlist'):
        at = lines.index('toplevel: %s' % shared)
        assert sorted(lines[at + 1:at + 3]) == sorted(
            ['  ' + alice_id, '  ' + bob_id])
    assert len(client_ids) == 2
    keys = ok(obnam(tmp_path, alice, 'c1', a_enc, 'list-keys')).splitlines()
    at = keys.index('key: %s' % bob_id)
    assert keys[at + 1:at + 5] == ['  chunklist', '  chunks', '  chunksums',
                                   '  clientlist']
    details = ok(obnam(tmp_path, alice, 'c1', a_enc, '--key-details',
                       'list-keys'))
    assert 'key: %s (Bob <bob@example.com>)' % bob_id in details

    # Removing Bob's key locks him out again (new keys are re-encrypted).
    ok(obnam(tmp_path, alice, 'c1', a_enc,
             '--keyid=%s' % alice.keys['Bob'], 'remove-key'))
    result = obnam(tmp_path, bob, 'c2', b_enc, 'backup', live_b)
    assert result.returncode == 1 and 'R0C79EX' in result.stderr

    result = obnam(tmp_path, alice, 'c1', a_enc, 'remove-client', 'nosuch')
    assert result.returncode == 1
    assert result.stderr == ('ERROR: R24424X: Repository client nosuch '
                             'does not exist\n')
    ok(obnam(tmp_path, alice, 'c1', a_enc, 'remove-client', 'c2'))
    assert ok(obnam(tmp_path, alice, 'c1', a_enc, 'clients')) == 'c1\n'


def test_client_keys(tmp_path, homes):
    alice, _ = homes
    from obnamlib.repo import factory as repo_factory
    settings = {'encrypt-with': alice.keys['Alice'],
                'gnupghome': alice.path}
    repo = repo_factory.open_repository(settings, url=str(tmp_path / 'repo'),
                                        create=True, lock_timeout=0)
    repo.lock_client_list()
    repo.add_client('with-key', keyid(alice, 'Alice'))
    repo.add_client('without-key', '')
    repo.commit_client_list()
    repo.close()
    enc = '--encrypt-with=%s' % alice.keys['Alice']
    assert ok(obnam(tmp_path, alice, 'c1', enc, 'client-keys')) == (
        'with-key %s\nwithout-key no key\n' % keyid(alice, 'Alice'))
    assert ok(obnam(tmp_path, alice, 'c1', enc, '--key-details',
                    'client-keys')).splitlines()[0] == (
        'with-key %s (Alice <alice@example.com>)' % keyid(alice, 'Alice'))


@pytest.fixture
def reference_home():
    home = GpgHome('gr')
    home.import_reference()
    yield home
    home.cleanup()


def test_obnam_1x_encrypted_repository_continued(tmp_path, reference_home,
                                                 monkeypatch):
    """Back up into the encrypted reference repository with its key; the
    old generations still match their manifests, the new one restores."""
    from tests.gpg_fixture import REFERENCE_KEY
    from tests.obnamlib.repo.fmt_6 import reference_repos as rr
    from tests.obnamlib.repo.fmt_6.test_reference_repos import \
        test_generation_matches_manifest as matches_manifest
    rr.unpack(rr.ENCRYPTED, str(tmp_path))
    live = make_live(tmp_path / 'live', 'new generation')
    enc = '--encrypt-with=%s' % REFERENCE_KEY
    ok(obnam(tmp_path, reference_home, 'havelock', enc, 'backup', live))
    ok(obnam(tmp_path, reference_home, 'havelock', enc, 'restore', '--to',
             tmp_path / 'out'))
    assert read_tree(tmp_path / 'out' / str(live).lstrip('/')) == \
        read_tree(live)
    monkeypatch.setenv('GNUPGHOME', reference_home.path)
    from obnamlib.repo import factory as repo_factory
    repo = repo_factory.open_repository(url=str(tmp_path / 'repo'))
    assert [int(g) for g in repo.get_generation_ids('havelock')][:2] == [2, 5]
    assert len(repo.get_generation_ids('havelock')) == 3
    for index in (0, 1):
        matches_manifest(str(tmp_path), index)
    for name in ('clientlist', 'chunks', 'chunklist', 'chunksums'):
        key = (tmp_path / 'repo' / name / 'key').read_bytes()
        assert len(gpg.decrypt(key, reference_home.path)) == 64


def test_backup_records_encrypt_with_as_client_key(tmp_path, homes):
    alice, _ = homes
    live = make_live(tmp_path / 'live', 'text')
    enc = '--encrypt-with=%s' % alice.keys['Alice']
    ok(obnam(tmp_path, alice, 'c1', enc, 'backup', live))
    assert ok(obnam(tmp_path, alice, 'c1', enc, 'client-keys')) == (
        'c1 %s\n' % alice.keys['Alice'])


def chunk_files(tmp_path):
    root = tmp_path / 'repo' / 'chunks'
    return sorted(os.path.relpath(os.path.join(d, n), str(root))
                  for d, _, names in os.walk(str(root)) for n in names
                  if n not in ('key', 'userkeys', 'lock'))


def test_clients_with_different_keys_deduplicate(tmp_path, homes):
    """The chunk indexes are shared toplevels: once Bob's key may read
    them, his backup of Alice's data stores no new chunk."""
    alice, bob = homes
    live = make_live(tmp_path / 'live', 'shared data')
    (live / 'large').write_bytes(os.urandom(300 * 1024))
    ok(obnam(tmp_path, alice, 'c1',
             '--encrypt-with=%s' % alice.keys['Alice'], 'backup', live))
    ok(obnam(tmp_path, alice, 'c1', '--encrypt-with=%s' % alice.keys['Alice'],
             '--keyid=%s' % alice.keys['Bob'], 'add-key'))
    before = chunk_files(tmp_path)
    assert len(before) >= 3
    b_enc = '--encrypt-with=%s' % bob.keys['Bob']
    ok(obnam(tmp_path, bob, 'c2', b_enc, 'backup', live))
    assert chunk_files(tmp_path) == before
    ok(obnam(tmp_path, bob, 'c2', b_enc, 'restore', '--to', tmp_path / 'out'))
    assert read_tree(tmp_path / 'out' / str(live).lstrip('/')) == \
        read_tree(live)


def test_many_chunks_go_through_the_cipher_helper(tmp_path, homes):
    """Past the first few chunk files, a helper process encrypts and
    writes them, and reads them ahead for verify; for restore and fsck
    too where they cannot run a second process of their own (one core:
    with two, each of their processes decrypts what it reads)."""
    alice, _ = homes
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(60):
        (live / ('f%02d-%s' % (i, PLANT))).write_bytes(
            os.urandom(i * 997) + PLANT.encode())
    (live / 'big').write_bytes(os.urandom(3 * 65536 + 5) + PLANT.encode())
    enc = '--encrypt-with=%s' % alice.keys['Alice']
    ok(obnam(tmp_path, alice, 'c1', enc, '--chunk-size=65536',
             '--checkpoint=300k', 'backup', live))
    log = (tmp_path / 'obnam.log').read_text()
    assert 'Started the cipher helper process' in log
    for dirpath, _, names in os.walk(str(tmp_path / 'repo')):
        for name in names:
            data = open(os.path.join(dirpath, name), 'rb').read()
            assert PLANT.encode() not in data
    first = read_tree(live)
    (live / ('f07-%s' % PLANT)).write_bytes(b'changed')
    ok(obnam(tmp_path, alice, 'c1', enc, '--chunk-size=65536',
             'backup', live))
    ok(obnam(tmp_path, alice, 'c1', enc, 'verify', live))
    ok(obnam(tmp_path, alice, 'c1', enc, 'fsck'))
    ok(obnam(tmp_path, alice, 'c1', enc, 'restore', '--to', tmp_path / 'new'))
    assert read_tree(tmp_path / 'new' / str(live).lstrip('/')) == \
        read_tree(live)
    gens = ok(obnam(tmp_path, alice, 'c1', enc, 'genids')).split()
    ok(obnam(tmp_path, alice, 'c1', enc, 'restore', '--generation', gens[0],
             '--to', tmp_path / 'old'))
    assert read_tree(tmp_path / 'old' / str(live).lstrip('/')) == first
    two_cores = len(os.sched_getaffinity(0)) >= 2
    assert (tmp_path / 'obnam.log').read_text().count(
        'Started the cipher helper process') == (3 if two_cores else 6)


def test_fsck_names_gpg_reasons_on_each_problem_line(tmp_path, homes):
    """A toplevel whose key gpg cannot decrypt: each problem is one line
    with gpg's reasons, the key's before what it breaks."""
    alice, _ = homes
    enc = '--encrypt-with=%s' % alice.keys['Alice']
    ok(obnam(tmp_path, alice, 'c1', enc, 'backup',
             make_live(tmp_path / 'live', 'x')))
    repo = tmp_path / 'repo'
    (repo / 'chunksums' / 'userkeys').unlink()
    client_id, = [n for n in os.listdir(str(repo)) if n.isdigit()]
    (repo / client_id / 'key').write_bytes(b'junk')
    result = obnam(tmp_path, alice, 'c1', enc, 'fsck')
    assert result.returncode == 1
    gpg_said = ('R0C79EX: gpg failed with exit code 2: gpg: no valid '
                'OpenPGP data found.; gpg: decrypt_message failed: Unknown '
                'system error')
    assert result.stderr.splitlines() == [
        'chunksums: encryption file userkeys is missing',
        'client c1 (%s): cannot open its encryption key: %s'
        % (client_id, gpg_said),
        'client c1 (forest %s): cannot be opened: %s' % (client_id, gpg_said),
        'client c1: generations cannot be listed: %s' % gpg_said,
        'unused chunks were not looked for: the problems above hide which '
        'chunks are in use',
        'ERROR: R1E173X: fsck found 5 problem(s) that remain']
