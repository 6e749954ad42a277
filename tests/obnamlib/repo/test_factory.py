"""Opening and creating repositories: format detection and its errors."""

import os

import pytest

from obnamlib import errors
from obnamlib.repo import factory as repo_factory


def test_missing_repository_names_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(errors.ObnamSystemError) as e:
        repo_factory.open_repository(url='nope')
    assert e.value.code == 'RD5FA4X'
    assert str(e.value) == ('RD5FA4X: System error: %s/nope: 2: '
                            'No such file or directory' % tmp_path)


def test_create_makes_one_directory_and_format(tmp_path):
    url = str(tmp_path / 'repo')
    repo = repo_factory.open_repository(url=url, create=True)
    assert repo.format_name == '6'
    assert os.listdir(url) == ['metadata']
    with open(os.path.join(url, 'metadata', 'format'), 'rb') as f:
        assert f.read() == b'6\n'


def test_create_needs_existing_parent(tmp_path):
    url = str(tmp_path / 'a' / 'repo')
    with pytest.raises(errors.ObnamSystemError) as e:
        repo_factory.open_repository(url=url, create=True)
    assert str(e.value) == ('RD5FA4X: System error: %s: 2: '
                            'No such file or directory' % url)
    assert not os.path.exists(tmp_path / 'a')


def test_directory_without_format_is_not_a_repository(tmp_path):
    with pytest.raises(errors.NotARepository) as e:
        repo_factory.open_repository(url=str(tmp_path))
    assert str(e.value) == ('RA920EX: %s does not seem to be an Obnam '
                            'repository' % tmp_path)
    assert os.listdir(tmp_path) == []


def test_unknown_format(tmp_path):
    (tmp_path / 'metadata').mkdir()
    (tmp_path / 'metadata' / 'format').write_bytes(b'green-albatross-20160813\n')
    with pytest.raises(errors.UnknownRepositoryFormat) as e:
        repo_factory.open_repository(url=str(tmp_path))
    assert str(e.value) == ('RF4EFDX: Unknown format green-albatross-20160813 '
                            'at %s' % tmp_path)


def test_format_marker_first_line_only(tmp_path):
    (tmp_path / 'metadata').mkdir()
    (tmp_path / 'metadata' / 'format').write_bytes(b'6\nanything\n')
    repo = repo_factory.open_repository(url=str(tmp_path))
    assert repo.get_client_names() == []


def test_existing_repository_opens_without_create(tmp_path):
    url = str(tmp_path / 'repo')
    repo = repo_factory.open_repository(url=url, create=True)
    repo.lock_client_list()
    repo.add_client('x')
    repo.commit_client_list()
    again = repo_factory.open_repository(url=url)
    assert again.get_client_names() == ['x']


def test_read_only_use_writes_nothing(tmp_path):
    url = str(tmp_path / 'repo')
    repo = repo_factory.open_repository(url=url, create=True)
    repo.lock_client_list()
    repo.add_client('x')
    repo.commit_client_list()
    before = _snapshot(url)
    reader = repo_factory.open_repository(url=url)
    assert reader.get_client_names() == ['x']
    assert reader.get_generation_ids('x') == []
    assert reader.find_chunk_ids_by_content(b'x') == []
    assert _snapshot(url) == before


def test_missing_repository_setting():
    with pytest.raises(errors.RepositorySettingMissingError):
        repo_factory.open_repository(settings={})


def test_settings_mapping_is_used(tmp_path):
    url = str(tmp_path / 'repo')
    repo = repo_factory.open_repository(
        settings={'repository': url, 'node-size': 2048, 'lock-timeout': 0},
        create=True)
    assert repo.node_size == 2048
    assert repo.locks.timeout == 0


def _snapshot(root):
    result = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            with open(p, 'rb') as f:
                result[p] = f.read()
        for name in dirnames:
            result[os.path.join(dirpath, name)] = None
    return result


# --- creating only where nothing is -----------------------------------------

def tree_state(root):
    """Every name below root with its type, bytes and mtime: a refused
    create must leave the directory exactly as it was."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            data = None
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, 'rb') as f:
                    data = f.read()
            state[os.path.relpath(path, root)] = (st.st_mode, st.st_mtime_ns,
                                                  data)
    return state, os.stat(root).st_mtime_ns


@pytest.mark.timeout(30)
@pytest.mark.parametrize('names', [['passwd'], ['.hidden'], ['lost+found/'],
                                   ['metadata/'], ['lock']])
def test_create_refuses_a_non_empty_directory(tmp_path, names):
    url = str(tmp_path / 'etc')
    os.mkdir(url)
    for name in names:
        if name.endswith('/'):
            os.mkdir(os.path.join(url, name))
        else:
            with open(os.path.join(url, name), 'wb') as f:
                f.write(b'root:x:0:0\n')
    before = tree_state(url)
    with pytest.raises(repo_factory.RefusingNonEmptyDirectory) as e:
        repo_factory.open_repository(url=url, create=True)
    assert str(e.value) == (
        'RE7199X: %s is not an Obnam repository and not empty: refusing to '
        'create a repository in it; give a new or empty directory' % url)
    assert tree_state(url) == before


@pytest.mark.timeout(30)
def test_create_in_an_empty_directory_says_it_created(tmp_path):
    url = str(tmp_path / 'empty')
    os.mkdir(url)
    repo = repo_factory.open_repository(url=url, create=True)
    assert repo.created is True
    assert os.listdir(url) == ['metadata']
    repo.close()
    again = repo_factory.open_repository(url=url, create=True)
    assert again.created is False
    again.close()


@pytest.mark.timeout(30)
def test_new_directory_is_created(tmp_path):
    repo = repo_factory.open_repository(url=str(tmp_path / 'new'),
                                        create=True)
    assert repo.created is True
    repo.close()


@pytest.mark.timeout(30)
def test_non_empty_directory_without_create_is_still_not_a_repository(
        tmp_path):
    (tmp_path / 'file').write_bytes(b'x')
    with pytest.raises(errors.NotARepository):
        repo_factory.open_repository(url=str(tmp_path))


def test_refusal_code_is_new_and_pinned():
    from tests.legacy_codes import legacy_code
    assert repo_factory.RefusingNonEmptyDirectory.code == legacy_code(
        'RefusingNonEmptyDirectory', 'obnamlib.repo_factory')


class FirstBackupAlongside:
    """A raw VFS where another first backup creates the repository just
    after we found no format marker, before we list the directory."""

    def __init__(self, url):
        from obnamlib.vfs.local import LocalFS
        self.base = LocalFS(url)
        self.url = url
        self.raced = False

    def listdir(self, path):
        if not self.raced:
            self.raced = True
            other = repo_factory.open_repository(url=self.url, create=True)
            other.lock_client_list()
            other.add_client('other')
            other.commit_client_list()
            other.close()
        return self.base.listdir(path)

    def __getattr__(self, name):
        return getattr(self.base, name)


@pytest.mark.timeout(30)
def test_two_first_backups_into_one_empty_directory_both_open_it(tmp_path):
    url = str(tmp_path / 'empty')
    os.mkdir(url)
    vfs = FirstBackupAlongside(url)
    repo = repo_factory.open_repository(url=url, vfs=vfs, create=True)
    assert vfs.raced
    assert repo.created is False
    assert repo.get_client_names() == ['other']
    repo.close()
