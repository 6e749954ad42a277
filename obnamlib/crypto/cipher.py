"""What the storage layer asks of a cipher (the `cipher` of RepositoryFS).

Every cipher encrypts and decrypts whole files with a toplevel's
passphrase.  Some can also seal a file in one pass into a scratch buffer
and tell its encrypted size in advance, which lets the storage hand the
encryption to a background process (obnamlib.crypto.cipher_process);
they say so with `seals_in_scratch` rather than by having the methods.
"""

import abc


class Cipher(abc.ABC):

    # True: encrypt_in_scratch and encrypted_size work.
    seals_in_scratch = False

    @abc.abstractmethod
    def encrypt(self, data, passphrase):
        """The stored bytes of `data`."""

    @abc.abstractmethod
    def decrypt(self, data, passphrase):
        """The bytes `encrypt` was given."""

    def decrypt_view(self, data, passphrase):
        """decrypt() for a bytes-like `data`, returning a bytes-like
        object (a cipher that can avoid copies overrides it)."""
        return self.decrypt(data, passphrase)

    def encrypt_in_scratch(self, parts, passphrase, lead=b''):
        """lead + encrypt(b''.join(parts)) in a scratch buffer (only
        where seals_in_scratch)."""
        raise NotImplementedError(type(self).__name__ + ' cannot seal')

    def encrypted_size(self, length, passphrase):
        """len(encrypt(data)) for data of this length (only where
        seals_in_scratch)."""
        raise NotImplementedError(type(self).__name__ + ' cannot seal')
