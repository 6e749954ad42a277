"""Metadata of live filesystem objects: reading it, and applying it on restore.

Reading records what format-6.md §7.5 stores (Obnam 1.x's observed values:
every integer field, `target` present and empty for non-symlinks, user and
group names when they resolve, an xattr blob over every namespace the OS
lists).  Applying follows cli.md §8: ownership, mode, xattrs, then times, so
that nothing done later moves the times again.
"""

import errno
import grp
import os
import pwd
import stat

import obnamlib.errors
import obnamlib.repo.metadata
from obnamlib.repo.metadata import decode_xattrs, encode_xattrs  # noqa: F401


class SetMetadataError(obnamlib.errors.ObnamError):
    code = 'R0FC21X'
    msg = "{filename}: Couldn't set metadata {metadata}: {errno}: {strerror}"


_BILLION = 1000000000
_SETID_BITS = stat.S_ISUID | stat.S_ISGID

# A uid or gid is 32 bits, and (uid_t)-1 means "leave it" to chown(2).
_LAST_OWNER_ID = 2 ** 32 - 2


def _owner_id(what, value):
    """A stored uid or gid as chown(2) takes it (None: -1, "leave it");
    one beyond what any system has is damage, reported for the file
    being restored.  (The codec refuses more than 32 bits already;
    (uid_t)-1 fits them.)"""
    if value is None:
        return -1
    if 0 <= value <= _LAST_OWNER_ID:
        return value
    raise obnamlib.errors.RepositoryCorrupt(
        what='metadata with %s %d' % (what, value),
        reason='not a %s any system has' % what)


class MetadataReader:
    """Reads Metadata from a VFS; user and group names are looked up once."""

    def __init__(self, fs):
        self.fs = fs
        self._users = {}
        self._groups = {}

    def read(self, path, st=None):
        """Metadata of path (bytes); st: its lstat if already known.
        The md5 field is left to whoever reads the content."""
        if st is None:
            st = self.fs.lstat(path)
        md = metadata_from_stat(st)
        md.username = self._owner(st, 'st_username', self._users,
                                  _user_name, st.st_uid)
        md.groupname = self._owner(st, 'st_groupname', self._groups,
                                   _group_name, st.st_gid)
        if stat.S_ISLNK(st.st_mode):
            md.target = self.fs.readlink(path)
        md.xattr = encode_xattrs(self.read_xattrs(path))
        return md

    def read_xattrs(self, path):
        """[(name, value)] in the order the filesystem lists them, as
        Obnam 1.x stored them (so verify across the two tools agrees);
        an attribute that vanished between listing and reading is left
        out."""
        pairs = []
        for name in self.fs.llistxattr(path):
            try:
                pairs.append((name, self.fs.lgetxattr(path, name)))
            except obnamlib.errors.ObnamError as e:
                if getattr(e, 'errno', None) != errno.ENODATA:
                    raise
        return pairs

    def _owner(self, st, attribute, cache, lookup, number):
        """The name a remote VFS reports (SFTP: as the server shows it),
        else the local lookup of the number."""
        if hasattr(st, attribute):
            return getattr(st, attribute)
        return self._name(cache, lookup, number)

    @staticmethod
    def _name(cache, lookup, number):
        if number not in cache:
            try:
                cache[number] = os.fsencode(lookup(number))
            except KeyError:
                cache[number] = None
        return cache[number]


def _user_name(uid):
    return pwd.getpwuid(uid).pw_name


def _group_name(gid):
    return grp.getgrgid(gid).gr_name


def metadata_from_stat(st):
    """The lstat part of Metadata (target present and empty)."""
    return obnamlib.repo.metadata.Metadata(
        st_mode=st.st_mode,
        st_mtime_sec=st.st_mtime_ns // _BILLION,
        st_mtime_nsec=st.st_mtime_ns % _BILLION,
        st_atime_sec=st.st_atime_ns // _BILLION,
        st_atime_nsec=st.st_atime_ns % _BILLION,
        st_nlink=st.st_nlink, st_size=st.st_size,
        st_uid=st.st_uid, st_gid=st.st_gid,
        st_dev=st.st_dev, st_ino=st.st_ino, st_blocks=st.st_blocks,
        target=b'')


class MetadataApplier:
    """Sets recorded metadata on restored objects (cli.md §8).

    euid: the effective uid deciding root-only steps (default: the
    process's).  log: optional callable(str) for skipped xattrs.
    """

    def __init__(self, fs, always_restore_setuid=False, euid=None, log=None):
        self.fs = fs
        self.always_restore_setuid = always_restore_setuid
        self.euid = os.geteuid() if euid is None else euid
        self.log = log or (lambda text: None)

    def apply(self, path, md, open_file=None):
        """Apply md to path (bytes); returns a list of SetMetadataError
        (empty on success): a failed step does not stop later ones.
        Owner, mode and times go through the VFS's set_attributes (one
        round trip over SFTP), or open_file's (path open for writing, its
        content written: SETS_ATTRIBUTES_OF_OPEN_FILES); xattrs, which
        SFTP lacks, are set one by one."""
        attributes = dict(
            owner=self._owner_ids(md),
            mode=self.mode_to_set(md) if self._mode_applies(md) else None,
            times=_times_ns(md))
        if open_file is None:
            failures = self.fs.set_attributes(path, **attributes)
        else:
            failures = open_file.set_attributes(**attributes)
        errors = []
        for name, what in (('owner', 'chown'), ('mode', 'chmod')):
            if name in failures and (name != 'owner' or self.euid == 0):
                errors.append(_set_error(path, what, failures[name]))
        self._set_xattrs(path, md, errors)
        if 'times' in failures:
            errors.append(_set_error(path, 'utimes', failures['times']))
        return errors

    def _owner_ids(self, md):
        """(uid, gid) to set, -1 for "leave": all as root, else the group
        (whose failure is ignored); None for nothing."""
        uid = _owner_id('uid', md.st_uid)
        gid = _owner_id('gid', md.st_gid)
        if self.euid == 0:
            return uid, gid
        return (-1, gid) if gid != -1 else None

    @staticmethod
    def _mode_applies(md):
        return md.st_mode is not None and not stat.S_ISLNK(md.st_mode)

    def mode_to_set(self, md):
        """Permission bits, setuid/setgid dropped unless we may keep them."""
        mode = stat.S_IMODE(md.st_mode)
        keep = (self.euid == 0 or self.always_restore_setuid or
                (md.st_uid is not None and md.st_uid == self.euid))
        return mode if keep else mode & ~_SETID_BITS

    def _set_xattrs(self, path, md, errors):
        for name, value in decode_xattrs(md.xattr):
            if self.euid != 0 and not name.startswith(b'user.'):
                self.log('Not restoring xattr %s on %s (not root)' %
                         (os.fsdecode(name), os.fsdecode(path)))
                continue
            self._step(errors, path, 'xattr %s' % os.fsdecode(name),
                       self.fs.lsetxattr, path, name, value)

    @staticmethod
    def _step(errors, path, what, func, *args):
        try:
            func(*args)
        except obnamlib.errors.ObnamError as e:
            obnamlib.errors.reraise_fatal(e)
            errors.append(_set_error(path, what, e))


def _times_ns(md):
    """(atime, mtime) in nanoseconds to set, or None; no atime: mtime."""
    if md.st_mtime_sec is None:
        return None
    mtime = md.st_mtime_sec * _BILLION + (md.st_mtime_nsec or 0)
    if md.st_atime_sec is None:
        return mtime, mtime
    return md.st_atime_sec * _BILLION + (md.st_atime_nsec or 0), mtime


def _set_error(path, what, error):
    return SetMetadataError(filename=path, metadata=what,
                            errno=getattr(error, 'errno', None),
                            strerror=getattr(error, 'strerror', str(error)))
