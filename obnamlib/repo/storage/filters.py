"""The tag chain that wraps every filtered repository file (format-6.md §3).

A filtered file is `tag NUL data` repeated: the empty tag ends the chain,
`deflate` means zlib, `encrypt1` means OpenPGP symmetric encryption with the
toplevel's key.  The writer always applies compression first, encryption
second, and each filter may decline to act (compression that does not
shrink the data is skipped, §3.4).  The cipher is pluggable: any object
with `encrypt(data, passphrase)` and `decrypt(data, passphrase)`.

The framing both obnam and its cipher helper process need (the tags,
`unwrap` and its errors, sealing) is obnamlib.crypto.tag_chain's: the
storage imports crypto, never the reverse.  Its reading names are
imported here, so that the storage layer has one module for the chain.
"""

import zlib

from obnamlib.crypto.tag_chain import (  # noqa: F401 (unwrap and errors)
    DEFLATE, END, ENCRYPT1, ENCRYPT1_PREFIX, CorruptCompressedData,
    EncryptedFileWithoutKey, tagged, unwrap)


def compress(data):
    """zlib at level 6, or None when it would not make the file smaller.

    Obnam >= 1.18 skips compression when the tagged result would not be
    shorter than its input."""
    packed = zlib.compress(data, 6)
    if len(packed) + len(DEFLATE) + 1 >= len(data):
        return None
    return packed


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
