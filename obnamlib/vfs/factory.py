"""Which VirtualFileSystem serves a URL: the one place that knows every
implementation (obnamlib.vfs.base knows none)."""

import urllib.parse

import obnamlib.errors
from obnamlib.vfs.local import LocalFS


def parse_scheme(url):
    """The URL scheme as obnam sees it: '' for a local path."""
    return urllib.parse.urlparse(url).scheme


def open_vfs(url, settings=None):
    """A VirtualFileSystem rooted at url: local path or sftp://; else R826A1X."""
    scheme = parse_scheme(url)
    if scheme == '':
        return LocalFS(url)
    if scheme == 'sftp':
        # Imported when first needed: paramiko and the SFTP code take a
        # tenth of a second to load, which a local run need not pay.
        from obnamlib.vfs.sftp.fs import SftpFS
        return SftpFS(url, settings=settings)
    raise obnamlib.errors.UnknownVFSError(url=url)
