"""The tag chain that wraps every filtered repository file (format-6.md §3).

A filtered file is `tag NUL data` repeated: the empty tag ends the chain,
`deflate` means zlib, `encrypt1` means OpenPGP symmetric encryption with the
toplevel's key.  The writer always applies compression first, encryption
second, and each filter may decline to act (compression that does not
shrink the data, or whose sample does not, is skipped, §3.4: the tags are
per file, so a reader takes files of both kinds in one repository).  The
cipher is pluggable: any object with `encrypt(data, passphrase)` and
`decrypt(data, passphrase)`.

The framing both obnam and its cipher helper process need (the tags,
`unwrap` and its errors, sealing) is obnamlib.crypto.tag_chain's: the
storage imports crypto, never the reverse.  Its reading names are
imported here, so that the storage layer has one module for the chain.
"""

import zlib

from obnamlib.crypto.tag_chain import (  # noqa: F401 (unwrap and errors)
    DEFLATE, END, ENCRYPT1, ENCRYPT1_PREFIX, CorruptCompressedData,
    EncryptedFileWithoutKey, tagged, unwrap)


# zlib level 1: on mkcorpus text, 30% of the input at 9 ms of CPU per MiB,
# where level 6 (zlib's default, Obnam 1.x's) gives 26% at 30 ms/MiB.  Any
# level is plain zlib to a reader (format-6.md §3.4).
LEVEL = 1

# Data longer than this is first tried on its first SAMPLE_BYTES: when
# those shrink by less than a tenth, the whole is stored uncompressed
# without compressing it (random, already compressed or encrypted files:
# 0.3 ms per MiB chunk instead of 15).
SAMPLE_BYTES = 16 * 1024
SAMPLE_KEPT_AT_MOST = 0.9


def compress(data):
    """zlib at LEVEL, or None when it would not make the file smaller.

    Obnam >= 1.18 skips compression when the tagged result would not be
    shorter than its input; this skips it too when a sample of the data
    does not compress.  A pure function: safe in any thread, and zlib
    releases the GIL while it works."""
    if not sample_compresses(data):
        return None
    packed = zlib.compress(data, LEVEL)
    if len(packed) + len(DEFLATE) + 1 >= len(data):
        return None
    return packed


def sample_compresses(data):
    """Whether data is short enough to try whole, or its first
    SAMPLE_BYTES shrink by at least a tenth."""
    if len(data) <= SAMPLE_BYTES:
        return True
    sample = memoryview(data)[:SAMPLE_BYTES]
    return len(zlib.compress(sample, LEVEL)) <= \
        SAMPLE_BYTES * SAMPLE_KEPT_AT_MOST


def wrap(payload, compression=False, encrypt=None):
    """The bytes to store for `payload`.

    encrypt: None (no encryption) or a callable bytes -> ciphertext."""
    data = b''.join(unencrypted_parts(payload, compression))
    if encrypt is not None:
        data = ENCRYPT1_PREFIX + encrypt(data)
    return data


def unencrypted_parts(payload, compression=False):
    """The tag chain up to encryption, as parts to concatenate: a cipher
    that takes parts (tag_chain.seal) never copies the payload to
    put a tag in front of it."""
    if compression:
        packed = compress(tagged(END, payload))
        if packed is not None:
            return (DEFLATE + b'\0', packed)
    return (END + b'\0', payload)


def unwrap_format5(data, decrypt=None, filename=''):
    """The payload of a format-5 file (format-6.md §14): no tags; with
    both filters the file is zlib(encrypted(payload)), so the zlib layer
    (when present) comes off first, then decryption if the toplevel has a
    key."""
    if data[:1] == b'\x78':
        try:
            data = zlib.decompress(data)
        except zlib.error:
            pass    # not compressed after all: an unfiltered payload
    if decrypt is not None:
        data = decrypt(data)
    return data


def tags_of(data):
    """The outer tags visible without decrypting (for tests and fsck)."""
    found = []
    while True:
        tag, sep, rest = data.partition(b'\0')
        if not sep or tag == END:
            return found
        found.append(tag)
        if tag != DEFLATE:
            return found
        data = zlib.decompress(rest)
