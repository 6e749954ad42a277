import zlib

import pytest

from obnamlib import errors
from obnamlib.crypto.cipher import Cipher
from obnamlib.repo.storage import filters


class XorCipher(Cipher):
    """A reversible stand-in cipher to test the chain's plumbing; the real
    OpenPGP cipher is tested in test_openpgp and test_repo_fs."""

    def encrypt(self, data, passphrase):
        return b'X' + bytes(b ^ 0x5a for b in data) + passphrase.encode()

    def decrypt(self, data, passphrase):
        data = bytes(data)      # unwrap hands over a memoryview
        assert data.startswith(b'X') and data.endswith(passphrase.encode())
        return bytes(b ^ 0x5a for b in data[1:-len(passphrase)])


def test_plain_payload_gets_leading_nul():
    assert filters.wrap(b'hello') == b'\0hello'
    assert filters.unwrap(b'\0hello') == b'hello'


def test_empty_payload():
    assert filters.wrap(b'') == b'\0'
    assert filters.unwrap(b'\0') == b''


def test_payload_with_nul_bytes_round_trips():
    payload = b'\0\0deflate\0encrypt1\0'
    assert filters.unwrap(filters.wrap(payload, compression=True)) == payload


def test_compression_is_zlib_of_nul_payload():
    payload = b'a' * 1000
    stored = filters.wrap(payload, compression=True)
    assert stored == b'deflate\0' + zlib.compress(b'\0' + payload, 6)
    assert stored[8:10] == b'\x78\x9c'
    assert filters.unwrap(stored) == payload


def test_compression_skipped_when_not_smaller():
    payload = b'abc'
    assert filters.wrap(payload, compression=True) == b'\0abc'


def test_skip_rule_boundary():
    # Find a payload where compressed + 8 == len(input): must be skipped.
    for n in range(1, 200):
        payload = bytes(range(n % 256))[:n] + b'x' * (n // 3)
        data = b'\0' + payload
        packed = zlib.compress(data, 6)
        stored = filters.wrap(payload, compression=True)
        if len(packed) + 8 >= len(data):
            assert stored == data
        else:
            assert stored == b'deflate\0' + packed


def test_reader_accepts_any_compression_level():
    stored = b'deflate\0' + zlib.compress(b'\0' + b'z' * 100, 9)
    assert filters.unwrap(stored) == b'z' * 100


def test_encryption_wraps_after_compression():
    cipher = XorCipher()
    payload = b'b' * 500
    stored = filters.wrap(payload, compression=True,
                          encrypt=lambda d: cipher.encrypt(d, 'pw'))
    assert stored.startswith(b'encrypt1\0X')
    inner = cipher.decrypt(stored[9:], 'pw')
    assert inner == b'deflate\0' + zlib.compress(b'\0' + payload, 6)
    got = filters.unwrap(stored, decrypt=lambda d: cipher.decrypt(d, 'pw'))
    assert got == payload


def test_encryption_without_compression():
    cipher = XorCipher()
    stored = filters.wrap(b'p', encrypt=lambda d: cipher.encrypt(d, 'k'))
    assert cipher.decrypt(stored[9:], 'k') == b'\0p'


def test_encrypted_without_key_is_clear_error():
    with pytest.raises(filters.EncryptedFileWithoutKey) as info:
        filters.unwrap(b'encrypt1\0junk', filename='chunks/0/0/0/1')
    assert str(info.value).startswith('R9387DX: chunks/0/0/0/1 is encrypted')


def test_no_nul_is_no_filter_tag_error():
    with pytest.raises(errors.NoFilterTagError) as info:
        filters.unwrap(b'ORBL')
    assert str(info.value) == 'R173AEX: No filter tag found'


def test_unknown_tag_is_missing_filter_error():
    with pytest.raises(errors.MissingFilterError) as info:
        filters.unwrap(b'gzip\0stuff')
    assert info.value.code == 'R169C6X'
    assert 'gzip' in str(info.value)


def test_damaged_zlib_is_clear_error():
    with pytest.raises(filters.CorruptCompressedData):
        filters.unwrap(b'deflate\0not zlib', filename='x')


def test_tags_of():
    assert filters.tags_of(b'\0x') == []
    stored = filters.wrap(b'q' * 100, compression=True)
    assert filters.tags_of(stored) == [b'deflate']
    assert filters.tags_of(b'encrypt1\0...') == [b'encrypt1']


def test_format5_unwrap_layers():
    cipher = XorCipher()
    payload = b'[metadata]\n'
    both = zlib.compress(cipher.encrypt(payload, 'k'))
    assert filters.unwrap_format5(
        both, lambda d: cipher.decrypt(d, 'k')) == payload
    assert filters.unwrap_format5(zlib.compress(payload)) == payload
    assert filters.unwrap_format5(payload) == payload
    assert filters.unwrap_format5(b'x not zlib') == b'x not zlib'


def test_decrypt_gets_a_view_and_may_return_one():
    seen = []

    def decrypt(data):
        seen.append(type(data))
        return memoryview(b'\0inner payload')
    assert filters.unwrap(b'encrypt1\0whatever', decrypt) == b'inner payload'
    assert seen == [memoryview]


def test_long_unknown_tag_is_still_missing_filter_error():
    with pytest.raises(errors.MissingFilterError):
        filters.unwrap(b'x' * 100 + b'\0stuff')


def test_a_huge_unknown_tag_is_shortened_in_the_message():
    with pytest.raises(errors.MissingFilterError) as info:
        filters.unwrap(b'x' * 1000000 + b'\0stuff')
    assert str(info.value) == (
        'R169C6X: Unknown filter tag: ' + 'x' * 64 + '... (1000000 bytes)')


def test_unwrap_returns_bytes_for_any_bytes_like_input():
    result = filters.unwrap(bytearray(b'\0abc'))
    assert type(result) is bytes and result == b'abc'
