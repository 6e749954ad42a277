"""The OpenPGP algorithms obnam reads and writes (RFC 4880 §9): cipher
and hash ids, their CFB ciphers from the cryptography package (built once
per key where that pays), and the string-to-key derivation (§3.7) that
turns a passphrase into a key, cached because gpg's default S2K costs
about 200 ms."""

import functools
import hashlib
import threading

from obnamlib.crypto import cfb
from obnamlib.crypto.openpgp_aead import AES_KEY_SIZES
from obnamlib.crypto.openpgp_packets import OpenPgpFormatError

# Cipher algorithm id -> (cryptography class name, key bytes).
CIPHERS = {
    2: ('TripleDES', 24),
    3: ('CAST5', 16),
    4: ('Blowfish', 16),
    7: ('AES', 16),
    8: ('AES', 24),
    9: ('AES', 32),
    11: ('Camellia', 16),
    12: ('Camellia', 24),
    13: ('Camellia', 32),
}
HASHES = {1: 'md5', 2: 'sha1', 3: 'ripemd160', 8: 'sha256', 9: 'sha384',
          10: 'sha512', 11: 'sha224'}

AES256 = 9
SHA256 = 8
S2K_ITERATED = 3


def _cipher(cipher_id):
    """(class name, key bytes) of a cipher id; a format error if unknown."""
    try:
        return CIPHERS[cipher_id]
    except KeyError:
        raise OpenPgpFormatError(
            reason='unsupported cipher algorithm %d' % cipher_id)


def _algorithm_name(cipher_id):
    return _cipher(cipher_id)[0]


def key_length(cipher_id):
    return _cipher(cipher_id)[1]


def block_size(cipher_id):
    return 16 if CIPHERS.get(cipher_id, ('', 0))[0] in ('AES', 'Camellia') \
        else 8


def whole_message_aes(cipher_id, key):
    """Whether cfb.CfbMessageDecryptor can decrypt with this key."""
    return AES_KEY_SIZES.get(cipher_id) == len(key)


def cfb_cipher(cipher_id, key, iv):
    """A CFB cipher of this OpenPGP algorithm (cryptography's Cipher)."""
    return cfb.cipher(_available_algorithm(cipher_id), key, iv)


@functools.lru_cache(maxsize=None)
def _available_algorithm(cipher_id):
    """The algorithm's name, once this OpenSSL is seen to run it in CFB
    mode.  It may not: CAST5 and Blowfish are in OpenSSL's legacy
    provider, which CRYPTOGRAPHY_OPENSSL_NO_LEGACY or FIPS mode leave
    out, and cryptography then refuses the first encryptor or decryptor
    with UnsupportedAlgorithm; here that is a coded error."""
    from cryptography.exceptions import UnsupportedAlgorithm
    name = _algorithm_name(cipher_id)
    try:
        cfb.cipher(name, bytes(key_length(cipher_id)),
                   bytes(block_size(cipher_id))).decryptor()
    except UnsupportedAlgorithm:
        raise OpenPgpFormatError(
            reason='cipher %s is not available from the OpenSSL '
            'cryptography uses' % name)
    return name


@functools.lru_cache(maxsize=64)
def zero_iv_cfb(cipher_id, key):
    """The CFB cipher with a zero IV that SKESK and SEIPD packets use:
    built once per key (building one costs as much as encrypting a few
    KiB), each message then takes its own encryptor or decryptor."""
    return cfb_cipher(cipher_id, key, b'\0' * block_size(cipher_id))


# --- S2K (RFC 4880 §3.7) ------------------------------------------------

def s2k_count(code):
    return (16 + (code & 15)) << ((code >> 4) + 6)


def hash_new(hash_id):
    try:
        return hashlib.new(HASHES[hash_id])
    except (KeyError, ValueError):
        raise OpenPgpFormatError(reason='unsupported hash algorithm %d'
                                 % hash_id)


def derive_key(passphrase, size, hash_id, salt=b'', count=0):
    """The key S2K makes of passphrase (bytes); count 0 = not iterated."""
    material = salt + passphrase
    if count < len(material):
        count = len(material)
    out = b''
    preload = 0
    while len(out) < size:
        h = hash_new(hash_id)
        h.update(b'\0' * preload)
        _feed(h, material, count)
        out += h.digest()
        preload += 1
    return out[:size]


def _feed(h, material, count):
    """Hash `count` bytes of material repeated (the iterated S2K)."""
    if not material:
        return
    block = material * max(1, 65536 // len(material))
    while count >= len(block):
        h.update(block)
        count -= len(block)
    h.update(block[:count])


class S2KCache:
    """Derived keys by (passphrase, S2K parameters): derive once per
    process, not once per file; thread-safe."""

    def __init__(self, limit=256):
        self.limit = limit
        self.keys = {}
        self.lock = threading.Lock()

    def get(self, passphrase, size, hash_id, salt, count):
        wanted = (passphrase, size, hash_id, salt, count)
        with self.lock:
            found = self.keys.get(wanted)
        if found is None:
            found = derive_key(passphrase, size, hash_id, salt, count)
            with self.lock:
                if len(self.keys) >= self.limit:
                    self.keys.pop(next(iter(self.keys)))
                self.keys[wanted] = found
        return found


def parse_s2k(body, pos):
    """(hash id, salt, count, position after) of an S2K specifier."""
    try:
        kind, hash_id = body[pos], body[pos + 1]
    except IndexError:
        raise OpenPgpFormatError(reason='S2K specifier is cut short')
    pos += 2
    if kind == 0:
        return hash_id, b'', 0, pos
    if kind == 1:
        return hash_id, bytes(body[pos:pos + 8]), 0, pos + 8
    if kind == 3:
        if pos + 9 > len(body):
            raise OpenPgpFormatError(reason='S2K specifier is cut short')
        return (hash_id, bytes(body[pos:pos + 8]), s2k_count(body[pos + 8]),
                pos + 9)
    raise OpenPgpFormatError(reason='unsupported S2K type %d' % kind)

