"""`obnam mount` as people run it: a real FUSE mount of a real backup."""

import errno
import os
import shutil
import stat
import subprocess
import sys

import pytest

from obnamlib import errors
from obnamlib.cli.plugins import fuse_plugin
from tests import paths

OBNAM = paths.OBNAM
CLIENT = 'mountclient'
CHUNK = 4096
FUSERMOUNT = shutil.which('fusermount3') or shutil.which('fusermount')


def fuse_missing():
    """Why a real mount cannot be tried here, or None."""
    if not os.path.exists('/dev/fuse'):
        return '/dev/fuse does not exist'
    if not os.access('/dev/fuse', os.R_OK | os.W_OK):
        return '/dev/fuse is not readable and writable by this user'
    if not FUSERMOUNT:
        return 'neither fusermount3 nor fusermount is installed'
    try:
        fuse_plugin.load_binding()
    except errors.ObnamError as e:
        return str(e)
    return None


needs_fuse = pytest.mark.skipif(fuse_missing() is not None,
                                reason=str(fuse_missing()))


def obnam_argv(base, *args):
    return [sys.executable, OBNAM, '--no-default-configs', '--quiet',
            '--client-name', CLIENT, '--repository', str(base / 'repo'),
            '--log', str(base / 'obnam.log'), '--log-level=debug'] + \
        [str(a) for a in args]


def obnam(base, *args):
    return subprocess.run(obnam_argv(base, *args), capture_output=True,
                          text=True)


def backup(base, live):
    result = obnam(base, 'backup', '--chunk-size=%d' % CHUNK, live)
    assert result.returncode == 0, result.stderr


def genids(base):
    result = obnam(base, 'genids')
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def make_live_tree(live):
    (live / 'dir' / 'sub').mkdir(parents=True)
    (live / 'dir' / 'file').write_bytes(b'hello, world\n')
    (live / 'big').write_bytes(os.urandom(3 * CHUNK + 1001))
    (live / 'empty').write_bytes(b'')
    os.symlink('dir/file', live / 'link')
    os.symlink('/nonexistent/target', live / 'dangling')
    os.mkfifo(live / 'fifo')
    os.setxattr(live / 'dir' / 'file', b'user.note', b'a note')
    os.utime(live / 'dir' / 'file', ns=(1, 1400000000987654321))
    os.utime(live / 'dir' / 'sub', ns=(0, -100 * 10 ** 9))


def wait_for_mount(mnt, proc=None):
    """Poll until mnt is a mount point (bounded); fail if the server died."""
    for _ in range(400):
        if os.path.ismount(mnt):
            return
        if proc is not None:
            try:
                proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail('mount exited %s: %s' % (proc.returncode,
                                                proc.stderr.read()))
    pytest.fail('%s did not become a mount point' % mnt)


def unmount(mnt, proc=None):
    if os.path.ismount(mnt):
        subprocess.run([FUSERMOUNT, '-u', str(mnt)], check=True)
    if proc is not None:
        proc.wait(timeout=60)


def assert_same_tree(live, mounted):
    """Every object under live matches its mounted copy; how many."""
    paths = [str(live)]
    for dirpath, dirnames, filenames in os.walk(live):
        paths += [os.path.join(dirpath, n) for n in dirnames + filenames]
    for path in paths:
        assert_same_object(path,
                           os.path.join(mounted, os.path.relpath(path, live)))
    return len(paths)


def assert_same_object(path, copy):
    """Byte for byte, and in metadata (times to the nanosecond, negative
    ones as 0)."""
    st, mst = os.lstat(path), os.lstat(copy)
    assert mst.st_mode == st.st_mode, path
    assert (mst.st_uid, mst.st_gid) == (st.st_uid, st.st_gid), path
    assert mst.st_mtime_ns == max(st.st_mtime_ns, 0), path
    if not stat.S_ISDIR(st.st_mode):
        assert mst.st_size == st.st_size, path
        assert mst.st_nlink == st.st_nlink, path
    if stat.S_ISREG(st.st_mode):
        with open(path, 'rb') as a, open(copy, 'rb') as b:
            assert a.read() == b.read(), path
    elif stat.S_ISLNK(st.st_mode):
        assert os.readlink(copy) == os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        assert sorted(os.listdir(copy)) == sorted(os.listdir(path))
    if not stat.S_ISLNK(st.st_mode) and not stat.S_ISFIFO(st.st_mode):
        names = sorted(os.listxattr(path))
        assert sorted(os.listxattr(copy)) == names, path
        for name in names:
            assert os.getxattr(copy, name) == os.getxattr(path, name)


@pytest.fixture
def mounted(tmp_path):
    """A foreground mount of one backup: (base, live, mnt, proc)."""
    live = tmp_path / 'live'
    make_live_tree(live)
    backup(tmp_path, live)
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    proc = subprocess.Popen(
        obnam_argv(tmp_path, 'mount', '--fuse-opt=-f', '--to', mnt),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_mount(mnt, proc)
        yield tmp_path, live, mnt, proc
    finally:
        unmount(mnt, proc)


@needs_fuse
def test_mount_shows_the_backup_exactly(mounted):
    base, live, mnt, proc = mounted
    [gen] = genids(base)
    assert sorted(os.listdir(mnt)) == sorted(['.pid', gen, 'latest'])
    assert os.readlink(mnt / 'latest') == gen
    inside = str(mnt / gen) + str(live)
    assert assert_same_tree(live, inside) == 9
    with open(os.path.join(inside, 'big'), 'rb') as f:
        f.seek(CHUNK - 3)
        data = f.read(CHUNK + 6)
    assert data == (live / 'big').read_bytes()[CHUNK - 3:2 * CHUNK + 3]
    assert os.stat(mnt / 'latest').st_ino == os.stat(mnt / gen).st_ino
    assert os.statvfs(mnt).f_blocks > 0


@needs_fuse
def test_pid_file_names_the_server_and_refreshes_generations(mounted):
    base, live, mnt, proc = mounted
    [first] = genids(base)
    (live / 'dir' / 'file').write_bytes(b'changed\n')
    backup(base, live)
    second = genids(base)[-1]
    assert sorted(os.listdir(mnt)) == sorted(['.pid', first, 'latest'])
    with open(mnt / '.pid') as f:
        assert f.read() == '%d\n' % proc.pid
    assert sorted(os.listdir(mnt)) == sorted(['.pid', first, second,
                                              'latest'])
    assert os.readlink(mnt / 'latest') == second
    inside = str(live).lstrip('/')
    assert (mnt / second / inside / 'dir' / 'file').read_bytes() == \
        b'changed\n'
    assert (mnt / first / inside / 'dir' / 'file').read_bytes() == \
        b'hello, world\n'


@needs_fuse
def test_every_write_fails_with_erofs(mounted):
    base, live, mnt, proc = mounted
    inside = mnt / 'latest' / str(live).lstrip('/')
    attempts = [
        lambda: open(inside / 'dir' / 'file', 'ab'),
        lambda: open(inside / 'new', 'wb'),
        lambda: os.mkdir(inside / 'newdir'),
        lambda: os.mkdir(mnt / 'newgen'),
        lambda: os.unlink(inside / 'dir' / 'file'),
        lambda: os.rmdir(inside / 'dir' / 'sub'),
        lambda: os.rename(inside / 'big', inside / 'big2'),
        lambda: os.symlink('x', inside / 'newlink'),
        lambda: os.link(inside / 'big', inside / 'hard'),
        lambda: os.chmod(inside / 'big', 0o600),
        lambda: os.utime(inside / 'big', (1, 1)),
        lambda: os.truncate(inside / 'big', 0),
        lambda: os.setxattr(inside / 'big', b'user.x', b'y'),
        lambda: os.removexattr(inside / 'dir' / 'file', b'user.note'),
        lambda: os.unlink(mnt / '.pid'),
    ]
    for attempt in attempts:
        with pytest.raises(OSError) as e:
            attempt()
        assert e.value.errno == errno.EROFS
    assert (inside / 'dir' / 'file').read_bytes() == b'hello, world\n'


@needs_fuse
def test_mount_without_foreground_runs_in_background(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'f').write_bytes(b'background\n')
    backup(tmp_path, live)
    mnt = tmp_path / 'mnt'
    mnt.mkdir()
    try:
        result = obnam(tmp_path, 'mount', '--to', mnt)
        assert (result.returncode, result.stderr) == (0, '')
        assert os.path.ismount(mnt)
        pid = int((mnt / '.pid').read_text())
        os.kill(pid, 0)          # the server is alive and is not obnam's run
        assert (mnt / 'latest' / str(live / 'f').lstrip('/')).read_bytes() \
            == b'background\n'
    finally:
        unmount(mnt)


@needs_fuse
def test_a_missing_mount_point_is_an_error(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    backup(tmp_path, live)
    result = obnam(tmp_path, 'mount', '--to', tmp_path / 'nowhere')
    assert result.returncode == 1
    assert result.stderr == ('ERROR: R6A2EFX: The mount command wants an '
                             'existing directory set with --to\n')


def test_missing_binding_names_the_debian_package(monkeypatch):
    monkeypatch.setitem(sys.modules, 'pyfuse3', None)
    with pytest.raises(fuse_plugin.FuseModuleNotFoundError) as e:
        fuse_plugin.load_binding()
    assert str(e.value) == ('RABC26X: Failed to load module "pyfuse3", '
                            'try installing python3-pyfuse3')


def test_fuse_options():
    parse = fuse_plugin.parse_fuse_options
    base = {'ro', 'fsname=obnam', 'subtype=obnam'}
    assert parse([]) == (base, False, False)
    assert parse(['-f']) == (base, True, False)
    assert parse(['-o allow_other,noatime', '-f']) == \
        (base | {'allow_other', 'noatime'}, True, False)
    assert parse(['-oallow_root', 'rw']) == (base | {'allow_root'},
                                             False, False)
    assert parse(['-d']) == (base, True, True)


@needs_fuse
def test_sigterm_unmounts_and_exits_cleanly(mounted):
    base, live, mnt, proc = mounted
    proc.terminate()
    assert proc.wait(timeout=60) == 0
    assert not os.path.ismount(mnt)
