"""Public-key encryption of a short message (RFC 4880 §5.1, RFC 6637) to
RSA and ECDH (Curve25519, NIST) keys, the way gpg 2.2 does it.

Used only when the local gpg (2.3 and later) writes OCB packets for keys
that advertise AEAD: gpg still chooses the recipient (sub)keys, and we
write the PKESK v3 + SEIPD v1 message for those keys ourselves.
"""

import hashlib
import os

from obnamlib import errors
from obnamlib.crypto import openpgp
from obnamlib.crypto.openpgp_aead import AES_KEY_SIZES
from obnamlib.crypto.openpgp_algorithms import AES256, hash_new, key_length
from obnamlib.crypto.openpgp_packets import (
    OpenPgpFormatError, iter_packets, packet)

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
    h = hash_new(hash_id)
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
    return openpgp.encrypt_seipd(session_key, data, lead=b''.join(packets))
