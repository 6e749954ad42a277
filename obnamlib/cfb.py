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
# ... and of AES in CBC mode, which CfbMessageDecryptor uses.
_CBC_NAMES = {16: b'aes-128-cbc', 24: b'aes-192-cbc', 32: b'aes-256-cbc'}
_BLOCK = 16

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
    """AES by whole blocks, unpadded: with no chaining (ECB, no IV), or in
    CBC mode with an IV."""

    def __init__(self, key, names=_BLOCK_NAMES, iv=None):
        self.evp_cipher = _evp_cipher(names[len(key)])
        self.key = bytes(key)
        self.iv = iv


def _block_stream(cipher, encrypt):
    stream = _Stream(cipher, encrypt)
    _lib.EVP_CIPHER_CTX_set_padding(stream.ctx, 0)
    return stream


def aes_block_decryptor(key):
    """A function decrypting whole 16-byte AES blocks with key, each on
    its own (RFC 3394 key unwrapping, in obnamlib.gpg_agent)."""
    return _block_stream(_AesBlocks(key), encrypt=False).update


class CfbMessageDecryptor:
    """Whole messages in AES-CFB with one key and IV, decrypted about ten
    times as fast as a CFB stream.

    Why: a CFB plaintext block is its ciphertext block XOR the AES of
    the ciphertext block before it, so decrypting needs no chain, yet
    OpenSSL's CFB runs AES one block after another (~650 MB/s here).
    Here one ECB pass gives Y[i] = AES(C[i]) for all blocks at once, and
    a CBC decryption of Y with IV AES(iv) gives AES^-1(Y[i]) XOR Y[i-1]
    = C[i] XOR AES(C[i-1]): the plaintext.  OpenSSL pipelines both
    (several GB/s).  Needs blocks_available()."""

    def __init__(self, key, iv):
        if len(iv) != _BLOCK:
            raise ValueError('an AES IV is 16 bytes')
        self.ecb = _block_stream(_AesBlocks(key), encrypt=True)
        self.first = self.ecb.update(iv)    # AES(iv): what block 0 uses
        self.cbc = _block_stream(
            _AesBlocks(key, _CBC_NAMES, self.first), encrypt=False)

    def decrypt_into(self, data, out):
        """Decrypt one whole message into the start of out (a writable
        buffer at least as long); returns len(data)."""
        size = len(data)
        if len(out) < size:
            raise ValueError('output buffer too small')
        whole = size - size % _BLOCK
        data, out = memoryview(data), memoryview(out)
        if whole:
            self.ecb.update_into(data[:whole], out)
            last = bytes(out[whole - _BLOCK:whole])
            self._restart_cbc()
            self.cbc.update_into(out[:whole], out)  # in place, as allowed
        else:
            last = self.first
        tail = size - whole
        if tail:
            out[whole:size] = (
                int.from_bytes(data[whole:size], 'big') ^
                int.from_bytes(last[:tail], 'big')).to_bytes(tail, 'big')
        return size

    def _restart_cbc(self):
        """Back to the IV AES(iv), keeping the key schedule."""
        if _lib.EVP_CipherInit_ex(
                self.cbc.ctx, _ffi.NULL, _ffi.NULL, _ffi.NULL,
                _ffi.from_buffer(self.first), 0) != 1:
            raise ValueError('OpenSSL could not reset the AES IV')


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
