"""obnamlib.cfb (OpenSSL's AES-CFB called directly) gives exactly what
cryptography's Cipher API gives, and OpenPGP messages written either way
are read the other way."""

import os
import warnings

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from obnamlib import cfb, openpgp

pytestmark = pytest.mark.skipif(not cfb.available(),
                                reason='no direct OpenSSL binding here')

SIZES = [0, 1, 15, 16, 17, 1000, 65536, 1 << 20]


def reference(key, iv):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return Cipher(algorithms.AES(key), modes.CFB(iv))


@pytest.mark.parametrize('key_bytes', [16, 24, 32])
def test_same_bytes_as_the_cipher_api(key_bytes):
    key, iv = os.urandom(key_bytes), os.urandom(16)
    data = os.urandom(sum(SIZES))
    ours = cfb.AesCfb(key, iv).encryptor()
    theirs = reference(key, iv).encryptor()
    pos = 0
    for size in SIZES:      # many updates, most not on block boundaries
        piece = memoryview(data)[pos:pos + size]
        out = bytearray(size + 15)
        count = ours.update_into(piece, out)
        assert count == size
        assert bytes(out[:count]) == theirs.update(piece)
        pos += size
    back = cfb.AesCfb(key, iv).decryptor()
    ciphertext = reference(key, iv).encryptor().update(data)
    assert back.update(ciphertext[:100]) + back.update(ciphertext[100:]) \
        == data
    assert ours.finalize() == b''


def test_too_small_an_output_buffer_is_refused():
    stream = cfb.AesCfb(bytes(32), bytes(16)).encryptor()
    with pytest.raises(ValueError):
        stream.update_into(b'x' * 100, bytearray(99))


@pytest.fixture
def cipher_api_only(monkeypatch):
    monkeypatch.setattr(cfb, '_forced_off', [True])
    openpgp._zero_iv_cfb.cache_clear()
    monkeypatch.setattr(openpgp._ZeroIvDecryptor, '_local',
                        type(openpgp._ZeroIvDecryptor._local)())
    yield
    openpgp._zero_iv_cfb.cache_clear()


def test_messages_written_by_the_cipher_api_are_read_directly(
        cipher_api_only):
    assert not isinstance(openpgp._cfb(openpgp.AES256, bytes(32), bytes(16)),
                          cfb.AesCfb)
    messages = [(size, openpgp.encrypt_symmetric(b'a' * size, 'pass'))
                for size in SIZES]
    cfb._forced_off.clear()
    openpgp._zero_iv_cfb.cache_clear()
    openpgp._ZeroIvDecryptor._local.__dict__.clear()
    assert isinstance(openpgp._cfb(openpgp.AES256, bytes(32), bytes(16)),
                      cfb.AesCfb)
    for size, message in messages:
        assert openpgp.decrypt_symmetric(message, 'pass') == b'a' * size


def test_messages_written_directly_are_read_by_the_cipher_api(
        cipher_api_only):
    cfb._forced_off.clear()
    messages = [(size, openpgp.encrypt_symmetric(b'b' * size, 'pass'))
                for size in SIZES]
    cfb._forced_off.append(True)
    openpgp._zero_iv_cfb.cache_clear()
    openpgp._ZeroIvDecryptor._local.__dict__.clear()
    for size, message in messages:
        assert openpgp.decrypt_symmetric(message, 'pass') == b'b' * size


@pytest.mark.skipif(not cfb.blocks_available(), reason='no unpadded AES')
@pytest.mark.parametrize('key_bytes', [16, 24, 32])
def test_message_decryptor_gives_what_a_cfb_stream_gives(key_bytes):
    key, iv = os.urandom(key_bytes), os.urandom(16)
    messages = cfb.CfbMessageDecryptor(key, iv)
    # One decryptor for many messages in a row: on and off block
    # boundaries, shorter than a block, empty, and into a bigger buffer.
    for size in SIZES + [31, 32, 33, 5, 0, 48]:
        ciphertext = os.urandom(size)
        out = bytearray(size + 7)
        assert messages.decrypt_into(ciphertext, out) == size
        assert bytes(out[:size]) == reference(key, iv).decryptor().update(
            ciphertext)
        assert out[size:] == bytes(7)


@pytest.mark.skipif(not cfb.blocks_available(), reason='no unpadded AES')
def test_message_decryptor_refuses_too_small_an_output_buffer():
    messages = cfb.CfbMessageDecryptor(bytes(32), bytes(16))
    with pytest.raises(ValueError):
        messages.decrypt_into(b'x' * 100, bytearray(99))


@pytest.mark.skipif(not cfb.blocks_available(), reason='no unpadded AES')
def test_message_decryptor_refuses_an_iv_that_is_not_a_block():
    with pytest.raises(ValueError):
        cfb.CfbMessageDecryptor(bytes(32), bytes(8))


@pytest.mark.skipif(not cfb.blocks_available(), reason='no unpadded AES')
def test_without_aes_blocks_in_openssl_the_cfb_stream_is_used(monkeypatch):
    openpgp._ZeroIvDecryptor._local.__dict__.clear()
    monkeypatch.setattr(cfb, '_CBC_NAMES', {32: b'aes-256-no-such-mode'})
    with pytest.raises(ValueError):
        cfb.CfbMessageDecryptor(bytes(32), bytes(16))
    decryptor = openpgp._ZeroIvDecryptor.of(openpgp.AES256, bytes(32))
    assert not isinstance(decryptor, openpgp._FastZeroIvDecryptor)
    message = openpgp.encrypt_symmetric(b'still read', 'pass')
    assert openpgp.decrypt_symmetric(message, 'pass') == b'still read'
    openpgp._ZeroIvDecryptor._local.__dict__.clear()


@pytest.mark.skipif(not cfb.blocks_available(), reason='no unpadded AES')
def test_aes_messages_are_decrypted_whole_where_openssl_allows():
    openpgp._ZeroIvDecryptor._local.__dict__.clear()
    fast = openpgp._ZeroIvDecryptor.of(openpgp.AES256, bytes(32))
    assert isinstance(fast, openpgp._FastZeroIvDecryptor)
    cast5 = openpgp._ZeroIvDecryptor.of(3, bytes(16))
    assert isinstance(cast5, openpgp._ZeroIvDecryptor)
