"""RepositoryFS's side of the cipher process (obnamlib.crypto.cipher_process)
of an encrypted repository on a local disk: started when first needed,
given the files to read and decrypt ahead, and handing back what it read.

Kept apart from RepositoryFS so that the process's lifetime and the
read-ahead bookkeeping (how many files were asked for, which toplevels
have no key to read ahead with) are in one place.
"""

from obnamlib.crypto import cipher_process
from obnamlib import errors
from obnamlib.repo.storage.content_filter import is_filtered, toplevel_of


class SecondProcess:
    """The cipher process of one repository, and what was asked of it.

    base: the storage below RepositoryFS (its `root` is the helper's).
    keys: the repository's key_store.KeyStore.
    """

    def __init__(self, base, keys):
        self._base = base
        self._keys = keys
        self.process = None       # cipher_process.CipherProcess, if used
        self._ahead_asked = 0
        self._keyless = set()     # toplevels whose key read_ahead lacked

    def helper(self):
        """The process, started when first used."""
        if self.process is None:
            self.process = cipher_process.CipherProcess(self._base.root)
        return self.process

    def take(self, path):
        """(data, stored size) of `path` if it was read ahead, else None."""
        if self.process is None:
            return None
        return self.process.take(path)

    def read_ahead(self, paths, in_line_limit):
        """Have the helper read these files ahead; until it has booted,
        the first `in_line_limit` files are left to read_file (see
        RepositoryFS.read_ahead)."""
        paths = [path for path in paths if is_filtered(path)]
        booted = self.process is not None and self.process.ready()
        in_line = 0 if booted else max(0, in_line_limit - self._ahead_asked)
        self._ahead_asked += len(paths)
        if not booted and self._ahead_asked <= in_line_limit // 2:
            return      # so few so far that the helper may never be needed
        helper = self.helper()
        helper.start()
        paths = paths[in_line:]
        wanted = []
        for path in paths:
            passphrase = self._read_ahead_key(path)
            if passphrase is None:
                break
            wanted.append((path, passphrase))
        helper.read_ahead(wanted)

    def _read_ahead_key(self, path):
        """The key to read `path` ahead with, or None.  Reading ahead is a
        hint: a key that cannot be had is not its error to report, but
        that of the read_file that follows (fsck counts it as a problem
        of that file; a restore names the file).  Nor is it tried again
        for a hint: each try may be a gpg run, and every read tries."""
        toplevel = toplevel_of(path)
        if toplevel in self._keyless:
            return None
        try:
            return self._keys.symmetric_key(toplevel)
        except errors.ObnamError:
            self._keyless.add(toplevel)
            return None

    def close(self):
        if self.process is not None:
            self.process.close()
            self.process = None
