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
    assert stored == b'deflate\0' + zlib.compress(b'\0' + payload,
                                                  filters.LEVEL)
    assert stored[8:10] == b'\x78\x01'     # RFC 1950 header, fastest level
    assert filters.unwrap(stored) == payload


def test_compression_skipped_when_not_smaller():
    payload = b'abc'
    assert filters.wrap(payload, compression=True) == b'\0abc'


def test_skip_rule_boundary():
    # Find a payload where compressed + 8 == len(input): must be skipped.
    for n in range(1, 200):
        payload = bytes(range(n % 256))[:n] + b'x' * (n // 3)
        data = b'\0' + payload
        packed = zlib.compress(data, filters.LEVEL)
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
    assert inner == b'deflate\0' + zlib.compress(b'\0' + payload,
                                                 filters.LEVEL)
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


# --- the sample: data that does not compress is not compressed whole ------

def random_bytes(n, seed=1):
    import random
    return random.Random(seed).randbytes(n)


class CompressSpy:
    """zlib for filters, recording the length of every compress input."""

    def __init__(self):
        self.lengths = []

    def compress(self, data, level):
        self.lengths.append(len(data))
        return zlib.compress(data, level)


@pytest.fixture
def spy(monkeypatch):
    spy = CompressSpy()
    monkeypatch.setattr(filters, 'zlib', spy)
    return spy


def test_random_chunk_is_stored_after_compressing_only_its_sample(spy):
    payload = random_bytes(1 << 20)
    assert filters.wrap(payload, compression=True) == b'\0' + payload
    assert spy.lengths == [filters.SAMPLE_BYTES]


def test_compressible_chunk_is_compressed_whole_after_its_sample(spy):
    payload = b'line of text %d\n' * 70000
    stored = filters.wrap(payload, compression=True)
    assert stored.startswith(b'deflate\0')
    assert spy.lengths == [filters.SAMPLE_BYTES, len(payload) + 1]
    assert zlib.decompress(stored[8:]) == b'\0' + payload


def test_short_data_is_tried_whole_without_a_sample(spy):
    payload = b'short text, ' * 100
    assert filters.wrap(payload, compression=True).startswith(b'deflate\0')
    assert spy.lengths == [len(payload) + 1]


def test_short_random_data_is_stored_by_the_1_18_rule():
    payload = random_bytes(filters.SAMPLE_BYTES // 2)
    assert filters.wrap(payload, compression=True) == b'\0' + payload


def test_random_sample_hides_the_compressible_rest():
    """The price of sampling: a chunk that starts random is stored whole,
    even when the rest would compress (one chunk, not the file)."""
    payload = random_bytes(filters.SAMPLE_BYTES) + b'a' * (1 << 20)
    assert filters.wrap(payload, compression=True) == b'\0' + payload


def test_a_compressible_sample_lets_the_whole_decide(spy):
    """After a good sample the chunk is compressed whole, and kept so
    when that saves anything at all (the 1.18 rule)."""
    payload = b'a' * filters.SAMPLE_BYTES + random_bytes(1 << 20)
    stored = filters.wrap(payload, compression=True)
    assert spy.lengths == [filters.SAMPLE_BYTES, len(payload) + 1]
    assert stored.startswith(b'deflate\0')
    assert zlib.decompress(stored[8:]) == b'\0' + payload


def test_sample_threshold_is_a_tenth_saved():
    """Half random, half repeated: the sample saves about half, so the
    chunk is compressed; all but a twentieth random: stored."""
    half = bytes(b for pair in zip(random_bytes(32768), b'x' * 32768)
                 for b in pair)
    assert filters.sample_compresses(half * 2)
    mostly = bytearray(random_bytes(1 << 18))
    mostly[::20] = b'\0' * len(mostly[::20])
    assert not filters.sample_compresses(bytes(mostly))


def test_an_unfiltered_file_unwraps_to_its_payload_copied_or_viewed():
    stored = b'\0' + b'payload'
    for data in (stored, bytearray(stored), memoryview(stored)):
        copied = filters.unwrap(data)
        assert type(copied) is bytes and copied == b'payload'
        viewed = filters.unwrap(data, copy=False)
        assert bytes(viewed) == b'payload'
    assert filters.unwrap(b'\0') == b''
