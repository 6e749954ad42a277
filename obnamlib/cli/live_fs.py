"""The live file system a command reads: the VFS its roots are on and
their paths there (backup backs them up, verify compares with them).

Local roots share one local VFS; sftp:// roots must all be on one host.
"""

import os
import urllib.parse

import obnamlib.errors
import obnamlib.vfs.factory


class MixedRootsError(obnamlib.errors.ObnamError):
    """All roots of one run must be on the same machine (new here)."""
    code = 'R280D8X'
    msg = ('Backup roots must all be on one machine: {root} is not where '
           '{first} is')


def normalise_root(root):
    """Absolute bytes path of a local root, without trailing slashes."""
    return os.fsencode(os.path.abspath(root))


def open_live_fs(roots, settings):
    """The live VFS and the roots' paths on it (local, or one sftp host)."""
    schemes = {obnamlib.vfs.factory.parse_scheme(root) for root in roots}
    if schemes == {''}:
        return (obnamlib.vfs.factory.open_vfs('/', settings),
                [normalise_root(root) for root in roots])
    first = roots[0]
    fs = obnamlib.vfs.factory.open_vfs(first, settings)
    paths = []
    for root in roots:
        parsed = urllib.parse.urlparse(root)
        if parsed.scheme != urllib.parse.urlparse(first).scheme or \
                parsed.netloc != urllib.parse.urlparse(first).netloc:
            fs.close()
            raise MixedRootsError(root=root, first=first)
        paths.append(os.fsencode(os.path.normpath(fs.path_of(root))))
    return fs, paths
