"""Conformance tests every VirtualFileSystem must pass.

Subclass `VfsConformance` in a `Test*` class and define
`make_vfs(self, root)` returning a VFS whose root is the local directory
`root` (str, absolute); an SFTP implementation serves that same directory
through a local sshd, so live-data paths (bytes, absolute) are the same.
`supports_hardlinks` may be set False by implementations that cannot link.
"""

import errno
import os
import stat

import pytest

import obnamlib.errors


class VfsConformance:

    supports_hardlinks = True

    def make_vfs(self, root):
        raise NotImplementedError

    @pytest.fixture(autouse=True)
    def _vfs(self, tmp_path):
        self.root = str(tmp_path / 'root')
        os.mkdir(self.root)
        self.vfs = self.make_vfs(self.root)
        yield
        self.vfs.close()

    def live(self, *names):
        return os.fsencode(os.path.join(self.root, *names))

    # --- StorageFS ----------------------------------------------------------

    def test_write_then_read_file(self):
        self.vfs.write_file('a/b/c', b'hello')
        assert self.vfs.read_file('a/b/c') == b'hello'
        with open(os.path.join(self.root, 'a/b/c'), 'rb') as f:
            assert f.read() == b'hello'

    def test_write_file_replaces(self):
        self.vfs.write_file('f', b'one')
        self.vfs.write_file('f', b'two')
        assert self.vfs.read_file('f') == b'two'
        assert self.vfs.listdir('') == ['f']

    def test_repository_modes(self):
        self.vfs.write_file('d/e/f', b'x')
        self.vfs.makedirs('g/h')
        assert stat.S_IMODE(os.stat(os.path.join(self.root, 'd/e/f')).st_mode) == 0o600
        for d in ('d', 'd/e', 'g', 'g/h'):
            mode = os.stat(os.path.join(self.root, d)).st_mode
            assert stat.S_IMODE(mode) == 0o700, d

    def test_read_missing_file_raises_file_not_found(self):
        with pytest.raises(FileNotFoundError):
            self.vfs.read_file('nope')

    def test_listdir_missing_raises_file_not_found(self):
        with pytest.raises(FileNotFoundError):
            self.vfs.listdir('nope')

    def test_remove_missing_raises_file_not_found(self):
        with pytest.raises(FileNotFoundError):
            self.vfs.remove('nope')

    def test_exists_isdir_listdir(self):
        self.vfs.write_file('dir/file', b'')
        assert self.vfs.exists('dir') and self.vfs.isdir('dir')
        assert self.vfs.exists('dir/file') and not self.vfs.isdir('dir/file')
        assert not self.vfs.exists('other')
        assert self.vfs.listdir('dir') == ['file']
        assert self.vfs.listdir('') == ['dir']

    def test_file_sizes(self):
        self.vfs.write_file('a/one', b'1')
        self.vfs.write_file('a/three', b'333')
        self.vfs.makedirs('a/sub')
        self.vfs.write_file('b/empty', b'')
        sizes = self.vfs.file_sizes(['a', 'nope', 'b'])
        assert sizes[0] == {'one': 1, 'three': 3}
        assert isinstance(sizes[1], FileNotFoundError)
        assert sizes[2] == {'empty': 0}

    def test_makedirs_is_idempotent(self):
        self.vfs.makedirs('x/y')
        self.vfs.makedirs('x/y')
        assert self.vfs.isdir('x/y')

    def test_remove_and_rmdir(self):
        self.vfs.write_file('d/f', b'1')
        self.vfs.remove('d/f')
        self.vfs.rmdir('d')
        assert not self.vfs.exists('d')

    def test_rename_replaces(self):
        self.vfs.write_file('a', b'A')
        self.vfs.write_file('b', b'B')
        self.vfs.rename('a', 'b')
        assert self.vfs.read_file('b') == b'A'
        assert not self.vfs.exists('a')

    def test_counters(self):
        self.vfs.write_file('f', b'12345')
        self.vfs.read_file('f')
        assert self.vfs.bytes_written >= 5
        assert self.vfs.bytes_read >= 5

    def test_lock_and_unlock(self):
        self.vfs.lock('c/lock')
        assert self.vfs.exists('c/lock')
        assert self.vfs.read_file('c/lock') == b''
        with pytest.raises(obnamlib.errors.LockFail) as info:
            self.vfs.lock('c/lock')
        assert info.value.code == 'R681AEX'
        self.vfs.unlock('c/lock')
        assert not self.vfs.exists('c/lock')
        self.vfs.lock('c/lock', b'content')
        assert self.vfs.read_file('c/lock') == b'content'
        assert self.vfs.listdir('c') == ['lock']

    # --- live data ----------------------------------------------------------

    def test_open_write_then_read(self):
        f = self.vfs.open_write(self.live('f'))
        f.write(b'abc')
        f.close()
        f = self.vfs.open_read(self.live('f'))
        assert f.read(10) == b'abc'
        assert f.read(10) == b''
        f.close()

    def test_sparse_write(self):
        f = self.vfs.open_write(self.live('sparse'))
        f.write(b'a')
        f.seek(10 * 1024 * 1024)
        f.write(b'b')
        f.truncate(20 * 1024 * 1024)
        f.close()
        st = os.stat(self.live('sparse'))
        assert st.st_size == 20 * 1024 * 1024
        assert st.st_blocks * 512 < 1024 * 1024
        with open(self.live('sparse'), 'rb') as g:
            data = g.read()
        assert data[0:1] == b'a' and data[10 * 1024 * 1024:][:1] == b'b'
        assert data.count(0) == len(data) - 2

    def test_lstat_and_scandir(self):
        os.mkdir(self.live('d'))
        with open(self.live('d', 'file'), 'wb') as f:
            f.write(b'12345')
        os.symlink('file', self.live('d', 'link'))
        st = self.vfs.lstat(self.live('d', 'link'))
        assert stat.S_ISLNK(st.st_mode)
        pairs = self.vfs.scandir(self.live('d'))
        assert [name for name, _ in pairs] == [b'file', b'link']
        assert pairs[0][1].st_size == 5
        assert stat.S_ISLNK(pairs[1][1].st_mode)
        assert self.vfs.readlink(self.live('d', 'link')) == b'file'

    def test_lstat_missing_is_system_error(self):
        path = self.live('missing')
        with pytest.raises(obnamlib.errors.ObnamSystemError) as info:
            self.vfs.lstat(path)
        assert info.value.code == 'RD5FA4X'
        assert info.value.errno == errno.ENOENT
        assert str(info.value) == (
            'RD5FA4X: System error: %s: 2: No such file or directory'
            % os.fsdecode(path))

    def test_open_read_missing_is_io_error(self):
        with pytest.raises(obnamlib.errors.ObnamIOError) as info:
            self.vfs.open_read(self.live('missing'))
        assert info.value.code == 'RCE08AX'
        assert info.value.errno == errno.ENOENT

    def test_bytes_shared_methods(self):
        d = self.live('x')
        self.vfs.mkdir(d)
        assert self.vfs.exists(d) and self.vfs.isdir(d)
        self.vfs.makedirs(self.live('x', 'y', 'z'))
        assert self.vfs.isdir(self.live('x', 'y', 'z'))
        self.vfs.rmdir(self.live('x', 'y', 'z'))
        with open(self.live('x', 'f'), 'wb'):
            pass
        self.vfs.remove(self.live('x', 'f'))
        assert not self.vfs.exists(self.live('x', 'f'))
        with pytest.raises(obnamlib.errors.ObnamSystemError):
            self.vfs.rmdir(self.live('x', 'nope'))

    def test_symlink_and_times(self):
        link = self.live('l')
        self.vfs.symlink(b'/nowhere', link)
        assert os.readlink(link) == b'/nowhere'
        self.vfs.lutimes(link, 1000000001, 2000000002)
        st = os.lstat(link)
        assert st.st_mtime_ns == 2000000002
        assert st.st_atime_ns == 1000000001

    def test_chmod_and_lchown(self):
        path = self.live('f')
        with open(path, 'wb'):
            pass
        self.vfs.chmod(path, 0o640)
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o640
        self.vfs.lchown(path, -1, os.getgid())
        assert os.lstat(path).st_gid == os.getgid()

    def test_hardlink(self):
        if not self.supports_hardlinks:
            pytest.skip('no hard links on this VFS')
        with open(self.live('a'), 'wb') as f:
            f.write(b'x')
        self.vfs.link(self.live('a'), self.live('b'))
        assert os.stat(self.live('a')).st_ino == os.stat(self.live('b')).st_ino

    def test_fifo_and_socket(self):
        self.vfs.mknod(self.live('fifo'), stat.S_IFIFO | 0o644)
        assert stat.S_ISFIFO(os.lstat(self.live('fifo')).st_mode)
        self.vfs.mknod(self.live('sock'), stat.S_IFSOCK | 0o644)
        assert stat.S_ISSOCK(os.lstat(self.live('sock')).st_mode)

    def test_xattrs(self):
        path = self.live('f')
        with open(path, 'wb'):
            pass
        try:
            os.setxattr(path, 'user.probe', b'1')
            os.removexattr(path, 'user.probe')
        except OSError:
            pytest.skip('no user xattrs on this filesystem')
        self.vfs.lsetxattr(path, b'user.foo', b'some value')
        assert self.vfs.llistxattr(path) == [b'user.foo']
        assert self.vfs.lgetxattr(path, b'user.foo') == b'some value'
