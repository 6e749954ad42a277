"""What changed between two generations (cli.md §5.8), as 1.x reported it.

Walk from `/`: in each directory, the second generation's children in
order (`+` added, `*` changed), then the children that are gone (`-`),
then the directories present in both, recursively.  An added or removed
directory is one line.  Only a directory/non-directory type change or a
different whole-file MD5 counts as a change: permission, owner, mtime and
symlink target changes are not reported, and directories never get `*`.
"""

from obnamlib.engine import listing

ADDED = '+'
REMOVED = '-'
CHANGED = '*'


def diff(repo, old_gen, new_gen, path=b'/'):
    """Yield (char, path, metadata) for each difference; metadata is the
    new generation's (the old one's for removals)."""
    pending = [path]
    while pending:
        current = pending.pop()
        old_names = set(repo.get_file_children(old_gen, current))
        both_dirs = []
        for name in repo.get_file_children(new_gen, current):
            child = listing.join(current, name)
            new_md = repo.get_metadata(new_gen, child)
            if name not in old_names:
                yield ADDED, child, new_md
                continue
            old_md = repo.get_metadata(old_gen, child)
            if old_md.isdir() and new_md.isdir():
                both_dirs.append(child)
            elif _changed(old_md, new_md):
                yield CHANGED, child, new_md
        new_names = set(repo.get_file_children(new_gen, current))
        for name in sorted(old_names - new_names):
            child = listing.join(current, name)
            yield REMOVED, child, repo.get_metadata(old_gen, child)
        pending.extend(reversed(both_dirs))


def _changed(old_md, new_md):
    if old_md.isdir() != new_md.isdir():
        return True
    return old_md.md5 != new_md.md5
