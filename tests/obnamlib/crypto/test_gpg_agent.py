"""Decrypting toplevel keys through gpg-agent's socket, checked against
gpg itself with real agents and keys."""

import os
import subprocess

import pytest

from obnamlib.crypto import gpg, gpg_agent, openpgp_pubkey
from tests.gpg_fixture import (GpgHome, gpg_home,  # noqa: F401
                               subkeys_gpg_home)


def _listing(home, who):
    return gpg_agent.parse_secret_listing(
        gpg.require_secret_key(who, home.path))


def _start_agent(home):
    """gpg starts the agent on first use; so do we here."""
    gpg.run(['--list-secret-keys'], gnupghome=home.path)
    subprocess.run(['gpg-connect-agent', '--homedir', home.path, '/bye'],
                   capture_output=True, check=True)


@pytest.mark.parametrize('algorithm', ['rsa2048', 'nistp256', 'cv25519'])
def test_agent_decrypts_what_gpg_decrypts(subkeys_gpg_home, algorithm):
    home = subkeys_gpg_home
    _start_agent(home)
    keyring = home.export_public('Carol')
    keyid = bytes.fromhex(home.subkeys[algorithm])
    texts = [os.urandom(32).hex().encode() for _ in range(3)]
    messages = [openpgp_pubkey.encrypt_to_public_keys(text, keyring, [keyid])
                for text in texts]
    subkeys = _listing(home, home.keys['Carol'])
    assert subkeys[keyid].algorithm in (1, 18)
    got = gpg_agent.decrypt_many(messages, subkeys, home.path)
    assert got == texts
    assert [gpg.decrypt(m, home.path) for m in messages] == texts


def test_key_files_gpg_writes_are_read(gpg_home):
    _start_agent(gpg_home)
    alice = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    bob = gpg.export_public_key(gpg_home.keys['Bob'], gpg_home.path)
    message = gpg.encrypt_to_keyring(b'ab' * 32, gpg.keyring_add(bob, alice))
    subkeys = _listing(gpg_home, gpg_home.keys['Alice'])
    # Bob's packet comes first and is skipped: not a key of this listing
    assert gpg_agent.decrypt_many([message, b'junk'], subkeys,
                                  gpg_home.path) == [b'ab' * 32, None]


def test_what_the_agent_cannot_do_is_left_to_gpg(gpg_home, tmp_path):
    _start_agent(gpg_home)
    alice = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    message = gpg.encrypt_to_keyring(b'cd' * 32, alice)
    subkeys = _listing(gpg_home, gpg_home.keys['Alice'])
    bobs = _listing(gpg_home, gpg_home.keys['Bob'])
    for wanted, home in ((bobs, gpg_home.path),      # not for this key
                         ({}, gpg_home.path),        # no keys listed
                         (subkeys, str(tmp_path))):  # no agent there
        assert gpg_agent.decrypt_many([message], wanted, home) == [None]


def test_a_passphrase_it_would_have_to_ask_for_is_left_to_gpg():
    with GpgHome('gp') as home:
        home.gpg('--passphrase', 'secret', '--pinentry-mode', 'loopback',
                 '--quick-gen-key', 'Dan <dan@example.com>', 'future-default',
                 'default', 'never')
        message = gpg.encrypt_to_keyring(
            b'ef' * 32, home.export_public('dan@example.com'))
        subkeys = _listing(home, 'dan@example.com')
        subprocess.run(['gpgconf', '--homedir', home.path, '--reload',
                        'gpg-agent'], capture_output=True, check=True)
        _start_agent(home)
        assert gpg_agent.decrypt_many([message], subkeys, home.path) == [None]


def test_aes_key_unwrap_matches_rfc_3394():
    from cryptography.hazmat.primitives import keywrap
    for kek_size in (16, 24, 32):
        kek = os.urandom(kek_size)
        key = os.urandom(40)
        wrapped = keywrap.aes_key_wrap(kek, key)
        assert gpg_agent.aes_key_unwrap(kek, wrapped) == key
        damaged = wrapped[:-1] + bytes([wrapped[-1] ^ 1])
        with pytest.raises(gpg_agent.NotHere):
            gpg_agent.aes_key_unwrap(kek, damaged)


def test_secret_listing_keeps_only_keys_with_their_secret_half():
    listing = (
        b'sec:u:255:22:1111111111111111:1::::::scESC:::+::ed25519:::0:\n'
        b'fpr:::::::::' + b'A' * 40 + b':\n'
        b'grp:::::::::' + b'B' * 40 + b':\n'
        b'ssb:u:255:18:2222222222222222:1::::::e:::#::cv25519::\n'
        b'fpr:::::::::' + b'C' * 40 + b':\n'
        b'grp:::::::::' + b'D' * 40 + b':\n'
        b'ssb:u:2048:1:3333333333333333:1::::::e:::+:::::\n'
        b'fpr:::::::::' + b'E' * 40 + b':\n'
        b'grp:::::::::' + b'F' * 40 + b':\n')
    found = gpg_agent.parse_secret_listing(listing)
    assert sorted(found) == [bytes.fromhex('1' * 16), bytes.fromhex('3' * 16)]
    rsa = found[bytes.fromhex('3' * 16)]
    assert (rsa.algorithm, rsa.keygrip, rsa.fingerprint) == (
        1, 'F' * 40, bytes.fromhex('E' * 40))


def test_assuan_escapes_round_trip():
    data = bytes(range(256)) + b'%%\r\n'
    assert gpg_agent._unescape(gpg_agent._escape(data)) == data
    assert b'\n' not in gpg_agent._escape(data)


def test_socket_found_where_gpgconf_says(gpg_home, monkeypatch, tmp_path):
    _start_agent(gpg_home)
    real = os.path.join(gpg_home.path, 'S.gpg-agent')
    assert gpg_agent.socket_path(gpg_home.path) == real
    monkeypatch.setattr(gpg_agent, '_gpgconf_socket', lambda home: real)
    assert gpg_agent.socket_path(str(tmp_path)) == real
    monkeypatch.setattr(gpg_agent, '_gpgconf_socket', lambda home: None)
    assert gpg_agent.socket_path(str(tmp_path)) is None


def test_a_tampered_message_gives_none_and_the_rest_goes_on(gpg_home):
    _start_agent(gpg_home)
    alice = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    good = gpg.encrypt_to_keyring(b'gh' * 32, alice)
    tampered = good[:-1] + bytes([good[-1] ^ 1])
    subkeys = _listing(gpg_home, gpg_home.keys['Alice'])
    got = gpg_agent.decrypt_many([good, tampered, good], subkeys,
                                 gpg_home.path)
    assert got == [b'gh' * 32, None, b'gh' * 32]


def test_the_agent_is_asked_in_the_homes_turn(gpg_home, monkeypatch):
    """Not beside a gpg run in the same home (see gpg.home_turn)."""
    _start_agent(gpg_home)
    alice = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    message = gpg.encrypt_to_keyring(b'ab' * 32, alice)
    subkeys = _listing(gpg_home, gpg_home.keys['Alice'])
    held = []
    real_decrypt = gpg_agent.decrypt
    monkeypatch.setattr(gpg_agent, 'decrypt', lambda *args: (
        held.append(gpg.home_turn(gpg_home.path).locked()),
        real_decrypt(*args))[1])
    assert gpg_agent.decrypt_many([message], subkeys, gpg_home.path) == [
        b'ab' * 32]
    assert held == [True]


def test_each_plaintext_is_handed_over_as_soon_as_it_is_decrypted(gpg_home):
    _start_agent(gpg_home)
    keyring = gpg.export_public_key(gpg_home.keys['Alice'], gpg_home.path)
    texts = [b'%02d' % i * 32 for i in range(3)]
    messages = [gpg.encrypt_to_keyring(text, keyring) for text in texts]
    messages.insert(1, b'junk')
    handed = []
    got = gpg_agent.decrypt_many(
        messages, _listing(gpg_home, gpg_home.keys['Alice']), gpg_home.path,
        each=lambda i, plain: handed.append((i, plain)))
    assert got == [texts[0], None, texts[1], texts[2]]
    assert handed == [(0, texts[0]), (2, texts[1]), (3, texts[2])]
