"""In-process OpenPGP symmetric encryption with a passphrase (RFC 4880),
compatible with `gpg --symmetric` / `gpg --decrypt` in both directions.

Why not a gpg process per file: its passphrase key derivation alone costs
about 200 ms.  A toplevel's passphrase is 256 random bits (format-6.md
§4.1), so we derive its key once per process with a cheap iterated S2K and
encrypt every file with AES-256 in a SEIPD packet with MDC (tag 18), the
kind every gpg since 1.4 reads.  We never write AEAD (tag 20) packets.

Reading accepts what gpg and old Obnam wrote: SKESK (tag 3) with or without
an encrypted session key, SEIPD with MDC (verified), old SED (tag 9, no
integrity check; CAST5 in 2012-2014 repositories), GnuPG 2.3+'s SKESK v5
and AEAD packets (tag 20, obnamlib.crypto.openpgp_aead), compressed packets
(ZIP, ZLIB, BZip2) and literal data.

It can also encrypt a short message to RSA and ECDH (Curve25519, NIST)
public keys, the way gpg 2.2 does: obnamlib.crypto.gpg falls back to that when a
newer gpg writes OCB for the toplevel keys.
"""

import bz2
import functools
import hashlib
import hmac
import logging
import os
import threading
import zlib

from obnamlib.crypto import cfb, openpgp_aead
from obnamlib import errors
from obnamlib.crypto.openpgp_aead import AES_KEY_SIZES
from obnamlib.crypto.openpgp_packets import (
    COMPRESSED, LITERAL, MARKER, MDC, SED, SEIPD, SKESK, AEAD,
    OpenPgpFormatError, header, iter_packets, packet, read_packet)

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
# Coded count 0 = 1024 bytes hashed: the passphrase already has 256 bits
# of entropy, so stretching it buys nothing.
WRITE_S2K_COUNT_CODE = 0
# Session keys SymmetricCipher remembers, at most (a repository written
# by many processes has many salts).
SESSION_KEYS_KEPT = 256

_MDC_HEADER = b'\xd3\x14'
_log = logging.getLogger(__name__)


class DecryptionFailed(errors.ObnamError):
    code = 'R5CF1CX'
    msg = 'Decryption failed: {reason}'


def _algorithm_name(cipher_id):
    try:
        return CIPHERS[cipher_id][0]
    except KeyError:
        raise OpenPgpFormatError(
            reason='unsupported cipher algorithm %d' % cipher_id)


def key_length(cipher_id):
    try:
        return CIPHERS[cipher_id][1]
    except KeyError:
        raise OpenPgpFormatError(
            reason='unsupported cipher algorithm %d' % cipher_id)


def block_size(cipher_id):
    return 16 if CIPHERS.get(cipher_id, ('', 0))[0] in ('AES', 'Camellia') \
        else 8


def _whole_message_aes(cipher_id, key):
    """Whether cfb.CfbMessageDecryptor can decrypt with this key."""
    return AES_KEY_SIZES.get(cipher_id) == len(key)


def _cfb(cipher_id, key, iv):
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
def _zero_iv_cfb(cipher_id, key):
    """The CFB cipher with a zero IV that SKESK and SEIPD packets use:
    built once per key (building one costs as much as encrypting a few
    KiB), each message then takes its own encryptor or decryptor."""
    return _cfb(cipher_id, key, b'\0' * block_size(cipher_id))


# --- S2K (RFC 4880 §3.7) ------------------------------------------------

def s2k_count(code):
    return (16 + (code & 15)) << ((code >> 4) + 6)


def _hash_new(hash_id):
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
        h = _hash_new(hash_id)
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


# --- writing ---------------------------------------------------------------

class _WriteKey:
    """One toplevel's write key: a salt drawn once per process, the key
    derived once, the SKESK packet built once."""

    def __init__(self, passphrase, cache):
        self.salt = os.urandom(8)
        count = s2k_count(WRITE_S2K_COUNT_CODE)
        self.key = cache.get(passphrase, key_length(AES256), SHA256,
                             self.salt, count)
        body = bytes([4, AES256, S2K_ITERATED, SHA256]) + self.salt + \
            bytes([WRITE_S2K_COUNT_CODE])
        self.skesk = packet(SKESK, body)


def literal_header(length):
    """Header and fixed fields of a binary literal packet of `length`
    data bytes (no file name, date 0)."""
    fields = b'b\0\0\0\0\0'
    return header(LITERAL, len(fields) + length) + fields


def _seipd_plain_length(data_length):
    """Bytes encrypted in a SEIPD packet for `data_length` literal bytes:
    random prefix and its check bytes, literal packet, MDC packet."""
    return 18 + len(literal_header(data_length)) + data_length + 22


def _encrypt_seipd(key, data, lead=b''):
    """`lead` (packets that go first), then a SEIPD packet with MDC of a
    literal packet of data, as new bytes."""
    return bytes(_encrypt_seipd_into(key, (data,), lead, _new_buffer))


def _new_buffer(size):
    return memoryview(bytearray(size))


_scratch = cfb.ScratchBuffer()          # for encrypting
_read_scratch = cfb.ScratchBuffer()     # for decrypting


def _encrypt_seipd_into(key, parts, lead, new_view):
    """`lead`, then a SEIPD packet with MDC of a literal packet of the
    parts' concatenation, encrypted straight into a view from
    new_view(size) (the parts are never joined); returns the view of the
    bytes written."""
    length = sum(len(part) for part in parts)
    prefix = os.urandom(16)
    prefix += prefix[-2:]
    head = prefix + literal_header(length)
    sha = hashlib.sha1(head)
    for part in parts:
        sha.update(part)
    sha.update(_MDC_HEADER)
    tail = _MDC_HEADER + sha.digest()
    plain_len = _seipd_plain_length(length)
    start = lead + header(SEIPD, 1 + plain_len) + b'\x01'
    view = new_view(len(start) + plain_len + 15)   # update_into wants +15
    view[:len(start)] = start
    encryptor = _ZeroIvEncryptor.of(key)
    pos = len(start)
    try:
        for part in (head, *parts, tail):
            pos += encryptor.stream.update_into(part, view[pos:])
    except BaseException:
        encryptor.drop()        # where the stream stopped is unknown
        raise
    encryptor.restart(view[len(start):pos])
    return view[:pos]


class _PerThread(threading.local):
    """What one thread keeps by key: a few long-lived cipher streams
    (a command uses a few keys; a stream is no use to another thread)."""

    KEPT = 16

    def __init__(self):
        self.found = {}

    def get(self, wanted, make, *args):
        """The kept object for wanted, made by make(*args) if none."""
        found = self.found.get(wanted)
        if found is None:
            if len(self.found) >= self.KEPT:
                self.found.clear()
            found = self.found[wanted] = make(*args)
        return found

    def drop(self, wanted):
        self.found.pop(wanted, None)


class _ZeroIvEncryptor:
    """One long-lived AES-256-CFB encryptor per thread and key, brought
    back to a zero IV after each message instead of building a new
    context (7-10 us with cryptography 38, ~3 us with 51; this 1-3 us).

    How: complete the last block with padding; the register is then
    that ciphertext block C, and encrypting the block AES(C) gives the
    ciphertext zero, which is where a fresh stream with a zero IV is."""

    _local = _PerThread()

    def __init__(self, key):
        self.key = key
        self.stream = _zero_iv_cfb(AES256, key).encryptor()
        self.block = cfb.aes_block_encryptor(key)
        self.scratch = bytearray(4 * 16)

    @classmethod
    def of(cls, key):
        return cls._local.get(key, cls, key)

    def drop(self):
        self._local.drop(self.key)

    def restart(self, written):
        """Back to a zero IV after a message whose ciphertext (since the
        last restart) is written."""
        fed = len(written) % 16
        last = bytes(written[len(written) - fed:]) if fed else \
            bytes(written[-16:]) if written else bytes(16)
        if fed:
            count = self.stream.update_into(bytes(16 - fed), self.scratch)
            last += bytes(self.scratch[:count])
        self.stream.update_into(self.block(last), self.scratch)


# --- reading ---------------------------------------------------------------

def _skesk_key(body, passphrase, cache):
    """(cipher id, session key) from a SKESK packet and the passphrase."""
    if len(body) < 4 or body[0] not in (4, 5):
        raise OpenPgpFormatError(reason='unsupported SKESK packet version')
    cipher_id = body[1]
    hash_id, salt, count, pos = parse_s2k(body, 2 if body[0] == 4 else 3)
    kek = cache.get(passphrase, key_length(cipher_id), hash_id, salt, count)
    if body[0] == 5:        # GnuPG 2.3+ for AEAD packets
        try:
            return openpgp_aead.skesk5_unwrap(body, pos, kek)
        except openpgp_aead.AeadFailed:
            raise DecryptionFailed(reason='wrong passphrase')
    encrypted = body[pos:]
    if not encrypted:
        return cipher_id, kek
    decryptor = _zero_iv_cfb(cipher_id, kek).decryptor()
    plain = decryptor.update(encrypted) + decryptor.finalize()
    session_cipher = plain[0]
    if session_cipher not in CIPHERS or \
            len(plain) - 1 != key_length(session_cipher):
        raise DecryptionFailed(reason='wrong passphrase')
    return session_cipher, plain[1:]


class _ZeroIvDecryptor:
    """One long-lived CFB decryptor per thread and key, reset to a zero IV
    between messages without building a new cipher context (that costs as
    much as decrypting ~10 KiB).

    CFB decrypts each block with the block of ciphertext before it.  So,
    with the stream at a block boundary, feeding one block of zeros leaves
    the decryptor exactly where a fresh one with a zero IV starts."""

    _local = _PerThread()

    def __init__(self, cipher_id, key):
        self.block = block_size(cipher_id)
        self.cipher = _zero_iv_cfb(cipher_id, key)
        self.scratch = bytearray(3 * self.block)
        self._fresh()

    def _fresh(self):
        self.decryptor = self.cipher.decryptor()
        self.used = False
        self.fed = 0        # bytes fed since the last block boundary

    @classmethod
    def of(cls, cipher_id, key):
        return cls._local.get((cipher_id, key), _zero_iv_decryptor,
                              cipher_id, key)

    def decrypt(self, data, into=None):
        """Decrypted data as a view of one new buffer (update() would
        allocate a zeroed buffer and copy it out again), or of the view
        into(size) gives."""
        if self.used:
            self._restart()
        self.used = True
        size = len(data) + self.block - 1   # room update_into asks
        buf = bytearray(size) if into is None else into(size)
        try:
            count = self.decryptor.update_into(data, buf)
        except BaseException:
            self._fresh()       # where the stream stopped is unknown
            raise
        self.fed = count % self.block
        return memoryview(buf)[:count]

    def _restart(self):
        """To the next block boundary, then one block of zeros."""
        pad = (self.block - self.fed) % self.block
        zeros = bytes(pad + self.block)
        self.decryptor.update_into(zeros, self.scratch)
        self.fed = 0


class _FastZeroIvDecryptor:
    """_ZeroIvDecryptor's decrypt through cfb.CfbMessageDecryptor: each
    message is decrypted whole, so nothing carries over between them."""

    def __init__(self, key):
        self.messages = cfb.CfbMessageDecryptor(key, bytes(16))

    def decrypt(self, data, into=None):
        size = len(data) + 15       # room decrypt_into asks
        buf = bytearray(size) if into is None else into(size)
        count = self.messages.decrypt_into(data, buf)
        return memoryview(buf)[:count]


def _zero_iv_decryptor(cipher_id, key):
    """A _FastZeroIvDecryptor for AES, else a _ZeroIvDecryptor."""
    if _whole_message_aes(cipher_id, key):
        return _FastZeroIvDecryptor(key)
    return _ZeroIvDecryptor(cipher_id, key)


def _decrypt_seipd(body, cipher_id, key, into=None):
    if not body or body[0] != 1:
        raise OpenPgpFormatError(reason='unsupported SEIPD version')
    bs = block_size(cipher_id)
    plain = _ZeroIvDecryptor.of(cipher_id, key).decrypt(body[1:], into)
    if len(plain) < bs + 2 + 22:
        raise OpenPgpFormatError(reason='encrypted packet is too short')
    if plain[bs - 2:bs] != plain[bs:bs + 2]:
        raise DecryptionFailed(reason='wrong passphrase')
    digest = hashlib.sha1(plain[:-20]).digest()
    if plain[-22:-20] != _MDC_HEADER or \
            not hmac.compare_digest(digest, plain[-20:]):
        raise DecryptionFailed(reason='integrity check (MDC) failed; '
                               'the data has been modified')
    return plain[bs + 2:-22]


# Encrypted data packets with an integrity check: what public-key
# encrypted messages are read from (obnamlib.crypto.gpg_agent).
INTEGRITY_PROTECTED = (SEIPD, AEAD)


def decrypt_packet(tag, body, cipher_id, key, into=None):
    """The literal data of an encrypted data packet (SEIPD, GnuPG 2.3+'s
    AEAD, or old SED), given its session key."""
    if tag == SEIPD:
        return message_content(
            _decrypt_seipd(memoryview(body), cipher_id, key, into))
    if tag == AEAD:
        return decrypt_aead(body, key)
    return _sed_content(_decrypt_sed(body, cipher_id, key))


def decrypt_aead(body, key):
    """The literal data of an AEAD packet (tag 20) body, given its
    session key: what GnuPG 2.3 and later may write."""
    try:
        return message_content(openpgp_aead.decrypt(body, key))
    except openpgp_aead.AeadFailed:
        raise DecryptionFailed(reason='wrong key, or the data has been '
                               'modified (AEAD tag check failed)')


_warned_no_mdc = []


def _decrypt_sed(body, cipher_id, key):
    """Tag 9: OpenPGP CFB with resynchronisation, no integrity check."""
    if not _warned_no_mdc:
        _warned_no_mdc.append(True)
        _log.warning('Reading OpenPGP data without integrity protection '
                     '(old Obnam repository, cipher %d)', cipher_id)
    bs = block_size(cipher_id)
    if len(body) < bs + 2:
        raise OpenPgpFormatError(reason='encrypted packet is too short')
    first = _zero_iv_cfb(cipher_id, key).decryptor()
    prefix = first.update(body[:bs + 2])
    if prefix[bs - 2:bs] != prefix[bs:bs + 2]:
        raise DecryptionFailed(reason='wrong passphrase')
    rest = _cfb(cipher_id, key, bytes(body[2:bs + 2])).decryptor()
    return memoryview(rest.update(body[bs + 2:]))


def _sed_content(plain):
    """message_content of SED plaintext, which has no integrity check:
    garbage means a wrong key."""
    try:
        return message_content(plain)
    except OpenPgpFormatError:
        raise DecryptionFailed(reason='wrong passphrase')


def _decompress(body):
    if not body:
        raise OpenPgpFormatError(reason='empty compressed packet')
    algo, data = body[0], body[1:]
    try:
        if algo == 0:
            return data
        if algo == 1:
            return zlib.decompressobj(-15).decompress(data)
        if algo == 2:
            return zlib.decompress(data)
        if algo == 3:
            return bz2.decompress(data)
    except (zlib.error, OSError, ValueError) as e:
        raise OpenPgpFormatError(reason='bad compressed data: %s' % e)
    raise OpenPgpFormatError(reason='unknown compression algorithm %d' % algo)


def _literal_data(body):
    if len(body) < 6:
        raise OpenPgpFormatError(reason='literal packet is too short')
    name_len = body[1]
    return body[2 + name_len + 4:]


def message_content(data, depth=0):
    """The literal data inside a decrypted message (compressed or not)."""
    if depth > 8:
        raise OpenPgpFormatError(reason='compressed packets nested too deep')
    for tag, body in iter_packets(data):
        if tag == LITERAL:
            return _literal_data(body)
        if tag == COMPRESSED:
            return message_content(_decompress(body), depth + 1)
        if tag in (MARKER, 2, 4):   # marker, signature, one-pass signature
            continue
        raise OpenPgpFormatError(reason='unexpected packet %d in message' % tag)
    raise OpenPgpFormatError(reason='no literal data packet in message')


class SymmetricCipher:
    """The `cipher` of RepositoryFS: passphrase-encrypted OpenPGP."""

    def __init__(self):
        self.cache = S2KCache()
        self.session_keys = {}      # (passphrase, SKESK body) -> key
        self.write_keys = {}
        self.lock = threading.Lock()

    def _write_key(self, passphrase):
        found = self.write_keys.get(passphrase)
        if found is None:
            with self.lock:
                found = self.write_keys.get(passphrase)
                if found is None:
                    found = _WriteKey(passphrase, self.cache)
                    self.write_keys[passphrase] = found
        return found

    def encrypt(self, data, passphrase):
        """SKESK (AES-256, iterated SHA-256 S2K) + SEIPD with MDC."""
        wkey = self._write_key(_as_bytes(passphrase))
        return _encrypt_seipd(wkey.key, data, lead=wkey.skesk)

    def encrypt_in_scratch(self, parts, passphrase, lead=b''):
        """lead + encrypt(b''.join(parts), passphrase), as a view of this
        thread's scratch buffer that the thread's next call overwrites:
        for a caller that writes it out at once (cipher_process.seal).
        No allocation, no copy of the parts."""
        wkey = self._write_key(_as_bytes(passphrase))
        return _encrypt_seipd_into(wkey.key, parts, lead + wkey.skesk,
                                   _scratch)

    def encrypted_size(self, length, passphrase):
        """len(encrypt(data, passphrase)) for any data of this length:
        known before encrypting, so a caller can count bytes written
        while the encryption runs in another thread."""
        wkey = self._write_key(_as_bytes(passphrase))
        plain_len = _seipd_plain_length(length)
        return len(wkey.skesk) + len(header(SEIPD, 1 + plain_len)) + \
            1 + plain_len

    def decrypt(self, data, passphrase):
        return bytes(self.decrypt_view(data, passphrase))

    def decrypt_in_scratch(self, data, passphrase):
        """decrypt_view into this thread's reading scratch buffer, which
        its next call overwrites: for a caller that copies or sends the
        plaintext at once (the helper of obnamlib.crypto.cipher_process)."""
        inside = getattr(data, 'obj', None) is _read_scratch.buf
        return self.decrypt_view(data, passphrase,
                                 into=None if inside else _read_scratch)

    def decrypt_view(self, data, passphrase, into=None):
        """The plaintext as a bytes-like object (often a view of the
        decryption buffer), for a caller that copies it anyway: saves a
        copy of every file read through RepositoryFS."""
        passphrase = _as_bytes(passphrase)
        data = memoryview(data)     # packet bodies become views, not copies
        cipher_id = key = None
        pos = 0
        while pos < len(data):
            tag, body, pos = read_packet(data, pos)
            if tag == SKESK:
                if key is None:
                    cipher_id, key = self._session_key(body, passphrase)
            elif tag == MARKER:
                continue
            elif tag in (SEIPD, SED, AEAD):
                if key is None:
                    raise OpenPgpFormatError(
                        reason='no passphrase-encrypted session key')
                return decrypt_packet(tag, body, cipher_id, key, into)
            else:
                raise OpenPgpFormatError(
                    reason='unexpected packet %d before encrypted data' % tag)
        raise OpenPgpFormatError(reason='no encrypted data packet')

    def _session_key(self, body, passphrase):
        """_skesk_key, remembered: the files one process wrote share
        one SKESK packet (one salt per toplevel key), and a restore
        reads thousands of them."""
        wanted = (passphrase, bytes(body))
        found = self.session_keys.get(wanted)
        if found is None:
            found = _skesk_key(body, passphrase, self.cache)
            if len(self.session_keys) >= SESSION_KEYS_KEPT:
                self.session_keys.clear()
            self.session_keys[wanted] = found
        return found


def _as_bytes(passphrase):
    return passphrase.encode('utf-8') if isinstance(passphrase, str) \
        else bytes(passphrase)


_default = SymmetricCipher()


def encrypt_symmetric(data, passphrase):
    return _default.encrypt(data, passphrase)


def decrypt_symmetric(data, passphrase):
    return _default.decrypt(data, passphrase)


# --- public-key encryption of a short message (RFC 4880 §5.1, RFC 6637) ----
#
# Used only when the local gpg (2.3 and later) writes OCB packets for keys
# that advertise AEAD: gpg still chooses the recipient (sub)keys, and we
# write the PKESK v3 + SEIPD v1 message for those keys ourselves.

RSA_ALGORITHMS = (1, 2)
ECDH = 18
PUBLIC_KEY_TAGS = (6, 14)
_ECDH_CURVES = {
    bytes.fromhex('2b060104019755010501'): 'X25519',
    bytes.fromhex('2a8648ce3d030107'): 'SECP256R1',
    bytes.fromhex('2b81040022'): 'SECP384R1',
    bytes.fromhex('2b81040023'): 'SECP521R1',
}


class UnsupportedRecipient(errors.ObnamError):
    code = 'R5761CX'
    msg = 'Cannot encrypt to OpenPGP key {keyid}: {reason}'


def read_mpi(data, pos):
    """(integer bytes, position after) of the MPI at pos."""
    if pos + 2 > len(data):
        raise OpenPgpFormatError(reason='MPI is cut short')
    size = (int.from_bytes(data[pos:pos + 2], 'big') + 7) // 8
    end = pos + 2 + size
    if end > len(data):
        raise OpenPgpFormatError(reason='MPI is cut short')
    return bytes(data[pos + 2:end]), end


def _encode_mpi(value):
    value = value.lstrip(b'\0')
    bits = len(value) * 8 - (8 - value[0].bit_length()) if value else 0
    return bits.to_bytes(2, 'big') + value


def v4_fingerprint(body):
    """SHA-1 fingerprint of a v4 public (sub)key packet body."""
    framed = b'\x99' + len(body).to_bytes(2, 'big') + bytes(body)
    return hashlib.sha1(framed).digest()


def find_public_key(keyring, keyid):
    """The body of the v4 public key or subkey packet with this 8-byte
    key id in a keyring blob, or None."""
    for tag, body in iter_packets(keyring):
        if tag in PUBLIC_KEY_TAGS and body[:1] == b'\x04' and \
                v4_fingerprint(body)[-8:] == keyid:
            return bytes(body)
    return None


def _session_key_block(session_key):
    checksum = sum(session_key) & 0xffff
    return bytes([AES256]) + session_key + checksum.to_bytes(2, 'big')


def _rsa_fields(key_material, block):
    from cryptography.hazmat.primitives.asymmetric import padding, rsa
    n, pos = read_mpi(key_material, 0)
    e, _ = read_mpi(key_material, pos)
    public = rsa.RSAPublicNumbers(int.from_bytes(e, 'big'),
                                  int.from_bytes(n, 'big')).public_key()
    return _encode_mpi(public.encrypt(block, padding.PKCS1v15()))


def _ecdh_shared(curve, point):
    """(ephemeral public point as OpenPGP encodes it, shared secret)."""
    from cryptography.hazmat.primitives.asymmetric import ec, x25519
    from cryptography.hazmat.primitives import serialization
    if curve == 'X25519':
        if point[:1] != b'\x40' or len(point) != 33:
            raise OpenPgpFormatError(reason='bad Curve25519 point')
        mine = x25519.X25519PrivateKey.generate()
        shared = mine.exchange(x25519.X25519PublicKey.from_public_bytes(
            point[1:]))
        raw = mine.public_key().public_bytes(serialization.Encoding.Raw,
                                             serialization.PublicFormat.Raw)
        return b'\x40' + raw, shared
    curve_class = getattr(ec, curve)()
    theirs = ec.EllipticCurvePublicKey.from_encoded_point(curve_class, point)
    mine = ec.generate_private_key(curve_class)
    shared = mine.exchange(ec.ECDH(), theirs)
    return mine.public_key().public_bytes(
        serialization.Encoding.X962,
        serialization.PublicFormat.UncompressedPoint), shared


def _ecdh_fields(key_material, block, fingerprint):
    from cryptography.hazmat.primitives import keywrap
    oid_len = key_material[0]
    oid = key_material[1:1 + oid_len]
    curve = _ECDH_CURVES.get(oid)
    if curve is None:
        raise UnsupportedRecipient(keyid=fingerprint[-8:].hex().upper(),
                                   reason='unknown ECDH curve')
    point, pos = read_mpi(key_material, 1 + oid_len)
    kdf = key_material[pos:pos + 4]
    if len(kdf) != 4 or kdf[0] != 3 or kdf[1] != 1 or \
            kdf[3] not in AES_KEY_SIZES:
        raise OpenPgpFormatError(reason='bad ECDH KDF parameters')
    ephemeral, shared = _ecdh_shared(curve, point)
    kek = ecdh_kek(shared, oid, kdf[2], kdf[3], fingerprint)
    pad = 8 - len(block) % 8
    wrapped = keywrap.aes_key_wrap(kek, block + bytes([pad]) * pad)
    return _encode_mpi(ephemeral) + bytes([len(wrapped)]) + wrapped


def ecdh_kek(shared_x, oid, hash_id, kek_id, fingerprint):
    """The key-wrapping key of RFC 6637 §7-8: from the shared secret x
    and the recipient key's curve OID, KDF parameters (hash id, wrapping
    cipher id) and v4 fingerprint.  Encrypting here; decrypting in
    obnamlib.crypto.gpg_agent."""
    param = (bytes([len(oid)]) + oid + bytes([ECDH, 3, 1, hash_id, kek_id]) +
             b'Anonymous Sender    ' + fingerprint)
    h = _hash_new(hash_id)
    h.update(b'\0\0\0\1' + shared_x + param)
    return h.digest()[:AES_KEY_SIZES[kek_id]]


def _pkesk(key_body, session_key):
    """A version 3 PKESK packet giving session_key to this v4 key."""
    fingerprint = v4_fingerprint(key_body)
    algorithm = key_body[5]
    material = key_body[6:]
    block = _session_key_block(session_key)
    if algorithm in RSA_ALGORITHMS:
        fields = _rsa_fields(material, block)
    elif algorithm == ECDH:
        fields = _ecdh_fields(material, block, fingerprint)
    else:
        raise UnsupportedRecipient(keyid=fingerprint[-8:].hex().upper(),
                                   reason='public-key algorithm %d is not '
                                   'supported here' % algorithm)
    return packet(1, bytes([3]) + fingerprint[-8:] + bytes([algorithm]) +
                  fields)


def encrypt_to_public_keys(data, keyring, keyids):
    """PKESK v3 for each key id (8 bytes; (sub)keys found in the keyring
    blob), then SEIPD v1 with MDC: the message gpg 2.2 writes for -e."""
    session_key = os.urandom(key_length(AES256))
    packets = []
    for keyid in keyids:
        body = find_public_key(keyring, keyid)
        if body is None:
            raise UnsupportedRecipient(
                keyid=keyid.hex().upper(),
                reason='no version 4 key with this id in the keyring')
        packets.append(_pkesk(body, session_key))
    return _encrypt_seipd(session_key, data, lead=b''.join(packets))
