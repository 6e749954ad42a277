"""What lstat and scandir return for files on an SFTP server."""

import zlib

from obnamlib.vfs.sftp.url import join


class RemoteStat:
    """What lstat/scandir return: os.stat_result's fields, from SFTP v3
    attributes, plus the owner and group names the server itself shows
    (`st_username`, `st_groupname`: bytes, or None when not known)."""

    __slots__ = ('st_mode', 'st_ino', 'st_dev', 'st_nlink', 'st_uid',
                 'st_gid', 'st_size', 'st_atime', 'st_mtime', 'st_ctime',
                 'st_atime_ns', 'st_mtime_ns', 'st_ctime_ns', 'st_blocks',
                 'st_blksize', 'st_rdev', 'st_username', 'st_groupname')

    def __init__(self, attrs, path, longname=None):
        mtime = _signed32(attrs.st_mtime or 0)
        atime = _signed32(attrs.st_atime or 0)
        nlink, self.st_username, self.st_groupname = _ls_fields(longname)
        self.st_mode = attrs.st_mode or 0
        self.st_ino = _fake_inode(path)
        self.st_dev = 0
        self.st_nlink = nlink or 1
        self.st_uid = attrs.st_uid or 0
        self.st_gid = attrs.st_gid or 0
        self.st_size = attrs.st_size or 0
        self.st_atime, self.st_mtime, self.st_ctime = atime, mtime, mtime
        self.st_atime_ns = atime * 10**9
        self.st_mtime_ns = self.st_ctime_ns = mtime * 10**9
        self.st_blocks = (self.st_size + 511) // 512
        self.st_blksize = 4096
        self.st_rdev = 0

    def __repr__(self):
        return 'RemoteStat(mode=%o, size=%d, mtime=%d)' % (
            self.st_mode, self.st_size, self.st_mtime)


def _ls_fields(longname):
    """(link count, owner, group) from an `ls -l` style line: SFTP v3
    attributes have neither.  OpenSSH fills the names in from the server's
    user database; numbers mean it had no name.  None when not known."""
    fields = (longname or b'').split(None, 4)
    if len(fields) < 5:
        return None, None, None
    nlink = int(fields[1]) if fields[1].isdigit() else None
    owner, group = (None if name.isdigit() else name for name in fields[2:4])
    return nlink, owner, group


def same_attrs(a, b):
    """Does a listing's entry still describe what LSTAT just returned?"""
    return all(getattr(a, field) == getattr(b, field) for field in
               ('st_mode', 'st_uid', 'st_gid', 'st_size', 'st_mtime'))


def _signed32(value):
    """SFTP v3 times are 32 bits; read them as the signed time_t they were."""
    value &= 0xffffffff
    return value - (1 << 32) if value >= (1 << 31) else value


def _fake_inode(path):
    """SFTP has no inode numbers; a stable one per path keeps callers sane."""
    return zlib.crc32(path) | (zlib.adler32(path) << 32)


def scan_entries(full, raw):
    """scandir's sorted (name, RemoteStat) list from directory entries."""
    entries = [(name, RemoteStat(attrs, join(full, name), longname))
               for name, attrs, longname in raw]
    entries.sort(key=lambda entry: entry[0])
    return entries
