"""cli.md §6.3: is the stored entry of a path still right for the live
object?  A backup stores only what fails this test, and --pretend
reports the same paths.  Metadata only: content is never read for it."""


def unchanged(old, new):
    """Whether stored Metadata `old` still describes live Metadata `new`."""
    return (old.st_mtime_sec == new.st_mtime_sec and
            old.st_mtime_nsec == new.st_mtime_nsec and
            old.st_mode == new.st_mode and
            old.st_nlink == new.st_nlink and
            old.st_size == new.st_size and
            old.st_uid == new.st_uid and
            old.st_gid == new.st_gid and
            (old.xattr or b'') == (new.xattr or b''))


def is_unchanged(old, new):
    """unchanged(), where `old` is None for a path not stored yet."""
    return old is not None and unchanged(old, new)
