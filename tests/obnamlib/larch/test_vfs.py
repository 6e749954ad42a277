import os

import pytest

from obnamlib import larch


@pytest.fixture(params=['local', 'memory'])
def fs(request, tmp_path):
    if request.param == 'local':
        return larch.LocalFS(str(tmp_path))
    return larch.MemoryFS()


def test_write_creates_parents_and_reads_back(fs):
    fs.write_file('a/b/c', b'data')
    assert fs.read_file('a/b/c') == b'data'
    assert fs.isdir('a/b')
    assert fs.exists('a/b/c')
    assert not fs.isdir('a/b/c')


def test_write_replaces(fs):
    fs.write_file('x', b'one')
    fs.write_file('x', b'two')
    assert fs.read_file('x') == b'two'


def test_missing_file_raises_file_not_found(fs):
    with pytest.raises(FileNotFoundError):
        fs.read_file('nope')
    with pytest.raises(FileNotFoundError):
        fs.remove('nope')
    with pytest.raises(FileNotFoundError):
        fs.listdir('nodir')
    assert not fs.exists('nope')


def test_listdir_names_files_and_dirs(fs):
    fs.write_file('d/f1', b'')
    fs.write_file('d/sub/f2', b'')
    assert sorted(fs.listdir('d')) == ['f1', 'sub']


def test_makedirs_is_idempotent_and_rmdir_removes_empty(fs):
    fs.makedirs('p/q')
    fs.makedirs('p/q')
    assert fs.listdir('p/q') == []
    fs.rmdir('p/q')
    assert not fs.exists('p/q')


def test_rmdir_refuses_non_empty(fs):
    fs.write_file('p/f', b'')
    with pytest.raises(OSError):
        fs.rmdir('p')


def test_rename_replaces_target(fs):
    fs.write_file('a', b'A')
    fs.write_file('b', b'B')
    fs.rename('a', 'b')
    assert fs.read_file('b') == b'A'
    assert not fs.exists('a')


def test_paths_with_dot_prefix_are_the_same(fs):
    fs.write_file('./dir/f', b'1')
    assert fs.read_file('dir/f') == b'1'


def test_local_write_is_atomic_leaves_no_temp_files(tmp_path):
    fs = larch.LocalFS(str(tmp_path))
    for i in range(5):
        fs.write_file('d/f', b'%d' % i)
    assert os.listdir(str(tmp_path / 'd')) == ['f']


def test_local_write_failure_leaves_old_content(tmp_path):
    fs = larch.LocalFS(str(tmp_path))
    fs.write_file('f', b'old')

    class Boom:
        def __len__(self):
            return 3

        def __buffer__(self, flags):
            raise RuntimeError('boom')
    with pytest.raises(Exception):
        fs.write_file('f', Boom())
    assert fs.read_file('f') == b'old'
    assert os.listdir(str(tmp_path)) == ['f']
