"""Repository storage as larch and fmt_6 see it: the StorageFS protocol on
top of a raw storage, with the tag chain (compression, encryption) applied
to filtered files at the read/write boundary (format-6.md §3).

Nothing above this layer knows about filters or encryption.  Files that are
never filtered (`metadata/format`, `key`, `userkeys`, `lock`) pass through
unchanged; the toplevel (first path component) chooses the key.  Which
files are filtered, and with which key, is content_filter's; the cipher
process of an encrypted local repository is second_process's.
"""

import threading

from obnamlib.crypto import cipher_process
from obnamlib import errors
from obnamlib.repo.storage import content_filter, filters, second_process
from obnamlib.repo.storage.content_filter import is_filtered
from obnamlib.vfs import base as vfs_base

# Files asked for ahead that are read in line, while the helper process
# that reads the rest boots (read_ahead).
READ_AHEAD_AFTER = 64

# The base's capabilities that hold for RepositoryFS too.
_PASSED_ON = frozenset({vfs_base.READS_IN_BATCHES})


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
    helper: whether an encrypted local repository may start the cipher
    helper process (False: decrypt in this process, which is itself a
    helper of obnam's: fsck's second process).

    The interface: the Storage methods (filtered content, names, locks,
    `sync`, `spread_subdirectories`, `close`), `read_raw`/`write_raw`,
    larch's reading hints (`reads_in_batches`, `read_files`,
    `read_ahead`, `can_read_ahead`) and fmt_6's (`expect_reads`), the
    chunk store's background writing (`can_seal_behind`/`seal_behind`,
    `can_write_behind`/`write_behind`,
    `can_create_in_batches`/`create_many_in_base`), the counters
    `bytes_read`/`bytes_written`, `keys`, `toplevel_names()` and
    `reopening(toplevels)`.
    """

    def __init__(self, base, compress=False, keys=None, cipher=None,
                 format5=False, helper=True):
        self.base = vfs_base.as_storage(base)
        self._filter = content_filter.ContentFilter(
            compress=compress, keys=keys, cipher=cipher, format5=format5)
        self._second = second_process.SecondProcess(self.base, keys)
        self._helper = helper
        self._reads_in_line = False   # see expect_reads
        self._count_lock = threading.Lock()
        self._behind = None       # see write_behind
        self._sealing = False     # see seal_behind
        self.bytes_read = 0
        self.bytes_written = 0

    def __repr__(self):
        return 'RepositoryFS(%r)' % (self.base,)

    @property
    def compress(self):
        return self._filter.compress

    @property
    def keys(self):
        return self._filter.keys

    @property
    def format5(self):
        return self._filter.format5

    @property
    def cipher(self):
        return self._filter.cipher

    @property
    def _process(self):
        """The cipher process, None until first used (or after close)."""
        return self._second.process

    # --- filtered content -------------------------------------------------

    def read_file(self, path):
        if self._second.process is not None:    # it may have read ahead
            got = self._second.take(path)
            if got is not None:
                data, stored_size = got
                self.bytes_read += stored_size
                return data
        return self._filter.unwrap(path, self.read_raw(path))

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
        contents = self.base.read_files(list(paths))
        self.bytes_read += sum(len(data) for data in contents)
        for i, path in enumerate(paths):    # each stored copy let go
            contents[i] = self._filter.unwrap(path, contents[i])
        return contents

    def write_file(self, path, data):
        self.write_raw(path, self._filter.wrap(path, data))

    def create_file(self, path, data):
        """Exclusive create (chunk files); FileExistsError if present."""
        if not self._seal_behind(path, data):
            self._create_raw(path, self._filter.wrap(path, data))

    def _seal_behind(self, path, data):
        """Leave a create's encryption to the writer (see seal_behind):
        the file is counted now, at the size the cipher knows in advance.
        False if the writer or file do not allow it."""
        if not self._sealing or not is_filtered(path):
            return False
        passphrase = self._filter.write_passphrase(path)
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
        return self._has_helper() and cipher_process.can_seal(self.cipher)

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
        return self._second.helper()

    def expect_reads(self, in_line=False):
        """A hint: many files will be read (fsck, restore, verify).  An
        encrypted local repository starts its helper process now, so that
        it has booted when the reading starts and is given all of it.
        in_line: the files are decrypted in this process, without the
        helper (the command has a second process of its own sharing the
        reads: a third would only take turns with the two on the cores,
        and costs a copy of everything through its pipe)."""
        self._reads_in_line = in_line
        if self._reads_ahead():
            self.seal_helper().start()

    def read_ahead(self, paths):
        """Have these files read and decrypted in a second process, for
        the read_file calls that follow (encrypted local repositories).
        Until the helper has booted, the first READ_AHEAD_AFTER files are
        left to read_file (a command that reads only a few files does not
        wait for it, and few are read before it has booted)."""
        if self._reads_ahead():
            self._second.read_ahead(paths, READ_AHEAD_AFTER)
        else:
            self.base.advise_reads(paths)

    @property
    def can_read_ahead(self):
        """Whether read_ahead does anything: the second process reads
        ahead, or the base can start the reads (ADVISES_READS: a local
        disk, where the page cache may lack the files)."""
        return (self._reads_ahead() or
                vfs_base.ADVISES_READS in self.base.capabilities)

    def reopening(self, toplevels):
        """What a second process needs to read these toplevels by itself:
        (the base's url and settings (VirtualFileSystem.reopening),
        {toplevel: passphrase} or None where nothing is encrypted); None
        where the base cannot be reopened, or in format 5.  A key that
        cannot be had raises its error (the caller does the work in one
        process, and says why)."""
        found = self.base.reopening()
        if found is None or self.format5:
            return None
        url, settings = found
        if self.keys is None:
            return url, settings, None
        return url, settings, {toplevel: self.keys.symmetric_key(toplevel)
                               for toplevel in toplevels}

    def _has_helper(self):
        """An encrypted repository on a local disk (format 6): the helper
        process may seal and read."""
        return (self.keys is not None and not self.format5 and
                self._helper and
                vfs_base.LOCAL_FILES in self.base.capabilities)

    def _reads_ahead(self):
        """The helper reads ahead (unless told to read in line)."""
        return self._has_helper() and not self._reads_in_line

    @property
    def can_write_behind(self):
        """Whether write_behind() may be used: the base can create files
        from a second thread."""
        return (not self.format5 and
                vfs_base.CREATES_IN_BACKGROUND in self.base.capabilities)

    @property
    def can_create_in_parallel(self):
        """Whether write_behind() may be given a writer with several
        threads (a network or FUSE filesystem: each create a round trip).
        An encrypted repository seals in its helper process instead."""
        return (self.can_write_behind and
                vfs_base.CREATES_IN_PARALLEL in self.base.capabilities)

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

    def file_sizes(self, dirnames):
        """Stored sizes (after compression and encryption): the base's."""
        return self.base.file_sizes(dirnames)

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
        self._second.close()
        self.base.close()
