"""LocalFS objects that believe their root is on a given filesystem: a
mount table in /proc/self/mountinfo's form, written beside the root."""

import pathlib

import obnamlib.vfs.local


def mount_table(root, fstype):
    """The path of a table that mounts `root` as `fstype` under an ext4
    /, written next to root (not in it: a VFS test lists root)."""
    root = pathlib.Path(root)
    path = root.parent / (root.name + '.mountinfo')
    path.write_text('20 1 0:1 / / rw - ext4 /dev/sda1 rw\n'
                    '21 20 0:2 / %s rw - %s server:/export rw\n'
                    % (root, fstype))
    return str(path)


def local_fs_on(root, fstype='nfs4'):
    return obnamlib.vfs.local.LocalFS(str(root),
                                      mountinfo=mount_table(root, fstype))
