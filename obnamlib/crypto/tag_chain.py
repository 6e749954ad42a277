"""The tag chain's framing (format-6.md §3), as obnam and its cipher
helper process (obnamlib.crypto.cipher_helper) both need it.

A filtered file is `tag NUL data` repeated: the empty tag ends the chain,
`deflate` means zlib, `encrypt1` means OpenPGP symmetric encryption with
the toplevel's key.  Here: the tags, `unwrap` (peeling every layer, as a
read does in either process) and `seal` (the encrypt1 layer put on in one
pass).  Writing the rest of the chain (compression, which filters to
apply) is the storage layer's, obnamlib.repo.storage.filters.

It lives with the crypto code, below the storage, so that the helper
process imports nothing of the repository layers.
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


ENCRYPT1_PREFIX = tagged(ENCRYPT1, b'')


def seal(cipher, parts, passphrase):
    """The stored bytes of an encrypted file whose unencrypted tag chain
    is `parts` (filters.unencrypted_parts), as a view of this thread's
    scratch buffer: write them out before sealing the next file."""
    return cipher.encrypt_in_scratch(parts, passphrase,
                                     lead=ENCRYPT1_PREFIX)


def can_seal(cipher):
    return cipher.seals_in_scratch


def sealed_size(cipher, parts, passphrase):
    """len(seal(cipher, parts, passphrase)), without encrypting."""
    return len(ENCRYPT1_PREFIX) + cipher.encrypted_size(
        sum(len(part) for part in parts), passphrase)


def unwrap(data, decrypt=None, filename='', copy=True):
    """The payload inside stored bytes, undoing filters as the tags say.

    decrypt: None (no key known) or a callable taking the ciphertext as a
    bytes-like object (a memoryview) and returning a bytes-like plaintext.
    Layers are peeled as views, so a large file is copied only once, into
    the bytes returned (copy=False: not at all, a view is returned)."""
    if data[:1] == _END_FIRST:      # no filters: the usual plain file
        if not copy:
            return memoryview(data)[1:]
        return data[1:] if type(data) is bytes else bytes(data[1:])
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


# A file whose first tag is END (an empty tag: the file starts with NUL).
_END_FIRST = END + b'\0'

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
