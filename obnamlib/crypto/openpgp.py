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

The algorithms and the passphrase's key derivation are in
obnamlib.crypto.openpgp_algorithms; encrypting to public keys (what
obnamlib.crypto.gpg falls back to when a newer gpg writes OCB) is in
obnamlib.crypto.openpgp_pubkey.
"""

import bz2
import hashlib
import hmac
import logging
import os
import threading
import zlib

from obnamlib.crypto import cfb, openpgp_aead
from obnamlib.crypto.cipher import Cipher
from obnamlib import errors
from obnamlib.crypto.openpgp_algorithms import (
    AES256, CIPHERS, S2K_ITERATED, SHA256, S2KCache, block_size, cfb_cipher,
    key_length, parse_s2k, s2k_count, whole_message_aes, zero_iv_cfb)
from obnamlib.crypto.openpgp_packets import (
    COMPRESSED, LITERAL, MARKER, SED, SEIPD, SKESK, AEAD,
    OpenPgpFormatError, header, iter_packets, packet, read_packet)

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


def encrypt_seipd(key, data, lead=b''):
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
        self.stream = zero_iv_cfb(AES256, key).encryptor()
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
    decryptor = zero_iv_cfb(cipher_id, kek).decryptor()
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
        self.cipher = zero_iv_cfb(cipher_id, key)
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
    if whole_message_aes(cipher_id, key):
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
    first = zero_iv_cfb(cipher_id, key).decryptor()
    prefix = first.update(body[:bs + 2])
    if prefix[bs - 2:bs] != prefix[bs:bs + 2]:
        raise DecryptionFailed(reason='wrong passphrase')
    rest = cfb_cipher(cipher_id, key, bytes(body[2:bs + 2])).decryptor()
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


class SymmetricCipher(Cipher):
    """The `cipher` of RepositoryFS: passphrase-encrypted OpenPGP."""

    seals_in_scratch = True

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
        return encrypt_seipd(wkey.key, data, lead=wkey.skesk)

    def encrypt_in_scratch(self, parts, passphrase, lead=b''):
        """lead + encrypt(b''.join(parts), passphrase), as a view of this
        thread's scratch buffer that the thread's next call overwrites:
        for a caller that writes it out at once (tag_chain.seal).
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
