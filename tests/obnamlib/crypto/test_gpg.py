import concurrent.futures
import os
import shutil
import subprocess
import sys
import threading

import pytest

from obnamlib import errors
from obnamlib.crypto import gpg, openpgp_packets
from tests.gpg_fixture import (REFERENCE_DIR, REFERENCE_KEY,  # noqa
                               REFERENCE_SECOND_KEY,
                               GpgHome, empty_gpg_home, gpg_home,
                               reference_gpg_home)


def packet_tags(data):
    return [tag for tag, _ in openpgp_packets.iter_packets(data)]


def test_export_public_key_by_fingerprint_and_user_id(gpg_home):
    fpr = gpg_home.keys['Alice']
    blob = gpg.export_public_key(fpr, gnupghome=gpg_home.path)
    assert packet_tags(blob)[0] == 6
    assert gpg.keyring_key_ids(blob) == [fpr[-16:]]
    by_uid = gpg.export_public_key('alice@example.com', gpg_home.path)
    assert gpg.keyring_key_ids(by_uid) == [fpr[-16:]]


def test_export_unknown_key_is_gpg_error(gpg_home):
    with pytest.raises(errors.GpgError) as info:
        gpg.export_public_key('DEADBEEFDEADBEEF', gnupghome=gpg_home.path)
    assert str(info.value) == (
        'R0C79EX: GnuPG home %s has no public key DEADBEEFDEADBEEF; import '
        'it (gpg --import), or point --gnupghome at the keyring that has it'
        % gpg_home.path)


def test_default_gnupghome_from_environment(gpg_home, monkeypatch):
    monkeypatch.setenv('GNUPGHOME', gpg_home.path)
    assert gpg.has_secret_key(gpg_home.keys['Bob'])


def test_encrypt_to_keyring_and_decrypt(gpg_home):
    keyring = gpg.keyring_add(
        gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path),
        gpg.export_public_key(gpg_home.keys['Bob'], gpg_home.path))
    assert sorted(gpg.keyring_key_ids(keyring)) == sorted(
        fpr[-16:] for fpr in gpg_home.keys.values())
    encrypted = gpg.encrypt_to_keyring(b'ab' * 32, keyring)
    tags = packet_tags(encrypted)
    assert tags == [1, 1, 18]           # one PKESK per key, SEIPD with MDC
    assert 20 not in tags
    assert not encrypted.startswith(b'-----BEGIN')
    assert gpg.decrypt(encrypted, gnupghome=gpg_home.path) == b'ab' * 32


def test_decrypt_without_secret_key_carries_gpg_stderr(gpg_home,
                                                       empty_gpg_home):
    keyring = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    encrypted = gpg.encrypt_to_keyring(b'x', keyring)
    with pytest.raises(errors.GpgError) as info:
        gpg.decrypt(encrypted, gnupghome=empty_gpg_home.path)
    assert info.value.code == 'R0C79EX'
    assert 'has no secret key' in str(info.value)
    assert 'No secret key' in info.value.stderr


def test_secret_key_checks(gpg_home, empty_gpg_home):
    assert gpg.has_secret_key(gpg_home.keys['Alice'], gpg_home.path)
    assert not gpg.has_secret_key(gpg_home.keys['Alice'], empty_gpg_home.path)
    with pytest.raises(errors.GpgError) as info:
        gpg.require_secret_key('ABCDEF01', empty_gpg_home.path)
    assert str(info.value) == (
        'R0C79EX: GnuPG home %s has no secret key ABCDEF01; import it (gpg '
        '--import), or point --gnupghome at the keyring that has it'
        % empty_gpg_home.path)


def test_a_message_for_keys_this_home_lacks_is_one_line(
        gpg_home, empty_gpg_home):
    message = gpg_home.gpg('--trust-model', 'always', '-e', '-r',
                           gpg_home.keys['Alice'], '-r', gpg_home.keys['Bob'],
                           input=b'secret').stdout
    subkeys = gpg.recipients(message)
    assert len(subkeys) == 2 and all(len(k) == 16 for k in subkeys)
    assert sorted(subkeys) == sorted(
        line.split(':')[4] for line in gpg_home.gpg(
            '--with-colons', '--list-keys').stdout.decode().splitlines()
        if line.startswith('sub:'))
    with pytest.raises(errors.GpgError) as info:
        gpg.decrypt(message, empty_gpg_home.path, what='the test message')
    assert str(info.value) == (
        'R0C79EX: Cannot decrypt the test message: it is encrypted for key '
        '%s, and GnuPG home %s has no secret key for any of them; import '
        'the secret key (gpg --import), or point --gnupghome at the keyring '
        'that has it' % (', '.join(subkeys), empty_gpg_home.path))
    assert info.value.first_line() == str(info.value)
    assert gpg.decrypt(message, gpg_home.path) == b'secret'


def test_keyring_remove(gpg_home):
    alice = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    bob = gpg.export_public_key(gpg_home.keys['Bob'], gpg_home.path)
    both = gpg.keyring_add(alice, bob)
    only_alice = gpg.keyring_remove(both, gpg_home.keys['Bob'][-16:])
    assert gpg.keyring_key_ids(only_alice) == [gpg_home.keys['Alice'][-16:]]
    assert gpg.keyring_remove(only_alice, 'DEADBEEFDEADBEEF') == only_alice
    assert gpg.keyring_remove(only_alice, gpg_home.keys['Alice']) == b''


def test_reference_keyring(reference_gpg_home):
    blob = gpg.export_public_key(REFERENCE_KEY, reference_gpg_home.path)
    assert gpg.keyring_key_ids(blob) == [REFERENCE_KEY]
    uids = gpg.keyring_user_ids(blob, REFERENCE_KEY)
    assert uids and 'Test Key' in uids[0]
    assert gpg.has_secret_key(REFERENCE_SECOND_KEY, reference_gpg_home.path)


def test_gpg_missing_is_one_line_error(monkeypatch):
    monkeypatch.setattr(gpg, 'GPG', '/nonexistent/gpg')
    with pytest.raises(gpg.GpgMissing) as info:
        gpg.decrypt(b'x')
    assert len(str(info.value).splitlines()) == 1


def test_legacy_pubring_with_trust_packets():
    with open(REFERENCE_DIR + '/test-gpghome/pubring.gpg', 'rb') as f:
        pubring = f.read()
    assert openpgp_packets.TRUST in packet_tags(pubring)
    assert gpg.keyring_key_ids(pubring) == [REFERENCE_KEY,
                                            REFERENCE_SECOND_KEY]
    keys = gpg.split_keyring(pubring)
    assert len(keys) == 2
    assert openpgp_packets.TRUST not in packet_tags(b''.join(keys))


def packet_shapes(data):
    return [(tag, body[0]) for tag, body in openpgp_packets.iter_packets(data)]


def test_key_encryption_is_rfc4880_with_mdc(gpg_home):
    keyring = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    encrypted = gpg.encrypt_to_keyring(b'cd' * 32, keyring)
    # PKESK version 3, then SEIPD version 1 (MDC); never tag 20 (OCB).
    assert packet_shapes(encrypted) == [(1, 3), (18, 1)]
    assert gpg.is_rfc4880_message(encrypted)


def replace_last_packet(message, tag, first_byte, keyid=None):
    """gpg's message with its SEIPD made into what gpg >= 2.3 writes for
    keys advertising AEAD (OCB: tag 20, or SEIPD v2); optionally with
    another recipient key id in its PKESK packets."""
    packets = list(openpgp_packets.iter_packets(message))
    out = b''
    for t, body in packets[:-1]:
        body = bytes(body)
        if keyid is not None:
            body = body[:1] + keyid + body[9:]
        out += openpgp_packets.packet(t, body)
    body = bytes([first_byte]) + bytes(packets[-1][1][1:])
    return out + openpgp_packets.packet(tag, body)


def test_aead_shapes_are_recognised(gpg_home):
    keyring = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    good = gpg.encrypt_to_keyring(b'ef' * 32, keyring)
    assert not gpg.is_rfc4880_message(
        replace_last_packet(good, openpgp_packets.AEAD, 1))
    assert not gpg.is_rfc4880_message(
        replace_last_packet(good, openpgp_packets.SEIPD, 2))
    assert not gpg.is_rfc4880_message(good[-60:])
    assert not gpg.is_rfc4880_message(b'')
    assert gpg.packet_shapes(replace_last_packet(
        good, openpgp_packets.AEAD, 1)) == ['PKESK v3', 'AEAD (tag 20)']


def gpg_writing_ocb(monkeypatch, keyid=None):
    """Make gpg -e behave like GnuPG >= 2.3 with AEAD keys: its real
    output, with the SEIPD packet turned into OCB (tag 20)."""
    real_run = gpg.run

    def ocb_gpg(args, data=b'', gnupghome=None, passphrase=None):
        out = real_run(args, data, gnupghome, passphrase)
        if '-e' in args:
            out = replace_last_packet(out, openpgp_packets.AEAD, 1, keyid)
        return out

    monkeypatch.setattr(gpg, 'run', ocb_gpg)


def test_ocb_from_gpg_is_rewritten_for_the_same_keys(gpg_home, monkeypatch):
    keyring = gpg.keyring_add(
        gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path),
        gpg.export_public_key(gpg_home.keys['Bob'], gpg_home.path))
    plain_keyids = [body[1:9] for tag, body in openpgp_packets.iter_packets(
        gpg.encrypt_to_keyring(b'x', keyring)) if tag == 1]
    gpg_writing_ocb(monkeypatch)
    encrypted = gpg.encrypt_to_keyring(b'12' * 32, keyring)
    assert packet_shapes(encrypted) == [(1, 3), (1, 3), (18, 1)]
    assert [body[1:9] for tag, body in openpgp_packets.iter_packets(
        encrypted) if tag == 1] == plain_keyids
    monkeypatch.undo()
    assert gpg.decrypt(encrypted, gnupghome=gpg_home.path) == b'12' * 32
    assert gpg_home.decrypt(encrypted).stdout == b'12' * 32


def test_ocb_for_a_key_we_cannot_find_is_refused(gpg_home, monkeypatch):
    keyring = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    gpg_writing_ocb(monkeypatch, keyid=bytes.fromhex('DEADBEEFDEADBEEF'))
    with pytest.raises(gpg.UnreadableKeyFile) as info:
        gpg.encrypt_to_keyring(b'00' * 32, keyring)
    text = str(info.value)
    assert text.startswith(
        'R88F9FX: gpg encrypted a toplevel key as PKESK v3, AEAD (tag 20), '
        'which GnuPG 2.2 and Obnam 1.x cannot read, and obnam cannot write '
        'it itself (Cannot encrypt to OpenPGP key DEADBEEFDEADBEEF: no '
        'version 4 key with this id in the keyring); nothing was written.')
    assert len(text.splitlines()) == 1


def _private_leftovers():
    where = gpg._private_dir() or '/tmp'
    return sorted(name for name in os.listdir(where)
                  if name.startswith('obd'))


def test_decrypt_many_in_one_run(gpg_home, monkeypatch):
    alice = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    with GpgHome('gx') as other:
        carol = gpg.export_public_key(other.generate_key('Carol'),
                                      other.path)
        for_carol = gpg.encrypt_to_keyring(b'c' * 64, carol)
    texts = [b'%d' % i * 64 for i in range(4)]
    messages = [b'not OpenPGP'] + [
        gpg.encrypt_to_keyring(text, alice) for text in texts[:2]] + [
        for_carol] + [gpg.encrypt_to_keyring(text, alice)
                      for text in texts[2:]]
    before = _private_leftovers()
    runs = []
    real_popen = gpg.subprocess.Popen
    monkeypatch.setattr(gpg.subprocess, 'Popen', lambda *a, **k: (
        runs.append(a[0]), real_popen(*a, **k))[1])
    got = gpg.decrypt_many(messages, gpg_home.path)
    assert got == [None, texts[0], texts[1], None, texts[2], texts[3]]
    assert len(runs) == 1
    assert gpg.decrypt_many([]) == [] and len(runs) == 1
    assert _private_leftovers() == before


def test_decrypt_many_refuses_what_gpg_refuses(gpg_home):
    """gpg writes a file's plaintext before it checks it (MDC): a
    tampered or cut message must give None, as gpg -d fails."""
    alice = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    good = gpg.encrypt_to_keyring(b'ab' * 32, alice)
    tampered = good[:-1] + bytes([good[-1] ^ 1])
    cut = good[:-24]
    for bad in (tampered, cut):
        with pytest.raises(errors.GpgError):
            gpg.decrypt(bad, gpg_home.path)
    assert gpg.decrypt_many([tampered, good, cut], gpg_home.path) == [
        None, b'ab' * 32, None]


def test_decrypt_many_refuses_a_huge_plaintext_without_hanging(gpg_home):
    alice = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    huge = os.urandom(3 * gpg.MAX_PLAINTEXT)    # more than a pipe holds
    messages = [gpg.encrypt_to_keyring(huge, alice),
                gpg.encrypt_to_keyring(b'small', alice)]
    assert gpg.decrypt_many(messages, gpg_home.path) == [None, b'small']


def _logging_gpg(tmp_path, monkeypatch):
    """Point gpg.GPG at a wrapper that logs when each real gpg run starts
    and ends; returns the log's path."""
    log = tmp_path / 'runs'
    wrapper = tmp_path / 'gpg'
    wrapper.write_text('#!/bin/sh\necho start >> "%s"\n"%s" "$@"\nrc=$?\n'
                       'echo end >> "%s"\nexit $rc\n'
                       % (log, shutil.which('gpg'), log))
    wrapper.chmod(0o755)
    monkeypatch.setattr(gpg, 'GPG', str(wrapper))
    return log


def test_gpg_runs_in_one_home_one_at_a_time(tmp_path, monkeypatch):
    """gpg-agent stores a key from gpg 1.x's secring.gpg anew on its
    first use, and a gpg decrypting beside that may find no secret key:
    threads decrypting at once in a fresh import of Obnam 1.x's keys all
    succeed, and their gpg runs never overlap."""
    log = _logging_gpg(tmp_path, monkeypatch)
    with GpgHome('gt') as home:
        home.import_reference()
        public = gpg.export_public_key(REFERENCE_KEY, home.path)
        messages = [gpg.encrypt_to_keyring(b'%d' % i * 32, public)
                    for i in range(4)]
        log.unlink()
        start = threading.Barrier(3)

        def alone(message):
            start.wait()
            return gpg.decrypt(message, home.path)

        def together(messages):
            start.wait()
            return gpg.decrypt_many(messages, home.path)

        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            runs = [pool.submit(alone, messages[0]),
                    pool.submit(alone, messages[1]),
                    pool.submit(together, messages[2:])]
            got = [run.result() for run in runs]
    assert got == [b'0' * 32, b'1' * 32, [b'2' * 32, b'3' * 32]]
    assert log.read_text().split() == ['start', 'end'] * 3


_TRY_FLOCK = (
    'import fcntl, os, sys\n'
    'fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n'
    'try:\n'
    '    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n'
    'except BlockingIOError:\n'
    '    sys.exit(3)\n')


def _another_process_can_lock(home):
    code = subprocess.run(
        [sys.executable, '-c', _TRY_FLOCK, str(home)]).returncode
    assert code in (0, 3)
    return code == 0


def test_a_home_turn_keeps_other_processes_out(tmp_path):
    """Two obnam commands at once on a fresh import race in gpg-agent as
    two threads do: the turn is a flock on the home directory too."""
    turn = gpg.home_turn(str(tmp_path))
    with turn:
        assert turn.locked()
        assert not _another_process_can_lock(tmp_path)
    assert not turn.locked()
    assert _another_process_can_lock(tmp_path)
    assert os.listdir(str(tmp_path)) == []      # nothing written there


def test_a_home_held_too_long_by_another_process_is_used_beside_it(
        tmp_path, monkeypatch, caplog):
    holder = subprocess.Popen(
        [sys.executable, '-c', _TRY_FLOCK + 'print("held", flush=True)\n'
         'sys.stdin.read()\n', str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == 'held\n'
        monkeypatch.setattr(gpg, 'HOME_WAIT', 0)
        with gpg.home_turn(str(tmp_path)) as turn:
            assert turn.locked()
    finally:
        holder.communicate('')
    assert holder.returncode == 0
    assert 'is still in use by another process after 0 s' in caplog.text


def test_a_home_not_made_yet_has_the_threads_turn_only(tmp_path):
    turn = gpg.home_turn(str(tmp_path / 'none'))
    with turn:
        assert turn.locked()
    assert not turn.locked()


def test_a_home_turn_is_one_lock_per_directory(tmp_path, monkeypatch):
    monkeypatch.setenv('GNUPGHOME', str(tmp_path))
    os.symlink(str(tmp_path), str(tmp_path / 'link'))
    assert gpg.home_turn() is gpg.home_turn(str(tmp_path / 'link'))
    assert gpg.home_turn() is not gpg.home_turn(str(tmp_path / 'other'))
