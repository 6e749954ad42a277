"""The restore engine against a real format-6 repository on disk."""

import errno
import re
import hashlib
import os
import stat
import sys

import pytest

import obnamlib.errors
import obnamlib.repo.factory
import obnamlib.engine.background_md5
import obnamlib.engine.read_ahead
import obnamlib.engine.restore_writer
import obnamlib.engine.restorer
import obnamlib.vfs.local
from obnamlib.engine.live_metadata import encode_xattrs
from obnamlib.repo.interface import PREFETCHES_CHUNKS
from obnamlib.vfs.base import ADVISES_READS, SETS_ATTRIBUTES_OF_OPEN_FILES
from tests.gpg_fixture import reference_gpg_home  # noqa: F401
from tests.sshd_fixture import sshd  # noqa: F401
from tests.nobody import NOBODY, as_nobody, why_python_cannot_run_as_nobody
from tests.obnamlib import restore_helpers as rh
from tests.obnamlib.restore_helpers import Collect
from tests.obnamlib.backup_helpers import (
    FatalTestError, make_deep, remove_deep)
from tests import paths

IS_ROOT = os.geteuid() == 0


@pytest.fixture
def world(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    return tmp_path, live


def restorer(repo, gen, target, by_path=False, **kwargs):
    """by_path: the target's files take their metadata by path after
    closing, as on a VFS without SETS_ATTRIBUTES_OF_OPEN_FILES."""
    reporter = kwargs.pop('reporter', Collect())
    fs = obnamlib.vfs.local.LocalFS('/')
    if by_path:
        fs.capabilities = fs.capabilities - {SETS_ATTRIBUTES_OF_OPEN_FILES}
    r = obnamlib.engine.restorer.Restorer(repo, gen, fs, os.fsencode(target),
                                   reporter=reporter, **kwargs)
    return r, reporter


def facts(root):
    """{relative path: facts} of a live tree, for comparing two trees."""
    result = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames + ([''] if dirpath == str(root) else []):
            path = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISREG(st.st_mode):
                with open(path, 'rb') as f:
                    content = hashlib.sha1(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                content = os.readlink(path)
            else:
                content = None
            xattrs = {n: os.getxattr(path, n, follow_symlinks=False)
                      for n in os.listxattr(path, follow_symlinks=False)}
            size = None if stat.S_ISDIR(st.st_mode) else st.st_size
            result[rel] = (oct(st.st_mode), st.st_mtime_ns, size,
                           st.st_nlink if not stat.S_ISDIR(st.st_mode) else None,
                           st.st_uid, st.st_gid, content, xattrs)
    return result


def write(path, data, mtime_ns=None):
    with open(path, 'wb') as f:
        f.write(data)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns))


def make_funny_farm(live):
    """Every kind of object restore handles."""
    write(live / 'empty', b'')
    write(live / 'small', b'hello\n')
    write(live / 'multi', os.urandom(4096 * 3 + 17))
    sparse = bytearray(4096 * 6)
    sparse[4096 * 2:4096 * 2 + 5] = b'12345'
    write(live / 'sparse-middle', bytes(sparse))
    write(live / 'ends-in-hole', b'x' * 4096 + bytes(4096 * 4))
    write(live / 'all-zero', bytes(4096 * 2 + 3))
    (live / 'dir').mkdir()
    write(live / 'dir' / 'inner', b'inner')
    os.link(live / 'dir' / 'inner', live / 'hardlink')
    os.symlink('dir/inner', live / 'symlink')
    os.symlink('/does/not/exist', live / 'dangling')
    os.symlink('dir', live / 'dirlink')
    os.mkfifo(live / 'fifo')
    os.mknod(live / 'socket', stat.S_IFSOCK | 0o644)
    write(live / 'setuid', b'#!/bin/sh\n')
    os.chmod(live / 'setuid', 0o4755)
    write(live / 'xattrs', b'x')
    os.setxattr(live / 'xattrs', 'user.foo', b'some value')
    os.setxattr(live / 'xattrs', 'user.empty', b'')
    os.chmod(live / 'dir', 0o751)
    for name in ('small', 'dir/inner'):
        os.utime(live / name, ns=(1234567890123456789, 1400000000987654321))
    os.utime(live / 'symlink', ns=(1, 1300000000000000001),
             follow_symlinks=False)
    os.utime(live / 'dir', ns=(5, 1200000000000000007))
    if IS_ROOT:
        os.mknod(live / 'chardev', stat.S_IFCHR | 0o600, os.makedev(1, 3))
        os.chown(live / 'small', 1234, 5678)
        os.setxattr(live / 'xattrs', 'trusted.t', b'root only')


@pytest.mark.parametrize('by_path', [False, True])
def test_full_round_trip(world, by_path):
    tmp, live = world
    make_funny_farm(live)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target, by_path=by_path)
    stats = r.restore()
    # Format 6 keeps no device number: said, and made as 0:0.
    assert rep.errors == [] and rep.notes == ([
        '%s/chardev: restored as device 0:0: repository format 6 keeps no '
        'device number (make it again with mknod)' % live] if IS_ROOT else [])
    restored = target / str(live).lstrip('/')
    before, after = facts(live), facts(restored)
    assert before.keys() == after.keys()
    for name in before:
        assert after[name] == before[name], name
    # every object counts, directories included ('/', ancestors, live, dir)
    assert stats.files == len(before) + len(str(live).strip('/').split('/'))
    assert stats.bytes == sum(os.lstat(live / n).st_size for n in before
                              if stat.S_ISREG(os.lstat(live / n).st_mode)
                              and n != 'hardlink')


def test_target_gets_root_metadata_on_full_restore(world):
    tmp, live = world
    write(live / 'f', b'1')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    root_md = repo.get_metadata(gen, b'/')
    target = tmp / 'target'
    restorer(repo, gen, target)[0].restore()
    st = os.lstat(target)
    assert st.st_mode == root_md.st_mode
    assert st.st_mtime_ns == (root_md.st_mtime_sec * 10**9 +
                              root_md.st_mtime_nsec)


def test_sparse_files_are_sparse_and_exact(world):
    tmp, live = world
    data = bytes(4096 * 64) + b'end' + bytes(4096 * 64)
    write(live / 'sparse', data)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    restorer(repo, gen, target)[0].restore()
    path = target / str(live).lstrip('/') / 'sparse'
    with open(path, 'rb') as f:
        assert f.read() == data
    assert os.stat(path).st_blocks * 512 <= 3 * 4096


def test_partial_restore_keeps_full_path_and_private_parents(world):
    tmp, live = world
    (live / 'a' / 'b').mkdir(parents=True)
    write(live / 'a' / 'b' / 'f', b'data', mtime_ns=10**18)
    write(live / 'other', b'no')
    os.chmod(live / 'a', 0o755)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    wanted = os.fsencode(str(live / 'a' / 'b'))
    r, rep = restorer(repo, gen, target)
    stats = r.restore([wanted + b'/'])
    assert rep.errors == []
    assert stats.files == 2
    restored = target / str(live).lstrip('/')
    assert (restored / 'a' / 'b' / 'f').read_bytes() == b'data'
    assert os.stat(restored / 'a' / 'b' / 'f').st_mtime_ns == 10**18
    assert not (restored / 'other').exists()
    assert stat.S_IMODE(os.stat(restored / 'a').st_mode) == 0o700
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o700


def test_restore_of_a_single_file(world):
    tmp, live = world
    write(live / 'f', b'one file')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    restorer(repo, gen, target)[0].restore([os.fsencode(str(live / 'f'))])
    assert os.listdir(target / str(live).lstrip('/')) == ['f']


def test_existing_empty_target_is_used(world):
    tmp, live = world
    write(live / 'f', b'x')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    target.mkdir()
    restorer(repo, gen, target)[0].restore()
    assert (target / str(live).lstrip('/') / 'f').read_bytes() == b'x'


def test_non_empty_target_is_refused(world):
    tmp, live = world
    write(live / 'f', b'x')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    target.mkdir()
    write(target / '.hidden', b'')
    r, _ = restorer(repo, gen, target, target_display='target')
    with pytest.raises(obnamlib.engine.restorer.RestoreTargetNotEmpty) as info:
        r.restore()
    assert str(info.value) == (
        'R3E1C1X: The restore --to directory (target) is not empty.')
    assert os.listdir(target) == ['.hidden']


def test_target_whose_parent_is_missing(world):
    tmp, live = world
    write(live / 'f', b'x')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'no' / 'target'
    with pytest.raises(obnamlib.errors.ObnamSystemError) as info:
        restorer(repo, gen, target)[0].restore()
    assert str(info.value) == (
        'RD5FA4X: System error: %s: 2: No such file or directory' % target)


def test_path_not_in_generation(world):
    tmp, live = world
    write(live / 'f', b'x')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    r, _ = restorer(repo, gen, target)
    with pytest.raises(
            obnamlib.errors.RepositoryFileDoesNotExistInGeneration) as info:
        r.restore([b'/not/there'])
    assert str(info.value) == (
        'R3E151X: Client client, generation %s does not have file /not/there'
        % repo.make_generation_spec(gen))
    assert not target.exists()


def test_missing_chunk_is_reported_and_restore_continues(world):
    tmp, live = world
    write(live / 'a-broken', b'A' * 5000)
    write(live / 'b-fine', b'fine')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    broken = os.fsencode(str(live / 'a-broken'))
    lost = repo.get_file_chunk_ids(gen, broken)[1]
    os.remove(rh.chunk_file(tmp / 'repo', lost))
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors) as info:
        r.restore()
    assert str(info.value) == (
        'RD6259X: There were errors when restoring\n\n'
        'See previous error messages for details.')
    assert len(rep.errors) == 1
    assert rep.errors[0].startswith(
        "Failed to restore %s: R43272X: Repository doesn't contain chunk "
        % (live / 'a-broken'))
    assert '. It is expected at chunks/' in rep.errors[0]
    assert (target / str(live).lstrip('/') / 'b-fine').read_bytes() == b'fine'
    assert not (target / str(live).lstrip('/') / 'a-broken').exists()


def test_checksum_mismatch_is_notified_fails_the_run_and_leaves_no_file(world):
    tmp, live = world
    write(live / 'f', b'content')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    path = os.fsencode(str(live / 'f'))
    rh.rewrite_metadata(repo, gen, path, md5=b'\0' * 16)
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    actual = hashlib.md5(b'content').hexdigest()
    assert rep.notes == ['File checksum restore error: %s (%s vs %s)' % (
        live / 'f', actual, '00' * 16)]
    assert rep.errors == [
        'Failed to restore %s: R2F75CX: Backed-up data does not match its '
        'checksum (%s vs %s); the file was not restored'
        % (live / 'f', actual, '00' * 16)]
    assert not (target / str(live).lstrip('/') / 'f').exists()


def test_checksums_made_by_the_worker_thread_pass_and_fail_as_in_line(
        world, monkeypatch):
    """Every piece hashed by background_md5's worker (two cores, no size
    floor): a right file is restored exactly, a wrong checksum is still
    caught, and the worker is gone after the run."""
    monkeypatch.setattr(obnamlib.engine.background_md5,
                        'BACKGROUND_HASH_BYTES', 0)
    monkeypatch.setattr(obnamlib.engine.background_md5.os,
                        'sched_getaffinity', lambda pid: {0, 1})
    hashed = []
    real_new_hasher = obnamlib.engine.background_md5.new_hasher

    def recording_hasher():
        executor = real_new_hasher()
        real_submit = executor.submit

        def submit(work, data):
            hashed.append(len(data))
            return real_submit(work, data)

        executor.submit = submit
        return executor

    monkeypatch.setattr(obnamlib.engine.background_md5, 'new_hasher',
                        recording_hasher)
    tmp, live = world
    good = os.urandom(3 * 1024 * 1024 + 5)
    write(live / 'good', good)
    write(live / 'bad', b'content')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    rh.rewrite_metadata(repo, gen, os.fsencode(str(live / 'bad')),
                        md5=b'\0' * 16)
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    restored = target / str(live).lstrip('/')
    assert (restored / 'good').read_bytes() == good
    assert not (restored / 'bad').exists()
    assert rep.notes == ['File checksum restore error: %s (%s vs %s)' % (
        live / 'bad', hashlib.md5(b'content').hexdigest(), '00' * 16)]
    assert r.hasher is None
    assert sum(hashed) == len(good) + len(b'content')  # all by the worker


@pytest.mark.parametrize('by_path', [False, True])
def test_metadata_failure_is_reported_with_r0fc21x(world, by_path):
    tmp, live = world
    write(live / 'f', b'x')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    path = os.fsencode(str(live / 'f'))
    rh.rewrite_metadata(repo, gen, path,
                        xattr=encode_xattrs([(b'bogus.name', b'v')]))
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target, by_path=by_path)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    dest = target / str(live).lstrip('/') / 'f'
    assert rep.errors == [
        "R0FC21X: %s: Couldn't set metadata xattr bogus.name: %d: %s"
        % (dest, errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))]
    # later steps still ran
    assert os.stat(dest).st_mtime_ns == os.stat(live / 'f').st_mtime_ns


@pytest.mark.parametrize('by_path', [False, True])
@pytest.mark.parametrize('euid, always, kept', [
    (0, False, True), (4321, False, False), (4321, True, True),
    (None, False, True)])
def test_setuid_rule(world, euid, always, kept, by_path):
    tmp, live = world
    write(live / 'suid', b'x')
    os.chmod(live / 'suid', 0o6755)
    uid = os.lstat(live / 'suid').st_uid
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    r, _ = restorer(repo, gen, target, euid=uid if euid is None else euid,
                    always_restore_setuid=always, by_path=by_path)
    r.restore()
    mode = stat.S_IMODE(os.lstat(target / str(live).lstrip('/') / 'suid').st_mode)
    assert mode == (0o6755 if kept else 0o755)


@pytest.mark.parametrize('by_path', [False, True])
def test_regular_files_take_their_metadata_through_the_open_file(
        world, monkeypatch, by_path):
    """Where the target can (SETS_ATTRIBUTES_OF_OPEN_FILES), regular
    files' owner, mode and times are set through the open file; the rest
    by path, and everything by path where it cannot."""
    tmp, live = world
    make_funny_farm(live)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    through_file, by_name = [], []
    real_file = obnamlib.vfs.local.LocalFile.set_attributes
    real_path = obnamlib.vfs.local.LocalFS.set_attributes
    monkeypatch.setattr(
        obnamlib.vfs.local.LocalFile, 'set_attributes',
        lambda self, **kw: (through_file.append(self.path),
                            real_file(self, **kw))[1])
    monkeypatch.setattr(
        obnamlib.vfs.local.LocalFS, 'set_attributes',
        lambda self, path, **kw: (by_name.append(path),
                                  real_path(self, path, **kw))[1])
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target, by_path=by_path)
    r.restore()
    restored = target / str(live).lstrip('/')
    assert facts(restored) == facts(live)
    files = {os.fsencode(str(restored / name)) for name in (
        'empty', 'small', 'multi', 'sparse-middle', 'ends-in-hole',
        'all-zero', 'dir/inner', 'setuid', 'xattrs')}
    if by_path:
        assert through_file == [] and files <= set(by_name)
    else:
        assert set(through_file) == files and not files & set(by_name)
        assert os.fsencode(str(restored / 'symlink')) in by_name


def test_a_damaged_file_reports_its_checksum_not_its_metadata(world):
    """Metadata set through the open file is reported only after the
    checksum check, as when it was set after it."""
    tmp, live = world
    write(live / 'f', b'content')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    rh.rewrite_metadata(repo, gen, os.fsencode(str(live / 'f')),
                        md5=b'\0' * 16,
                        xattr=encode_xattrs([(b'bogus.name', b'v')]))
    r, rep = restorer(repo, gen, tmp / 'target')
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    assert len(rep.errors) == 1 and 'R2F75CX' in rep.errors[0]
    assert not (tmp / 'target' / str(live).lstrip('/') / 'f').exists()


def test_non_root_sets_only_user_xattrs(world):
    tmp, live = world
    write(live / 'f', b'x')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    path = os.fsencode(str(live / 'f'))
    rh.rewrite_metadata(repo, gen, path, xattr=encode_xattrs(
        [(b'trusted.t', b'1'), (b'user.u', b'2')]))
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target, euid=4321)
    r.restore()
    dest = target / str(live).lstrip('/') / 'f'
    assert os.listxattr(dest) == ['user.u']
    assert any('trusted.t' in line for line in rep.logs)


def test_pretend_creates_nothing_and_reads_no_data(world):
    tmp, live = world
    (live / 'd').mkdir()
    write(live / 'd' / 'f', b'x' * 10000)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    for dirpath, _, names in os.walk(tmp / 'repo' / 'chunks'):
        for name in names:
            os.remove(os.path.join(dirpath, name))
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target, pretend=True)
    stats = r.restore()
    assert not target.exists()
    assert rep.errors == []
    assert stats.files == 3 + len(str(live).strip('/').split('/'))
    assert stats.bytes == 0


def test_directory_metadata_is_set_after_contents(world):
    tmp, live = world
    (live / 'd').mkdir()
    write(live / 'd' / 'f', b'x')
    os.chmod(live / 'd', 0o555)
    os.utime(live / 'd', ns=(7, 777777777777))
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target, euid=4321)
    r.restore()
    assert rep.errors == []
    st = os.lstat(target / str(live).lstrip('/') / 'd')
    assert st.st_mtime_ns == 777777777777
    assert stat.S_IMODE(st.st_mode) == 0o555
    assert rep.done.index(os.fsencode(str(live / 'd'))) > \
        rep.done.index(os.fsencode(str(live / 'd' / 'f')))


def test_deeper_than_recursion_limit(world):
    tmp, live = world
    depth = sys.getrecursionlimit() + 50
    make_deep(str(live), depth, leaf=b'bottom')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    try:
        restorer(repo, gen, target)[0].restore()
        restored = target / str(live).lstrip('/')
        rel = '/'.join(['d'] * depth)
        assert (restored / rel / 'leaf').read_bytes() == b'bottom'
    finally:
        remove_deep(str(live), depth)
        remove_deep(str(target / str(live).lstrip('/')), depth)


RESTORE_AS_NOBODY = '''
import os, sys
sys.path.insert(0, sys.argv[1])
import obnamlib.repo.factory, obnamlib.engine.restorer, obnamlib.vfs.local
repo = obnamlib.repo.factory.open_repository(url=sys.argv[2])
gen = repo.get_generation_ids("client")[-1]
class Rep(obnamlib.engine.restorer.RestoreReporter):
    def error(self, text):
        print("ERROR", text)
r = obnamlib.engine.restorer.Restorer(repo, gen, obnamlib.vfs.local.LocalFS("/"),
                               os.fsencode(sys.argv[3]), reporter=Rep())
r.restore()
print("done", r.stats.files)
'''


@pytest.mark.skipif(why_python_cannot_run_as_nobody() is not None,
                    reason=str(why_python_cannot_run_as_nobody()))
def test_real_non_root_restore(tmp_path):
    """A restore by an ordinary user: setuid bits of someone else's file
    dropped, group-only ownership silently skipped, only user.* xattrs."""
    import shutil
    import subprocess
    import tempfile
    top = tempfile.mkdtemp(prefix='nr', dir='/tmp')
    try:
        os.chmod(top, 0o755)
        live = os.path.join(top, 'live')
        os.mkdir(live)
        write(os.path.join(live, 'suid'), b'#!/bin/sh\n')
        os.chmod(os.path.join(live, 'suid'), 0o4755)
        write(os.path.join(live, 'x'), b'x')
        os.setxattr(os.path.join(live, 'x'), 'user.u', b'U')
        os.setxattr(os.path.join(live, 'x'), 'trusted.t', b'T')
        repo = rh.new_repository(os.path.join(top, 'repo'))
        rh.store_tree(repo, live)
        for dirpath, dirnames, filenames in os.walk(top):
            for name in [dirpath] + [os.path.join(dirpath, n)
                                     for n in dirnames + filenames]:
                os.lchown(name, NOBODY, NOBODY)
        src = paths.CHECKOUT
        target = os.path.join(top, 'target')
        result = subprocess.run(
            as_nobody([sys.executable, '-c', RESTORE_AS_NOBODY,
                       src, os.path.join(top, 'repo'), target]),
            capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith('done'), result.stdout
        restored = target + live
        st = os.lstat(os.path.join(restored, 'suid'))
        assert stat.S_IMODE(st.st_mode) == 0o755
        assert (st.st_uid, st.st_gid) == (NOBODY, NOBODY)
        assert os.listxattr(os.path.join(restored, 'x')) == ['user.u']
    finally:
        shutil.rmtree(top)


def test_damaged_nodes_fail_per_object_or_cleanly(tmp_path):
    """Each node of the client's B-tree damaged in turn: the restore either
    stops with a coded error (the generation's root) or names the objects
    it could not restore and restores the rest; never anything else."""
    import obnamlib.repo.factory
    live = tmp_path / 'live'
    for i in range(10):
        (live / ('d%02d' % i)).mkdir(parents=True)
        for j in range(12):
            write(live / ('d%02d' % i) / ('f%02d' % j), b'%d-%d' % (i, j))
    repo = obnamlib.repo.factory.open_repository(
        url=str(tmp_path / 'repo'), create=True, lock_timeout=0,
        node_size=4096)
    repo.lock_client_list()
    repo.add_client(rh.CLIENT)
    repo.commit_client_list()
    rh.store_tree(repo, str(live))
    client_dir = [n for n in os.listdir(tmp_path / 'repo') if n.isdigit()][0]
    nodes = sorted(os.path.join(d, n) for d, _, names in
                   os.walk(tmp_path / 'repo' / client_dir / 'nodes')
                   for n in names)
    assert len(nodes) > 10
    partial = 0
    for number, node in enumerate(nodes[::2]):     # every other: keep it quick
        with open(node, 'rb') as f:
            good = f.read()
        write(node, b'\0garbage')
        target = tmp_path / ('out%d' % number)
        try:
            again = obnamlib.repo.factory.open_repository(
                url=str(tmp_path / 'repo'), node_size=4096)
            gen = again.get_generation_ids(rh.CLIENT)[-1]
            r, rep = restorer(again, gen, target)
            r.restore()
        except obnamlib.engine.restorer.RestoreErrors:
            assert rep.errors or rep.notes
            for line in rep.errors:
                assert re.match(r'^Failed to restore /\S*: R[0-9A-F]{5}X: ',
                                line), line
            for line in rep.notes:
                assert line.startswith('File checksum restore error: /'), line
            if any(names for _, _, names in os.walk(target)):
                partial += 1
        except obnamlib.errors.ObnamError as e:
            assert e.code == 'RB0D42X'
        finally:
            write(node, good)
    assert partial > 0


def test_restore_over_sftp(world, sshd, monkeypatch):
    """The same restore with an SFTP target (--to sftp://...): everything
    SFTP can express comes back exactly (times to the second: SFTP v3);
    special files and xattrs, which the protocol cannot create, are
    reported and fail the run."""
    import obnamlib.vfs.factory
    monkeypatch.delenv('SSH_AUTH_SOCK', raising=False)
    tmp, live = world
    make_funny_farm(live)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    fs = obnamlib.vfs.factory.open_vfs(sshd.url(str(target)), {
        'ssh-key': sshd.client_key, 'ssh-known-hosts': sshd.known_hosts})
    rep = Collect()
    try:
        engine = obnamlib.engine.restorer.Restorer(
            repo, gen, fs, os.fsencode(fs.root), reporter=rep)
        with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
            engine.restore()
    finally:
        fs.close()
    restored = target / str(live).lstrip('/')
    specials = {'fifo', 'socket'} | ({'chardev'} if IS_ROOT else set())
    failed = sorted(line.split(': ')[0] for line in rep.errors
                    if line.startswith('Failed to restore '))
    assert failed == ['Failed to restore %s' % (live / n)
                      for n in sorted(specials)]
    xattr_errors = [line for line in rep.errors if line.startswith('R0FC21X')]
    assert len(xattr_errors) == len(rep.errors) - len(specials)
    assert all(line.startswith('R0FC21X: %s: ' % (restored / 'xattrs'))
               for line in xattr_errors)
    before = facts(live)
    after = facts(restored)
    assert set(before) - set(after) == specials
    for name in after:
        # SFTP v3 carries whole seconds; user.* xattrs cannot be set
        want = list(before[name])
        want[1] -= want[1] % 10**9
        if name == 'xattrs':
            want[-1] = {}
        assert list(after[name]) == want, name


def test_unknown_file_type_is_notified_and_skipped(world):
    tmp, live = world
    write(live / 'odd', b'')
    write(live / 'fine', b'fine')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    path = os.fsencode(str(live / 'odd'))
    repo.lock_client(rh.CLIENT)
    md = repo.get_metadata(gen, path)
    repo.set_metadata(gen, path, md.copy(st_mode=0o150644, md5=None))
    repo.set_file_chunk_ids(gen, path, [])
    repo.commit_client(rh.CLIENT)
    target = tmp / 'target'
    r, rep = restorer(repo, gen, target)
    r.restore()
    assert rep.notes == ['Unknown file type: %s (150644)' % (live / 'odd')]
    restored = target / str(live).lstrip('/')
    assert sorted(os.listdir(restored)) == ['fine']


# --- a damaged repository (issue 7): every undamaged file still restores ----

def damaged_world(tmp):
    """A real backup of files of three chunks each, a hard-linked pair and
    a subdirectory; (live, repo path, files {name: content})."""
    live = tmp / 'live'
    (live / 'dir').mkdir(parents=True)
    files = {
        'a-broken': os.urandom(4096 * 2 + 100),
        'b-fine': os.urandom(4096 * 2 + 200),
        'dir/inner': b'inner',
    }
    for name, data in files.items():
        write(live / name, data)
    return live, tmp / 'repo', files


def restored_at(target, live, name=''):
    return target / str(live).lstrip('/') / name


def content_md5(repo, gen, path):
    """MD5 of what the repository now yields for path."""
    digest = hashlib.md5()
    for chunk_id in repo.get_file_chunk_ids(gen, os.fsencode(str(path))):
        digest.update(repo.get_chunk_content(chunk_id))
    return digest.hexdigest()


def assert_all_but_broken_restored(target, live, files, broken):
    for name, data in files.items():
        dest = restored_at(target, live, name)
        if name in broken:
            assert not os.path.lexists(dest), name
        else:
            assert dest.read_bytes() == data, name


def test_missing_chunk_in_the_middle_leaves_no_partial_file(tmp_path):
    live, repo_path, files = damaged_world(tmp_path)
    repo, gen = rh.back_up(repo_path, live)
    lost = repo.get_file_chunk_ids(gen, os.fsencode(str(live / 'a-broken')))[1]
    os.remove(rh.chunk_file(repo_path, lost))
    target = tmp_path / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    from obnamlib.repo.fmt_6.chunk_store import idpath
    assert rep.errors == [
        "Failed to restore %s: R43272X: Repository doesn't contain chunk %x. "
        "It is expected at %s" % (live / 'a-broken', lost, idpath(lost))]
    assert rep.notes == []
    assert_all_but_broken_restored(target, live, files, {'a-broken'})
    assert os.fsencode(str(live / 'a-broken')) not in rep.done
    assert os.fsencode(str(live / 'b-fine')) in rep.done
    # the directories around it are finished with their metadata
    assert os.stat(restored_at(target, live)).st_mtime_ns == \
        os.stat(live).st_mtime_ns


@pytest.mark.parametrize('damage', [rh.truncate, rh.flip_last_bit])
def test_damaged_chunk_content_is_a_checksum_failure(tmp_path, damage):
    live, repo_path, files = damaged_world(tmp_path)
    repo, gen = rh.back_up(repo_path, live)
    damage(rh.file_chunk(repo, gen, repo_path, live / 'a-broken', 1))
    actual = content_md5(repo, gen, live / 'a-broken')
    recorded = hashlib.md5(files['a-broken']).hexdigest()
    assert actual != recorded
    target = tmp_path / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    assert rep.notes == ['File checksum restore error: %s (%s vs %s)' % (
        live / 'a-broken', actual, recorded)]
    assert rep.errors == [
        'Failed to restore %s: R2F75CX: Backed-up data does not match its '
        'checksum (%s vs %s); the file was not restored'
        % (live / 'a-broken', actual, recorded)]
    assert_all_but_broken_restored(target, live, files, {'a-broken'})


def test_emptied_chunk_file_cannot_be_decoded(tmp_path):
    live, repo_path, files = damaged_world(tmp_path)
    repo, gen = rh.back_up(repo_path, live)
    write(rh.file_chunk(repo, gen, repo_path, live / 'a-broken', 2), b'')
    target = tmp_path / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    assert rep.errors == ['Failed to restore %s: R173AEX: No filter tag found'
                          % (live / 'a-broken')]
    assert_all_but_broken_restored(target, live, files, {'a-broken'})


def test_hard_links_to_a_damaged_file_are_each_named(tmp_path):
    live, repo_path, files = damaged_world(tmp_path)
    os.link(live / 'a-broken', live / 'a-link')
    files['a-link'] = files['a-broken']
    repo, gen = rh.back_up(repo_path, live)
    os.remove(rh.file_chunk(repo, gen, repo_path, live / 'a-broken', 0))
    target = tmp_path / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    failed = [line.split(': R43272X: ')[0] for line in rep.errors]
    assert failed == ['Failed to restore %s' % (live / 'a-broken'),
                      'Failed to restore %s' % (live / 'a-link')]
    assert_all_but_broken_restored(target, live, files,
                                   {'a-broken', 'a-link'})


def test_failures_of_walk_and_writer_are_said_in_walk_order(tmp_path):
    """A chunk missing (found by the writer's side) and metadata that
    cannot be read (found by the walk) are named in the walk's order."""
    live, repo_path, files = damaged_world(tmp_path)
    for name in ('c-lost', 'e-lost'):
        files[name] = os.urandom(4096 * 2 + 300)
        write(live / name, files[name])
    rh.back_up(repo_path, live)
    rh.garble_metadata(repo_path, live / 'b-fine')
    repo = obnamlib.repo.factory.open_repository(url=str(repo_path))
    gen = repo.get_generation_ids(rh.CLIENT)[-1]
    for name in ('a-broken', 'c-lost', 'e-lost'):
        os.remove(rh.file_chunk(repo, gen, repo_path, live / name, 1))
    target = tmp_path / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    assert [line.split(': R')[0] for line in rep.errors] == [
        'Failed to restore %s' % (live / name)
        for name in ('a-broken', 'b-fine', 'c-lost', 'e-lost')]
    assert_all_but_broken_restored(
        target, live, files, {'a-broken', 'b-fine', 'c-lost', 'e-lost'})


def restore_with_garbled_metadata(tmp_path, name):
    """Back up damaged_world, garble the metadata of live/name, restore
    (which must fail); (live, target, files, reporter)."""
    live, repo_path, files = damaged_world(tmp_path)
    rh.back_up(repo_path, live)
    rh.garble_metadata(repo_path, live / name)
    repo = obnamlib.repo.factory.open_repository(url=str(repo_path))
    gen = repo.get_generation_ids(rh.CLIENT)[-1]
    target = tmp_path / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    return live, target, files, rep


def test_unreadable_metadata_of_one_file(tmp_path):
    live, target, files, rep = restore_with_garbled_metadata(
        tmp_path, 'b-fine')
    assert rep.errors == [
        "Failed to restore %s: RB0D42X: Repository is damaged: metadata of "
        "%r: metadata value has 7 bytes, expected at least 144"
        % (live / 'b-fine', os.fsencode(str(live / 'b-fine')))]
    assert_all_but_broken_restored(target, live, files, {'b-fine'})


def test_unreadable_metadata_of_a_directory_keeps_its_contents(tmp_path):
    live, target, files, rep = restore_with_garbled_metadata(
        tmp_path, 'dir')
    assert len(rep.errors) == 1
    assert rep.errors[0].startswith(
        'Failed to restore %s: RB0D42X: Repository is damaged: metadata of '
        % (live / 'dir'))
    assert_all_but_broken_restored(target, live, files, set())
    # created as a directory without the backed-up metadata: private
    assert stat.S_IMODE(os.stat(restored_at(target, live, 'dir')).st_mode) \
        == 0o700


def test_unreadable_generation_tree_is_one_fatal_error(tmp_path):
    live, repo_path, files = damaged_world(tmp_path)
    repo, gen = rh.back_up(repo_path, live)
    client_dir = [n for n in os.listdir(repo_path) if n.isdigit()]
    assert len(client_dir) == 1
    for dirpath, _, names in os.walk(repo_path / client_dir[0] / 'nodes'):
        for name in names:
            os.remove(os.path.join(dirpath, name))
    repo = obnamlib.repo.factory.open_repository(url=str(repo_path))
    target = tmp_path / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.errors.ObnamError) as info:
        r.restore()
    assert info.value.code == 'RB0D42X'
    assert len(str(info.value).splitlines()) == 1
    assert (rep.errors, rep.notes) == ([], [])
    assert not target.exists()


@pytest.mark.parametrize('damage, reason', [
    (rh.truncate, 'Error -5 while decompressing data: incomplete or '
     'truncated stream'),
    (rh.flip_last_bit, 'Error -3 while decompressing data: incorrect data '
     'check')])
def test_damaged_compressed_chunk_cannot_be_decoded(tmp_path, damage, reason):
    live, repo_path, files = damaged_world(tmp_path)
    files['a-broken'] = b''.join(b'line %06d\n' % i for i in range(1500))
    write(live / 'a-broken', files['a-broken'])
    repo, gen = rh.back_up(repo_path, live, compress_with='deflate')
    chunk_id = repo.get_file_chunk_ids(
        gen, os.fsencode(str(live / 'a-broken')))[1]
    chunk = rh.chunk_file(repo_path, chunk_id)
    with open(chunk, 'rb') as f:
        assert f.read().startswith(b'deflate\0')
    damage(chunk)
    target = tmp_path / 'target'
    r, rep = restorer(repo, gen, target)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    from obnamlib.repo.fmt_6.chunk_store import idpath
    assert rep.errors == [
        'Failed to restore %s: R70655X: %s: compressed data is damaged: %s'
        % (live / 'a-broken', idpath(chunk_id), reason)]
    assert_all_but_broken_restored(target, live, files, {'a-broken'})


def generation_files(repo, gen):
    """Every regular file's path in a generation with its chunk ids."""
    pending = [b'/']
    while pending:
        path = pending.pop()
        for name in repo.get_file_children(gen, path):
            child = path.rstrip(b'/') + b'/' + name
            if repo.get_metadata(gen, child).isdir():
                pending.append(child)
            elif repo.get_metadata(gen, child).isreg():
                yield child, repo.get_file_chunk_ids(gen, child)


# Offsets from the end of the one chunk of file-four-kibibytes (83 bytes:
# OpenPGP data without integrity protection around Obnam's deflate): a
# flipped bit there garbles the inner deflate stream, or the OpenPGP packet
# structure, which the decryptor reports as it can.
@pytest.mark.parametrize('offset, error', [
    (-5, 'R70655X: chunks/1277/2680/1984/f9baf814f09fa488: compressed data '
         'is damaged: Error -3 while decompressing data: '),
    (-13, 'R5CF1CX: Decryption failed: ')])
def test_damaged_chunk_in_obnam_1_encrypted_repository(
        tmp_path, reference_gpg_home, offset, error):
    """Obnam 1.x's encrypted, deflated repository with one bit flipped in
    one chunk: the files using it are named, everything else restores
    exactly as from the undamaged repository."""
    from tests.obnamlib.repo.fmt_6 import reference_repos as rr
    rr.unpack(rr.ENCRYPTED, str(tmp_path / 'ref'))

    def open_reference():
        return obnamlib.repo.factory.open_repository(
            {'gnupghome': reference_gpg_home.path},
            url=str(tmp_path / 'ref' / 'repo'))

    repo = open_reference()
    gen = repo.get_generation_ids('havelock')[-1]
    restorer(repo, gen, tmp_path / 'good')[0].restore()
    files = dict(generation_files(repo, gen))
    chunk_id, = [ids for path, ids in files.items()
                 if path.endswith(b'/file-four-kibibytes')][0]
    damaged = sorted(p for p, ids in files.items() if chunk_id in ids)
    assert len(damaged) == 3     # three files of the same content share it
    rh.flip_bit(rh.chunk_file(tmp_path / 'ref' / 'repo', chunk_id), offset)
    repo = open_reference()
    r, rep = restorer(repo, gen, tmp_path / 'bad')
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    assert rep.notes == []
    assert sorted(line.split(': R')[0] for line in rep.errors) == [
        'Failed to restore %s' % os.fsdecode(p) for p in damaged]
    for line in rep.errors:
        assert line.split(': ', 1)[1].startswith(error), line
    good, bad = facts(tmp_path / 'good'), facts(tmp_path / 'bad')
    for path in damaged:
        lost = os.path.relpath(os.fsdecode(path), '/')
        assert lost in good and lost not in bad
        del good[lost]
    assert bad == good



class TargetThatLosesItsConnection(obnamlib.vfs.local.LocalFS):
    """A target VFS whose every file creation fails as a lost SFTP link."""

    def open_write(self, path, *args, **kwargs):
        raise FatalTestError()


@pytest.mark.parametrize('sizes', [
    {'a': 1, 'b': 1, 'c': 1},
    # written in parts while more is fetched: a part's error is not
    # taken for a failed fetch
    {'big': obnamlib.engine.restore_writer.PART_BYTES * 2 + 1}])
def test_fatal_target_error_ends_restore_at_once(world, sizes):
    tmp, live = world
    for name, size in sizes.items():
        write(live / name, os.urandom(size))
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    reporter = Collect()
    r = obnamlib.engine.restorer.Restorer(
        repo, gen, TargetThatLosesItsConnection('/'),
        os.fsencode(str(tmp / 'target')), reporter=reporter)
    with pytest.raises(FatalTestError):
        r.restore()
    assert reporter.errors == []


# --- read-ahead hints ------------------------------------------------------

def record_hints_and_reads(repo, hints_act=True):
    """The real repository, with its prefetch hints and chunk reads noted
    in order: [('hint', [ids]) or ('read', id)].  Its storage says that
    hints do something (a local disk) or, hints_act False, that they do
    nothing (tmpfs), wherever the test's directory is."""
    base = repo.fs.base
    if hints_act:
        base.capabilities = base.capabilities | {ADVISES_READS}
    else:
        base.capabilities = base.capabilities - {ADVISES_READS}
    events = []
    hint, read = repo.prefetch_chunks, repo.get_chunk_content

    def prefetch_chunks(chunk_ids):
        events.append(('hint', list(chunk_ids)))
        hint(chunk_ids)

    def get_chunk_content(chunk_id):
        events.append(('read', chunk_id))
        return read(chunk_id)
    repo.prefetch_chunks = prefetch_chunks
    repo.get_chunk_content = get_chunk_content
    return events


def test_every_chunk_is_announced_before_it_is_read(world):
    tmp, live = world
    for i in range(100):
        (live / ('f%03d' % i)).write_bytes(b'%d' % i * 10)
    (live / 'big').write_bytes(os.urandom(4096 * 70 + 1))
    (live / 'sub').mkdir()
    (live / 'sub' / 'x').write_bytes(b'x' * 9000)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    events = record_hints_and_reads(repo)
    r, rep = restorer(repo, gen, tmp / 'target')
    r.restore()
    assert rep.errors == []
    assert facts(tmp / 'target' / str(live).lstrip('/')) == facts(live)
    hints = [ids for kind, ids in events if kind == 'hint']
    last_two = [set(), set()]
    read_of_last = 0
    for kind, value in events:
        if kind == 'hint':
            if last_two[1]:
                # the next hint goes out half-way through the last one
                assert read_of_last == len(last_two[1]) // 2
            last_two = [last_two[1], set(value)]
            read_of_last = 0
        else:
            assert value in last_two[0] | last_two[1]
            read_of_last += value in last_two[1]
    assert all(len(ids) <= obnamlib.engine.read_ahead.READ_AHEAD_CHUNKS
               for ids in hints)
    # 'big' (71 chunks), f000-f099 (100 chunks) and sub/x (3 chunks: a
    # window goes on into the directories the walk enters next), each
    # chunk named by one hint only.
    announced = [i for ids in hints for i in ids]
    reads = [value for kind, value in events if kind == 'read']
    assert len(announced) == len(set(announced)) == len(reads) == 71 + 100 + 3
    assert set(announced) == set(reads)
    assert [len(ids) for ids in hints] == [64, 64, 46]


def test_a_repository_whose_hints_do_nothing_is_given_none(world):
    """A plain repository in memory: no hints, nothing looked at ahead,
    the same tree."""
    tmp, live = world
    for path in ('a/d/x', 'a/y', 'b', 'c/z'):
        (live / path).parent.mkdir(parents=True, exist_ok=True)
        (live / path).write_bytes(path.encode() * 5000)
    os.link(live / 'b', live / 'c' / 'b2')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    events = record_hints_and_reads(repo, hints_act=False)
    assert PREFETCHES_CHUNKS not in repo.capabilities
    r, rep = restorer(repo, gen, tmp / 'target')
    r.restore()
    assert rep.errors == []
    assert facts(tmp / 'target' / str(live).lstrip('/')) == facts(live)
    assert {kind for kind, _ in events} == {'read'}
    assert r.fetcher.ahead == {}


def test_read_ahead_stops_at_its_byte_limit(world, monkeypatch):
    tmp, live = world
    for i in range(10):
        (live / ('f%d' % i)).write_bytes(os.urandom(3 * 4096))
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    monkeypatch.setattr(obnamlib.engine.read_ahead, 'READ_AHEAD_BYTES', 4 * 4096)
    events = record_hints_and_reads(repo)
    r, _ = restorer(repo, gen, tmp / 'target')
    r.restore()
    hints = [ids for kind, ids in events if kind == 'hint']
    assert [len(ids) for ids in hints] == [4] * 7 + [2]


def test_second_names_of_hard_links_are_not_read_ahead(world):
    tmp, live = world
    (live / 'a').write_bytes(b'linked data')
    os.link(live / 'a', live / 'b')
    (live / 'c').write_bytes(b'other')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    events = record_hints_and_reads(repo)
    r, _ = restorer(repo, gen, tmp / 'target')
    r.restore()
    restored = tmp / 'target' / str(live).lstrip('/')
    assert os.stat(restored / 'a').st_ino == os.stat(restored / 'b').st_ino
    assert (restored / 'b').read_bytes() == b'linked data'
    assert events[0] == ('hint', [
        repo.get_file_chunk_ids(gen, os.fsencode(live / name))[0]
        for name in ('a', 'c')])
    assert len([e for e in events if e[0] == 'read']) == 2


def test_read_ahead_follows_the_walk_into_and_out_of_directories(world):
    tmp, live = world
    for path in ('a/d/x', 'a/y', 'b', 'c/z'):
        (live / path).parent.mkdir(parents=True, exist_ok=True)
        (live / path).write_bytes(path.encode())
    (live / 'c' / 'empty').mkdir()
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    events = record_hints_and_reads(repo)
    r, _ = restorer(repo, gen, tmp / 'target')
    r.restore()
    assert facts(tmp / 'target' / str(live).lstrip('/')) == facts(live)
    assert events[0] == ('hint', [
        repo.get_file_chunk_ids(gen, os.fsencode(live / path))[0]
        for path in ('a/d/x', 'a/y', 'b', 'c/z')])
    assert [kind for kind, _ in events] == ['hint'] + ['read'] * 4


def count_lookups(repo):
    """{(method, path): calls} of the repository's per-path look-ups."""
    calls = {}
    for name in ('get_metadata', 'get_file_children', 'get_file_chunk_ids'):
        def counted(gen, path, name=name, real=getattr(repo, name)):
            calls[name, path] = calls.get((name, path), 0) + 1
            return real(gen, path)
        setattr(repo, name, counted)
    return calls


def test_each_name_is_looked_up_once(world, monkeypatch):
    """Looking ahead goes on from where the last hint stopped, and the
    walk takes what it found: no path's metadata, listing or chunk list
    is asked for twice."""
    tmp, live = world
    for d in range(6):
        (live / ('d%d' % d) / 'sub').mkdir(parents=True)
        for i in range(12):
            write(live / ('d%d' % d) / ('f%02d' % i), b'%d' % i * 3000)
        write(live / ('d%d' % d) / 'sub' / 'x', b'x')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    monkeypatch.setattr(obnamlib.engine.read_ahead, 'READ_AHEAD_CHUNKS', 8)
    calls = count_lookups(repo)
    r, rep = restorer(repo, gen, tmp / 'target')
    r.restore()
    assert rep.errors == []
    assert facts(tmp / 'target' / str(live).lstrip('/')) == facts(live)
    assert ('get_metadata', os.fsencode(live / 'd5' / 'sub' / 'x')) in calls
    assert set(calls.values()) == {1}


class TargetWithoutOneDirectory(obnamlib.vfs.local.LocalFS):
    """A target where one directory cannot be made."""

    def __init__(self, root, refused):
        super().__init__(root)
        self.refused = refused

    def mkdir(self, path, *args, **kwargs):
        if path.endswith(self.refused):
            raise obnamlib.errors.ObnamSystemError(
                filename=path, errno=errno.EACCES, strerror='refused')
        return super().mkdir(path, *args, **kwargs)


@pytest.mark.parametrize('window', [5, 12])
def test_the_walk_passes_what_was_looked_at_below_a_directory_not_made(
        world, monkeypatch, window):
    """Looking ahead went into a directory the walk then could not make
    (with 12 chunks a hint, on to the file after it): the files after it
    are still restored and hinted, those in it never read."""
    tmp, live = world
    for name in ('a', 'b/x', 'b/y', 'c', 'd'):
        (live / name).parent.mkdir(exist_ok=True)
        write(live / name, name.encode() * 5000)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    monkeypatch.setattr(obnamlib.engine.read_ahead, 'READ_AHEAD_CHUNKS',
                        window)
    events = record_hints_and_reads(repo)
    rep = Collect()
    target = tmp / 'target'
    r = obnamlib.engine.restorer.Restorer(
        repo, gen, TargetWithoutOneDirectory('/', b'/b'),
        os.fsencode(str(target)), reporter=rep)
    with pytest.raises(obnamlib.engine.restorer.RestoreErrors):
        r.restore()
    assert [line.split(': R')[0] for line in rep.errors] == [
        'Failed to restore %s' % (live / 'b')]
    restored = target / str(live).lstrip('/')
    assert sorted(os.listdir(restored)) == ['a', 'c', 'd']
    ids = {name: repo.get_file_chunk_ids(gen, os.fsencode(live / name))
           for name in ('a', 'b/x', 'b/y', 'c', 'd')}
    reads = [value for kind, value in events if kind == 'read']
    assert reads == ids['a'] + ids['c'] + ids['d']
    announced = {i for kind, value in events if kind == 'hint'
                 for i in value}
    assert set(reads) <= announced


def test_hint_schedule_calls_for_the_next_hint_half_way():
    """Restore and verify share it: a chunk no hint named, or the middle
    of the last hint, calls for the next; a refill skips what the last
    hint named."""
    hints = obnamlib.engine.read_ahead.HintSchedule()
    assert hints.due(1)
    first = hints.window(1)
    first.add([1, 2, 3, 4], 10)
    hints.sent(first)
    assert [hints.due(i) for i in (1, 2, 3, 4, 5)] == [
        False, False, True, False, True]
    refill = hints.window(3)
    refill.add([3, 4, 5, 6], 10)
    assert refill.chunk_ids == [5, 6]
    hints.sent(refill)
    assert [hints.due(i) for i in (3, 4, 5, 6, 7)] == [
        False, False, False, True, True]


class NotReopened(obnamlib.vfs.local.LocalFS):
    """A target a second process cannot open by itself."""

    def reopening(self):
        return None


@pytest.mark.parametrize('reopened', [True, False])
def test_restore_says_it_will_read_chunks_before_it_reads_any(
        world, reopened):
    """And that it reads them in line when its second process may share
    the reads (two cores, a target it can open): no helper process."""
    tmp, live = world
    (live / 'f').write_bytes(b'data' * 3000)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    events = record_hints_and_reads(repo)
    repo.expect_chunk_reads = lambda in_line=False: events.append(
        ('expect', in_line))
    target_fs = obnamlib.vfs.local.LocalFS('/') if reopened else \
        NotReopened('/')
    rep = Collect()
    r = obnamlib.engine.restorer.Restorer(
        repo, gen, target_fs, os.fsencode(tmp / 'target'), reporter=rep)
    r.restore()
    assert rep.errors == []
    assert events[0] == ('expect',
                         reopened and len(os.sched_getaffinity(0)) >= 2)
    assert any(kind == 'read' for kind, _ in events[1:])


# --- placement of the restored directories ----------------------------------

def top_directory_flag(path):
    """Whether FS_TOPDIR_FL is set on path (lsattr's T), or None where the
    filesystem has no such flag."""
    was = obnamlib.vfs.local._switch_top_directory_flag(path, False)
    if was:
        obnamlib.vfs.local._switch_top_directory_flag(path, True)
    return was


class SpreadRecorder(obnamlib.vfs.local.LocalFS):
    """LocalFS noting the placement hints and what was made meanwhile."""

    def __init__(self, root):
        super().__init__(root)
        self.hints = []

    def spread_directories_below(self, path, on):
        self.hints.append((path, on, top_directory_flag(path)))
        return super().spread_directories_below(path, on)


@pytest.mark.parametrize('set_before', [False, True])
def test_directories_are_spread_while_restoring_and_flag_left_as_found(
        world, set_before):
    tmp, live = world
    (live / 'd').mkdir()
    write(live / 'd' / 'f', b'x')
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))
    target = tmp / 'target'
    target.mkdir()
    if top_directory_flag(str(target)) is None:
        pytest.skip('no top directory flag on this filesystem')
    obnamlib.vfs.local._switch_top_directory_flag(str(target), set_before)
    fs = SpreadRecorder('/')
    rep = Collect()
    obnamlib.engine.restorer.Restorer(
        repo, gen, fs, os.fsencode(str(target)), reporter=rep).restore()
    assert rep.errors == []
    assert (target / str(live).lstrip('/') / 'd' / 'f').read_bytes() == b'x'
    dest = os.fsencode(str(target))
    assert fs.hints == [(dest, True, set_before)] + (
        [] if set_before else [(dest, False, True)])
    assert top_directory_flag(str(target)) is set_before


def test_a_target_without_the_hint_restores_the_same(world):
    tmp, live = world
    make_funny_farm(live)
    repo = rh.new_repository(tmp / 'repo')
    gen = rh.store_tree(repo, str(live))

    class NoHint(obnamlib.vfs.local.LocalFS):
        def spread_directories_below(self, path, on):
            return None
    rep = Collect()
    obnamlib.engine.restorer.Restorer(
        repo, gen, NoHint('/'), os.fsencode(str(tmp / 'target')),
        reporter=rep).restore()
    assert facts(tmp / 'target' / str(live).lstrip('/')) == facts(live)
