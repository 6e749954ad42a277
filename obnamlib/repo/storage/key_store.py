"""What RepositoryFS asks of the keys of an encrypted repository.

RepositoryFS calls every method below without asking whether it exists;
`check_before_writing` and `close` have defaults for key stores that have
nothing to check or release.  toplevel_keys.ToplevelKeys is the real one.
"""

import abc

from obnamlib import errors


class KeyStore(abc.ABC):
    """The passphrases of a repository's toplevels."""

    @abc.abstractmethod
    def symmetric_key(self, toplevel):
        """The toplevel's passphrase (str), or None where it is not
        encrypted; raises an ObnamError if the key cannot be had."""

    @abc.abstractmethod
    def prepare_toplevel(self, toplevel):
        """Make the `key`/`userkeys` files of a new toplevel (once, before
        its first file is written)."""

    def check_before_writing(self):
        """Raise if nothing may be written (a key check failed); called
        before every write.  By default there is nothing to check."""

    def close(self):
        """Release what the key store holds (threads, processes)."""


class KeyNotHandedOver(errors.ObnamError):
    code = 'RA2F0AX'
    msg = ('{toplevel} cannot be read here: obnam\'s first process did not '
           'hand over its key')


class WritingWithHandedOverKeys(errors.ObnamError):
    code = 'RA2F0BX'
    msg = ('Nothing may be written with keys handed over by another obnam '
           'process')


class KnownKeys(KeyStore):
    """Passphrases another obnam process handed over, for reading the
    toplevels they are for (fsck's second process): no gpg, no key file
    read, and nothing written."""

    def __init__(self, passphrases):
        self.passphrases = dict(passphrases)

    def symmetric_key(self, toplevel):
        try:
            return self.passphrases[toplevel]
        except KeyError:
            raise KeyNotHandedOver(toplevel=toplevel) from None

    def prepare_toplevel(self, toplevel):
        raise WritingWithHandedOverKeys()

    def check_before_writing(self):
        raise WritingWithHandedOverKeys()
