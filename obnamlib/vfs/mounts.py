"""Which kind of filesystem a local path is on: a repository directory on
an NFS, SMB or GlusterFS mount is "local" to obnam, but each file
operation there waits for a server (or a FUSE daemon), 1-20 ms, where a
local disk takes microseconds.  Such storage is faster with many
operations in flight at once than with one after another.

Linux says which filesystem holds a path in /proc/self/mountinfo; where
that cannot be read (another system, a sandbox) the path counts as a
local disk, which is what obnam did before it asked.
"""

import os

MOUNTINFO = '/proc/self/mountinfo'

# Filesystem types (mountinfo's field after " - ") whose operations are
# round trips to a server.  Every FUSE filesystem ("fuse.glusterfs",
# "fuse.sshfs", "fuse") is counted too: each call is an upcall to a daemon.
_REMOTE_TYPES = frozenset({
    '9p', 'afs', 'beegfs', 'ceph', 'cifs', 'fuse', 'fuseblk', 'glusterfs',
    'gpfs', 'lustre', 'ncpfs', 'nfs', 'nfs4', 'ocfs2', 'smb3', 'smbfs',
})


def has_round_trips(path, mountinfo=MOUNTINFO):
    """Whether path is on a network or FUSE filesystem (see above)."""
    fstype = filesystem_type(path, mountinfo)
    return fstype is not None and (
        fstype in _REMOTE_TYPES or fstype.startswith('fuse.'))


def filesystem_type(path, mountinfo=MOUNTINFO):
    """The type of the filesystem that holds path (or would hold it: a
    path not yet made is looked up by its nearest existing parent), or
    None if the mount table cannot be read."""
    try:
        with open(mountinfo, 'rb') as f:
            table = f.read()
    except OSError:
        return None
    where = _existing(os.fsencode(os.path.abspath(path)))
    best, best_type = None, None
    for line in table.splitlines():
        entry = _parse(line)
        if entry is None:
            continue
        mountpoint, fstype = entry
        if _is_below(where, mountpoint) and (
                best is None or len(mountpoint) >= len(best)):
            best, best_type = mountpoint, fstype
    return best_type


def _existing(path):
    """path, or its nearest parent that exists, with symbolic links
    resolved (the mount table names real directories)."""
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return os.path.realpath(path)


def _parse(line):
    """(mount point, filesystem type) of one mountinfo line, or None.
    Fields: id parent dev root MOUNTPOINT options [optional...] - TYPE
    source super-options; octal escapes (\\040) stand for blanks."""
    fields = line.split()
    try:
        separator = fields.index(b'-', 6)
        return _unescape(fields[4]), fields[separator + 1].decode(
            'ascii', 'replace')
    except (ValueError, IndexError):
        return None


def _unescape(field):
    out = bytearray()
    i = 0
    while i < len(field):
        octal = field[i + 1:i + 4]
        if field[i:i + 1] == b'\\' and len(octal) == 3 and octal.isdigit():
            out.append(int(octal, 8) & 0xff)
            i += 4
        else:
            out.append(field[i])
            i += 1
    return bytes(out)


def _is_below(path, mountpoint):
    if mountpoint == b'/':
        return path.startswith(b'/')
    return path == mountpoint or path.startswith(mountpoint + b'/')
