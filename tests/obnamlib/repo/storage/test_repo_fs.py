import os
import zlib

import pytest

from obnamlib import larch
import obnamlib.larch.vfs
import obnamlib.vfs.local
from obnamlib import errors
from obnamlib.repo.storage import content_filter, filters, repo_fs
from obnamlib.repo.storage.key_store import KeyStore
from tests.obnamlib.repo.storage.test_filters import XorCipher
from tests.gpg_fixture import plain_gpg_home  # noqa: F401
from tests.obnamlib.mount_tables import local_fs_on
from tests.reference_data import extract_all


class PassphraseTable(KeyStore):
    """A KeyStore with fixed passphrases, recording preparations."""

    def __init__(self, table):
        self.table = table
        self.prepared = []

    def symmetric_key(self, toplevel):
        return self.table.get(toplevel)

    def prepare_toplevel(self, toplevel):
        self.prepared.append(toplevel)


BASES = {
    'larch-local': lambda root: larch.vfs.LocalFS(root),
    'larch-memory': lambda root: larch.vfs.MemoryFS(),
    'obnam-local': lambda root: obnamlib.vfs.local.LocalFS(root),
}


@pytest.fixture(params=sorted(BASES))
def base(request, tmp_path):
    return BASES[request.param](str(tmp_path))


def test_filtered_file_has_nul_prefix(base):
    fs = repo_fs.RepositoryFS(base)
    fs.write_file('clientlist/metadata', b'[metadata]\n')
    assert base.read_file('clientlist/metadata') == b'\0[metadata]\n'
    assert fs.read_file('clientlist/metadata') == b'[metadata]\n'


@pytest.mark.parametrize('path', ['metadata/format', 'clientlist/key',
                                  'chunks/userkeys', 'lock', '123/lock',
                                  './lock'])
def test_unfiltered_files_pass_through(base, path):
    fs = repo_fs.RepositoryFS(base, compress=True,
                              keys=PassphraseTable({}), cipher=XorCipher())
    fs.write_file(path, b'6\n' * 100)
    assert base.read_file(path) == b'6\n' * 100
    assert fs.read_file(path) == b'6\n' * 100


def test_compression(base):
    fs = repo_fs.RepositoryFS(base, compress=True)
    fs.write_file('chunks/0/0/0/1', b'x' * 4096)
    raw = base.read_file('chunks/0/0/0/1')
    assert raw == b'deflate\0' + zlib.compress(b'\0' + b'x' * 4096,
                                                filters.LEVEL)
    assert fs.read_file('chunks/0/0/0/1') == b'x' * 4096


def test_reads_compressed_without_compress_setting(base):
    repo_fs.RepositoryFS(base, compress=True).write_file('a/b', b'y' * 99)
    assert repo_fs.RepositoryFS(base).read_file('a/b') == b'y' * 99


def test_encryption_uses_toplevel_key_and_prepares_once(base):
    keys = PassphraseTable({'chunks': 'k1', 'clientlist': 'k2'})
    fs = repo_fs.RepositoryFS(base, keys=keys, cipher=XorCipher())
    fs.write_file('chunks/0/0/0/1', b'one')
    fs.write_file('chunks/0/0/0/2', b'two')
    fs.write_file('clientlist/metadata', b'three')
    assert keys.prepared == ['chunks', 'clientlist']
    raw = base.read_file('chunks/0/0/0/1')
    assert raw.startswith(b'encrypt1\0') and raw.endswith(b'k1')
    assert base.read_file('clientlist/metadata').endswith(b'k2')
    assert fs.read_file('chunks/0/0/0/2') == b'two'
    assert fs.read_file('clientlist/metadata') == b'three'


def test_unencrypted_toplevel_with_keys_object(base):
    keys = PassphraseTable({})
    fs = repo_fs.RepositoryFS(base, keys=keys, cipher=XorCipher())
    fs.write_file('123/metadata', b'm')
    assert base.read_file('123/metadata') == b'\0m'
    assert keys.prepared == ['123']


def test_encrypted_file_without_keys_is_clear_error(base):
    keys = PassphraseTable({'chunks': 'k1'})
    repo_fs.RepositoryFS(base, keys=keys, cipher=XorCipher()).write_file(
        'chunks/0/0/0/1', b'secret')
    for other_keys in (None, PassphraseTable({})):
        fs = repo_fs.RepositoryFS(base, keys=other_keys, cipher=XorCipher())
        with pytest.raises(filters.EncryptedFileWithoutKey) as info:
            fs.read_file('chunks/0/0/0/1')
        assert 'chunks/0/0/0/1' in str(info.value)


def test_counters_count_raw_bytes(base):
    fs = repo_fs.RepositoryFS(base)
    fs.write_file('x/y', b'abc')
    fs.write_raw('metadata/format', b'6\n')
    fs.read_file('x/y')
    fs.read_raw('x/y')
    assert fs.bytes_written == 4 + 2
    assert fs.bytes_read == 4 + 4


def test_create_file_is_exclusive(base):
    fs = repo_fs.RepositoryFS(base, compress=True)
    fs.create_file('chunks/0/0/0/5', b'z' * 100)
    with pytest.raises(FileExistsError):
        fs.create_file('chunks/0/0/0/5', b'other')
    assert fs.read_file('chunks/0/0/0/5') == b'z' * 100


def test_lock_is_exclusive_and_unfiltered(base):
    fs = repo_fs.RepositoryFS(base, compress=True)
    fs.lock('123/lock', b'who')
    assert base.read_file('123/lock') == b'who'
    with pytest.raises(errors.LockFail):
        fs.lock('123/lock')
    fs.unlock('123/lock')
    assert not fs.exists('123/lock')
    fs.lock('lock')
    assert base.read_file('lock') == b''


def test_name_operations_pass_through(base):
    fs = repo_fs.RepositoryFS(base)
    fs.makedirs('a/b')
    fs.write_file('a/b/c', b'1')
    assert fs.isdir('a/b') and fs.exists('a/b/c')
    assert fs.listdir('a/b') == ['c']
    fs.rename('a/b/c', 'a/d')
    assert fs.read_file('a/d') == b'1'
    fs.remove('a/d')
    fs.rmdir('a/b')
    assert fs.listdir('a') == []
    with pytest.raises(FileNotFoundError):
        fs.read_file('a/d')


def test_larch_forest_over_repository_fs(tmp_path):
    import obnamlib.larch.forest
    base = larch.vfs.LocalFS(str(tmp_path))
    fs = repo_fs.RepositoryFS(base, compress=True)
    forest = larch.forest.open_forest('clientlist', key_size=4,
                                      node_size=256, allow_writes=True, vfs=fs)
    tree = forest.new_tree()
    for i in range(50):
        tree.insert(b'%04d' % i, b'v' * 20)
    forest.commit()
    meta = base.read_file('clientlist/metadata')
    assert meta.startswith(b'\0[metadata]')
    reopened = larch.forest.open_forest('clientlist', key_size=4,
                                        node_size=256, vfs=fs)
    last = reopened.trees[-1]
    assert last.lookup(b'0042') == b'v' * 20


def test_real_openpgp_cipher_is_default_and_gpg_reads_it(tmp_path,
                                                         plain_gpg_home):
    base = larch.vfs.LocalFS(str(tmp_path))
    keys = PassphraseTable({'chunks': 'ab' * 32})
    fs = repo_fs.RepositoryFS(base, compress=True, keys=keys)
    fs.write_file('chunks/0/0/0/1', b'content ' * 100)
    raw = base.read_file('chunks/0/0/0/1')
    assert raw.startswith(b'encrypt1\0')
    inner = plain_gpg_home.decrypt(raw[9:], passphrase='ab' * 32).stdout
    assert inner == b'deflate\0' + zlib.compress(
        b'\0' + b'content ' * 100, filters.LEVEL)
    assert fs.read_file('chunks/0/0/0/1') == b'content ' * 100
    assert b'content' not in raw


def test_format5_reference_repository_reads(tmp_path):
    """Obnam 0.27's format 5: no tags, zlib over ciphertext, metadata/format
    filtered too (format-6.md §14); read through the format-6 code."""
    import calendar
    import tarfile
    import time
    from obnamlib.repo.storage import toplevel_keys
    from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
    from tests.gpg_fixture import GpgHome, REFERENCE_DIR
    from tests.obnamlib.repo.fmt_6 import reference_repos as rr
    with tarfile.open(REFERENCE_DIR +
                      '/repo-format-5-encrypted-gzipped.tar.gz') as tar:
        extract_all(tar, str(tmp_path))
    with GpgHome('g5') as home:
        home.import_reference()
        base = larch.vfs.LocalFS(str(tmp_path / 'repo'))
        keys = toplevel_keys.ToplevelKeys(base, gnupghome=home.path)
        fs = repo_fs.RepositoryFS(base, keys=keys, format5=True)
        assert fs.read_file('metadata/format') == b'5\n'
        assert fs.read_file('clientlist/metadata').startswith(b'[metadata]')
        with pytest.raises(content_filter.Format5IsReadOnly):
            fs.write_file('clientlist/x', b'')
        repo = RepositoryFormat6(fs)
        assert repo.get_client_names() == ['rainyday']
        assert repo.get_client_key_id('rainyday') == '1B321347'
        gen = repo.get_generation_ids('rainyday')[-1]
        manifest = rr.parse_manifest(str(tmp_path / 'data.summain'))
        assert len(manifest) == 5
        root = [p for p in _walk(repo, gen, b'/') if p.endswith(b'/data')]
        assert len(root) == 1
        hashed = 0
        for name, facts in manifest.items():
            path = root[0][:-len(b'data')] + name.encode()
            md = repo.get_metadata(gen, path)
            assert '%o' % md.st_mode == facts['Mode']
            stamp = facts['Mtime'].rsplit(' ', 1)[0]
            sec, _, frac = stamp.partition('.')
            assert md.st_mtime_sec == calendar.timegm(
                time.strptime(sec, '%Y-%m-%d %H:%M:%S'))
            assert md.st_mtime_nsec == int(frac.ljust(9, '0'))
            if 'SHA1' in facts:
                import hashlib
                data = b''.join(repo.get_chunk_content(c) for c in
                                repo.get_file_chunk_ids(gen, path))
                assert hashlib.sha1(data).hexdigest() == facts['SHA1']
                hashed += 1
        assert hashed == 1


def _walk(repo, gen, path):
    yield path
    for name in repo.get_file_children(gen, path):
        yield from _walk(repo, gen, path.rstrip(b'/') + b'/' + name)


def test_nothing_passes_through_to_the_base_by_name(tmp_path):
    fs = repo_fs.RepositoryFS(obnamlib.vfs.local.LocalFS(str(tmp_path)))
    for name in ('lstat', 'mkdir', 'scandir', 'root', 'create_files'):
        assert hasattr(fs.base, name)
    for name in ('lstat', 'mkdir', 'scandir', 'root'):
        with pytest.raises(AttributeError):
            getattr(fs, name)


class CheckingKeys(PassphraseTable):
    """Keys whose check refuses every write (--encrypt-with without the
    secret key)."""

    closed = False

    def check_before_writing(self):
        raise errors.LockFail(lock_name='x', reason='no secret key')

    def close(self):
        self.closed = True


def test_the_keys_check_comes_before_any_write_and_close_reaches_them(base):
    keys = CheckingKeys({})
    fs = repo_fs.RepositoryFS(base, keys=keys, cipher=XorCipher())
    for write in (lambda: fs.write_file('a/b', b'x'),
                  lambda: fs.lock('lock'), lambda: fs.makedirs('d')):
        with pytest.raises(errors.LockFail):
            write()
    assert not fs.exists('a/b') and not fs.exists('lock')
    fs.close()
    assert keys.closed


def test_toplevel_names_are_the_directories_at_the_root(base):
    fs = repo_fs.RepositoryFS(base)
    fs.write_file('chunks/1', b'c')
    fs.write_file('metadata/format', b'6\n')
    fs.write_file('stray', b's')
    assert sorted(fs.toplevel_names()) == ['chunks', 'metadata']


def test_capabilities_are_the_bases_batched_reads_only(tmp_path):
    local = obnamlib.vfs.local.LocalFS(str(tmp_path))
    assert repo_fs.RepositoryFS(local).capabilities == frozenset()
    assert repo_fs.RepositoryFS(local).can_write_behind
    assert not repo_fs.RepositoryFS(larch.vfs.MemoryFS()).can_write_behind


@pytest.mark.parametrize('fstype, keys, reads_ahead', [
    ('ext4', None, True),
    ('tmpfs', None, False),
    ('tmpfs', PassphraseTable({'chunks': 'k'}), True)])
def test_reading_ahead_does_something_unless_plain_in_memory(
        tmp_path, fstype, keys, reads_ahead):
    """On a disk the base starts the reads; an encrypted repository's
    helper process reads ahead wherever the files are local."""
    fs = repo_fs.RepositoryFS(local_fs_on(tmp_path, fstype), keys=keys)
    assert fs.can_read_ahead is reads_ahead
