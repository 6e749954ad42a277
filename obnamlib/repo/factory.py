"""Opening (or creating) a repository and picking its format.

The only place that looks at `metadata/format`: `6` is format 6; a missing
marker on an existing directory is not a repository; anything else is a
format we do not know.  A repository is created only when asked (backup),
with one mkdir of its root, whose parent must exist, and only in a new or
empty directory: `-r /etc` or a mistyped path must not fill a directory
full of other things with repository files.
"""

import errno
import os
import urllib.parse

from obnamlib import errors

FORMAT_FILE = 'metadata/format'
FORMAT_6 = '6'
FORMAT_5 = '5'
SUPPORTED_FORMATS = (FORMAT_6,)      # what list-formats shows
READABLE_FORMATS = (FORMAT_6, FORMAT_5)   # format 5: read-only

class RefusingNonEmptyDirectory(errors.ObnamError):
    code = 'RE7199X'
    msg = ('{url} is not an Obnam repository and not empty: refusing to '
           'create a repository in it; give a new or empty directory')


DEFAULTS = {
    'repository': None,
    'compress-with': 'none',
    'encrypt-with': '',
    'node-size': 256 * 1024,
    'lock-timeout': 60,
    'gnupghome': None,
    'symmetric-key-bits': 256,
    'weak-random': True,
}


class _Settings:
    """Obnam settings by name, from the application's Settings or a dict, with
    keyword overrides (underscores for dashes) and defaults."""

    def __init__(self, settings, overrides):
        self.settings = settings
        self.overrides = {k.replace('_', '-'): v for k, v in overrides.items()}

    def __getitem__(self, name):
        if name in self.overrides:
            return self.overrides[name]
        if self.settings is not None:
            try:
                value = self.settings[name]
            except (KeyError, TypeError, IndexError, AttributeError):
                value = None
            else:
                return value
        return DEFAULTS.get(name)

    def get(self, name, default=None):
        value = self[name]
        return default if value is None else value


def open_repository(settings=None, vfs=None, create=False, url=None,
                    repo_fs=None, owns_storage=None, **overrides):
    """The Repository for `url` (default: the `repository` setting).

    vfs: an already opened raw VFS of the repository root.  repo_fs: a
    ready StorageFS with filters (tests, reopen_repository); then nothing
    else is built.  owns_storage: whether closing the repository closes
    the storage (default: when this call opened it).  create=True
    (backup) makes the directory and `metadata/format` if
    missing, in a new or empty directory only (RE7199X otherwise); the
    repository's `created` says whether this call made it.  Overrides:
    setting names, e.g. node_size=4096, lock_timeout=0.  Encryption
    problems are found before anything is written.
    """
    opts = _Settings(settings, overrides)
    url = url or opts['repository']
    if owns_storage is None:
        owns_storage = repo_fs is None and vfs is None
    if not url and vfs is None and repo_fs is None:
        raise errors.RepositorySettingMissingError()
    if repo_fs is None:
        if vfs is None:
            _check_local_root(url, create)
            vfs = _open_raw_vfs(url, opts)
        keys = _toplevel_keys(vfs, opts)
        if create:
            _make_root(vfs, url)
        elif not _is_local(url) and not vfs.isdir('.'):
            raise errors.ObnamSystemError(filename=url, errno=errno.ENOENT,
                                          strerror=os.strerror(errno.ENOENT))
        found, created = _check_format(vfs, url, create, keys)
        repo_fs = _repository_fs(vfs, opts, keys, found)
    else:
        _, created = _check_format(repo_fs, url, create, None)
    from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
    repo = RepositoryFormat6(repo_fs,
                             node_size=int(opts.get('node-size',
                                                    DEFAULTS['node-size'])),
                             lock_timeout=int(opts.get(
                                 'lock-timeout', DEFAULTS['lock-timeout'])),
                             location=url or '',
                             owns_storage=owns_storage)
    repo.created = created
    return repo


def reopen_repository(reopening):
    """A second opening, for reading, of a repository whose reopening()
    gave `reopening` (in another process): it takes no lock, and reads
    an encrypted repository with the passphrases handed over."""
    url = reopening['url']
    settings = reopening.get('settings') or {}
    keys = reopening.get('keys')
    if keys is None:
        return open_repository(settings, url=url,
                               node_size=reopening['node_size'],
                               lock_timeout=0)
    from obnamlib.repo.storage import key_store
    from obnamlib.repo.storage.repo_fs import RepositoryFS
    _check_local_root(url, create=False)
    storage = RepositoryFS(_open_raw_vfs(url, _Settings(settings, {})),
                           keys=key_store.KnownKeys(keys), helper=False)
    return open_repository(url=url, repo_fs=storage, owns_storage=True,
                           node_size=reopening['node_size'], lock_timeout=0)


def _is_local(url):
    return urllib.parse.urlparse(url).scheme == ''


def _open_raw_vfs(url, opts):
    from obnamlib.vfs import factory as vfs_factory
    return vfs_factory.open_vfs(
        url, opts.settings if opts.settings is not None else {})


def _check_local_root(url, create):
    """A missing local root is an error unless creating; its parent must
    exist (we make exactly one directory)."""
    if not _is_local(url):
        return
    path = os.path.abspath(url)
    if os.path.isdir(path):
        return
    if os.path.exists(path):
        raise errors.RootIsNotADirectory(baseurl=url)
    if not create:
        raise errors.ObnamSystemError(filename=path, errno=errno.ENOENT,
                                      strerror=os.strerror(errno.ENOENT))
    if not os.path.isdir(os.path.dirname(path)):
        raise errors.ObnamSystemError(filename=url, errno=errno.ENOENT,
                                      strerror=os.strerror(errno.ENOENT))


def _make_root(vfs, url):
    if vfs.isdir('.'):
        return
    try:
        vfs.mkdir('.')
    except FileExistsError:
        pass
    except OSError as e:
        raise errors.ObnamSystemError(filename=url, errno=e.errno,
                                      strerror=e.strerror)


def _check_format(fs, url, create, keys):
    """(format found, whether we created the repository); raise unless we
    read it.  Creates the marker when asked and missing, in an empty
    directory only."""
    data = _format_marker(fs)
    if data is None:
        if not create:
            raise errors.NotARepository(url=url)
        if _is_empty(fs):
            return FORMAT_6, _write_format(fs)
        data = _format_marker(fs)   # another first backup made it meanwhile
        if data is None:
            raise RefusingNonEmptyDirectory(url=url)
    found = _first_line(data)
    if found in READABLE_FORMATS:
        return found, False
    if not found.isdigit():
        found5 = _format5_marker(fs, keys)
        if found5 == FORMAT_5:
            return FORMAT_5, False
    raise errors.UnknownRepositoryFormat(format=found, url=url)


def _format_marker(fs):
    """The bytes of metadata/format, None if there is none."""
    try:
        return fs.read_file(FORMAT_FILE)
    except FileNotFoundError:
        return None


def _is_empty(fs):
    """A directory without a format marker becomes a repository only if
    it holds nothing: anything else is someone's data, or the mount point
    of a disk that is not there."""
    try:
        return not fs.listdir('.')
    except FileNotFoundError:
        return True


def _first_line(data):
    lines = data.decode('ascii', 'replace').splitlines()
    return lines[0].strip() if lines else ''


def _format5_marker(raw, keys):
    """Format 5 filtered `metadata/format` too (format-6.md §14)."""
    try:
        from obnamlib.repo.storage.repo_fs import RepositoryFS
        return _first_line(RepositoryFS(raw, keys=keys, format5=True)
                           .read_file(FORMAT_FILE))
    except Exception:       # not format 5 after all: report the raw marker
        return None


def _write_format(fs):
    """Write the marker; False if another process was first."""
    data = (FORMAT_6 + '\n').encode('ascii')
    try:
        fs.create_file(FORMAT_FILE, data)
    except FileExistsError:
        return False
    return True


def _repository_fs(vfs, opts, keys, found):
    """The filtered storage on top of the raw VFS (compression, encryption)."""
    from obnamlib.repo.storage.repo_fs import RepositoryFS
    compress = opts['compress-with'] in ('deflate', 'gzip')
    return RepositoryFS(vfs, compress=compress, keys=keys,
                        format5=(found == FORMAT_5))


def _toplevel_keys(vfs, opts):
    """Encryption keys of the toplevels, when the repository or the
    settings use encryption (format-6.md §4); None otherwise."""
    encrypt_with = opts['encrypt-with'] or None
    encrypted = _exists(vfs, 'clientlist/key') or _exists(vfs, 'metadata/key')
    if not encrypted and not encrypt_with:
        return None
    from obnamlib.repo.storage import toplevel_keys
    return toplevel_keys.ToplevelKeys(
        vfs, encrypt_with=encrypt_with, gnupghome=opts['gnupghome'],
        symmetric_key_bits=opts.get('symmetric-key-bits', 256),
        weak_random=opts.get('weak-random', True))


def _exists(vfs, path):
    try:
        return vfs.exists(path)
    except OSError:
        return False
