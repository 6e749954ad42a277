"""The block ciphers and CFB mode OpenPGP uses, through cryptography's
public API, taken from where each release keeps them (38 to 51), and AES
decryption of whole CFB messages made fast.

Where things are: cryptography 43 moved the old block ciphers (CAST5,
TripleDES, Blowfish, IDEA; later Camellia), which 2012-2014 Obnam
repositories and old gpg used, to
cryptography.hazmat.decrepit.ciphers.algorithms, and 47 moved the CFB
mode to decrepit.ciphers.modes; the old names still work but warn.  So a
name is taken from decrepit where the release has it there, else from
the old place.  Releases 37-42 warn about CAST5, Blowfish and IDEA with
nowhere else to take them from: only that warning, by its text, is
filtered, once, when such a class is first looked up.

Everything is imported at first use: runs without encryption never need
it.  The public API has a price on cryptography 38 (Debian 12), whose
backend imports its X.509 modules: an encrypted command's process spends
~60 ms more than it did through that release's private cffi binding
(gone from 42 on, where the Cipher API is all there is and cheap).
"""

import functools
import importlib
import threading
import warnings

_BLOCK = 16
_PRIMITIVES = 'cryptography.hazmat.primitives.ciphers'
_DECREPIT = 'cryptography.hazmat.decrepit.ciphers'


def _module(name):
    """The module, or None where this cryptography release has none."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@functools.lru_cache(maxsize=None)
def _decrepit_algorithms():
    """cryptography 43 and later: the old ciphers' own module."""
    return _module(_DECREPIT + '.algorithms')


@functools.lru_cache(maxsize=None)
def cfb_mode():
    """The CFB mode class: decrepit's from cryptography 47 on."""
    decrepit = _module(_DECREPIT + '.modes')
    if decrepit is not None:
        return decrepit.CFB
    return importlib.import_module(_PRIMITIVES + '.modes').CFB


@functools.lru_cache(maxsize=None)
def algorithm_class(name):
    """cryptography's cipher class of this name ('AES', 'CAST5', ...),
    from decrepit where this release keeps it there."""
    decrepit = _decrepit_algorithms()
    if decrepit is not None and name in vars(decrepit):
        return vars(decrepit)[name]
    primitives = importlib.import_module(_PRIMITIVES + '.algorithms')
    if name == 'AES':
        return primitives.AES
    from cryptography.utils import CryptographyDeprecationWarning
    with warnings.catch_warnings():
        warnings.filterwarnings(
            'ignore', message=name + ' has been ',
            category=CryptographyDeprecationWarning)
        return getattr(primitives, name)


def cipher(name, key, iv):
    """A CFB cipher (cryptography's Cipher) of this algorithm."""
    from cryptography.hazmat.primitives.ciphers import Cipher
    return Cipher(algorithm_class(name)(key), cfb_mode()(iv))


def _aes_whole_blocks(key, mode):
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
    return Cipher(algorithms.AES(key), mode)


def aes_block_decryptor(key):
    """A function decrypting whole 16-byte AES blocks with key, each on
    its own (RFC 3394 key unwrapping, in obnamlib.crypto.gpg_agent)."""
    from cryptography.hazmat.primitives.ciphers import modes
    return _aes_whole_blocks(key, modes.ECB()).decryptor().update


def aes_block_encryptor(key):
    """A function encrypting whole 16-byte AES blocks with key, each on
    its own (ECB keeps no state between blocks)."""
    from cryptography.hazmat.primitives.ciphers import modes
    return _aes_whole_blocks(key, modes.ECB()).encryptor().update


class ScratchBuffer(threading.local):
    """One buffer per thread, used again and again and grown in whole
    MiB: a fresh 1 MiB buffer costs page faults and zeroing, about as
    much as its AES.  Calling it gives a view of its first size bytes,
    which the thread's next call overwrites."""

    GRAIN = 1 << 20

    def __init__(self):
        self.buf = bytearray()

    def __call__(self, size):
        if len(self.buf) < size:
            self.buf = bytearray(-(-size // self.GRAIN) * self.GRAIN)
        return memoryview(self.buf)[:size]


_middle = ScratchBuffer()     # CfbMessageDecryptor's ECB pass


class CfbMessageDecryptor:
    """Whole messages in AES-CFB with one key and IV, decrypted several
    times as fast as a CFB stream.

    Why: a CFB plaintext block is its ciphertext block XOR the AES of
    the ciphertext block before it, so decrypting needs no chain, yet
    OpenSSL's CFB runs AES one block after another.  Here one ECB pass
    gives Y[i] = AES(C[i]) for all blocks at once, and a CBC decryption
    of Y with IV AES(iv) gives AES^-1(Y[i]) XOR Y[i-1] = C[i] XOR
    AES(C[i-1]): the plaintext.  OpenSSL pipelines both."""

    def __init__(self, key, iv):
        from cryptography.hazmat.primitives.ciphers import modes
        if len(iv) != _BLOCK:
            raise ValueError('an AES IV is 16 bytes')
        # ECB keeps no state between whole blocks: one context serves all
        self.ecb = _aes_whole_blocks(key, modes.ECB()).encryptor()
        self.first = self.ecb.update(bytes(iv))  # AES(iv): block 0's
        # One CBC stream for every message: after any whole blocks,
        # decrypting the block `first` leaves it where a fresh stream
        # with IV `first` starts (a new context costs 7 us with
        # cryptography 38, this 1 us).
        self.cbc = _aes_whole_blocks(key, modes.CBC(self.first)).decryptor()
        self.used = False
        self.spill = bytearray(2 * _BLOCK)

    def decrypt_into(self, data, out):
        """Decrypt one whole message into the start of out, a writable
        buffer at least len(data) + 15 bytes long (cryptography's rule
        for update_into); returns len(data)."""
        size = len(data)
        if len(out) < size + _BLOCK - 1:
            raise ValueError('output buffer too small')
        whole = size - size % _BLOCK
        data, out = memoryview(data), memoryview(out)
        if whole:
            middle = _middle(whole + _BLOCK - 1)
            self.ecb.update_into(data[:whole], middle)
            last = bytes(middle[whole - _BLOCK:whole])
            if self.used:
                self.cbc.update_into(self.first, self.spill)
            self.used = True
            self.cbc.update_into(middle[:whole], out)
        else:
            last = self.first
        tail = size - whole
        if tail:
            out[whole:size] = (
                int.from_bytes(data[whole:size], 'big') ^
                int.from_bytes(last[:tail], 'big')).to_bytes(tail, 'big')
        return size
