"""What is recorded about one filesystem object.

The fields are those of repository format 6 (format-6.md §7.5).  Each is None
when absent, which the format distinguishes from 0 or empty.  Strings
(user and group names, symlink target, md5 digest, xattr blob) are bytes.
Reading metadata from a live file system and applying it on restore live in
`obnamlib.live_metadata`; encoding lives in `obnamlib.fmt_6.metadata_codec`.
"""

import dataclasses
import stat


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
