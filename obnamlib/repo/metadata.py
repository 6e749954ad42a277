"""What is recorded about one filesystem object.

The fields are those of repository format 6 (format-6.md §7.5).  Each is None
when absent, which the format distinguishes from 0 or empty.  Strings
(user and group names, symlink target, md5 digest, xattr blob) are bytes.
Reading metadata from a live file system and applying it on restore live in
`obnamlib.engine.live_metadata`; encoding lives in `obnamlib.repo.fmt_6.metadata_codec`.
"""

import dataclasses
import stat
import struct

from obnamlib import errors


@dataclasses.dataclass
class Metadata:
    st_mode: int = None
    st_mtime_sec: int = None
    st_mtime_nsec: int = None
    st_atime_sec: int = None
    st_atime_nsec: int = None
    st_nlink: int = None
    st_size: int = None
    st_uid: int = None
    st_gid: int = None
    st_dev: int = None
    st_ino: int = None
    st_blocks: int = None
    groupname: bytes = None
    username: bytes = None
    target: bytes = None
    md5: bytes = None
    xattr: bytes = None

    def isdir(self):
        return self.st_mode is not None and stat.S_ISDIR(self.st_mode)

    def isreg(self):
        return self.st_mode is not None and stat.S_ISREG(self.st_mode)

    def islink(self):
        return self.st_mode is not None and stat.S_ISLNK(self.st_mode)

    def copy(self, **changes):
        return dataclasses.replace(self, **changes)


FIELDS = tuple(f.name for f in dataclasses.fields(Metadata))


# The xattr blob of format-6.md §7.5 is how Metadata.xattr holds attributes.

def encode_xattrs(pairs):
    """[(name, value)] bytes pairs -> the xattr blob; None when no pairs."""
    if not pairs:
        return None
    names = b''.join(name + b'\0' for name, _ in pairs)
    lengths = b''.join(struct.pack('!Q', len(value)) for _, value in pairs)
    return (struct.pack('!Q', len(names)) + names + lengths +
            b''.join(value for _, value in pairs))


def decode_xattrs(blob):
    """The xattr blob -> [(name, value)] in stored order."""
    if not blob:
        return []
    try:
        (names_len,) = struct.unpack_from('!Q', blob)
        names = blob[8:8 + names_len].split(b'\0')[:-1]
        pos = 8 + names_len
        lengths = struct.unpack_from('!%dQ' % len(names), blob, pos)
        pos += 8 * len(names)
        pairs = []
        for name, length in zip(names, lengths):
            pairs.append((name, blob[pos:pos + length]))
            pos += length
    except struct.error as e:
        raise errors.RepositoryCorrupt(what='xattr blob', reason=str(e))
    if pos != len(blob):
        raise errors.RepositoryCorrupt(what='xattr blob',
                                       reason='lengths do not add up')
    return pairs
