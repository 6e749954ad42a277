"""Which repository files the tag chain applies to, and applying it with
each toplevel's key (format-6.md §3): RepositoryFS's content filter.

Files that are never filtered (`metadata/format`, `key`, `userkeys`,
`lock`) pass through unchanged; the toplevel (first path component)
chooses the key.  Kept apart from RepositoryFS, which decides when to
filter (and counts, locks and hands writes on), so that the keys and the
cipher are asked in one place.
"""

import threading

from obnamlib import errors
from obnamlib.repo.storage import filters

UNFILTERED_PATHS = ('metadata/format',)
UNFILTERED_NAMES = ('key', 'userkeys', 'lock')


def normalise(path):
    """path without empty or '.' components (the usual path, a chunk
    file's or a B-tree node's, has none: no split per read)."""
    if ('.' not in path and '//' not in path and path[:1] != '/' and
            path[-1:] != '/'):
        return path
    return '/'.join(part for part in path.split('/') if part not in ('', '.'))


def is_filtered(path, format5=False):
    path = normalise(path)
    if path in UNFILTERED_PATHS and not format5:
        return False
    return path.rsplit('/', 1)[-1] not in UNFILTERED_NAMES


def toplevel_of(path):
    return normalise(path).split('/', 1)[0]


class Format5IsReadOnly(errors.ObnamError):
    code = 'RC71AAX'
    msg = 'Repository format 5 can be read but not written'


def default_cipher():
    from obnamlib.crypto import openpgp
    return openpgp.SymmetricCipher()


class ContentFilter:
    """The tag chain of a repository's files, wrapped and unwrapped.

    compress, keys, cipher and format5: as RepositoryFS takes them (the
    cipher None: in-process OpenPGP, made when first used).

    wrap and unwrap may be called from several threads at once (a chunk
    writer's worker beside the backup): compression is a pure function
    that releases the GIL, and what is made once (the cipher, each
    toplevel's key files) is made under a lock.
    """

    def __init__(self, compress=False, keys=None, cipher=None,
                 format5=False):
        self.compress = compress
        self.keys = keys
        self.format5 = format5
        self._cipher = cipher
        self._prepared = set()
        self._lock = threading.Lock()

    @property
    def cipher(self):
        if self._cipher is None:
            with self._lock:
                if self._cipher is None:
                    self._cipher = default_cipher()
        return self._cipher

    def unwrap(self, path, data):
        """The tag chain undone (one code path for every read)."""
        if not is_filtered(path, self.format5):
            return data
        if self.format5:
            return filters.unwrap_format5(data, self._format5_decryptor(path),
                                          filename=path)
        if self.keys is None:
            return filters.unwrap(data, None, filename=path)
        return filters.unwrap(data, self._decryptor(path), filename=path)

    def _format5_decryptor(self, path):
        """Format 5 has no tags: decrypt exactly when the toplevel has a key."""
        if self.keys is None:
            return None
        passphrase = self.keys.symmetric_key(toplevel_of(path))
        if passphrase is None:
            return None
        return lambda data: self.cipher.decrypt(data, passphrase)

    def _decryptor(self, path):
        toplevel = toplevel_of(path)

        def decrypt(data):
            passphrase = self.keys.symmetric_key(toplevel)
            if passphrase is None:
                raise filters.EncryptedFileWithoutKey(filename=path)
            return self.cipher.decrypt_view(data, passphrase)
        return decrypt

    def wrap(self, path, data):
        """The content to store for `path`; format 5 is never written."""
        if self.format5:
            raise Format5IsReadOnly()
        if not is_filtered(path):
            return data
        return filters.wrap(data, self.compress, self._encryptor(path))

    def _encryptor(self, path):
        passphrase = self.write_passphrase(path)
        if passphrase is None:
            return None
        return lambda data: self.cipher.encrypt(data, passphrase)

    def write_passphrase(self, path):
        """The key to encrypt a new file with (None: unencrypted), after
        its toplevel's key files exist."""
        if self.keys is None:
            return None
        toplevel = toplevel_of(path)
        self._prepare(toplevel)
        return self.keys.symmetric_key(toplevel)

    def _prepare(self, toplevel):
        """Let the keys create key/userkeys once per toplevel (§10.1)."""
        if toplevel in self._prepared:
            return
        with self._lock:
            if toplevel not in self._prepared:
                self.keys.prepare_toplevel(toplevel)
                self._prepared.add(toplevel)
