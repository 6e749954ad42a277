"""The tag chain that wraps every filtered repository file (format-6.md §3).

A filtered file is `tag NUL data` repeated: the empty tag ends the chain,
`deflate` means zlib, `encrypt1` means OpenPGP symmetric encryption with the
toplevel's key.  The writer always applies compression first, encryption
second, and each filter may decline to act (compression that does not
shrink the data is skipped, §3.4).  The cipher is pluggable: any object
with `encrypt(data, passphrase)` and `decrypt(data, passphrase)`.
"""

import zlib

from obnamlib import errors

END = b''
DEFLATE = b'deflate'
ENCRYPT1 = b'encrypt1'


class EncryptedFileWithoutKey(errors.ObnamError):
    code = 'R9387DX'
    msg = ('{filename} is encrypted, but no encryption key is available '
           'for its toplevel (use --encrypt-with or check your keyring)')


class CorruptCompressedData(errors.ObnamError):
    code = 'R70655X'
    msg = '{filename}: compressed data is damaged: {reason}'


def tagged(tag, data):
    return tag + b'\0' + data


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
    that takes parts (cipher_process.seal) never copies the payload to
    put a tag in front of it."""
    if compression:
        packed = compress(tagged(END, payload))
        if packed is not None:
            return (DEFLATE + b'\0', packed)
    return (END + b'\0', payload)


ENCRYPT1_PREFIX = tagged(ENCRYPT1, b'')


def unwrap(data, decrypt=None, filename='', copy=True):
    """The payload inside stored bytes, undoing filters as the tags say.

    decrypt: None (no key known) or a callable taking the ciphertext as a
    bytes-like object (a memoryview) and returning a bytes-like plaintext.
    Layers are peeled as views, so a large file is copied only once, into
    the bytes returned (copy=False: not at all, a view is returned)."""
    view = memoryview(data)
    while True:
        tag, rest = _split_tag(view)
        if tag == END:
            return bytes(rest) if copy else rest
        if tag == DEFLATE:
            view = memoryview(_decompress(rest, filename))
        elif tag == ENCRYPT1:
            if decrypt is None:
                raise EncryptedFileWithoutKey(filename=filename)
            view = memoryview(decrypt(rest))
        else:
            raise errors.MissingFilterError(tagname=_shown_tag(tag))


# Tags are short words: look for the NUL in this many leading bytes first.
_TAG_PROBE = 64


def _shown_tag(tag):
    """A tag for an error line: a damaged file's "tag" can be megabytes."""
    if len(tag) <= _TAG_PROBE:
        return tag
    return tag[:_TAG_PROBE] + b'... (%d bytes)' % len(tag)


def _split_tag(view):
    """(tag bytes, view of the rest) at the first NUL of view."""
    end = bytes(view[:_TAG_PROBE]).find(b'\0')
    if end < 0 and len(view) > _TAG_PROBE:
        end = bytes(view).find(b'\0')     # an unusually long tag
    if end < 0:
        raise errors.NoFilterTagError()
    return bytes(view[:end]), view[end + 1:]


def _decompress(data, filename):
    try:
        return zlib.decompress(data)
    except zlib.error as e:
        raise CorruptCompressedData(filename=filename, reason=str(e))


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
