"""The backup engine against a real format-6 repository on disk."""

import dataclasses
import errno
import hashlib
import os
import re
import socket
import stat
import subprocess

import pytest

import obnamlib.errors
import obnamlib.repo.interface as ri
from obnamlib.engine import backup_engine, backup_pretend, walker
from obnamlib.vfs import local
from obnamlib.cli import backup_progress
from tests.obnamlib.backup_helpers import (
    generation_manifest, live_fs, live_manifest, make_deep, open_repository,
    read_back, remove_deep)


class Counting:
    """The real live file system, counting content opens (to show that an
    unchanged file is never read)."""

    def __init__(self, fs):
        self.fs = fs
        self.opened = []

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def open_read(self, path):
        self.opened.append(path)
        return self.fs.open_read(path)


def backup(repo_dir, roots, fs=None, client='host', repo_settings=None,
           error_lines=None, **options):
    """Run the engine; `error_lines` (a list) sees errors even if it raises."""
    repo, storage = open_repository(str(repo_dir), **(repo_settings or {}))
    errors = [] if error_lines is None else error_lines
    progress = backup_progress.BackupProgress(on_error=errors.append)
    engine = backup_engine.BackupEngine(
        repo, fs or live_fs(),
        backup_engine.BackupOptions(client, **options), progress,
        repo_io=storage)
    engine.run([os.fsencode(r) for r in roots])
    progress.error_lines = errors
    return progress


def reopen(repo_dir):
    return open_repository(str(repo_dir))[0]


def generations(repo_dir, client='host'):
    repo = reopen(repo_dir)
    return repo, repo.get_generation_ids(client)


def repo_size(repo_dir):
    total = 0
    for dirpath, _, names in os.walk(repo_dir):
        for name in names:
            total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def xattrs_supported(path):
    try:
        os.setxattr(path, 'user.probe', b'1')
        os.removexattr(path, 'user.probe')
        return True
    except OSError:
        return False


def make_everything(top):
    """Every object type of cli.md §6.5 that an unprivileged test can make."""
    top.mkdir()
    (top / 'empty').write_bytes(b'')
    (top / 'one').write_bytes(b'1')
    (top / 'big').write_bytes(os.urandom(5 * 4096 + 17))
    sub = top / 'sub' / 'deeper'
    sub.mkdir(parents=True)
    (sub / 'file').write_bytes(b'deep content\n')
    os.symlink('../one', top / 'sub' / 'rel-link')
    os.symlink('/nonexistent/target', top / 'dangling')
    os.link(top / 'one', top / 'hard-one')
    os.mkfifo(top / 'fifo')
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(top / 'socket'))
    sock.close()
    sparse = top / 'sparse'
    with open(sparse, 'wb') as f:
        f.seek(3 * 4096)
        f.write(b'middle')
        f.truncate(8 * 4096)
    (top / 'setuid').write_bytes(b's')
    os.chmod(top / 'setuid', 0o4755)
    (top / 'setgid-dir').mkdir()
    os.chmod(top / 'setgid-dir', 0o2775)
    (top / 'sticky').mkdir()
    os.chmod(top / 'sticky', 0o1777)
    (top / 'old').write_bytes(b'1969')
    os.utime(top / 'old', ns=(-3600 * 10 ** 9, -3600 * 10 ** 9))
    (top / 'nanos').write_bytes(b'ns')
    os.utime(top / 'nanos', ns=(1, 1234567890123456789))
    with open(os.path.join(os.fsencode(top), b'not-utf8-\xff\xfe'), 'wb') as f:
        f.write(b'latin')
    if xattrs_supported(top / 'one'):
        os.setxattr(top / 'one', 'user.colour', b'blue')
        os.setxattr(top / 'one', 'user.empty', b'')


def assert_generation_is(repo, gen, root, manifest):
    assert generation_manifest(repo, gen, root) == manifest


# --- round trips -----------------------------------------------------------

def test_options_normalise_what_they_are_given_and_stay_fixed():
    options = backup_engine.BackupOptions(
        'host', chunk_size=0, checkpoint='5', deduplicate='bogus', now=None,
        exclusions=None, fail_matching=[re.compile(b'x')], key_id=None)
    assert (options.chunk_size, options.checkpoint, options.deduplicate,
            options.key_id) == (1, 5, 'never', '')
    assert isinstance(options.now(), int)
    assert isinstance(options.exclusions, walker.Exclusions)
    assert options.fail_matching == (re.compile(b'x'),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.chunk_size = 2


def test_every_object_type_round_trips_and_each_generation_keeps_its_state(
        tmp_path):
    live = tmp_path / 'live'
    make_everything(live)
    first = live_manifest(live)
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096)
    assert progress.errors == []
    assert progress.backed_up_count == len(first)
    assert progress.file_count == len(first)

    # Every kind of change of the issue, then a second generation.
    with open(live / 'big', 'ab') as f:
        f.write(b'appended')
    with open(live / 'sub' / 'deeper' / 'file', 'r+b') as f:
        f.seek(5)
        f.write(b'XXXX')
    os.truncate(live / 'sparse', 100)
    os.remove(live / 'empty')
    os.rename(live / 'nanos', live / 'nanos-renamed')
    os.chmod(live / 'setuid', 0o755)
    os.utime(live / 'old', ns=(0, 42))
    if xattrs_supported(live / 'one'):
        os.setxattr(live / 'one', 'user.colour', b'red')
    second = live_manifest(live)
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096)
    assert progress.errors == []

    repo, gens = generations(tmp_path / 'repo')
    assert len(gens) == 2
    assert_generation_is(repo, gens[0], live, first)
    assert_generation_is(repo, gens[1], live, second)


def test_hard_links_share_device_and_inode(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'a').write_bytes(b'linked')
    os.link(live / 'a', live / 'b')
    backup(tmp_path / 'repo', [live])
    repo, gens = generations(tmp_path / 'repo')
    a = repo.get_metadata(gens[-1], os.fsencode(live / 'a'))
    b = repo.get_metadata(gens[-1], os.fsencode(live / 'b'))
    assert (a.st_dev, a.st_ino, a.st_nlink) == (b.st_dev, b.st_ino, 2)
    assert repo.get_file_chunk_ids(gens[-1], os.fsencode(live / 'a')) == \
        repo.get_file_chunk_ids(gens[-1], os.fsencode(live / 'b'))


def test_ancestors_up_to_root_are_recorded(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    backup(tmp_path / 'repo', [live])
    repo, gens = generations(tmp_path / 'repo')
    path = os.fsencode(live)
    while path != b'/':
        parent = os.path.dirname(path)
        assert os.path.basename(path) in repo.get_file_children(gens[-1], parent)
        md = repo.get_metadata(gens[-1], parent)
        assert md.st_mode == os.lstat(parent).st_mode
        path = parent


def test_symlinked_ancestor_is_recorded_as_a_directory(tmp_path):
    (tmp_path / 'real' / 'live').mkdir(parents=True)
    (tmp_path / 'real' / 'live' / 'f').write_bytes(b'f')
    os.symlink('real', tmp_path / 'via')
    backup(tmp_path / 'repo', [tmp_path / 'via' / 'live'])
    repo, gens = generations(tmp_path / 'repo')
    via = repo.get_metadata(gens[-1], os.fsencode(tmp_path / 'via'))
    assert via.isdir()
    assert read_back(repo, gens[-1],
                     os.fsencode(tmp_path / 'via' / 'live' / 'f')) == b'f'


def test_file_root_backs_up_just_that_file(tmp_path):
    (tmp_path / 'f').write_bytes(b'only me')
    (tmp_path / 'g').write_bytes(b'not me')
    backup(tmp_path / 'repo', [tmp_path / 'f'])
    repo, gens = generations(tmp_path / 'repo')
    assert repo.get_file_children(gens[-1], os.fsencode(tmp_path)) == [b'f']
    assert read_back(repo, gens[-1], os.fsencode(tmp_path / 'f')) == b'only me'


def test_nothing_is_looked_up_below_a_new_directory(tmp_path,
                                                    monkeypatch):
    """A first backup asks the generation only about the root and its
    ancestors; a nested second root and a later backup still find what
    is stored (unchanged files are not stored again)."""
    from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
    live = tmp_path / 'live'
    (live / 'd' / 'e').mkdir(parents=True)
    for name in ('f', 'd/g', 'd/e/h'):
        (live / name).write_bytes(name.encode())
    asked = []
    real = RepositoryFormat6.get_metadata

    def get_metadata(self, gen, path):
        asked.append(path)
        return real(self, gen, path)
    monkeypatch.setattr(RepositoryFormat6, 'get_metadata', get_metadata)
    fs = Counting(live_fs())
    backup(tmp_path / 'repo', [live, live / 'd'], fs=fs)
    below = [p for p in asked if p.startswith(os.fsencode(live) + b'/')]
    # Only the second root's walk asks, each of its paths once.
    assert sorted(below) == sorted(
        os.fsencode(live / n) for n in ('d', 'd/e', 'd/e/h', 'd/g'))
    assert sorted(fs.opened) == sorted(
        os.fsencode(live / n) for n in ('f', 'd/g', 'd/e/h'))
    repo, gens = generations(tmp_path / 'repo')
    assert_generation_is(repo, gens[-1], live, live_manifest(live))
    fs = Counting(live_fs())
    backup(tmp_path / 'repo', [live], fs=fs)
    assert fs.opened == []


def test_two_roots_and_a_replaced_root(tmp_path):
    for name in ('one', 'two', 'three'):
        (tmp_path / name).mkdir()
        (tmp_path / name / 'f').write_bytes(name.encode())
    backup(tmp_path / 'repo', [tmp_path / 'one', tmp_path / 'two'])
    backup(tmp_path / 'repo', [tmp_path / 'three'])
    repo, gens = generations(tmp_path / 'repo')
    assert repo.get_file_children(gens[0], os.fsencode(tmp_path)) == \
        [b'one', b'two']
    assert repo.get_file_children(gens[1], os.fsencode(tmp_path)) == \
        [b'three']


def test_nonexistent_root_is_an_error_before_anything_is_written(tmp_path):
    with pytest.raises(backup_engine.BackupRootDoesNotExist) as e:
        backup(tmp_path / 'repo', [tmp_path / 'missing'])
    assert str(e.value) == (
        'R79ED6X: Backup root does not exist or is not a directory: %s'
        % (tmp_path / 'missing'))
    assert reopen(tmp_path / 'repo').get_client_names() == []


def test_root_that_is_a_symlink_to_a_directory_is_refused(tmp_path):
    (tmp_path / 'real').mkdir()
    os.symlink('real', tmp_path / 'link')
    with pytest.raises(backup_engine.BackupRootDoesNotExist):
        backup(tmp_path / 'repo', [tmp_path / 'link'])
    (tmp_path / 'file').write_bytes(b'f')
    os.symlink('file', tmp_path / 'file-link')
    backup(tmp_path / 'repo', [tmp_path / 'file-link'])
    repo, gens = generations(tmp_path / 'repo')
    md = repo.get_metadata(gens[-1], os.fsencode(tmp_path / 'file-link'))
    assert md.islink() and md.target == b'file'


def test_type_change_file_to_directory_and_back(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'x').write_bytes(b'file')
    backup(tmp_path / 'repo', [live])
    os.remove(live / 'x')
    (live / 'x').mkdir()
    (live / 'x' / 'inside').write_bytes(b'in')
    backup(tmp_path / 'repo', [live])
    m2 = live_manifest(live)
    import shutil
    shutil.rmtree(live / 'x')
    os.symlink('somewhere', live / 'x')
    m3 = live_manifest(live)
    backup(tmp_path / 'repo', [live])
    repo, gens = generations(tmp_path / 'repo')
    assert_generation_is(repo, gens[1], live, m2)
    assert_generation_is(repo, gens[2], live, m3)
    assert repo.get_file_chunk_ids(gens[2], os.fsencode(live / 'x')) == []


# --- change detection ----------------------------------------------------

def test_no_change_backup_reads_no_file_contents(tmp_path):
    live = tmp_path / 'live'
    make_everything(live)
    backup(tmp_path / 'repo', [live])
    fs = Counting(live_fs())
    progress = backup(tmp_path / 'repo', [live], fs=fs)
    assert fs.opened == []
    assert progress.backed_up_count == 0
    assert '* files backed up: 0' in progress.statistics_lines()
    assert progress.uploaded_bytes == 0


def test_each_compared_field_triggers_a_reread(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    f = live / 'f'
    f.write_bytes(b'content')
    backup(tmp_path / 'repo', [live])
    changes = [
        lambda: os.utime(f, ns=(0, os.lstat(f).st_mtime_ns + 1)),      # ns
        lambda: os.utime(f, ns=(0, os.lstat(f).st_mtime_ns + 10 ** 9)),
        lambda: os.chmod(f, 0o600),
        lambda: os.link(f, live / 'second-name'),                   # nlink
    ]
    if xattrs_supported(f):
        changes.append(lambda: os.setxattr(f, 'user.x', b'1'))
    for change in changes:
        change()
        fs = Counting(live_fs())
        backup(tmp_path / 'repo', [live], fs=fs)
        assert os.fsencode(f) in fs.opened


def test_same_size_same_mtime_rewrite_is_not_noticed(tmp_path):
    """§6.3 compares metadata only: content behind an unchanged mtime and
    size is trusted (as Obnam 1.x did)."""
    live = tmp_path / 'live'
    live.mkdir()
    f = live / 'f'
    f.write_bytes(b'aaaa')
    before = os.lstat(f)
    backup(tmp_path / 'repo', [live])
    f.write_bytes(b'bbbb')
    os.utime(f, ns=(before.st_atime_ns, before.st_mtime_ns))
    fs = Counting(live_fs())
    backup(tmp_path / 'repo', [live], fs=fs)
    assert fs.opened == []


# --- exclusion -----------------------------------------------------------

def test_newly_excluded_and_deleted_files_leave_the_generation(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'keep').write_bytes(b'k')
    (live / 'later-excluded.mp3').write_bytes(b'm')
    (live / 'deleted').write_bytes(b'd')
    (live / 'cache').mkdir()
    (live / 'cache' / 'blob').write_bytes(b'b')
    backup(tmp_path / 'repo', [live])
    os.remove(live / 'deleted')
    (live / 'cache' / 'CACHEDIR.TAG').write_bytes(
        b'Signature: 8a477f597d28d172789f06886806bc55')
    pattern = re.compile(rb'\.mp3$')
    exclusions = walker.Exclusions(
        exclude_path=lambda p: 'pattern' if pattern.search(p) else None,
        exclude_caches=True)
    backup(tmp_path / 'repo', [live], exclusions=exclusions)
    repo, gens = generations(tmp_path / 'repo')
    assert repo.get_file_children(gens[0], os.fsencode(live)) == [
        b'cache', b'deleted', b'keep', b'later-excluded.mp3']
    assert repo.get_file_children(gens[1], os.fsencode(live)) == [b'keep']


def test_only_directories_stored_before_are_listed_at_their_end(
        tmp_path, monkeypatch):
    """A directory new in the generation holds only what the walk put
    in it: its stored listing is not asked for; one stored before is
    (to drop what is gone)."""
    from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
    live = tmp_path / 'live'
    (live / 'sub').mkdir(parents=True)
    (live / 'sub' / 'f').write_bytes(b'f')
    listed = []
    real = RepositoryFormat6.get_file_children
    monkeypatch.setattr(RepositoryFormat6, 'get_file_children',
                        lambda self, gen, path: listed.append(path) or
                        real(self, gen, path))
    backup(tmp_path / 'repo', [live])
    assert listed == []
    os.remove(live / 'sub' / 'f')
    backup(tmp_path / 'repo', [live])
    assert os.fsencode(live / 'sub') in listed
    repo, gens = generations(tmp_path / 'repo')
    assert repo.get_file_children(gens[0], os.fsencode(live / 'sub')) == \
        [b'f']
    assert repo.get_file_children(gens[1], os.fsencode(live / 'sub')) == []


def test_excluded_root_is_dropped(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'f').write_bytes(b'f')
    backup(tmp_path / 'repo', [live])
    exclusions = walker.Exclusions(exclude_path=lambda p: 'pattern')
    backup(tmp_path / 'repo', [live], exclusions=exclusions)
    repo, gens = generations(tmp_path / 'repo')
    assert not repo.file_exists(gens[1], os.fsencode(live))


# --- de-duplication --------------------------------------------------------

@pytest.mark.slow
def test_copy_and_rename_of_a_50_mib_file_add_under_one_percent(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    with open(live / 'big', 'wb') as f:
        for _ in range(50):
            f.write(os.urandom(1 << 20))
    backup(tmp_path / 'repo', [live])
    size_one = repo_size(tmp_path / 'repo')
    os.link(live / 'big', live / 'copy-source')
    with open(live / 'copy-source', 'rb') as src, \
            open(live / 'copy', 'wb') as dst:
        dst.write(src.read())
    os.remove(live / 'copy-source')
    progress = backup(tmp_path / 'repo', [live])
    assert progress.uploaded_bytes == 0
    size_two = repo_size(tmp_path / 'repo')
    os.rename(live / 'big', live / 'renamed')
    backup(tmp_path / 'repo', [live])
    size_three = repo_size(tmp_path / 'repo')
    assert size_two - size_one < size_one / 100
    assert size_three - size_two < size_one / 100


def test_identical_content_is_stored_once_within_a_run_and_across_clients(
        tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    data = os.urandom(3 * 4096)
    for name in ('a', 'b', 'c'):
        (live / name).write_bytes(data)
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096)
    assert progress.uploaded_bytes == len(data)
    progress = backup(tmp_path / 'repo', [live], client='other',
                      chunk_size=4096)
    assert progress.uploaded_bytes == 0
    repo = reopen(tmp_path / 'repo')
    assert len(repo.get_chunk_ids()) == 3


def test_dedup_never_stores_every_chunk(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'a').write_bytes(b'same' * 1024)
    (live / 'b').write_bytes(b'same' * 1024)
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096,
                      deduplicate='never')
    assert progress.uploaded_bytes == 2 * 4096


def test_dedup_verify_reuses_only_equal_content(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'a').write_bytes(b'x' * 4096)
    backup(tmp_path / 'repo', [live], chunk_size=4096, deduplicate='verify')
    (live / 'b').write_bytes(b'x' * 4096)
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096,
                      deduplicate='verify')
    assert progress.uploaded_bytes == 0


def test_sparse_holes_are_not_stored_as_data(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    with open(live / 'sparse', 'wb') as f:
        f.seek(20 * 4096)
        f.write(b'data')
        f.truncate(40 * 4096)
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096)
    # One zero chunk and one data chunk are all that is stored.
    assert progress.uploaded_bytes == 4096 + 4096
    repo, gens = generations(tmp_path / 'repo')
    assert read_back(repo, gens[-1], os.fsencode(live / 'sparse')) == \
        (live / 'sparse').read_bytes()


# --- errors ----------------------------------------------------------------

def test_per_file_error_is_reported_and_the_generation_commits(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'good').write_bytes(b'g')
    (live / 'bad').write_bytes(b'b')
    progress = backup(tmp_path / 'repo', [live],
                      fail_matching=[re.compile(rb'/bad$')])
    assert progress.error_lines == [
        "ERROR: Can't back up %s/bad: RCE08AX: I/O error: %s/bad: 2: "
        "No such file or directory" % (live, live)]
    repo, gens = generations(tmp_path / 'repo')
    assert len(gens) == 1
    assert repo.get_file_children(gens[0], os.fsencode(live)) == [b'good']


def test_big_files_read_ahead_keep_their_errors_links_and_content(
        tmp_path):
    """Files of at least backup_reading.MIN_SIZE are read by the worker
    (LocalFS can be read from a second thread): one that fails is
    reported as serial reading reported it, a hard link is read once,
    and the chunks and whole-file digests are those of the content."""
    from obnamlib.engine import backup_reading
    live = tmp_path / 'live'
    live.mkdir()
    size = backup_reading.MIN_SIZE + 5000
    for name in ('a', 'bad', 'c'):
        (live / name).write_bytes(os.urandom(size))
    (live / 'small').write_bytes(b's')
    os.link(live / 'a', live / 'a-link')
    fs = Counting(live_fs())
    progress = backup(tmp_path / 'repo', [live], fs=fs, chunk_size=65536,
                      fail_matching=[re.compile(rb'/bad$')])
    assert progress.error_lines == [
        "ERROR: Can't back up %s/bad: RCE08AX: I/O error: %s/bad: 2: "
        "No such file or directory" % (live, live)]
    opened = sorted(os.path.basename(p) for p in fs.opened)
    assert opened in ([b'a', b'c', b'small'], [b'a-link', b'c', b'small'])
    repo, gens = generations(tmp_path / 'repo')
    manifest = live_manifest(live)
    del manifest[os.fsencode(live / 'bad')]
    assert_generation_is(repo, gens[0], live, manifest)


def test_unlistable_directory_is_RD5FA4X_and_keeps_only_its_metadata(
        tmp_path):
    live = tmp_path / 'live'
    (live / 'dir').mkdir(parents=True)
    (live / 'dir' / 'inside').write_bytes(b'i')
    (live / 'other').write_bytes(b'o')
    progress = backup(tmp_path / 'repo', [live],
                      fail_matching=[re.compile(rb'/dir$')])
    assert progress.error_lines == [
        "ERROR: Can't back up %s/dir: RD5FA4X: System error: %s/dir: 2: "
        "No such file or directory" % (live, live)]
    repo, gens = generations(tmp_path / 'repo')
    assert repo.get_file_children(gens[0], os.fsencode(live)) == [
        b'dir', b'other']
    assert repo.get_file_children(gens[0], os.fsencode(live / 'dir')) == []


def test_failed_file_keeps_its_previous_version(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'f').write_bytes(b'version 1')
    backup(tmp_path / 'repo', [live])
    (live / 'f').write_bytes(b'version 2, longer')
    progress = backup(tmp_path / 'repo', [live],
                      fail_matching=[re.compile(rb'/f$')])
    assert len(progress.errors) == 1
    repo, gens = generations(tmp_path / 'repo')
    assert read_back(repo, gens[1], os.fsencode(live / 'f')) == b'version 1'


@pytest.mark.skipif(os.geteuid() == 0, reason='root can read anything')
def test_unreadable_file_and_directory_codes(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'unreadable-file').write_bytes(b'secret')
    (live / 'unreadable-dir').mkdir()
    os.chmod(live / 'unreadable-file', 0)
    os.chmod(live / 'unreadable-dir', 0)
    try:
        progress = backup(tmp_path / 'repo', [live])
    finally:
        os.chmod(live / 'unreadable-dir', 0o755)
    assert sorted(progress.error_lines) == sorted([
        "ERROR: Can't back up %s/unreadable-dir: RD5FA4X: System error: "
        "%s/unreadable-dir: 13: Permission denied" % (live, live),
        "ERROR: Can't back up %s/unreadable-file: RCE08AX: I/O error: "
        "%s/unreadable-file: 13: Permission denied" % (live, live)])


class Unreadable(Counting):
    """The live file system, where opening one path is refused (as for
    a file root cannot read: tests here run as root)."""

    def __init__(self, fs, refused):
        super().__init__(fs)
        self.refused = refused

    def open_read(self, path):
        if path == self.refused:
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)
        return super().open_read(path)


def test_an_unreadable_empty_file_is_reported_like_any_other(tmp_path):
    """Obnam 1.x opened every file, so an empty one it could not read was
    an error; a readable empty one is opened too and has no chunks."""
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'empty').write_bytes(b'')
    (live / 'also-empty').write_bytes(b'')
    refused = os.fsencode(str(live / 'empty'))
    fs = Unreadable(live_fs(), refused)
    progress = backup(tmp_path / 'repo', [live], fs=fs)
    assert progress.error_lines == [
        "ERROR: Can't back up %s/empty: RCE08AX: I/O error: %s/empty: 13: "
        "Permission denied" % (live, live)]
    assert fs.opened == [os.fsencode(str(live / 'also-empty'))]


@pytest.mark.skipif(os.geteuid() != 0, reason='only root makes devices')
def test_a_device_node_is_backed_up_with_a_notice(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    os.mknod(live / 'null', stat.S_IFCHR | 0o600, os.makedev(1, 3))
    repo, storage = open_repository(str(tmp_path / 'repo'))
    notices = []
    progress = backup_progress.BackupProgress(on_notice=notices.append)
    backup_engine.BackupEngine(
        repo, live_fs(), backup_engine.BackupOptions('host'), progress,
        repo_io=storage).run([os.fsencode(str(live))])
    assert notices == [
        '%s/null: a device node: repository format 6 keeps no device '
        'number, so it is restored as 0:0 (make it again with mknod)' % live]
    gen = reopen(tmp_path / 'repo').get_generation_ids('host')[-1]
    md = reopen(tmp_path / 'repo').get_metadata(
        gen, os.fsencode(str(live / 'null')))
    assert stat.S_ISCHR(md.st_mode) and progress.errors == []


def test_a_symlink_counts_its_target_length_in_the_total(tmp_path):
    """GEN_TOTAL_DATA counts file sizes and symlink target lengths, as
    Obnam 1.x did; directories and special files add nothing."""
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'f').write_bytes(b'12345')
    os.symlink('a' * 17, live / 'l')
    os.mkfifo(live / 'p')
    backup(tmp_path / 'repo', [live])
    repo = reopen(tmp_path / 'repo')
    gen = repo.get_generation_ids('host')[-1]
    assert repo.get_generation_key(gen, ri.GEN_TOTAL_DATA) == 5 + 17


class FailingWrites:
    """Repository storage that runs out of space after some bytes."""

    def __init__(self, storage, budget):
        self.storage = storage
        self.budget = budget

    def __getattr__(self, name):
        return getattr(self.storage, name)

    def _spend(self, path, data):
        self.budget -= len(data)
        if self.budget < 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    def write_file(self, path, data):
        self._spend(path, data)
        self.storage.write_file(path, data)

    def create_file(self, path, data):
        self._spend(path, data)
        self.storage.create_file(path, data)


def test_out_of_space_stops_the_run_and_keeps_earlier_generations(tmp_path):
    from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'first').write_bytes(b'first')
    backup(tmp_path / 'repo', [live])
    manifest = live_manifest(live)
    (live / 'second').write_bytes(os.urandom(200000))
    _, storage = open_repository(str(tmp_path / 'repo'))
    full = FailingWrites(storage, 100000)
    repo = RepositoryFormat6(full, lock_timeout=0)
    engine = backup_engine.BackupEngine(
        repo, live_fs(), backup_engine.BackupOptions('host'),
        backup_progress.BackupProgress(), repo_io=full)
    chunks_before = set(reopen(tmp_path / 'repo').get_chunk_ids())
    with pytest.raises(backup_engine.RepositoryWriteError) as e:
        engine.run([os.fsencode(live)])
    assert e.value.errno == errno.ENOSPC
    assert 'No space left on device' in str(e.value)
    # The chunks the failed run wrote are gone again.
    assert set(reopen(tmp_path / 'repo').get_chunk_ids()) == chunks_before
    # No lock is left behind and the earlier generation is intact.
    leftover = [os.path.join(d, n) for d, _, ns in os.walk(tmp_path / 'repo')
                for n in ns if n == 'lock']
    assert leftover == []
    repo, gens = generations(tmp_path / 'repo')
    assert len(gens) == 1
    assert_generation_is(repo, gens[0], live, manifest)


# --- checkpoints -------------------------------------------------------------

def test_checkpoints_are_removed_after_a_successful_run(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(10):
        (live / ('f%d' % i)).write_bytes(os.urandom(5000))
    manifest = live_manifest(live)
    backup(tmp_path / 'repo', [live], checkpoint=4096, chunk_size=4096)
    repo, gens = generations(tmp_path / 'repo')
    assert len(gens) == 1
    assert repo.get_generation_key(gens[0], ri.GEN_IS_CHECKPOINT) == 0
    assert_generation_is(repo, gens[0], live, manifest)
    used = repo.get_generation_chunk_ids(gens[0])
    assert set(repo.get_chunk_ids()) == used


def test_leave_checkpoints_keeps_them(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(5):
        (live / ('f%d' % i)).write_bytes(os.urandom(5000))
    backup(tmp_path / 'repo', [live], checkpoint=4096, chunk_size=4096,
           leave_checkpoints=True)
    repo, gens = generations(tmp_path / 'repo')
    flags = [repo.get_generation_key(g, ri.GEN_IS_CHECKPOINT) for g in gens]
    assert len(gens) > 2
    assert flags == [1] * (len(gens) - 1) + [0]


# --- pretend -----------------------------------------------------------------

def snapshot(directory):
    result = {}
    for dirpath, dirnames, names in os.walk(directory):
        for name in dirnames + names:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            data = b''
            if stat.S_ISREG(st.st_mode):
                with open(path, 'rb') as f:
                    data = f.read()
            result[path] = (st.st_mode, st.st_mtime_ns, hashlib.sha1(data)
                            .hexdigest())
    result['.'] = os.lstat(directory).st_mtime_ns
    return result


def test_pretend_changes_nothing_and_counts(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'a').write_bytes(b'aaa')
    backup(tmp_path / 'repo', [live])
    before = snapshot(tmp_path / 'repo')
    (live / 'b').write_bytes(b'bbbbb')
    progress = backup(tmp_path / 'repo', [live], pretend=True)
    assert snapshot(tmp_path / 'repo') == before
    assert progress.backed_up_count == 2      # b and the live directory
    assert progress.uploaded_bytes == 5


def test_pretend_needs_a_generation(tmp_path):
    (tmp_path / 'live').mkdir()
    with pytest.raises(backup_pretend.PretendNeedsGeneration):
        backup(tmp_path / 'repo', [tmp_path / 'live'], pretend=True)


# --- big directories and deep trees -----------------------------------------

@pytest.mark.slow
def test_directory_with_100000_entries(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    try:
        for i in range(100000):
            os.close(os.open('f%06d' % i, os.O_CREAT | os.O_WRONLY, 0o644,
                             dir_fd=fd))
    finally:
        os.close(fd)
    progress = backup(tmp_path / 'repo', [live])
    assert progress.errors == []
    assert progress.file_count == 100001
    repo, gens = generations(tmp_path / 'repo')
    children = repo.get_file_children(gens[-1], os.fsencode(live))
    assert len(children) == 100000
    assert children[0] == b'f000000' and children[-1] == b'f099999'


def test_very_deep_tree(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    depth = 1100          # beyond Python's default recursion limit
    make_deep(live, depth, leaf=b'bottom')
    progress = backup(tmp_path / 'repo', [live])
    assert progress.errors == []
    repo, gens = generations(tmp_path / 'repo')
    leaf = os.fsencode(live) + b'/d' * depth + b'/leaf'
    assert read_back(repo, gens[-1], leaf) == b'bottom'
    remove_deep(live, depth)


def test_interrupted_run_resumes_from_its_checkpoint(tmp_path):
    from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6

    class Interrupting(RepositoryFormat6):
        puts = 0

        def put_chunk_content(self, data, md5_digest=None):
            Interrupting.puts += 1
            if Interrupting.puts == 30:
                raise KeyboardInterrupt()
            return super().put_chunk_content(data, md5_digest)

    live = tmp_path / 'live'
    live.mkdir()
    for i in range(40):
        (live / ('f%02d' % i)).write_bytes(os.urandom(4096))
    _, storage = open_repository(str(tmp_path / 'repo'))
    repo = Interrupting(storage, lock_timeout=0)
    engine = backup_engine.BackupEngine(
        repo, live_fs(),
        backup_engine.BackupOptions('host', chunk_size=4096,
                                    checkpoint=10 * 4096),
        backup_progress.BackupProgress(), repo_io=storage)
    with pytest.raises(KeyboardInterrupt):
        engine.run([os.fsencode(live)])
    repo, checkpoints = generations(tmp_path / 'repo')
    assert checkpoints
    assert [repo.get_generation_key(g, ri.GEN_IS_CHECKPOINT)
            for g in checkpoints] == [1] * len(checkpoints)
    saved = len(repo.get_file_children(checkpoints[-1], os.fsencode(live)))
    assert 0 < saved < 29
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096,
                      checkpoint=10 * 4096)
    # Files in the last checkpoint are skipped by change detection.  The
    # checkpoint was taken right after a chunk was stored (the threshold
    # is only crossed by chunk writes), so that chunk is in the indexes
    # although its file was not finished: it is found, not stored again.
    # Chunks written after the checkpoint were never indexed: stored anew.
    assert progress.uploaded_bytes == (40 - saved - 1) * 4096
    repo, gens = generations(tmp_path / 'repo')
    assert_generation_is(repo, gens[-1], live, live_manifest(live))
    # The interrupted run's checkpoints are not this run's: they stay.
    assert gens[:len(checkpoints)] == checkpoints


def _mount_tmpfs(path):
    if os.geteuid() != 0:
        return False
    result = subprocess.run(['mount', '-t', 'tmpfs', 'tmpfs', str(path)],
                            capture_output=True)
    return result.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason='mounting needs root')
def test_one_file_system_skips_mount_points(tmp_path):
    live = tmp_path / 'live'
    (live / 'mnt').mkdir(parents=True)
    (live / 'here').write_bytes(b'h')
    if not _mount_tmpfs(live / 'mnt'):
        pytest.skip('cannot mount tmpfs here')
    try:
        (live / 'mnt' / 'there').write_bytes(b't')
        backup(tmp_path / 'repo', [live])
        exclusions = walker.Exclusions(one_file_system=True)
        backup(tmp_path / 'repo', [live], exclusions=exclusions)
    finally:
        subprocess.run(['umount', str(live / 'mnt')], check=True)
    repo, gens = generations(tmp_path / 'repo')
    assert repo.get_file_children(gens[0], os.fsencode(live)) == [
        b'here', b'mnt']
    assert repo.get_file_children(gens[0], os.fsencode(live / 'mnt')) == [
        b'there']
    assert repo.get_file_children(gens[1], os.fsencode(live)) == [b'here']


def test_dedup_across_a_checkpoint_of_the_same_run(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    data = os.urandom(4096)
    for name in ('a', 'b', 'c'):
        (live / name).write_bytes(data)
    # A checkpoint after every chunk: the later copies are found in the
    # committed indexes, not in the run's own map.
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096,
                      checkpoint=1)
    assert progress.uploaded_bytes == 4096
    repo, gens = generations(tmp_path / 'repo')
    assert len(gens) == 1
    assert len(repo.get_chunk_ids()) == 1


class Appending:
    """The real live file system; a file grows right after it is opened,
    as a log file being written during the backup would."""

    def __init__(self, fs):
        self.fs = fs

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def open_read(self, path):
        f = self.fs.open_read(path)
        with open(path, 'ab') as out:
            out.write(b'more')
        return f


def test_file_changing_while_read_is_reported_and_old_version_kept(
        tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'log').write_bytes(b'first')
    backup(tmp_path / 'repo', [live])
    (live / 'log').write_bytes(b'second')
    progress = backup(tmp_path / 'repo', [live], fs=Appending(live_fs()))
    assert progress.error_lines == [
        "ERROR: Can't back up %s/log: R0A128X: %s/log: file changed while "
        "it was being backed up" % (live, live)]
    repo, gens = generations(tmp_path / 'repo')
    assert read_back(repo, gens[1], os.fsencode(live / 'log')) == b'first'


def chunks_nothing_uses(repo_dir, client='host'):
    """(chunk files no generation uses, index entries of chunks no
    generation uses)."""
    repo, gens = generations(repo_dir, client)
    used = set()
    for gen in gens:
        used |= repo.get_generation_chunk_ids(gen)
    chunklist, chunksums = repo.get_chunk_index_entries()
    return (set(repo.get_chunk_ids()) - used,
            {chunk_id for chunk_id, _ in chunklist} - used |
            {chunk_id for _, chunk_id, _ in chunksums} - used)


@pytest.mark.parametrize('checkpoint', [0, 3 * 4096])
def test_a_file_that_changed_while_read_leaves_no_chunk_behind(
        tmp_path, checkpoint):
    """Its chunks are neither indexed nor kept, also when a checkpoint
    came while it was being read."""
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'log').write_bytes(os.urandom(8 * 4096))
    (live / 'other').write_bytes(os.urandom(8 * 4096))
    progress = backup(tmp_path / 'repo', [live], fs=Appending(live_fs()),
                      chunk_size=4096, checkpoint=checkpoint)
    assert len(progress.error_lines) == 2
    assert chunks_nothing_uses(tmp_path / 'repo') == (set(), set())
    repo, gens = generations(tmp_path / 'repo')
    assert [repo.file_exists(gens[-1], os.fsencode(live / name))
            for name in ('log', 'other')] == [False, False]


def test_summary_and_statistics_lines_are_exact():
    now = [1000.0]
    progress = backup_progress.BackupProgress(clock=lambda: now[0])
    progress.found(b'/d/f', 5 * 1024 * 1024 + 100)
    progress.found(b'/d', 0)
    progress.backed_up(b'/d/f')
    progress.uploaded(3 * 1024 * 1024 + 7)
    progress.set_io(written=4 * 1024 * 1024, read=1536)
    now[0] += 3723
    progress.finish()
    assert progress.summary_lines() == [
        'Backed up 1 files (of 2 found), containing 5.0 MiB.',
        'Uploaded 3.0 MiB file data in 1h2m3s at 844.9 B/s average speed.',
        'Total download amount 1.0 KiB.',
        'Total upload amount 4.0 MiB. Overhead was 1.0 MiB (25.0 %).',
    ]
    assert progress.statistics_lines() == [
        'Backup performance statistics:',
        '* files found: 2',
        '* files backed up: 1',
        '* uploaded chunk data: 3145735 bytes (3.0 MiB)',
        '* total uploaded data (incl. metadata): 4194304 bytes (4.0 MiB)',
        '* total downloaded data (incl. metadata): 1536 bytes (1.0 KiB)',
        '* transfer overhead: 1050105 bytes (1.0 MiB)',
        '* duration: 3723.0 s (1h2m3s)',
        '* average speed: 844.9 B/s',
    ]


def test_independent_spec_reader_finds_what_backup_wrote(tmp_path):
    """The fmt_6 tests' reader, written from format-6.md alone, decodes a
    repository the backup engine wrote (checkpoints, a changed tree, every
    object type) and finds every file, its metadata and its content."""
    from tests.obnamlib.repo.fmt_6.test_independent_reader import (
        NODE_SIZE, SpecRepository, read_generation)
    live = tmp_path / 'live'
    make_everything(live)
    manifests = [live_manifest(live)]
    small_nodes = {'node_size': NODE_SIZE}     # deep trees, many nodes
    backup(tmp_path / 'repo', [live], chunk_size=4096, checkpoint=8192,
           repo_settings=small_nodes)
    os.remove(live / 'one')
    (live / 'sub' / 'new').write_bytes(os.urandom(10000))
    manifests.append(live_manifest(live))
    backup(tmp_path / 'repo', [live], chunk_size=4096, checkpoint=8192,
           repo_settings=small_nodes)

    spec = SpecRepository(str(tmp_path / 'repo'))
    gens = spec.generations(spec.client_id(b'host'))
    assert len(gens) == 2
    for (_, tree), manifest in zip(gens, manifests):
        found = read_generation(spec, tree)
        below = {path: entry for path, entry in found.items()
                 if path.startswith(os.fsencode(live))}
        assert set(below) == set(manifest)
        for path, (md, content) in below.items():
            mode, mtime_ns, size, nlink, data, xattrs = manifest[path]
            assert oct(md['st_mode']) == mode
            assert md['st_mtime_sec'] * 10 ** 9 + md['st_mtime_nsec'] == \
                mtime_ns
            if content is not None:
                assert hashlib.sha1(content).hexdigest() == data
                assert md['md5'] == hashlib.md5(content).digest()
            elif stat.S_ISLNK(md['st_mode']):
                assert md['target'] == data
        # the ancestors of the root are there, up to /
        assert os.fsencode(tmp_path) in found and b'/' in found


class ConnectionDropping:
    """The real live file system, but the connection to it (as in a pull
    backup over SFTP) is lost at the `opens`-th content open or at the
    `listings`-th directory listing."""

    def __init__(self, fs, opens=None, listings=None):
        self.fs = fs
        self.limits = {'open_read': opens, 'scandir': listings}
        self.calls = {'open_read': 0, 'scandir': 0}

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def _lost(self):
        from obnamlib.vfs.sftp.errors import SftpConnectionLost
        return SftpConnectionLost(hostname='client', reason='EOF')

    def _count(self, name):
        self.calls[name] += 1
        limit = self.limits[name]
        if limit is not None and self.calls[name] >= limit:
            raise self._lost()

    def open_read(self, path):
        self._count('open_read')
        return self.fs.open_read(path)

    def scandir(self, path):
        self._count('scandir')
        return self.fs.scandir(path)


@pytest.mark.parametrize('where', ['opens', 'listings'])
def test_lost_connection_ends_the_run_at_once_keeping_checkpoints(
        tmp_path, where):
    """A fatal error is not a per-file error: the run stops with it alone,
    unlocked, its checkpoints kept, and the next run completes."""
    from obnamlib.vfs.sftp.errors import SftpConnectionLost
    live = tmp_path / 'live'
    for d in range(10):
        (live / ('d%d' % d)).mkdir(parents=True)
        for i in range(4):
            (live / ('d%d' % d) / str(i)).write_bytes(os.urandom(4096))
    # The root and nine directories listed, 36 files read: then it dies.
    fs = ConnectionDropping(live_fs(), **{where: {'opens': 37,
                                                  'listings': 11}[where]})
    errors = []
    with pytest.raises(SftpConnectionLost):
        backup(tmp_path / 'repo', [live], fs=fs, chunk_size=4096,
               checkpoint=10 * 4096, error_lines=errors)
    assert errors == []
    assert fs.calls == {'opens': {'open_read': 37, 'scandir': 11},
                        'listings': {'open_read': 36, 'scandir': 11}}[where]
    leftover = [n for _, _, ns in os.walk(tmp_path / 'repo')
                for n in ns if n == 'lock']
    assert leftover == []
    repo, checkpoints = generations(tmp_path / 'repo')
    assert len(checkpoints) >= 2
    assert {repo.get_generation_key(g, ri.GEN_IS_CHECKPOINT)
            for g in checkpoints} == {1}
    # Chunks written after the last checkpoint were removed again; the
    # file that checkpoint cut in two keeps its chunk for the next run.
    chunklist, _ = repo.get_chunk_index_entries()
    assert len(set(repo.get_chunk_ids()) -
               {chunk_id for chunk_id, _ in chunklist}) == 1
    progress = backup(tmp_path / 'repo', [live], chunk_size=4096,
                      checkpoint=10 * 4096)
    assert progress.error_lines == []
    repo, gens = generations(tmp_path / 'repo')
    assert gens[:len(checkpoints)] == checkpoints
    assert_generation_is(repo, gens[-1], live, live_manifest(live))
    chunklist, _ = repo.get_chunk_index_entries()
    assert set(repo.get_chunk_ids()) == {chunk_id for chunk_id, _ in chunklist}


def test_lost_connection_at_a_root_is_not_a_missing_root(tmp_path):
    from obnamlib.vfs.sftp.errors import SftpConnectionLost

    class DeadAtOnce(ConnectionDropping):
        def lstat(self, path):
            raise self._lost()

    with pytest.raises(SftpConnectionLost):
        backup(tmp_path / 'repo', [tmp_path], fs=DeadAtOnce(live_fs()))


class Prefetching(Counting):
    """The real live file system with SftpFS's prefetch interface: records
    what the engine asks for, and serves it through open_read."""

    prefetch_size = 4096
    # As SftpFS's: its files are read in the backup's own thread.
    capabilities = frozenset()

    def __init__(self, fs):
        super().__init__(fs)
        self.prefetched = []

    def prefetch(self, paths):
        self.prefetched.append(list(paths))


def test_remote_small_changed_files_are_prefetched_in_batches(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(100):
        (live / ('s%03d' % i)).write_bytes(b'%d' % i)
    (live / 'big').write_bytes(os.urandom(5000))
    (live / 'empty').write_bytes(b'')
    fs = Prefetching(live_fs())
    backup(tmp_path / 'repo', [live], fs=fs)
    asked = [path for batch in fs.prefetched for path in batch]
    small = sorted(os.fsencode(live / ('s%03d' % i)) for i in range(100))
    assert sorted(asked) == small       # not big, not empty
    # A batch is FILE_BATCH files in directory order; 'big' and 'empty'
    # are not prefetched, and where they fall depends on the file system.
    sizes = [len(batch) for batch in fs.prefetched]
    assert max(sizes) <= backup_engine.FILE_BATCH
    assert max(sizes) >= backup_engine.FILE_BATCH - 2, sizes
    repo, gens = generations(tmp_path / 'repo')
    assert_generation_is(repo, gens[-1], live, live_manifest(live))
    # Unchanged files are neither prefetched nor read.
    (live / 's007').write_bytes(b'changed')
    fs = Prefetching(live_fs())
    backup(tmp_path / 'repo', [live], fs=fs)
    assert [p for batch in fs.prefetched for p in batch] == [
        os.fsencode(live / 's007')]
    assert fs.opened == [os.fsencode(live / 's007')]


class LocalPrefetching(Counting):
    """The real local file system, recording its live prefetch hints."""

    def __init__(self, fs):
        super().__init__(fs)
        self.prefetched = []

    def prefetch(self, paths):
        self.prefetched.append(list(paths))
        self.fs.prefetch(paths)


def test_local_small_changed_files_are_named_to_prefetch_in_batches(
        tmp_path):
    """On a local disk the small files are read in the backup's own
    thread: their reads are hinted together (started if the disk must be
    read); big ones are read ahead by the worker instead."""
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(100):
        (live / ('s%03d' % i)).write_bytes(b'%d' % i)
    (live / 'big').write_bytes(os.urandom(local.PREFETCH_LIVE_BYTES + 1))
    (live / 'empty').write_bytes(b'')
    fs = LocalPrefetching(live_fs())
    if fs.prefetch_size == 0:
        pytest.skip('the live files are in memory: nothing to prefetch')
    backup(tmp_path / 'repo', [live], fs=fs)
    asked = [path for batch in fs.prefetched for path in batch]
    assert sorted(asked) == sorted(
        os.fsencode(live / ('s%03d' % i)) for i in range(100))
    assert max(len(batch) for batch in fs.prefetched) <= \
        backup_engine.FILE_BATCH
    repo, gens = generations(tmp_path / 'repo')
    assert_generation_is(repo, gens[-1], live, live_manifest(live))
    fs = LocalPrefetching(live_fs())
    backup(tmp_path / 'repo', [live], fs=fs)
    assert fs.prefetched == []      # nothing changed: nothing to read
