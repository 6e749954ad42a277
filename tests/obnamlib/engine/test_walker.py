"""The backup scan: order, pruning, exclusion, no recursion limit."""

import os
import sys

import pytest

import obnamlib.vfs.base
from obnamlib.engine import walker
from tests.obnamlib.backup_helpers import live_fs, make_deep, remove_deep


def events(root, exclusions=None):
    root = os.fsencode(root)
    return list(walker.walk(live_fs(), root, os.lstat(root), exclusions))


def kinds_and_paths(root, exclusions=None):
    root_b = os.fsencode(root)
    return [(kind, os.path.relpath(path, root_b))
            for kind, path, _, _ in events(root, exclusions)]


def test_subdirectories_first_then_others_in_inode_order(tmp_path):
    # Create files before and after the subdirectories so name, creation
    # and inode orders disagree with "directories first".
    (tmp_path / 'z-file').write_bytes(b'z')
    (tmp_path / 'b-dir').mkdir()
    (tmp_path / 'a-file').write_bytes(b'a')
    (tmp_path / 'a-dir').mkdir()
    (tmp_path / 'a-dir' / 'inner').write_bytes(b'i')
    found = kinds_and_paths(tmp_path)
    by_ino = lambda name: os.lstat(tmp_path / name).st_ino
    dirs = sorted(['b-dir', 'a-dir'], key=by_ino)
    files = sorted(['z-file', 'a-file'], key=by_ino)
    expected = [('enter', b'.')]
    for d in dirs:
        expected.append(('enter', os.fsencode(d)))
        if d == 'a-dir':
            expected.append(('file', b'a-dir/inner'))
        expected.append(('exit', os.fsencode(d)))
    expected += [('file', os.fsencode(f)) for f in files]
    expected.append(('exit', b'.'))
    assert found == expected


def test_exit_carries_kept_names(tmp_path):
    (tmp_path / 'keep').write_bytes(b'')
    (tmp_path / 'drop.tmp').write_bytes(b'')
    ex = walker.Exclusions(
        exclude_path=lambda p: 'pattern' if p.endswith(b'.tmp') else None)
    exits = [names for kind, path, _, names in events(tmp_path, ex)
             if kind == walker.EXIT]
    assert exits == [{b'keep'}]


def test_excluded_directory_is_pruned_with_subtree(tmp_path):
    (tmp_path / 'skip' / 'deep').mkdir(parents=True)
    (tmp_path / 'skip' / 'deep' / 'f').write_bytes(b'x')
    (tmp_path / 'other').write_bytes(b'y')
    ex = walker.Exclusions(
        exclude_path=lambda p: 'pattern' if p.endswith(b'/skip') else None)
    assert kinds_and_paths(tmp_path, ex) == [
        ('enter', b'.'), ('file', b'other'), ('exit', b'.')]


def test_excluded_root_yields_nothing(tmp_path):
    ex = walker.Exclusions(exclude_path=lambda p: 'pattern')
    assert events(tmp_path, ex) == []


def test_cache_directory_with_valid_tag_is_excluded(tmp_path):
    cache = tmp_path / 'cache'
    cache.mkdir()
    (cache / 'CACHEDIR.TAG').write_bytes(
        b'Signature: 8a477f597d28d172789f06886806bc55\n# a cache\n')
    (cache / 'blob').write_bytes(b'b')
    fake = tmp_path / 'fake'
    fake.mkdir()
    (fake / 'CACHEDIR.TAG').write_bytes(b'Signature: not the right one')
    logged = []
    ex = walker.Exclusions(exclude_caches=True, log=logged.append)
    found = kinds_and_paths(tmp_path, ex)
    assert ('enter', b'cache') not in found
    assert ('file', b'cache/blob') not in found
    assert ('file', b'fake/CACHEDIR.TAG') in found
    exit_names = [n for k, p, _, n in events(tmp_path, ex)
                  if k == walker.EXIT and p == os.fsencode(tmp_path)]
    assert exit_names == [{b'fake'}]
    assert logged[-1:] == ['Excluding (cache dir): %s' % cache]
    # Without --exclude-caches the tag means nothing.
    assert ('file', b'cache/blob') in kinds_and_paths(tmp_path)


def test_one_file_system_uses_root_device():
    # /proc is another file system than /dev/shm or /tmp; walking a tree
    # where a child has a different st_dev must drop it.
    class FakeStat:
        def __init__(self, st, dev):
            self.st = st
            self.st_dev = dev

        def __getattr__(self, name):
            return getattr(self.st, name)

    ex = walker.Exclusions(one_file_system=True)
    st = os.lstat('/')
    assert ex.excluded(b'/x', FakeStat(st, st.st_dev + 1), st.st_dev)
    assert not ex.excluded(b'/x', st, st.st_dev)


def test_file_root_yields_only_itself(tmp_path):
    f = tmp_path / 'only'
    f.write_bytes(b'1')
    assert [(k, p) for k, p, _, _ in events(f)] == [
        ('file', os.fsencode(f))]


@pytest.mark.skipif(os.geteuid() == 0, reason='root can read anything')
def test_unreadable_directory_reports_error_and_continues(tmp_path):
    bad = tmp_path / 'bad'
    bad.mkdir()
    (bad / 'hidden').write_bytes(b'')
    (tmp_path / 'fine').write_bytes(b'')
    bad.chmod(0)
    try:
        evs = events(tmp_path)
    finally:
        bad.chmod(0o755)
    errors = [(p, str(e)) for k, p, e, _ in evs if k == walker.ERROR]
    assert errors == [(os.fsencode(bad),
                       'RD5FA4X: System error: %s: 13: Permission denied'
                       % bad)]
    assert ('file', b'fine') in [(k, os.path.relpath(p, os.fsencode(tmp_path)))
                                 for k, p, _, _ in evs]


def test_very_deep_tree_has_no_recursion_limit(tmp_path):
    depth = sys.getrecursionlimit() + 200
    make_deep(tmp_path, depth)
    # The walker uses absolute paths: the deepest must fit in PATH_MAX.
    assert depth * 2 + len(str(tmp_path)) < 4096
    found = events(tmp_path)
    assert sum(1 for k, _, _, _ in found if k == walker.ENTER) == depth + 1
    assert found[-1][:2] == (walker.EXIT, os.fsencode(tmp_path))
    remove_deep(tmp_path, depth)


def test_non_utf8_names_are_kept_as_bytes(tmp_path):
    name = b'caf\xe9-\xff'
    with open(os.path.join(os.fsencode(tmp_path), name), 'wb') as f:
        f.write(b'x')
    files = [p for k, p, _, _ in events(tmp_path) if k == walker.FILE]
    assert files == [os.path.join(os.fsencode(tmp_path), name)]


class PrefetchingFS:
    """The real live file system with a listing prefetch, as SftpFS has:
    records the batches and serves each prefetched listing once."""

    capabilities = frozenset({obnamlib.vfs.base.PREFETCHES_LISTINGS})

    def __init__(self, fs):
        self.fs = fs
        self.batches = []
        self.listed = []
        self.fetched = {}

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def prefetch_listings(self, paths):
        self.batches.append(list(paths))
        for path in paths:
            try:
                self.fetched[path] = self.fs.scandir(path)
            except Exception as e:
                self.fetched[path] = e
            self.listed.append(path)

    def scandir(self, path):
        result = self.fetched.pop(path)
        if isinstance(result, Exception):
            raise result
        return result


def test_prefetched_listings_give_the_same_walk_listing_each_dir_once(
        tmp_path, monkeypatch):
    monkeypatch.setattr(walker, 'LISTING_BATCH', 3)
    for top in ('a', 'b', 'c', 'd'):
        for sub in ('x', 'y'):
            (tmp_path / top / sub).mkdir(parents=True)
            (tmp_path / top / sub / 'f').write_bytes(b'f')
    os.chmod(tmp_path / 'c', 0)     # as root still listable: fine either way
    root = os.fsencode(tmp_path)
    plain = list(walker.walk(live_fs(), root, os.lstat(root)))
    fs = PrefetchingFS(live_fs())
    prefetched = list(walker.walk(fs, root, os.lstat(root)))
    os.chmod(tmp_path / 'c', 0o755)
    assert [(k, p, getattr(v, 'st_ino', v) if k != walker.ERROR else str(v),
             n) for k, p, v, n in prefetched] == [
        (k, p, getattr(v, 'st_ino', v) if k != walker.ERROR else str(v), n)
        for k, p, v, n in plain]
    assert sorted(fs.listed) == sorted(
        p for k, p, _, _ in plain if k == walker.ENTER)
    assert fs.fetched == {}
    assert all(len(batch) <= 3 for batch in fs.batches)
    # Siblings come together: the four top directories in two batches.
    tops = [b for b in fs.batches if os.path.dirname(b[0]) == root]
    assert [len(b) for b in tops] == [3, 1]
