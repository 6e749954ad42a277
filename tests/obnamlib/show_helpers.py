"""Build small real format-6 repositories through the Repository API, for
the show, diff and forget tests (no backup engine needed)."""

import hashlib
import stat

import pytest

from obnamlib.repo import factory as repo_factory
from obnamlib.repo import interface as ri
from obnamlib.repo.metadata import Metadata

CLIENT = 'havelock'


def reg(content=b'', mode=0o644, mtime=1445969005, **more):
    fields = dict(st_mode=stat.S_IFREG | mode, st_mtime_sec=mtime,
                  st_mtime_nsec=0, st_nlink=1, st_size=len(content),
                  st_uid=1000, st_gid=1000, username=b'liw',
                  groupname=b'liw', md5=hashlib.md5(content).digest())
    fields.update(more)
    return Metadata(**fields), content


def dir_(mode=0o755, mtime=1445969005, **more):
    fields = dict(st_mode=stat.S_IFDIR | mode, st_mtime_sec=mtime,
                  st_mtime_nsec=0, st_nlink=2, st_size=4096, st_uid=0,
                  st_gid=0, username=b'root', groupname=b'root')
    fields.update(more)
    return Metadata(**fields), None


def link(target, mtime=1445969005):
    return Metadata(st_mode=stat.S_IFLNK | 0o777, st_mtime_sec=mtime,
                    st_mtime_nsec=0, st_nlink=1, st_size=len(target),
                    st_uid=1000, st_gid=1000, username=b'liw',
                    groupname=b'liw', target=target), None


def special(kind, mode=0o644):
    return Metadata(st_mode=kind | mode, st_mtime_sec=0, st_mtime_nsec=0,
                    st_nlink=1, st_size=0, st_uid=0, st_gid=0,
                    username=b'root', groupname=b'root'), None


def open_repo(path, create=False):
    return repo_factory.open_repository(url=str(path), create=create,
                                        lock_timeout=0)


@pytest.fixture
def repo(tmp_path):
    """A new repository in tmp_path/repo, closed afterwards (a test module
    uses it by importing it)."""
    r = open_repo(tmp_path / 'repo', create=True)
    yield r
    r.close()


def add_generation(repo, files, started, ended=None, client=CLIENT,
                   checkpoint=False, file_count=None, total_data=None):
    """Commit a generation holding exactly `files` ({path: (md, content)};
    content bytes becomes one chunk per file, stored and indexed)."""
    if client not in repo.get_client_names():
        repo.lock_client_list()
        repo.add_client(client)
        repo.commit_client_list()
    repo.lock_client(client)
    gen = repo.create_generation(client, now=started)
    if repo.file_exists(gen, b'/'):
        for name in repo.get_file_children(gen, b'/'):
            repo.remove_file(gen, b'/' + name)
    repo.lock_chunk_indexes()
    for path, (md, content) in sorted(files.items()):
        repo.set_metadata(gen, path, md)
        if content:
            found = repo.find_chunk_ids_by_content(content)
            chunk_id = found[0] if found else repo.put_chunk_content(content)
            repo.put_chunk_into_indexes(chunk_id, content, client)
            repo.set_file_chunk_ids(gen, path, [chunk_id])
    if checkpoint:
        repo.set_generation_key(gen, ri.GEN_IS_CHECKPOINT, 1)
    if file_count is not None:
        repo.set_generation_key(gen, ri.GEN_FILE_COUNT, file_count)
    if total_data is not None:
        repo.set_generation_key(gen, ri.GEN_TOTAL_DATA, total_data)
    repo.commit_client(client, now=ended if ended is not None else started + 5)
    repo.commit_chunk_indexes()
    return gen


def tree(extra=None):
    """A little tree with parents of a root, like a real backup, plus
    extra {bytes path: (md, content)}."""
    files = {
        b'/': dir_(),
        b'/home': dir_(),
        b'/home/liw': dir_(st_uid=1000, username=b'liw', groupname=b'liw'),
        b'/home/liw/foo': reg(b'hello\n'),
    }
    files.update(extra or {})
    return files
