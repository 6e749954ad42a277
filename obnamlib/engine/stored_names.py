"""Names read from a repository are untrusted: one that is empty, `.`,
`..` or holds `/` or NUL is no single directory entry, and joined onto a
restore target or a live path it would escape it (or write through a
symlink made earlier).  Restore, verify, the FUSE view and fsck refuse
such names with `UnsafeStoredName` (R452C9X).
"""

import os

from obnamlib import errors

_SPECIAL = (b'', b'.', b'..')


def is_safe(name):
    """Whether a stored basename (bytes) is one ordinary directory entry.
    (find, not `in`: for bytes, `in` first tries its argument as an
    integer and builds a TypeError each time, twice as slow.)"""
    return (name not in _SPECIAL and name.find(b'/') < 0 and
            name.find(b'\0') < 0)


def child_path(dirname, name):
    """The path of name in directory dirname of a generation (bytes; the
    root's children are /name)."""
    return dirname.rstrip(b'/') + b'/' + name


def partition(names):
    """(safe names, unsafe names) of a directory listing, in its order."""
    if all(map(is_safe, names)):
        return names, []
    return ([name for name in names if is_safe(name)],
            [name for name in names if not is_safe(name)])


def unsafe_name_error(repo, gen_id, dirname, name, client_name=None):
    """The one-line error for name in directory dirname of gen_id."""
    return errors.UnsafeStoredName(
        client_name=client_name or getattr(gen_id, 'client_name', ''),
        genspec=repo.make_generation_spec(gen_id),
        filename=shown_path(dirname, name))


def shown_path(dirname, name):
    """dirname/name as a person should see it: the name repr'd, since it
    may hold a slash, NUL or nothing."""
    shown = os.fsdecode(name).encode('unicode_escape').decode('ascii')
    return '%s/"%s"' % (os.fsdecode(dirname).rstrip('/'), shown)
