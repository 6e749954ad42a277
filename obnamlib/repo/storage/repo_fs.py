"""Repository storage as larch and fmt_6 see it: the StorageFS protocol on
top of a raw storage, with the tag chain (compression, encryption) applied
to filtered files at the read/write boundary (format-6.md §3).

Nothing above this layer knows about filters or encryption.  Files that are
never filtered (`metadata/format`, `key`, `userkeys`, `lock`) pass through
unchanged; the toplevel (first path component) chooses the key.
"""

import threading

from obnamlib.crypto import cipher_process
from obnamlib import errors
from obnamlib.repo.storage import filters
from obnamlib.vfs import base as vfs_base

UNFILTERED_PATHS = ('metadata/format',)
UNFILTERED_NAMES = ('key', 'userkeys', 'lock')

# Files asked for ahead that are read in line, while the helper process
# that reads the rest boots (read_ahead).
READ_AHEAD_AFTER = 64

# The base's capabilities that hold for RepositoryFS too.
_PASSED_ON = frozenset({vfs_base.READS_IN_BATCHES})


def normalise(path):
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


class RepositoryFS(vfs_base.Storage):
    """Storage with filters: what fmt_6 and larch use, and nothing more.

    base: an obnamlib Storage (a VFS), or any object with the StorageFS
    table (larch's LocalFS in tests: wrapped in vfs.base.BasicStorage).
    compress: wrap with `deflate` when it helps.
    keys: None (no encryption) or a key_store.KeyStore.
    cipher: `encrypt(data, passphrase)`, `decrypt(data, passphrase)` and
    `decrypt_view(data, passphrase)` (takes and returns bytes-like
    objects, saves copies); default: in-process OpenPGP
    (obnamlib.crypto.openpgp).
    format5: read a format-5 repository (no tags, §14); read-only.

    The interface: the Storage methods (filtered content, names, locks,
    `sync`, `spread_subdirectories`, `close`), `read_raw`/`write_raw`,
    larch's reading hints (`reads_in_batches`, `read_files`,
    `read_ahead`) and fmt_6's (`expect_reads`), the chunk store's
    background writing (`can_seal_behind`/`seal_behind`,
    `can_write_behind`/`write_behind`,
    `can_create_in_batches`/`create_many_in_base`), the counters
    `bytes_read`/`bytes_written`, `keys` and `toplevel_names()`.
    """

    def __init__(self, base, compress=False, keys=None, cipher=None,
                 format5=False):
        self.base = vfs_base.as_storage(base)
        self.format5 = format5
        self.compress = compress
        self.keys = keys
        self._cipher = cipher
        self._prepared = set()
        self._lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._behind = None       # see write_behind
        self._sealing = False     # see seal_behind
        self._process = None      # cipher_process.CipherProcess, if used
        self._ahead_asked = 0
        self._keyless = set()     # toplevels whose key read_ahead lacked
        self.bytes_read = 0
        self.bytes_written = 0

    def __repr__(self):
        return 'RepositoryFS(%r)' % (self.base,)

    @property
    def cipher(self):
        if self._cipher is None:
            self._cipher = default_cipher()
        return self._cipher

    # --- filtered content -------------------------------------------------

    def read_file(self, path):
        if self._process is not None:
            got = self._process.take(path)
            if got is not None:
                data, stored_size = got
                self.bytes_read += stored_size
                return data
        return self._unwrap(path, self.read_raw(path))

    @property
    def capabilities(self):
        """The base's READS_IN_BATCHES (read_files then saves round trips:
        SFTP); its other capabilities are its own (see can_*_behind)."""
        return self.base.capabilities & _PASSED_ON

    def read_files(self, paths):
        """read_file of several files; the base reads them together when
        it reads in batches.  Raises like read_file for the first file
        that fails."""
        if not self.reads_in_batches:
            return [self.read_file(path) for path in paths]
        raw = self.base.read_files(list(paths))
        self.bytes_read += sum(len(data) for data in raw)
        return [self._unwrap(path, data) for path, data in zip(paths, raw)]

    def _unwrap(self, path, data):
        """The tag chain undone (one code path for every read)."""
        if not is_filtered(path, self.format5):
            return data
        if self.format5:
            return filters.unwrap_format5(data, self._format5_decryptor(path),
                                          filename=path)
        return filters.unwrap(data, self._decryptor(path), filename=path)

    def _format5_decryptor(self, path):
        """Format 5 has no tags: decrypt exactly when the toplevel has a key."""
        if self.keys is None:
            return None
        passphrase = self.keys.symmetric_key(toplevel_of(path))
        if passphrase is None:
            return None
        return lambda data: self.cipher.decrypt(data, passphrase)

    def write_file(self, path, data):
        self.write_raw(path, self._wrap_for(path, data))

    def create_file(self, path, data):
        """Exclusive create (chunk files); FileExistsError if present."""
        if not self._seal_behind(path, data):
            self._create_raw(path, self._wrap_for(path, data))

    def _seal_behind(self, path, data):
        """Leave a create's encryption to the writer (see seal_behind):
        the file is counted now, at the size the cipher knows in advance.
        False if the writer or file do not allow it."""
        if not self._sealing or not is_filtered(path):
            return False
        passphrase = self._write_passphrase(path)
        if passphrase is None:
            return False
        parts = filters.unencrypted_parts(data, self.compress)
        self._behind.submit_sealed(path, parts, passphrase)
        self._count_written(
            cipher_process.sealed_size(self.cipher, parts, passphrase))
        return True

    @property
    def can_seal_behind(self):
        """Whether chunk files may be encrypted and created by a second
        process (obnamlib.crypto.cipher_process; chunk_writer.ProcessChunkWriter
        with seal_helper() and seal_inline): an encrypted repository on a
        local disk, with a cipher that can seal."""
        return self._reads_ahead() and cipher_process.can_seal(self.cipher)

    def seal_behind(self, writer):
        """Like write_behind, with a writer that also encrypts
        (chunk_writer.ProcessChunkWriter): create_file hands it the
        unencrypted tag chain and the passphrase,
        writer.submit_sealed(path, parts, passphrase)."""
        self._behind = writer
        self._sealing = writer is not None

    def seal_inline(self, path, parts, passphrase):
        """Seal and create one file in this thread."""
        self._create_in_base(
            path, cipher_process.seal(self.cipher, parts, passphrase))

    def seal_helper(self):
        """The second process, started when first used."""
        if self._process is None:
            self._process = cipher_process.CipherProcess(self.base.root)
        return self._process

    def expect_reads(self):
        """A hint: many files will be read (fsck, restore, verify).  An
        encrypted local repository starts its helper process now, so that
        it has booted when the reading starts and is given all of it."""
        if self._reads_ahead():
            self.seal_helper().start()

    def read_ahead(self, paths):
        """Have these files read and decrypted in a second process, for
        the read_file calls that follow (encrypted local repositories).
        Until the helper has booted, the first READ_AHEAD_AFTER files are
        left to read_file (a command that reads only a few files does not
        wait for it, and few are read before it has booted)."""
        if not self._reads_ahead():
            return
        paths = [path for path in paths if is_filtered(path)]
        booted = self._process is not None and self._process.ready()
        in_line = 0 if booted else max(0, READ_AHEAD_AFTER - self._ahead_asked)
        self._ahead_asked += len(paths)
        if not booted and self._ahead_asked <= READ_AHEAD_AFTER // 2:
            return      # so few so far that the helper may never be needed
        helper = self.seal_helper()
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
            return self.keys.symmetric_key(toplevel)
        except errors.ObnamError:
            self._keyless.add(toplevel)
            return None

    def _reads_ahead(self):
        """An encrypted repository on a local disk (format 6)."""
        return (self.keys is not None and not self.format5 and
                vfs_base.LOCAL_FILES in self.base.capabilities)

    @property
    def can_write_behind(self):
        """Whether write_behind() may be used: the base can create files
        from a second thread."""
        return (not self.format5 and
                vfs_base.CREATES_IN_BACKGROUND in self.base.capabilities)

    @property
    def can_create_in_batches(self):
        """Whether create_many_in_base saves round trips (the base
        creates in batches: SFTP)."""
        return (not self.format5 and
                vfs_base.CREATES_IN_BATCHES in self.base.capabilities)

    def create_many_in_base(self, items):
        """The base's create_files for (path, already filtered data):
        per item None or FileExistsError (chunk_writer.BatchChunkWriter)."""
        return self.base.create_files(list(items))

    def write_behind(self, writer):
        """From now on create_file filters and counts the content, then
        leaves the base's create to writer.submit(path, data, create)
        (fmt_6.chunk_writer); None: create at once again."""
        self._behind = writer
        self._sealing = False

    def _wrap_for(self, path, data):
        if self.format5:
            raise Format5IsReadOnly()
        if not is_filtered(path):
            return data
        return filters.wrap(data, self.compress, self._encryptor(path))

    def _encryptor(self, path):
        passphrase = self._write_passphrase(path)
        if passphrase is None:
            return None
        return lambda data: self.cipher.encrypt(data, passphrase)

    def _write_passphrase(self, path):
        """The key to encrypt a new file with (None: unencrypted), after
        its toplevel's key files exist."""
        if self.keys is None:
            return None
        toplevel = toplevel_of(path)
        self._prepare(toplevel)
        return self.keys.symmetric_key(toplevel)

    def _decryptor(self, path):
        if self.keys is None:
            return None
        toplevel = toplevel_of(path)

        def decrypt(data):
            passphrase = self.keys.symmetric_key(toplevel)
            if passphrase is None:
                raise filters.EncryptedFileWithoutKey(filename=path)
            return self.cipher.decrypt_view(data, passphrase)
        return decrypt

    def _prepare(self, toplevel):
        """Let the keys create key/userkeys once per toplevel (§10.1)."""
        if toplevel in self._prepared:
            return
        with self._lock:
            if toplevel not in self._prepared:
                self.keys.prepare_toplevel(toplevel)
                self._prepared.add(toplevel)

    # --- raw content -------------------------------------------------------

    def read_raw(self, path):
        data = self.base.read_file(path)
        self.bytes_read += len(data)
        return data

    def write_raw(self, path, data):
        self._before_writing()
        self.base.write_file(path, data)
        self._count_written(len(data))

    def _count_written(self, size):
        with self._count_lock:
            self.bytes_written += size

    def _create_raw(self, path, data):
        if self._behind is not None:
            self._behind.submit(path, data, self._create_in_base)
            self._count_written(len(data))
            return
        self._create_in_base(path, data)
        self._count_written(len(data))

    def _create_in_base(self, path, data):
        self.base.create_file(path, data)

    # --- locks (never filtered, §9) ---------------------------------------

    def lock(self, path, content=b''):
        """Exclusive create; LockFail if the file exists."""
        self._before_writing()
        try:
            self.base.lock(path, content)
        except FileExistsError:
            raise errors.LockFail(lock_name=path,
                                  reason='lock file already exists')
        self._count_written(len(content))

    def unlock(self, path):
        self.base.unlock(path)

    # --- names -------------------------------------------------------------

    def exists(self, path):
        return self.base.exists(path)

    def isdir(self, path):
        return self.base.isdir(path)

    def listdir(self, path):
        return self.base.listdir(path)

    def makedirs(self, path):
        self._before_writing()
        self.base.makedirs(path)

    def remove(self, path):
        self._before_writing()
        self.base.remove(path)

    def rmdir(self, path):
        self._before_writing()
        self.base.rmdir(path)

    def rename(self, old, new):
        self._before_writing()
        self.base.rename(old, new)

    def toplevel_names(self):
        """The repository's toplevel directories (key commands)."""
        return [name for name in self.base.listdir('.')
                if self.base.isdir(name)]

    def sync(self):
        """Make everything written so far durable (a writing forest's
        commit, fmt_6.forests.SyncBeforeCommit)."""
        self.base.sync()

    def spread_subdirectories(self, path):
        """The base's placement hint for chunks/ (LocalFS: ext4)."""
        return self.base.spread_subdirectories(path)

    def _before_writing(self):
        """Nothing is written before the keys' checks have passed
        (--encrypt-with naming a key whose secret half is missing)."""
        if self.keys is not None:
            self.keys.check_before_writing()

    def close(self):
        if self.keys is not None:
            self.keys.close()
        if self._process is not None:
            self._process.close()
            self._process = None
        self.base.close()
