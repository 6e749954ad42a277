"""Reading what GnuPG 2.4.7 writes with OCB (AEAD packets, tag 20; SKESK
v5): messages made by Debian 13's gpg 2.4.7 with --force-ocb, as upstream
GnuPG 2.4 writes them to keys that advertise AEAD (tests/data/gpg24/README).
Read in process (openpgp, gpg_agent) and compared with this machine's gpg."""

import os
import pathlib
import subprocess

import pytest
from cryptography.exceptions import InvalidTag

from obnamlib import errors
from obnamlib.crypto import (gpg, gpg_agent, openpgp, openpgp_aead,
                             openpgp_algorithms, openpgp_packets)
from tests.gpg_fixture import GpgHome
from tests import paths

DATA = pathlib.Path(paths.DATA) / 'gpg24'
PASSPHRASE = '0123456789abcdef' * 4
SHORT = b'hello, gpg 2.4.7'
PLAIN = (DATA / 'plain-1000').read_bytes()


def fixture(name):
    return (DATA / name).read_bytes()


def shapes(message):
    return [(tag, bytes(body[:1])) for tag, body in
            openpgp_packets.iter_packets(message)]


@pytest.mark.parametrize('name,expected', [
    ('sym-ocb-short.gpg', SHORT),
    ('sym-ocb-chunked.gpg', PLAIN),     # 64-byte chunks, partial lengths
    ('sym-ocb-exact.gpg', PLAIN[:128]),  # uncompressed, chunks end flush
    ('sym-default-short.gpg', SHORT),   # gpg 2.4.7's default: SEIPD v1
])
def test_symmetric_messages_of_gpg_2_4_are_read(name, expected):
    message = fixture(name)
    if 'ocb' in name:
        assert shapes(message)[0] == (openpgp_packets.SKESK, b'\x05')
        assert shapes(message)[1][0] == openpgp_packets.AEAD
    assert openpgp.decrypt_symmetric(message, PASSPHRASE) == expected


def test_wrong_passphrase_for_skesk5_is_a_decryption_failure():
    with pytest.raises(openpgp.DecryptionFailed) as info:
        openpgp.decrypt_symmetric(fixture('sym-ocb-short.gpg'), 'x' * 64)
    assert 'wrong passphrase' in str(info.value)


@pytest.mark.parametrize('offset', [120, 300, -5])  # a chunk; the final tag
def test_a_changed_byte_in_an_aead_packet_is_refused(offset):
    message = bytearray(fixture('sym-ocb-chunked.gpg'))
    message[offset] ^= 0x40
    with pytest.raises(openpgp.DecryptionFailed) as info:
        openpgp.decrypt_symmetric(bytes(message), PASSPHRASE)
    assert 'AEAD tag check failed' in str(info.value)


def test_a_dropped_chunk_is_refused():
    """Chunks carry their index in their nonce and associated data."""
    message = fixture('sym-ocb-exact.gpg')
    tag, body, end = openpgp_packets.read_packet(message, 79)
    assert tag == openpgp_packets.AEAD and end == len(message)
    head = 4 + 15
    dropped = bytes(body[:head]) + bytes(body[head + 80:])
    _, skesk_body, _ = openpgp_packets.read_packet(message)
    _, key = openpgp._skesk_key(skesk_body, PASSPHRASE.encode(),
                                openpgp_algorithms.S2KCache())
    assert bytes(openpgp.decrypt_aead(body, key)) == PLAIN[:128]
    with pytest.raises(openpgp.DecryptionFailed):
        openpgp.decrypt_aead(dropped, key)      # the right key
    skesk = message[:79]
    forged = skesk + openpgp_packets.packet(openpgp_packets.AEAD, dropped)
    with pytest.raises(openpgp.DecryptionFailed):
        openpgp.decrypt_symmetric(forged, PASSPHRASE)


def aead_body(name='sym-ocb-chunked.gpg'):
    """The AEAD packet's body of a fixture, and the SKESK before it."""
    message = fixture(name)
    skesk_end = openpgp_packets.read_packet(message)[2]
    return message[:skesk_end], bytes(
        openpgp_packets.read_packet(message, skesk_end)[1])


@pytest.mark.parametrize('field,value,reason', [
    (0, 2, 'unsupported AEAD packet version'),
    (1, 13, 'AEAD with cipher 13 is not supported'),    # Camellia-256
    (1, 99, 'AEAD with cipher 99 is not supported'),
    (2, 3, 'unknown AEAD algorithm 3'),
    (3, 57, 'bad AEAD chunk size'),
    (3, 255, 'bad AEAD chunk size'),
])
def test_a_damaged_aead_header_is_a_format_error(field, value, reason):
    skesk, body = aead_body()
    damaged = bytearray(body)
    damaged[field] = value
    message = skesk + openpgp_packets.packet(openpgp_packets.AEAD,
                                             bytes(damaged))
    with pytest.raises(openpgp_packets.OpenPgpFormatError) as info:
        openpgp.decrypt_symmetric(message, PASSPHRASE)
    assert reason in str(info.value)
    assert info.value.code == 'REFFF4X'


@pytest.mark.parametrize('name', ['sym-ocb-short.gpg', 'sym-ocb-chunked.gpg',
                                  'sym-ocb-exact.gpg'])
def test_every_cut_of_an_aead_message_is_a_coded_error(name):
    """Cut anywhere (in the SKESK, a chunk, a tag, or a packet header of
    the plaintext): an ObnamError, never another exception."""
    message = fixture(name)
    for end in range(len(message)):
        with pytest.raises(errors.ObnamError):
            openpgp.decrypt_symmetric(message[:end], PASSPHRASE)


@pytest.mark.parametrize('length', [
    b'\xff\xff\xff\xff\xff',        # 4 GiB - 1, definite
    b'\xfe',                        # a 1 GiB partial part
])
def test_an_aead_packet_claiming_more_than_there_is_is_a_format_error(
        length):
    skesk, body = aead_body()
    message = skesk + bytes([0xc0 | openpgp_packets.AEAD]) + length + body
    with pytest.raises(openpgp_packets.OpenPgpFormatError) as info:
        openpgp.decrypt_symmetric(message, PASSPHRASE)
    assert 'packet is cut short' in str(info.value)


def test_without_ocb_in_openssl_an_ocb_message_is_a_format_error(
        monkeypatch):
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.ciphers import aead

    def no_ocb(key):
        raise UnsupportedAlgorithm('no OCB here')
    monkeypatch.setattr(aead, 'AESOCB3', no_ocb)
    openpgp_aead._aead.cache_clear()
    key = os.urandom(32)
    with pytest.raises(openpgp_packets.OpenPgpFormatError) as info:
        openpgp.decrypt_aead(bytes([1, 9, openpgp_aead.OCB, 0]) +
                             bytes(15 + 16), key)
    assert 'OCB is not supported' in str(info.value)
    openpgp_aead._aead.cache_clear()


def test_a_chunk_size_that_disagrees_with_the_chunks_fails_the_tags():
    """64-byte chunks read as 128-byte ones: no tag matches."""
    skesk, body = aead_body()
    assert body[3] == 0
    damaged = body[:3] + b'\x01' + body[4:]
    with pytest.raises(openpgp.DecryptionFailed):
        openpgp.decrypt_symmetric(
            skesk + openpgp_packets.packet(openpgp_packets.AEAD, damaged),
            PASSPHRASE)


def seal_ocb(key, plain, chunk_octet=0):
    """An AEAD packet body (OCB) of plain, made here as gpg makes them:
    for messages no gpg would write."""
    from cryptography.hazmat.primitives.ciphers.aead import AESOCB3
    head = bytes([1, 9, openpgp_aead.OCB, chunk_octet])
    iv = os.urandom(15)
    ad = bytes([0xc0 | openpgp_packets.AEAD]) + head
    ocb = AESOCB3(key)
    size = 1 << (chunk_octet + 6)
    sealed = []
    pieces = [plain[pos:pos + size] for pos in range(0, len(plain), size)]
    for index, piece in enumerate(pieces):
        sealed.append(ocb.encrypt(openpgp_aead._nonce(iv, index), piece,
                                  ad + index.to_bytes(8, 'big')))
    final = len(pieces).to_bytes(8, 'big') + len(plain).to_bytes(8, 'big')
    sealed.append(ocb.encrypt(openpgp_aead._nonce(iv, len(pieces)), b'',
                              ad + final))
    return head + iv + b''.join(sealed)


def test_our_sealing_is_read_in_every_chunking():
    key = os.urandom(32)
    for size in (0, 1, 63, 64, 65, 128, 1000):
        data = os.urandom(size)
        plain = openpgp.literal_header(size) + data
        for chunk_octet in (0, 1, 16):
            body = seal_ocb(key, plain, chunk_octet)
            assert bytes(openpgp.decrypt_aead(body, key)) == data


@pytest.mark.parametrize('plain,reason', [
    (b'', 'no literal data packet'),
    (openpgp.literal_header(100) + b'x' * 50, 'packet is cut short'),
    (b'\xcb', 'packet is cut short'),      # a header, then nothing
    (b'garbage', 'no packet header'),
])
def test_a_plaintext_that_ends_in_the_middle_is_a_format_error(plain,
                                                                reason):
    """Every tag matches, but what they protect is not a whole message."""
    key = os.urandom(32)
    with pytest.raises(openpgp_packets.OpenPgpFormatError) as info:
        openpgp.decrypt_aead(seal_ocb(key, plain), key)
    assert reason in str(info.value)


def test_a_final_tag_over_another_length_is_refused():
    """The final tag covers the plaintext's length: chunks dropped from
    the end with the final tag kept are found out."""
    key = os.urandom(32)
    plain = openpgp.literal_header(200) + os.urandom(200)
    body = seal_ocb(key, plain)
    head = 4 + 15
    cut = body[:head + 80] + body[-16:]     # first chunk, final tag
    with pytest.raises(openpgp.DecryptionFailed):
        openpgp.decrypt_aead(cut, key)


# The EAX paper's test vectors (Bellare, Rogaway, Wagner), first two:
# key, nonce, header, message, ciphertext with tag.
EAX_VECTORS = [
    ('233952DEE4D5ED5F9B9C6D6FF80FF478', '62EC67F9C3A4A407FCB2A8C49031A8B3',
     '6BFB914FD07EAE6B', '', 'E037830E8389F27B025A2D6527E79D01'),
    ('91945D3F4DCBEE0BF45EF52255F095A4', 'BECAF043B0A23D843194BA972C66DEBD',
     'FA3BFD4806EB53FA', 'F7FB', '19DD5C4C9331049D0BDAB0277408F67967E5'),
]


@pytest.mark.parametrize('key,nonce,header,message,sealed', EAX_VECTORS)
def test_eax_matches_the_papers_vectors(key, nonce, header, message, sealed):
    eax = openpgp_aead._Eax(bytes.fromhex(key))
    assert eax.decrypt(bytes.fromhex(nonce), bytes.fromhex(sealed),
                       bytes.fromhex(header)) == bytes.fromhex(message)
    broken = bytearray.fromhex(sealed)
    broken[-1] ^= 1
    with pytest.raises(InvalidTag):
        eax.decrypt(bytes.fromhex(nonce), bytes(broken),
                    bytes.fromhex(header))


@pytest.fixture(scope='module')
def gpg24_home():
    """A GnuPG home holding the key gpg 2.4.7 made with its defaults
    (ed25519 + cv25519, no passphrase), imported by this machine's gpg."""
    home = GpgHome('g4')
    home.gpg('--import', str(DATA / 'secret-key.gpg'))
    subprocess.run(['gpg-connect-agent', '--homedir', home.path, '/bye'],
                   capture_output=True, check=True)
    yield home
    home.cleanup()


def test_key_made_by_gpg_2_4_has_its_default_algorithms(gpg24_home):
    listing = gpg.require_secret_key(
        (DATA / 'fingerprint').read_text().strip(), gpg24_home.path)
    subkeys = gpg_agent.parse_secret_listing(listing)
    assert sorted((k.algorithm, k.curve) for k in subkeys.values()) == [
        (18, 'cv25519'), (22, 'ed25519')]


@pytest.mark.parametrize('name,expected', [
    ('pk-ocb-short.gpg', SHORT), ('pk-ocb-chunked.gpg', PLAIN),
    ('pk-default-short.gpg', SHORT)])
def test_agent_path_reads_public_key_messages_of_gpg_2_4(gpg24_home, name,
                                                         expected):
    message = fixture(name)
    fingerprint = (DATA / 'fingerprint').read_text().strip()
    subkeys = gpg_agent.parse_secret_listing(
        gpg.require_secret_key(fingerprint, gpg24_home.path))
    got = []
    assert gpg_agent.decrypt_many(
        [message], subkeys, gpg24_home.path,
        each=lambda i, plain: got.append(plain)) == [expected]
    assert got == [expected]        # in process, not left to gpg
    assert gpg.decrypt(message, gpg24_home.path) == expected


def test_agent_path_refuses_a_changed_aead_message(gpg24_home):
    original = fixture('pk-ocb-short.gpg')
    message = bytearray(original)
    message[-3] ^= 1
    fingerprint = (DATA / 'fingerprint').read_text().strip()
    subkeys = gpg_agent.parse_secret_listing(
        gpg.require_secret_key(fingerprint, gpg24_home.path))
    # the agent is there and reads the unchanged message in the same call
    assert gpg_agent.decrypt_many([bytes(message), original], subkeys,
                                  gpg24_home.path) == [None, SHORT]


def test_obnam_never_writes_aead():
    message = openpgp.encrypt_symmetric(os.urandom(100), PASSPHRASE)
    assert shapes(message) == [(openpgp_packets.SKESK, b'\x04'),
                               (openpgp_packets.SEIPD, b'\x01')]
