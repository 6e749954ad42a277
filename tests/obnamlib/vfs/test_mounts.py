"""Which filesystem a path is on, from a mount table in mountinfo's form."""

import os

import pytest

from obnamlib.vfs import mounts


def table(tmp_path, *lines):
    """A mountinfo file with these (mount point, type) entries."""
    text = ''.join(
        '%d 1 0:%d / %s rw,relatime shared:1 - %s src rw\n'
        % (20 + i, i, point, fstype) for i, (point, fstype) in
        enumerate(lines))
    path = tmp_path / 'mountinfo'
    path.write_text(text)
    return str(path)


def test_the_longest_mount_point_above_the_path_wins(tmp_path):
    info = table(tmp_path, ('/', 'ext4'), (str(tmp_path), 'nfs4'),
                 (str(tmp_path / 'de'), 'tmpfs'))
    (tmp_path / 'deep').mkdir()
    assert mounts.filesystem_type(str(tmp_path / 'deep'), info) == 'nfs4'
    assert mounts.filesystem_type('/usr', info) == 'ext4'


def test_a_path_not_yet_made_is_on_its_nearest_parents_filesystem(tmp_path):
    info = table(tmp_path, ('/', 'ext4'), (str(tmp_path), 'fuse.glusterfs'))
    repo = str(tmp_path / 'new' / 'repo')
    assert mounts.filesystem_type(repo, info) == 'fuse.glusterfs'
    assert mounts.has_round_trips(repo, info)


def test_symbolic_links_are_followed_to_the_mount(tmp_path):
    (tmp_path / 'real').mkdir()
    os.symlink(str(tmp_path / 'real'), str(tmp_path / 'link'))
    info = table(tmp_path, ('/', 'ext4'), (str(tmp_path / 'real'), 'cifs'))
    assert mounts.filesystem_type(str(tmp_path / 'link'), info) == 'cifs'


def test_blanks_in_mount_points_are_octal_escapes(tmp_path):
    (tmp_path / 'my nas').mkdir()
    escaped = str(tmp_path / 'my nas').replace(' ', '\\040')
    info = table(tmp_path, ('/', 'ext4'), (escaped, 'nfs'))
    assert mounts.filesystem_type(str(tmp_path / 'my nas'), info) == 'nfs'


@pytest.mark.parametrize('fstype, remote', [
    ('nfs', True), ('nfs4', True), ('cifs', True), ('smb3', True),
    ('fuse.glusterfs', True), ('fuse.sshfs', True), ('fuse', True),
    ('ceph', True), ('ext4', False), ('tmpfs', False), ('btrfs', False),
    ('xfs', False), ('zfs', False), ('overlay', False)])
def test_network_and_fuse_filesystems_have_round_trips(
        tmp_path, fstype, remote):
    info = table(tmp_path, ('/', fstype))
    assert mounts.has_round_trips(str(tmp_path), info) is remote


def test_an_unreadable_or_odd_table_counts_as_a_local_disk(tmp_path):
    assert mounts.filesystem_type('/', str(tmp_path / 'none')) is None
    assert not mounts.has_round_trips('/', str(tmp_path / 'none'))
    odd = tmp_path / 'odd'
    odd.write_bytes(b'garbage\n\n1 2 3 4 / 6 no-separator nfs\n\xff\n')
    assert mounts.filesystem_type('/', str(odd)) is None


def test_this_machines_table_is_read():
    """(/proc rather than /: in a chroot the table lists no mount at the
    root, which then counts as a local disk.)"""
    assert mounts.filesystem_type('/proc/self') == 'proc'
