"""Reading the OpenPGP AEAD packets GnuPG 2.3 and later write: the AEAD
encrypted data packet (tag 20, version 1) and the version 5 SKESK packet
that goes with it (draft-ietf-openpgp-rfc4880bis-10 §5.3, §5.16; GnuPG's
g10/decrypt-data.c).

Why: upstream GnuPG 2.4 encrypts with OCB to keys that advertise the AEAD
feature (its own new keys do), and for `gpg -c` with `--force-ocb`; an
Obnam 1.x that ran such a gpg wrote its `key`, `userkeys` and data files
so.  Debian's gpg 2.4 writes OCB only when forced, Debian 12's 2.2.40
reads it.  Obnam itself never writes these packets (old gpg and Obnam 1.x
cannot read them).

Packet body: version 1, cipher id, AEAD id (1 EAX, 2 OCB), chunk size
octet c (chunks of 2^(c+6) bytes), the starting IV (16 bytes for EAX, 15
for OCB), then each chunk's ciphertext with its 16-byte tag, then a final
16-byte tag over no data.  Chunk i's nonce is the IV with i (8 bytes, big
endian) XORed into its last 8 bytes; its associated data is the packet's
first 5 octets (0xd4, version, cipher, AEAD id, c) and i; the final tag's
also ends with the plaintext's total length (8 bytes).
"""

import functools
import hmac

from obnamlib.crypto.openpgp_packets import AEAD, SKESK, OpenPgpFormatError

EAX = 1
OCB = 2
NONCE_SIZES = {EAX: 16, OCB: 15}
TAG_SIZE = 16
# OpenPGP's AES cipher ids (RFC 4880 §9.2) -> key bytes: what AEAD
# packets, ECDH key wrapping and cfb.CfbMessageDecryptor take.
AES_KEY_SIZES = {7: 16, 8: 24, 9: 32}
_AEAD_HEADER = 0xc0 | AEAD   # the tag as a new-format header has it
_SKESK_HEADER = 0xc0 | SKESK


class AeadFailed(Exception):
    """A tag did not match: wrong key, or the data was changed."""


def _nonce_size(aead_id):
    try:
        return NONCE_SIZES[aead_id]
    except KeyError:
        raise OpenPgpFormatError(reason='unknown AEAD algorithm %d' % aead_id)


@functools.lru_cache(maxsize=64)
def _aead(aead_id, cipher_id, key):
    """decrypt(nonce, data_and_tag, ad) for this AEAD mode and key: made
    once per key, not once per message (each file of a repository)."""
    if AES_KEY_SIZES.get(cipher_id) != len(key):
        raise OpenPgpFormatError(
            reason='AEAD with cipher %d is not supported' % cipher_id)
    if aead_id == OCB:
        return _TagChecked(_ocb(key).decrypt)
    if aead_id == EAX:
        return _TagChecked(_Eax(key).decrypt)
    raise OpenPgpFormatError(reason='unknown AEAD algorithm %d' % aead_id)


def _ocb(key):
    """cryptography's AES-OCB3, which an OpenSSL built without OCB, its
    FIPS provider, or BoringSSL lacks: then a coded error, not
    cryptography's UnsupportedAlgorithm."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.ciphers.aead import AESOCB3
    try:
        return AESOCB3(key)
    except UnsupportedAlgorithm:
        raise OpenPgpFormatError(
            reason='OCB is not supported by the OpenSSL cryptography uses')


class _TagChecked:
    """cryptography's InvalidTag as AeadFailed."""

    def __init__(self, decrypt):
        from cryptography.exceptions import InvalidTag
        self.decrypt_raw = decrypt
        self.invalid_tag = InvalidTag

    def decrypt(self, nonce, data, ad):
        try:
            return self.decrypt_raw(nonce, bytes(data), ad)
        except self.invalid_tag:
            raise AeadFailed()


class _Eax:
    """EAX (Bellare, Rogaway, Wagner 2004) from AES-CTR and CMAC, which
    cryptography has; it has no EAX of its own."""

    def __init__(self, key):
        self.key = key

    def _omac(self, t, data):
        from cryptography.hazmat.primitives import cmac
        from cryptography.hazmat.primitives.ciphers import algorithms
        mac = cmac.CMAC(algorithms.AES(self.key))
        mac.update(bytes(15) + bytes([t]) + data)
        return mac.finalize()

    def decrypt(self, nonce, data, ad):
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers import (
            Cipher, algorithms, modes)
        ciphertext, tag = data[:-TAG_SIZE], data[-TAG_SIZE:]
        n = self._omac(0, nonce)
        expected = bytes(a ^ b ^ c for a, b, c in zip(
            n, self._omac(1, ad), self._omac(2, ciphertext)))
        if not hmac.compare_digest(expected, tag):
            raise InvalidTag()
        return Cipher(algorithms.AES(self.key),
                      modes.CTR(n)).decryptor().update(ciphertext)


def _nonce(iv, index):
    tail = int.from_bytes(iv[-8:], 'big') ^ index
    return iv[:-8] + tail.to_bytes(8, 'big')


def decrypt(body, key):
    """The plaintext (OpenPGP packets) of an AEAD packet's body, given its
    session key; AeadFailed if any tag does not match."""
    if len(body) < 4 or body[0] != 1:
        raise OpenPgpFormatError(reason='unsupported AEAD packet version')
    cipher_id, aead_id, chunk_octet = body[1], body[2], body[3]
    nonce_size = _nonce_size(aead_id)
    if chunk_octet > 56:
        raise OpenPgpFormatError(reason='bad AEAD chunk size')
    aead = _aead(aead_id, cipher_id, bytes(key))
    start = 4 + nonce_size
    iv = bytes(body[4:start])
    data = memoryview(body)[start:]
    if len(iv) != nonce_size or len(data) < TAG_SIZE:
        raise OpenPgpFormatError(reason='AEAD packet is cut short')
    head = bytes(body[:4])
    ad = bytes([_AEAD_HEADER]) + head
    step = (1 << (chunk_octet + 6)) + TAG_SIZE
    chunks = data[:-TAG_SIZE]
    out = []
    total = index = 0
    for pos in range(0, len(chunks), step):
        piece = chunks[pos:pos + step]
        if len(piece) <= TAG_SIZE:
            raise OpenPgpFormatError(reason='AEAD chunk is cut short')
        plain = aead.decrypt(_nonce(iv, index), piece,
                             ad + index.to_bytes(8, 'big'))
        out.append(plain)
        total += len(plain)
        index += 1
    aead.decrypt(_nonce(iv, index), data[-TAG_SIZE:],
                 ad + index.to_bytes(8, 'big') + total.to_bytes(8, 'big'))
    return b''.join(out)


def _skesk5_fields(body, s2k_end):
    """(cipher id, AEAD id, nonce, encrypted key with its tag) of a
    version 5 SKESK body whose S2K specifier ends at s2k_end."""
    aead_id = body[2]
    nonce_size = _nonce_size(aead_id)
    nonce = bytes(body[s2k_end:s2k_end + nonce_size])
    wrapped = bytes(body[s2k_end + nonce_size:])
    if len(nonce) != nonce_size or len(wrapped) <= TAG_SIZE:
        raise OpenPgpFormatError(reason='SKESK packet is cut short')
    return body[1], aead_id, nonce, wrapped


def skesk5_unwrap(body, s2k_end, kek):
    """(cipher id, session key) of a version 5 SKESK packet body whose S2K
    specifier ends at s2k_end, given the key the S2K made; AeadFailed
    for a wrong passphrase."""
    cipher_id, aead_id, nonce, wrapped = _skesk5_fields(body, s2k_end)
    ad = bytes([_SKESK_HEADER, 5, cipher_id, aead_id])
    return cipher_id, _aead(aead_id, cipher_id, bytes(kek)).decrypt(
        nonce, wrapped, ad)
