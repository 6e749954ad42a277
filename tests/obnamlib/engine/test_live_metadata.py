"""Reading metadata of live files, and applying it on restore."""

import grp
import os
import pwd
import stat

import pytest

import obnamlib.errors
import obnamlib.repo.metadata
import obnamlib.vfs.local
from obnamlib.engine import live_metadata as lm

IS_ROOT = os.geteuid() == 0


@pytest.fixture
def fs():
    return obnamlib.vfs.local.LocalFS('/')


def p(path):
    return os.fsencode(str(path))


def test_xattr_blob_matches_format_example():
    blob = lm.encode_xattrs([(b'user.foo', b'some value')])
    assert blob == (b'\0' * 7 + b'\x09' + b'user.foo\0' +
                    b'\0' * 7 + b'\x0a' + b'some value')
    assert lm.decode_xattrs(blob) == [(b'user.foo', b'some value')]


def test_xattr_blob_round_trip_and_absence():
    pairs = [(b'security.x', b''), (b'user.a', b'\0\xff'), (b'user.b', b'v')]
    assert lm.decode_xattrs(lm.encode_xattrs(pairs)) == pairs
    assert lm.encode_xattrs([]) is None
    assert lm.decode_xattrs(None) == [] and lm.decode_xattrs(b'') == []


def test_regular_file_metadata(fs, tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'12345')
    os.utime(path, ns=(1111111111222222222, 1333333333444444444))
    os.setxattr(path, 'user.b', b'2')
    os.setxattr(path, 'user.a', b'1')
    st = os.lstat(path)
    md = lm.MetadataReader(fs).read(p(path))
    assert md.st_mode == st.st_mode and md.st_size == 5
    assert (md.st_mtime_sec, md.st_mtime_nsec) == (1333333333, 444444444)
    assert (md.st_atime_sec, md.st_atime_nsec) == (1111111111, 222222222)
    assert (md.st_nlink, md.st_uid, md.st_gid) == (1, st.st_uid, st.st_gid)
    assert (md.st_dev, md.st_ino, md.st_blocks) == \
        (st.st_dev, st.st_ino, st.st_blocks)
    assert md.username == os.fsencode(pwd.getpwuid(st.st_uid).pw_name)
    assert md.groupname == os.fsencode(grp.getgrgid(st.st_gid).gr_name)
    assert md.target == b''
    assert md.md5 is None
    # In the order the filesystem lists them, as Obnam 1.x stored them.
    listed = [os.fsencode(name) for name in os.listxattr(path)]
    assert lm.decode_xattrs(md.xattr) == [
        (name, {b'user.a': b'1', b'user.b': b'2'}[name]) for name in listed]
    assert sorted(listed) == [b'user.a', b'user.b']


def test_symlink_metadata_is_of_the_link(fs, tmp_path):
    os.symlink('/nowhere/at/all', tmp_path / 'l')
    md = lm.MetadataReader(fs).read(p(tmp_path / 'l'))
    assert stat.S_ISLNK(md.st_mode)
    assert md.target == b'/nowhere/at/all'
    assert md.st_size == len(b'/nowhere/at/all')
    assert md.xattr is None


@pytest.mark.skipif(not IS_ROOT, reason='chown needs root')
def test_unknown_ids_have_no_names(fs, tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'')
    os.chown(path, 54321, 54322)
    md = lm.MetadataReader(fs).read(p(path))
    assert (md.st_uid, md.st_gid) == (54321, 54322)
    assert md.username is None and md.groupname is None


@pytest.mark.skipif(not IS_ROOT, reason='trusted.* needs root')
def test_every_namespace_is_read(fs, tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'')
    os.setxattr(path, 'trusted.t', b'T')
    os.setxattr(path, 'user.u', b'U')
    md = lm.MetadataReader(fs).read(p(path))
    assert lm.decode_xattrs(md.xattr) == [(b'trusted.t', b'T'), (b'user.u', b'U')]


def test_missing_file_is_system_error(fs, tmp_path):
    with pytest.raises(obnamlib.errors.ObnamSystemError) as info:
        lm.MetadataReader(fs).read(p(tmp_path / 'gone'))
    assert info.value.code == 'RD5FA4X'


def md_for(**fields):
    base = dict(st_mode=stat.S_IFREG | 0o644, st_mtime_sec=1500000000,
                st_mtime_nsec=123456789, st_atime_sec=1400000000,
                st_atime_nsec=987654321, st_uid=os.geteuid(),
                st_gid=os.getegid())
    base.update(fields)
    return obnamlib.repo.metadata.Metadata(**base)


def test_apply_sets_mode_times_and_xattrs(fs, tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'')
    md = md_for(st_mode=stat.S_IFREG | 0o640,
                xattr=lm.encode_xattrs([(b'user.k', b'v')]))
    assert lm.MetadataApplier(fs).apply(p(path), md) == []
    st = os.lstat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_mtime_ns == 1500000000123456789
    assert st.st_atime_ns == 1400000000987654321
    assert os.getxattr(path, 'user.k') == b'v'


def test_apply_to_symlink_sets_times_not_mode(fs, tmp_path):
    os.symlink('target', tmp_path / 'l')
    md = md_for(st_mode=stat.S_IFLNK | 0o777)
    assert lm.MetadataApplier(fs).apply(p(tmp_path / 'l'), md) == []
    assert os.lstat(tmp_path / 'l').st_mtime_ns == 1500000000123456789


@pytest.mark.skipif(not IS_ROOT, reason='chown needs root')
def test_root_sets_numeric_owner_ignoring_names(fs, tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'')
    md = md_for(st_uid=4242, st_gid=4343, username=b'root', groupname=b'root')
    assert lm.MetadataApplier(fs).apply(p(path), md) == []
    st = os.lstat(path)
    assert (st.st_uid, st.st_gid) == (4242, 4343)


@pytest.mark.parametrize('euid', [0, 4242])
@pytest.mark.parametrize('ids', [{'st_uid': 2 ** 64 - 3}, {'st_gid': 2 ** 32},
                                 {'st_uid': 2 ** 32 - 1}])
def test_an_owner_id_no_system_has_is_damage_not_a_crash(fs, tmp_path, euid,
                                                         ids):
    """A damaged repository's uid or gid that chown(2) cannot take is the
    file's error (RepositoryCorrupt), not an OverflowError for the run."""
    path = tmp_path / 'f'
    path.write_bytes(b'')
    md = md_for(**dict({'st_uid': 0, 'st_gid': 0}, **ids))
    with pytest.raises(obnamlib.errors.RepositoryCorrupt) as e:
        lm.MetadataApplier(fs, euid=euid).apply(p(path), md)
    assert 'not a ' in str(e.value) and '\n' not in str(e.value)
    [(name, value)] = ids.items()
    what = name[len('st_'):]
    assert '%s %d' % (what, value) in str(e.value)
    assert 'not a %s any system has' % what in str(e.value)


def test_non_root_sets_group_only_and_ignores_failure(fs, tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'')
    before = os.lstat(path)
    md = md_for(st_uid=4242, st_gid=before.st_gid)
    assert lm.MetadataApplier(fs, euid=4242).apply(p(path), md) == []
    assert os.lstat(path).st_uid == before.st_uid


@pytest.mark.parametrize('euid, stored_uid, always, expected', [
    (0, 1, False, 0o6755),
    (1000, 1000, False, 0o6755),
    (1000, 1, False, 0o0755),
    (1000, 1, True, 0o6755),
])
def test_setuid_rule(fs, euid, stored_uid, always, expected):
    applier = lm.MetadataApplier(fs, always_restore_setuid=always, euid=euid)
    md = md_for(st_mode=stat.S_IFREG | 0o6755, st_uid=stored_uid)
    assert applier.mode_to_set(md) == expected


def test_sticky_bit_is_always_kept(fs):
    applier = lm.MetadataApplier(fs, euid=1000)
    md = md_for(st_mode=stat.S_IFDIR | 0o1777, st_uid=1)
    assert applier.mode_to_set(md) == 0o1777


def test_failures_are_returned_and_later_steps_run(fs, tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'')
    md = md_for(xattr=lm.encode_xattrs([(b'nonsense.x', b'1')]))
    errors = lm.MetadataApplier(fs).apply(p(path), md)
    assert [e.code for e in errors] == ['R0FC21X']
    assert str(errors[0]).startswith(
        "R0FC21X: %s: Couldn't set metadata xattr nonsense.x: " % path)
    assert os.lstat(path).st_mtime_ns == 1500000000123456789


def test_apply_on_missing_file_reports_each_step(fs, tmp_path):
    errors = lm.MetadataApplier(fs).apply(p(tmp_path / 'gone'), md_for())
    assert [e.metadata for e in errors] == ['chown', 'chmod', 'utimes'] \
        if IS_ROOT else ['chmod', 'utimes']
    assert all(e.errno == 2 for e in errors)


class RemoteLikeStat:
    """An lstat result as vfs_sftp gives it: names from the server."""

    def __init__(self, st, username, groupname):
        for name in dir(st):
            if name.startswith('st_'):
                setattr(self, name, getattr(st, name))
        self.st_username = username
        self.st_groupname = groupname


def test_names_reported_by_the_vfs_win_over_local_lookup(fs, tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'')
    st = RemoteLikeStat(os.lstat(path), b'remoteuser', None)
    md = lm.MetadataReader(fs).read(p(path), st)
    assert md.username == b'remoteuser'
    assert md.groupname is None
