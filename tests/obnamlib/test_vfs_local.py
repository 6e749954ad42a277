import os

import pytest

import obnamlib.errors
import obnamlib.vfs
import obnamlib.vfs_local
from tests.obnamlib.vfs_conformance import VfsConformance


class TestLocalFSConformance(VfsConformance):

    def make_vfs(self, root):
        return obnamlib.vfs_local.LocalFS(root)


def test_open_vfs_plain_path_is_local(tmp_path):
    vfs = obnamlib.vfs.open_vfs(str(tmp_path))
    assert isinstance(vfs, obnamlib.vfs_local.LocalFS)
    assert vfs.root == str(tmp_path)


def test_open_vfs_relative_path_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    vfs = obnamlib.vfs.open_vfs('repo')
    assert vfs.root == os.path.join(str(tmp_path), 'repo')


@pytest.mark.parametrize('url', ['file:///tmp/x', 'ssh://host/x', 'foo:bar/x'])
def test_open_vfs_unknown_scheme(url):
    with pytest.raises(obnamlib.errors.UnknownVFSError) as info:
        obnamlib.vfs.open_vfs(url)
    assert str(info.value) == 'R826A1X: Unknown VFS type: %s' % url


def test_root_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / 'file'
    path.write_bytes(b'')
    with pytest.raises(obnamlib.errors.RootIsNotADirectory) as info:
        obnamlib.vfs_local.LocalFS(str(path))
    assert info.value.code == 'RA4F35X'


def test_lock_without_hardlinks_falls_back_to_exclusive_create(tmp_path, monkeypatch):
    vfs = obnamlib.vfs_local.LocalFS(str(tmp_path))

    def no_link(*args, **kwargs):
        raise PermissionError(1, 'Operation not permitted')
    monkeypatch.setattr(os, 'link', no_link)
    vfs.lock('lock')
    with pytest.raises(obnamlib.errors.LockFail):
        vfs.lock('lock')
    assert os.listdir(str(tmp_path)) == ['lock']
