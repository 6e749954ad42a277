"""Opening (or creating) a repository and picking its format.

The only place that looks at `metadata/format`: `6` is format 6; a missing
marker on an existing directory is not a repository; anything else is a
format we do not know.  A repository is created only when asked (backup),
with one mkdir of its root, whose parent must exist.
"""

import errno
import os
import urllib.parse

from obnamlib import errors

FORMAT_FILE = 'metadata/format'
FORMAT_6 = '6'
SUPPORTED_FORMATS = (FORMAT_6,)

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
    """Obnam settings by name, from a cliapp-like object or a dict, with
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
                    repo_fs=None, **overrides):
    """The Repository for `url` (default: the `repository` setting).

    vfs: an already opened raw VFS of the repository root.  repo_fs: a
    ready StorageFS with filters (tests); then nothing else is built.
    create=True (backup) makes the directory and `metadata/format` if
    missing.  Overrides: setting names, e.g. node_size=4096, lock_timeout=0.
    """
    opts = _Settings(settings, overrides)
    url = url or opts['repository']
    if not url and vfs is None and repo_fs is None:
        raise errors.RepositorySettingMissingError()
    if repo_fs is None:
        if vfs is None:
            vfs = _open_raw_vfs(url, opts, create)
        _check_format(vfs, url, create)
        repo_fs = _repository_fs(vfs, url, opts)
    else:
        _check_format(repo_fs, url, create)
    from obnamlib.fmt_6.repo_fmt_6 import RepositoryFormat6
    return RepositoryFormat6(repo_fs, node_size=int(opts['node-size']),
                             lock_timeout=int(opts['lock-timeout']),
                             location=url or '')


def _is_local(url):
    return urllib.parse.urlparse(url).scheme == ''


def _open_raw_vfs(url, opts, create):
    if _is_local(url):
        _prepare_local_root(url, create)
    try:
        from obnamlib import vfs as vfs_module
    except ImportError:
        vfs_module = None
    if vfs_module is None:
        if not _is_local(url):
            raise errors.UnknownVFSError(url=url)
        return None     # _repository_fs falls back to local storage
    return vfs_module.open_vfs(url, opts.settings if opts.settings is not None
                               else {})


def _prepare_local_root(url, create):
    path = os.path.abspath(url)
    if os.path.isdir(path):
        return
    if os.path.exists(path):
        raise errors.RootIsNotADirectory(baseurl=url)
    if not create:
        raise errors.ObnamSystemError(filename=path, errno=errno.ENOENT,
                                      strerror=os.strerror(errno.ENOENT))
    try:
        os.mkdir(path, 0o700)
    except OSError as e:
        raise errors.ObnamSystemError(filename=url, errno=e.errno,
                                      strerror=e.strerror)


def _check_format(fs, url, create):
    """Raise unless the storage holds a format we read; create if asked."""
    if fs is None:
        fs = _local_raw(url)
    try:
        data = fs.read_file(FORMAT_FILE)
    except FileNotFoundError:
        if not create:
            raise errors.NotARepository(url=url)
        _write_format(fs)
        return FORMAT_6
    lines = data.decode('ascii', 'replace').splitlines()
    found = lines[0].strip() if lines else ''
    if found not in SUPPORTED_FORMATS:
        raise errors.UnknownRepositoryFormat(format=found, url=url)
    return found


def _write_format(fs):
    create = getattr(fs, 'create_file', None)
    data = (FORMAT_6 + '\n').encode('ascii')
    if create is not None:
        try:
            create(FORMAT_FILE, data)
        except FileExistsError:
            pass
    else:
        fs.write_file(FORMAT_FILE, data)


def _local_raw(url):
    import larch.vfs
    return larch.vfs.LocalFS(os.path.abspath(url))


def _repository_fs(vfs, url, opts):
    """The filtered storage on top of the raw VFS (compression, encryption)."""
    try:
        from obnamlib.repo_fs import RepositoryFS
    except ImportError:
        RepositoryFS = None
    if RepositoryFS is None or vfs is None:
        from obnamlib.fmt_6.fallback_storage import PlainLocalStorage
        return PlainLocalStorage(os.path.abspath(url))
    compress = opts['compress-with'] in ('deflate', 'gzip')
    keys = _toplevel_keys(vfs, opts)
    return RepositoryFS(vfs, compress=compress, keys=keys)


def _toplevel_keys(vfs, opts):
    """Encryption keys of the toplevels, when the repository or the
    settings use encryption (format-6.md §4)."""
    encrypted = vfs.exists('clientlist/key') or bool(opts['encrypt-with'])
    if not encrypted:
        return None
    from obnamlib import toplevel_keys
    return toplevel_keys.ToplevelKeys(vfs, opts.settings)
