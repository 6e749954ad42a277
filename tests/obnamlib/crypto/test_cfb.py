"""obnamlib.crypto.cfb: ciphers from the place this cryptography release keeps
them, without a warning; the whole-message AES-CFB decryption gives what a
CFB stream gives; only the public API is used."""

import os
import pathlib
import subprocess
import sys

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

from obnamlib.crypto import cfb, openpgp, openpgp_algorithms
from tests import paths

SIZES = [0, 1, 15, 16, 17, 1000, 65536, 1 << 20]
ROOT = pathlib.Path(paths.CHECKOUT)


def reference(key, iv):
    """AES-CFB as the stream Cipher API runs it."""
    return Cipher(algorithms.AES(key), cfb.cfb_mode()(iv))


@pytest.mark.parametrize('key_bytes', [16, 24, 32])
def test_message_decryptor_gives_what_a_cfb_stream_gives(key_bytes):
    key, iv = os.urandom(key_bytes), os.urandom(16)
    messages = cfb.CfbMessageDecryptor(key, iv)
    # One decryptor for many messages in a row: on and off block
    # boundaries, shorter than a block, empty, and into a bigger buffer.
    for size in SIZES + [31, 32, 33, 5, 0, 48]:
        ciphertext = os.urandom(size)
        out = bytearray(size + 22)
        assert messages.decrypt_into(ciphertext, out) == size
        assert bytes(out[:size]) == reference(key, iv).decryptor().update(
            ciphertext)
        assert out[size:] == bytes(22)      # nothing written beyond


def test_message_decryptor_refuses_too_small_an_output_buffer():
    messages = cfb.CfbMessageDecryptor(bytes(32), bytes(16))
    with pytest.raises(ValueError):
        messages.decrypt_into(b'x' * 100, bytearray(114))


def test_message_decryptor_refuses_an_iv_that_is_not_a_block():
    with pytest.raises(ValueError):
        cfb.CfbMessageDecryptor(bytes(32), bytes(8))


def test_aes_block_decryptor_inverts_ecb():
    key, blocks = os.urandom(32), os.urandom(64)
    from cryptography.hazmat.primitives.ciphers import modes
    encrypted = Cipher(algorithms.AES(key), modes.ECB()).encryptor().update(
        blocks)
    assert cfb.aes_block_decryptor(key)(encrypted) == blocks


def test_aes_messages_are_decrypted_whole():
    openpgp._ZeroIvDecryptor._local.found.clear()
    fast = openpgp._ZeroIvDecryptor.of(openpgp_algorithms.AES256, bytes(32))
    assert isinstance(fast, openpgp._FastZeroIvDecryptor)
    cast5 = openpgp._ZeroIvDecryptor.of(3, bytes(16))
    assert isinstance(cast5, openpgp._ZeroIvDecryptor)


@pytest.mark.parametrize('name,key_bytes', [
    ('CAST5', 16), ('TripleDES', 24), ('Blowfish', 16), ('Camellia', 32),
    ('AES', 32)])
def test_each_cipher_streams_as_cfb(name, key_bytes):
    key, iv = os.urandom(key_bytes), os.urandom(
        16 if name in ('AES', 'Camellia') else 8)
    data = os.urandom(1001)
    encrypted = cfb.cipher(name, key, iv).encryptor().update(data)
    assert encrypted != data
    assert cfb.cipher(name, key, iv).decryptor().update(encrypted) == data
    # CFB by its definition, from the same algorithm's single blocks:
    # C[0] = P[0] ^ E(iv), C[1] = P[1] ^ E(C[0])
    from cryptography.hazmat.primitives.ciphers import modes
    block = Cipher(cfb.algorithm_class(name)(key),
                   modes.ECB()).encryptor().update
    size = len(iv)
    for i, before in enumerate((iv, encrypted[:size])):
        piece = slice(i * size, (i + 1) * size)
        assert encrypted[piece] == bytes(
            a ^ b for a, b in zip(data[piece], block(before)))


def test_old_ciphers_come_from_decrepit_where_the_release_has_it():
    decrepit = cfb._decrepit_algorithms()
    for name in ('CAST5', 'TripleDES'):
        cls = cfb.algorithm_class(name)
        if decrepit is not None:
            assert cls.__module__ == decrepit.__name__
        else:
            assert cls.__module__.startswith(
                'cryptography.hazmat.primitives.ciphers')


# Every cipher and mode looked up, and a message of each old kind read,
# in a fresh interpreter where any warning is an error.
_NO_WARNINGS = '''
import warnings
warnings.simplefilter('error')
from obnamlib.crypto import cfb, openpgp, openpgp_algorithms
for name in ('AES', 'CAST5', 'TripleDES', 'Blowfish', 'Camellia'):
    cfb.algorithm_class(name)
cfb.cfb_mode()
for cipher_id, size in ((2, 24), (3, 16), (4, 16), (9, 32), (13, 32)):
    c = openpgp_algorithms.cfb_cipher(
        cipher_id, bytes(size),
        bytes(openpgp_algorithms.block_size(cipher_id)))
    c.encryptor().update(b'x' * 40)
m = openpgp.encrypt_symmetric(b'data', 'pw')
assert openpgp.decrypt_symmetric(m, 'pw') == b'data'
print('quiet')
'''


def test_no_cipher_or_mode_warns_on_this_release():
    result = subprocess.run(
        [sys.executable, '-W', 'error', '-c', _NO_WARNINGS],
        cwd=ROOT, capture_output=True, timeout=50)
    assert result.stderr == b''
    assert result.stdout == b'quiet\n'


def test_no_private_binding_is_used():
    """cryptography's bindings and Rust internals change every release:
    obnamlib uses the public API only."""
    for path in (ROOT / 'obnamlib').rglob('*.py'):
        text = path.read_text()
        for private in ('_openssl', 'hazmat.bindings', '_rust'):
            assert private not in text, (path, private)
