"""AES in CFB mode, as OpenPGP uses it, with OpenSSL's EVP interface
called directly.

Why not cryptography's Cipher API: its first use loads the package's
OpenSSL backend, which imports X.509 support too (about 90 ms, more than
a whole no-change backup spends on its B-trees), and each call passes
through several Python layers.  The same package's bare cffi binding of
libcrypto loads in a few ms.  That binding is an internal of the
cryptography package, present in the versions Debian ships with Python
3.11 (38.x); where it lacks what we need, `available()` is False and
obnamlib.openpgp uses the Cipher API, which reads and writes the same
bytes (tested both ways).
"""

try:
    from cryptography.hazmat.bindings._openssl import ffi as _ffi
    from cryptography.hazmat.bindings._openssl import lib as _lib
except ImportError:     # newer cryptography: the Cipher API only
    _ffi = _lib = None

_FUNCTIONS = ('EVP_CIPHER_CTX_new', 'EVP_CIPHER_CTX_free',
              'EVP_get_cipherbyname', 'EVP_CipherInit_ex', 'EVP_CipherUpdate')

# Key bytes -> OpenSSL's name of AES in CFB mode (128-bit feedback).
_NAMES = {16: b'aes-128-cfb', 24: b'aes-192-cfb', 32: b'aes-256-cfb'}
# ... and of AES on single blocks (ECB), which RFC 3394 key unwrapping uses.
_BLOCK_NAMES = {16: b'aes-128-ecb', 24: b'aes-192-ecb', 32: b'aes-256-ecb'}

_forced_off = []    # tests switch the fast path off to test the other


def available():
    return (_lib is not None and not _forced_off and
            all(hasattr(_lib, name) for name in _FUNCTIONS))


def blocks_available():
    """Whether aes_block_decryptor can be used."""
    return available() and hasattr(_lib, 'EVP_CIPHER_CTX_set_padding')


class AesCfb:
    """An AES-CFB cipher with a key and IV, in the shape of cryptography's
    Cipher: encryptor() and decryptor() start a stream each."""

    def __init__(self, key, iv):
        self.evp_cipher = _evp_cipher(_NAMES[len(key)])
        self.key = bytes(key)
        self.iv = bytes(iv)

    def encryptor(self):
        return _Stream(self, encrypt=True)

    def decryptor(self):
        return _Stream(self, encrypt=False)


class _AesBlocks:
    """AES with no chaining (no IV), for aes_block_decryptor."""

    def __init__(self, key):
        self.evp_cipher = _evp_cipher(_BLOCK_NAMES[len(key)])
        self.key = bytes(key)
        self.iv = None


def aes_block_decryptor(key):
    """A function decrypting whole 16-byte AES blocks with key, each on
    its own (RFC 3394 key unwrapping, in obnamlib.gpg_agent)."""
    stream = _Stream(_AesBlocks(key), encrypt=False)
    _lib.EVP_CIPHER_CTX_set_padding(stream.ctx, 0)
    return stream.update


def _evp_cipher(name):
    evp_cipher = _lib.EVP_get_cipherbyname(name)
    if evp_cipher == _ffi.NULL:
        raise ValueError('OpenSSL has no %s' % name.decode())
    return evp_cipher


class _Stream:
    """One direction of one CFB stream: what update_into does to n bytes
    depends on every byte before them."""

    def __init__(self, cipher, encrypt):
        ctx = _lib.EVP_CIPHER_CTX_new()
        if ctx == _ffi.NULL:
            raise MemoryError('OpenSSL could not make a cipher context')
        self.ctx = _ffi.gc(ctx, _lib.EVP_CIPHER_CTX_free)
        self.out_len = _ffi.new('int *')
        if _lib.EVP_CipherInit_ex(
                self.ctx, cipher.evp_cipher, _ffi.NULL,
                _ffi.from_buffer(cipher.key),
                _ffi.NULL if cipher.iv is None
                else _ffi.from_buffer(cipher.iv),
                1 if encrypt else 0) != 1:
            raise ValueError('OpenSSL refused the AES key')

    def update_into(self, data, out):
        """Transform data into the start of out; returns len(data)."""
        size = len(data)
        if size == 0:
            return 0
        target = _ffi.from_buffer(out, require_writable=True)
        if len(target) < size:
            raise ValueError('output buffer too small')
        if size > 0x7fffffff:
            raise ValueError('more than 2 GiB in one call')
        if _lib.EVP_CipherUpdate(self.ctx, target, self.out_len,
                                 _ffi.from_buffer(data), size) != 1:
            raise ValueError('OpenSSL could not run AES-CFB')
        return self.out_len[0]

    def update(self, data):
        out = bytearray(len(data))
        count = self.update_into(data, out)
        return bytes(out[:count])

    def finalize(self):
        return b''
