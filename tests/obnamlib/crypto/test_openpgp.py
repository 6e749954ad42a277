import os
import pathlib
import subprocess
import sys
import tarfile
import zlib

import pytest

from obnamlib.repo.storage import filters
from obnamlib.crypto import (
    openpgp, openpgp_algorithms, openpgp_packets, openpgp_pubkey)
from tests.gpg_fixture import (REFERENCE_DIR, GpgHome,  # noqa: F401
                               plain_gpg_home, reference_gpg_home,
                               subkeys_gpg_home)
from tests.reference_data import extract_all
from tests import paths

PASSPHRASE = 'd5b11990' * 8
ROOT = pathlib.Path(paths.CHECKOUT)
SIZES = [0, 1, 15, 16, 17, 191, 192, 8383, 8384, 100000, (1 << 20) + 7]


def payload(size):
    return bytes((i * 7 + i // 251) & 0xff for i in range(size))


@pytest.fixture
def cipher():
    return openpgp.SymmetricCipher()


@pytest.mark.parametrize('size', SIZES)
def test_round_trip(cipher, size):
    data = payload(size)
    assert cipher.decrypt(cipher.encrypt(data, PASSPHRASE), PASSPHRASE) == data


@pytest.mark.parametrize('size', [0, 1000, (1 << 20) + 3])
def test_decrypt_view_of_a_view_gives_same_plaintext(cipher, size):
    data = payload(size)
    stored = b'encrypt1\0' + cipher.encrypt(data, PASSPHRASE)
    plain = cipher.decrypt_view(memoryview(stored)[9:], PASSPHRASE)
    assert isinstance(cipher.decrypt(stored[9:], PASSPHRASE), bytes)
    assert bytes(plain) == data


def test_key_is_derived_once_per_passphrase(cipher):
    first = cipher.encrypt(b'a', PASSPHRASE)
    second = cipher.encrypt(b'a', PASSPHRASE)
    # Same SKESK packet (salt drawn once), different random prefix.
    assert first[:15] == second[:15]
    assert first[15:] != second[15:]
    assert len(cipher.cache.keys) == 1
    cipher.encrypt(b'a', 'other')
    assert len(cipher.cache.keys) == 2


def test_a_session_key_is_found_once_per_skesk_and_passphrase(
        cipher, monkeypatch):
    writer = openpgp.SymmetricCipher()
    messages = [writer.encrypt(b'%d' % i, PASSPHRASE) for i in range(3)]
    other = openpgp.SymmetricCipher().encrypt(b'x', PASSPHRASE)   # new salt
    found = []
    real = openpgp._skesk_key
    monkeypatch.setattr(openpgp, '_skesk_key', lambda body, passphrase,
                        cache: found.append(1) or real(body, passphrase, cache))
    assert [cipher.decrypt(m, PASSPHRASE) for m in messages] == [
        b'0', b'1', b'2']
    assert cipher.decrypt(other, PASSPHRASE) == b'x'
    assert len(found) == 2
    with pytest.raises(openpgp.DecryptionFailed):   # not the cached key
        cipher.decrypt(messages[0], 'wrong')
    monkeypatch.setattr(openpgp, 'SESSION_KEYS_KEPT', 2)
    cipher.decrypt(writer.encrypt(b'y', 'third'), 'third')
    assert len(cipher.session_keys) == 1     # full: started afresh


def test_written_packets(cipher):
    data = cipher.encrypt(b'hello', PASSPHRASE)
    packets = list(openpgp_packets.iter_packets(data))
    assert [tag for tag, _ in packets] == [3, 18]
    skesk = packets[0][1]
    assert skesk[:4] == bytes([4, 9, 3, 8])     # v4, AES256, iterated, SHA256
    assert packets[1][1][0] == 1                # SEIPD version 1


def test_wrong_passphrase_is_clear_error(cipher):
    data = cipher.encrypt(b'secret' * 10, PASSPHRASE)
    with pytest.raises(openpgp.DecryptionFailed) as info:
        cipher.decrypt(data, 'wrong')
    assert str(info.value).startswith('R5CF1CX: Decryption failed')


def test_tampered_data_fails_mdc(cipher):
    data = bytearray(cipher.encrypt(b'secret' * 10, PASSPHRASE))
    data[-30] ^= 1
    with pytest.raises(openpgp.DecryptionFailed) as info:
        cipher.decrypt(bytes(data), PASSPHRASE)
    assert 'MDC' in str(info.value)


def test_truncated_data_is_format_error(cipher):
    data = cipher.encrypt(b'secret' * 10, PASSPHRASE)
    with pytest.raises(openpgp_packets.OpenPgpFormatError):
        cipher.decrypt(data[:-5], PASSPHRASE)
    with pytest.raises(openpgp_packets.OpenPgpFormatError):
        cipher.decrypt(b'', PASSPHRASE)
    with pytest.raises(openpgp_packets.OpenPgpFormatError):
        cipher.decrypt(b'plain text', PASSPHRASE)


def test_s2k_count_decoding():
    assert openpgp_algorithms.s2k_count(0) == 1024
    assert openpgp_algorithms.s2k_count(96) == 65536
    assert openpgp_algorithms.s2k_count(255) == 65011712


def test_partial_body_lengths_are_joined():
    body = b'x' * 1000
    # 512-byte partial chunk, then 256, then the final 232 bytes.
    framed = bytes([0xc0 | 11, 0xe0 | 9]) + body[:512] + \
        bytes([0xe0 | 8]) + body[512:768] + bytes([192, 40]) + body[768:]
    tag, got, end = openpgp_packets.read_packet(framed)
    assert (tag, got, end) == (11, body, len(framed))


def test_old_format_headers():
    for first, length_bytes in ((0x80 | 11 << 2, b'\x05'),
                                (0x81 | 11 << 2, b'\x00\x05'),
                                (0x82 | 11 << 2, b'\x00\x00\x00\x05')):
        tag, body, _ = openpgp_packets.read_packet(
            bytes([first]) + length_bytes + b'abcde')
        assert (tag, body) == (11, b'abcde')
    tag, body, _ = openpgp_packets.read_packet(bytes([0x83 | 8 << 2]) + b'zz')
    assert (tag, body) == (8, b'zz')


# --- interoperability with real gpg --------------------------------------

@pytest.mark.parametrize('size', [0, 5000, (1 << 20) + 3])
def test_gpg_decrypts_what_we_write(cipher, plain_gpg_home, size):
    data = payload(size)
    encrypted = cipher.encrypt(data, PASSPHRASE)
    result = plain_gpg_home.decrypt(encrypted, passphrase=PASSPHRASE)
    assert result.stdout == data
    listing = plain_gpg_home.list_packets(encrypted, passphrase=PASSPHRASE)
    text = listing.stdout.decode()
    assert 'tag=20' not in text
    assert 'tag=18' in text and 'mdc_method: 2' in text
    assert 'cipher 9' in text


def gpg_symmetric(home, data, *options):
    return home.gpg('-q', '--no-textmode', '--symmetric', '--pinentry-mode',
                    'loopback', *options, input=data,
                    passphrase=PASSPHRASE).stdout


@pytest.mark.parametrize('size', [0, (1 << 20) + 11])
def test_we_decrypt_gpg_default(cipher, plain_gpg_home, size):
    data = payload(size)
    encrypted = gpg_symmetric(plain_gpg_home, data)
    assert cipher.decrypt(encrypted, PASSPHRASE) == data


@pytest.mark.parametrize('algo', ['zlib', 'zip', 'bzip2', 'none'])
def test_we_decrypt_gpg_compression(cipher, plain_gpg_home, algo):
    data = b'compressible ' * 20000 + payload(3000)
    encrypted = gpg_symmetric(plain_gpg_home, data, '--compress-algo', algo)
    first = first_inner_packet(cipher, encrypted)
    expected = {'zip': (8, 1), 'zlib': (8, 2), 'bzip2': (8, 3),
                'none': (11, ord('b'))}
    assert (first[0], first[1][0]) == expected[algo]
    assert cipher.decrypt(encrypted, PASSPHRASE) == data


def first_inner_packet(cipher, encrypted):
    """(tag, body) of the first packet inside the SEIPD packet."""
    packets = list(openpgp_packets.iter_packets(encrypted))
    assert [tag for tag, _ in packets] == [3, 18]
    cipher_id, key = openpgp._skesk_key(packets[0][1], PASSPHRASE.encode(),
                                        cipher.cache)
    plain = openpgp._decrypt_seipd(packets[1][1], cipher_id, key)
    tag, body, _ = openpgp_packets.read_packet(plain)
    return tag, body


def test_a_cipher_openssl_lacks_is_a_format_error():
    """CAST5 (2012-2014 repositories) with OpenSSL's legacy provider
    left out, here in a fresh interpreter."""
    script = ('from obnamlib.crypto import openpgp_algorithms as alg\n'
              'try:\n'
              '    alg.cfb_cipher(3, bytes(16), bytes(8)).decryptor()\n'
              'except alg.OpenPgpFormatError as e:\n'
              '    print(e.code, e)\n'
              'else:\n'
              '    print("available")\n')
    env = dict(os.environ, CRYPTOGRAPHY_OPENSSL_NO_LEGACY='1')
    result = subprocess.run([sys.executable, '-c', script], env=env,
                            cwd=ROOT, capture_output=True, timeout=50)
    assert result.stderr == b''
    out = result.stdout.decode()
    if out == 'available\n':
        pytest.skip('this cryptography loads the legacy provider anyway')
    assert out.startswith('REFFF4X ')
    assert 'cipher CAST5 is not available from the OpenSSL' in out


@pytest.mark.parametrize('algo', ['CAST5', 'AES128', '3DES', 'CAMELLIA256'])
def test_we_decrypt_gpg_ciphers(cipher, plain_gpg_home, algo):
    data = payload(70000)
    # gpg 2.3 and later write CAST5 and 3DES only when allowed to
    allow = ('--allow-old-cipher-algos',) \
        if plain_gpg_home.version() >= (2, 3) else ()
    encrypted = gpg_symmetric(plain_gpg_home, data, *allow,
                              '--cipher-algo', algo)
    assert cipher.decrypt(encrypted, PASSPHRASE) == data


def test_we_decrypt_gpg_without_mdc(cipher, plain_gpg_home):
    data = payload(5000)
    encrypted = gpg_symmetric(plain_gpg_home, data, '--cipher-algo', 'CAST5',
                              '--rfc2440')
    assert [tag for tag, _ in openpgp_packets.iter_packets(encrypted)] == \
        [3, 9]
    assert cipher.decrypt(encrypted, PASSPHRASE) == data
    with pytest.raises(openpgp.DecryptionFailed):
        cipher.decrypt(encrypted, 'wrong passphrase')


@pytest.mark.parametrize('mode_hash', [('1', 'SHA1'), ('0', 'SHA512')])
def test_we_decrypt_gpg_s2k_modes(cipher, plain_gpg_home, mode_hash):
    mode, digest = mode_hash
    data = payload(1000)
    encrypted = gpg_symmetric(plain_gpg_home, data, '--s2k-mode', mode,
                              '--s2k-digest-algo', digest)
    assert cipher.decrypt(encrypted, PASSPHRASE) == data


# --- the Obnam 1.x reference repository ----------------------------------

@pytest.fixture(scope='module')
def reference_repo(tmp_path_factory):
    dest = tmp_path_factory.mktemp('ref')
    name = 'repo-format-6-encrypted-deflated.tar.xz'
    with tarfile.open(os.path.join(REFERENCE_DIR, name)) as tar:
        extract_all(tar, str(dest))
    return dest / 'repo'


@pytest.mark.parametrize('toplevel', ['clientlist', 'chunklist', 'chunks'])
def test_reference_repository_files(cipher, reference_repo,
                                    reference_gpg_home, toplevel):
    top = reference_repo / toplevel
    passphrase = reference_gpg_home.decrypt(
        (top / 'key').read_bytes()).stdout.decode()
    assert len(passphrase) == 64
    checked = 0
    for dirpath, _, names in os.walk(str(top)):
        for name in names:
            if name in ('key', 'userkeys', 'lock'):
                continue
            with open(os.path.join(dirpath, name), 'rb') as f:
                raw = f.read()
            assert raw.startswith(b'encrypt1\0')
            ours = cipher.decrypt(raw[9:], passphrase)
            if checked < 2:     # gpg is slow; compare a sample
                theirs = reference_gpg_home.decrypt(
                    raw[9:], passphrase=passphrase, ignore_mdc=True).stdout
                assert ours == theirs
            filters.unwrap(raw, lambda d: cipher.decrypt(d, passphrase))
            checked += 1
    assert checked > 0
    if toplevel == 'clientlist':
        meta = filters.unwrap((top / 'metadata').read_bytes(),
                              lambda d: cipher.decrypt(d, passphrase))
        assert meta.startswith(b'[metadata]\n')
        assert b'key_size = 25' in meta


def test_reference_userkeys_is_untagged_keyring(cipher, reference_repo,
                                                reference_gpg_home):
    top = reference_repo / 'clientlist'
    passphrase = reference_gpg_home.decrypt(
        (top / 'key').read_bytes()).stdout.decode()
    keyring = cipher.decrypt((top / 'userkeys').read_bytes(), passphrase)
    tags = [tag for tag, _ in openpgp_packets.iter_packets(keyring)]
    assert tags[0] == 6        # public key packet
    assert 13 in tags          # user id


# --- public-key encryption (the fallback when gpg writes OCB) ---------------

@pytest.mark.parametrize('algorithm', ['rsa2048', 'nistp256', 'cv25519'])
def test_gpg_decrypts_what_we_encrypt_to_public_keys(subkeys_gpg_home,
                                                     algorithm):
    home = subkeys_gpg_home
    keyring = home.export_public('Carol')
    keyid = bytes.fromhex(home.subkeys[algorithm])
    message = openpgp_pubkey.encrypt_to_public_keys(b'ab' * 32, keyring,
                                                    [keyid])
    packets = list(openpgp_packets.iter_packets(message))
    assert [(tag, body[0]) for tag, body in packets] == [(1, 3), (18, 1)]
    assert packets[0][1][1:9] == keyid
    assert home.decrypt(message).stdout == b'ab' * 32


def test_encrypt_to_several_public_keys(subkeys_gpg_home):
    home = subkeys_gpg_home
    keyids = [bytes.fromhex(k) for k in sorted(home.subkeys.values())]
    message = openpgp_pubkey.encrypt_to_public_keys(
        b'x' * 100, home.export_public('Carol'), keyids)
    tags = [tag for tag, _ in openpgp_packets.iter_packets(message)]
    assert tags == [1, 1, 1, 18]
    assert home.decrypt(message).stdout == b'x' * 100


def test_encrypt_to_unknown_or_signing_only_key_refused(subkeys_gpg_home):
    home = subkeys_gpg_home
    keyring = home.export_public('Carol')
    with pytest.raises(openpgp_pubkey.UnsupportedRecipient) as info:
        openpgp_pubkey.encrypt_to_public_keys(b'x', keyring, [b'\x01' * 8])
    assert str(info.value) == ('R5761CX: Cannot encrypt to OpenPGP key '
                               '0101010101010101: no version 4 key with '
                               'this id in the keyring')
    primary = bytes.fromhex(home.keys['Carol'][-16:])    # ed25519, signing
    with pytest.raises(openpgp_pubkey.UnsupportedRecipient) as info:
        openpgp_pubkey.encrypt_to_public_keys(b'x', keyring, [primary])
    assert 'public-key algorithm 22 is not supported' in str(info.value)


@pytest.mark.parametrize('cipher_id', [9, 7, 13, 3, 2])
def test_reused_decryptor_matches_a_fresh_one_for_every_length(cipher_id):
    # Lengths on and off block boundaries, in a row on one decryptor.
    key = bytes(range(openpgp_algorithms.key_length(cipher_id)))
    reused = openpgp._ZeroIvDecryptor(cipher_id, key)
    zero_iv = b'\0' * openpgp_algorithms.block_size(cipher_id)
    for size in [0, 1, 7, 8, 9, 15, 16, 17, 32, 33, 1000, 16, 5, 0, 24]:
        data = payload(size)
        fresh = openpgp_algorithms.cfb_cipher(cipher_id, key,
                                              zero_iv).decryptor()
        assert bytes(reused.decrypt(data)) == fresh.update(data)


def test_reused_decryptor_recovers_after_a_failed_call():
    key = bytes(32)
    reused = openpgp._ZeroIvDecryptor(9, key)
    reused.decrypt(payload(5))
    with pytest.raises(TypeError):
        reused.decrypt('not bytes')
    fresh = openpgp_algorithms.cfb_cipher(9, key, bytes(16)).decryptor()
    assert bytes(reused.decrypt(payload(40))) == fresh.update(payload(40))


def _general_read(data, pos=0):
    """A packet read straight from the header functions, for comparing."""
    first = data[pos]
    if first & 0x40:
        return openpgp_packets._new_header(data, pos + 1, first)
    return openpgp_packets._old_header(data, pos + 1, first)


def _outcome(read, data):
    try:
        tag, body, end = read(data)
        return tag, bytes(body), end
    except openpgp_packets.OpenPgpFormatError as e:
        return str(e)


@pytest.mark.parametrize('size', [0, 1, 191, 192, 8383, 8384, 70000])
def test_packet_headers_read_alike_by_both_paths(size):
    body = bytes(range(256)) * (size // 256 + 1)
    whole = openpgp_packets.packet(18, body[:size]) + b'tail'
    for data in (whole, memoryview(whole), whole[:len(whole) - 5],
                 whole[:2], whole[:1]):
        assert _outcome(openpgp_packets.read_packet, data) == \
            _outcome(_general_read, data)
    tag, got, end = openpgp_packets.read_packet(whole)
    assert (tag, bytes(got), whole[end:]) == (18, body[:size], b'tail')


def test_partial_lengths_still_take_the_general_path():
    # a partial body length (2**9) then a one-byte final length
    data = bytes([0xc0 | 11, 0xe9]) + b'a' * 512 + bytes([3]) + b'bcd'
    assert _outcome(openpgp_packets.read_packet, data) == (
        11, b'a' * 512 + b'bcd', len(data))


def test_messages_in_a_row_each_start_from_a_zero_iv(plain_gpg_home):
    """One thread's encryptor is reused, brought back to a zero IV after
    each message: every message reads alone, by us and by gpg, whatever
    the length of the message before it."""
    cipher = openpgp.SymmetricCipher()
    sizes = [0, 1, 15, 16, 17, 31, 32, 33, 1000, 65536, 5, 0, 48]
    messages = [(payload(size), cipher.encrypt(payload(size), PASSPHRASE))
                for size in sizes]
    for data, message in messages:
        assert cipher.decrypt(message, PASSPHRASE) == data
    for data, message in messages[1:5]:
        assert plain_gpg_home.decrypt(message,
                                      passphrase=PASSPHRASE).stdout == data
