"""Format 6 passes the Repository conformance suite on a local directory."""

import pytest

from obnamlib.repo import factory as repo_factory
from tests.gpg_fixture import gpg_home  # noqa: F401
from tests.obnamlib.repo_interface_conformance import RepositoryConformance
from tests.obnamlib.restore_helpers import new_repository


class TestFormat6Conformance(RepositoryConformance):

    def open_repo(self, path):
        return repo_factory.open_repository(url=str(path), create=True,
                                            node_size=4096, lock_timeout=0)


def test_damaged_node_is_reported_as_corruption(tmp_path):
    import os
    import pytest
    from obnamlib import errors
    from tests.obnamlib.repo_interface_conformance import dir_md
    url = str(tmp_path / 'repo')
    repo = new_repository(url, 'c')
    repo.lock_client('c')
    gen = repo.create_generation('c')
    repo.set_metadata(gen, b'/', dir_md())
    repo.commit_client('c')
    client_dir = os.path.join(url, str(repo.get_client_id('c')))
    for dirpath, _, names in os.walk(os.path.join(client_dir, 'nodes')):
        for name in names:
            with open(os.path.join(dirpath, name), 'r+b') as f:
                f.truncate(10)
    reader = repo_factory.open_repository(url=url)
    with pytest.raises(errors.RepositoryCorrupt) as e:
        reader.get_generation_ids('c')
    assert e.value.code == errors.RepositoryCorrupt.code


def test_locking_and_committing_without_changes_writes_nothing(tmp_path):
    from tests.obnamlib.repo_interface_conformance import dir_md
    from tests.obnamlib.repo.test_factory import _snapshot
    url = str(tmp_path / 'repo')
    repo = new_repository(url, 'c')
    repo.lock_client('c')
    gen = repo.create_generation('c')
    repo.set_metadata(gen, b'/', dir_md())
    repo.lock_chunk_indexes()
    repo.put_chunk_into_indexes(repo.put_chunk_content(b'x'), b'x', 'c')
    repo.commit_client('c')
    repo.commit_chunk_indexes()
    before = _snapshot(url)
    repo.lock_everything()
    repo.commit_everything()
    repo.lock_client('c')
    repo.commit_client('c')
    assert _snapshot(url) == before



def test_backup_of_unchanged_files_reads_no_chunk_index(tmp_path, monkeypatch):
    """Locking the chunk indexes reads nothing: a backup that adds no
    chunk (nothing changed) never reads chunklist or chunksums, so an
    encrypted one never waits for those toplevels' keys.  A lookup in
    the same session still sees what is there."""
    from obnamlib.repo.storage import repo_fs
    from tests.obnamlib.repo_interface_conformance import dir_md
    url = str(tmp_path / 'repo')
    repo = new_repository(url, 'c')
    repo.lock_client('c')
    repo.lock_chunk_indexes()
    chunk = repo.put_chunk_content(b'x')
    repo.put_chunk_into_indexes(chunk, b'x', 'c')
    repo.commit_client('c')
    repo.commit_chunk_indexes()
    read = []
    real = repo_fs.RepositoryFS.read_file
    monkeypatch.setattr(repo_fs.RepositoryFS, 'read_file',
                        lambda self, path: (read.append(path),
                                            real(self, path))[1])
    repo = repo_factory.open_repository(url=url, lock_timeout=0)
    repo.lock_client('c')
    repo.lock_chunk_indexes()
    gen = repo.create_generation('c')
    repo.set_metadata(gen, b'/', dir_md())
    repo.commit_client('c')
    repo.commit_chunk_indexes()
    assert read and not [path for path in read
                         if path.startswith(('chunklist/', 'chunksums/'))]
    repo.lock_chunk_indexes()
    assert repo.find_chunk_ids_by_content(b'x') == [chunk]
    assert [path for path in read if path.startswith('chunksums/')]
    repo.unlock_chunk_indexes()

class TestEncryptedFormat6Conformance(RepositoryConformance):
    """The same behaviour with compression and encryption underneath."""

    @pytest.fixture(autouse=True)
    def _keys(self, gpg_home):
        self.gpg_home = gpg_home

    def open_repo(self, path):
        return repo_factory.open_repository(
            url=str(path), create=True, node_size=4096, lock_timeout=0,
            compress_with='deflate', encrypt_with=self.gpg_home.keys['Alice'],
            gnupghome=self.gpg_home.path)


def test_forget_copes_with_chunk_missing_from_chunklist(tmp_path):
    """Obnam 1.x dropped chunklist entries of chunks other clients still
    used (format-6.md §7.4): the checksum then comes from the content."""
    from obnamlib.repo.fmt_6 import keys
    from tests.obnamlib.repo_interface_conformance import file_md
    url = str(tmp_path / 'repo')
    repo = repo_factory.open_repository(url=url, create=True, lock_timeout=0)
    repo.lock_client_list()
    repo.add_client('a')
    repo.commit_client_list()
    chunk = repo.put_chunk_content(b'data')
    repo.lock_client('a')
    gen = repo.create_generation('a')
    repo.set_metadata(gen, b'/f', file_md())
    repo.set_file_chunk_ids(gen, b'/f', [chunk])
    repo.lock_chunk_indexes()
    repo.put_chunk_into_indexes(chunk, b'data', 'a')
    repo.commit_client('a')
    repo.commit_chunk_indexes()
    repo.lock_chunk_indexes()
    repo.indexes.list_tree.remove(keys.chunklist_key(chunk))
    repo.indexes.changed = True
    repo.commit_chunk_indexes()
    reader = repo_factory.open_repository(url=url)
    assert reader.get_chunk_index_entries()[0] == []
    assert reader.find_chunk_ids_by_content(b'data') == [chunk]
    repo.lock_everything()
    repo.remove_generation(gen)
    assert repo.remove_unused_chunks('a', [chunk]) == [chunk]
    repo.commit_everything()
    assert not repo.has_chunk(chunk)
    assert repo.get_chunk_index_entries() == ([], [])


def _colliding_basenames():
    """Two names whose MD5s share the first 4 bytes: same default file id
    in one directory (a birthday search, ~2**16 hashes)."""
    import hashlib
    seen = {}
    i = 0
    while True:
        name = b'n%d' % i
        prefix = hashlib.md5(name).digest()[:4]
        if prefix in seen:
            return seen[prefix], name
        seen[prefix] = name
        i += 1


def test_paths_sharing_a_default_file_id(tmp_path):
    from obnamlib.repo.fmt_6 import keys
    from tests.obnamlib.repo_interface_conformance import dir_md, file_md
    one, two = _colliding_basenames()
    a, b = b'/d/' + one, b'/d/' + two
    assert keys.default_file_id(a) == keys.default_file_id(b)
    url = str(tmp_path / 'repo')
    repo = new_repository(url, 'c')
    repo.lock_client('c')
    gen = repo.create_generation('c')
    repo.set_metadata(gen, b'/d', dir_md())
    repo.set_metadata(gen, a, file_md(size=1))
    repo.set_metadata(gen, b, file_md(size=2))
    repo.set_file_chunk_ids(gen, a, [1])
    repo.set_file_chunk_ids(gen, b, [2])
    repo.commit_client('c')
    reader = repo_factory.open_repository(url=url)
    gen = reader.get_generation_ids('c')[0]
    assert reader.get_metadata(gen, a).st_size == 1
    assert reader.get_metadata(gen, b).st_size == 2
    assert reader.get_file_chunk_ids(gen, b) == [2]
    assert reader.get_file_children(gen, b'/d') == sorted([one, two])
    repo.lock_client('c')
    gen2 = repo.create_generation('c')
    repo.remove_file(gen2, a)
    assert not repo.file_exists(gen2, a)
    assert repo.get_metadata(gen2, b).st_size == 2
    assert repo.get_generation_chunk_ids(gen2) == {2}
    repo.commit_client('c')


def _repository_of_generations(url, count):
    from tests.obnamlib.repo_interface_conformance import dir_md
    repo = new_repository(url, 'c')
    for _ in range(count):
        repo.lock_client('c')
        gen = repo.create_generation('c')
        repo.set_metadata(gen, b'/', dir_md())
        repo.commit_client('c')
    return repo


def _count_id_reads(monkeypatch):
    """The generation trees whose id is read from the tree."""
    from obnamlib.repo.fmt_6 import client_tree, keys
    reads = []
    real = client_tree.GenerationTree.get_gen_value
    monkeypatch.setattr(client_tree.GenerationTree, 'get_gen_value',
                        lambda self, key: (
                            reads.append(self) if key == keys.GEN_ID
                            else None, real(self, key))[1])
    return reads


def test_newest_generation_found_without_reading_every_tree(
        tmp_path, monkeypatch):
    """A backup reads the newest generation: with many generations it
    must not read every older tree's id (each costs a leaf node)."""
    url = str(tmp_path / 'repo')
    ids = _repository_of_generations(url, 12).get_generation_ids('c')
    reads = _count_id_reads(monkeypatch)
    repo = repo_factory.open_repository(url=url)
    latest = repo.interpret_generation_spec('c', 'latest')
    assert latest == ids[-1]
    assert repo.get_metadata(latest, b'/') is not None
    assert len(reads) == 1
    # an older one: the trees from the newest down to it, each once
    assert repo.get_metadata(ids[4], b'/') is not None
    assert repo.get_metadata(ids[-1], b'/') is not None
    assert len(reads) == 12 - 4
    assert repo.get_generation_ids('c') == ids
    assert repo.interpret_generation_spec('c', str(int(ids[3]))) == ids[3]


def test_new_generation_is_found_first_in_a_backup(tmp_path, monkeypatch):
    url = str(tmp_path / 'repo')
    _repository_of_generations(url, 10)
    reads = _count_id_reads(monkeypatch)
    repo = repo_factory.open_repository(url=url, lock_timeout=0)
    repo.lock_client('c')
    gen = repo.create_generation('c')
    assert repo.get_metadata(gen, b'/') is not None
    assert reads == []      # the new tree's id is known; no other is read
    repo.unlock_client('c')


def test_a_generation_id_twice_reads_and_forgets_the_same_tree(tmp_path):
    """A damaged forest may give two trees one id: reading and removing
    it take the same tree, and fsck then keeps every chunk."""
    from obnamlib.engine import fsck_engine
    from obnamlib.repo.fmt_6 import keys
    from tests.obnamlib.repo_interface_conformance import dir_md
    url = str(tmp_path / 'repo')
    repo = new_repository(url, 'c')
    contents = [b'old data', b'new data']
    for data in contents:
        repo.lock_client('c')
        gen = repo.create_generation('c')
        repo.set_metadata(gen, b'/', dir_md())
        repo.set_file_chunk_ids(gen, b'/', [repo.put_chunk_content(data)])
        repo.lock_chunk_indexes()
        repo.put_chunk_into_indexes(
            repo.get_file_chunk_ids(gen, b'/')[0], data, 'c')
        repo.commit_chunk_indexes()
        repo.commit_client('c')
    old, new = repo.get_generation_ids('c')
    repo.lock_client('c')
    repo._writable_client('c').generation(int(new)).set_gen_value(
        keys.GEN_ID, int(old))
    repo.commit_client('c')

    reader = repo_factory.open_repository(url=url)
    assert [int(g) for g in reader.get_generation_ids('c')] == [int(old)] * 2
    newest_chunk = reader.get_file_chunk_ids(old, b'/')
    assert reader.get_chunk_content(newest_chunk[0]) == b'new data'
    problems = fsck_engine.Fsck(reader, fsck_engine.FsckOptions(
        rm_unused=True)).run()
    assert 'c: duplicate generation id %d' % int(old) in problems
    assert not any('deleting' in p for p in problems)
    assert sorted(reader.get_chunk_content(c) for c in reader.get_chunk_ids()
                  ) == sorted(contents)
    reader.close()

    repo = repo_factory.open_repository(url=url, lock_timeout=0)
    repo.lock_client('c')
    repo.remove_generation(old)
    repo.commit_client('c')
    left = repo.get_generation_ids('c')
    assert [int(g) for g in left] == [int(old)]
    assert repo.get_chunk_content(
        repo.get_file_chunk_ids(left[0], b'/')[0]) == b'old data'


def test_every_public_method_reports_btree_damage():
    """Each public method carries reporting_damage where it is defined
    (in RepositoryFormat6 or the method classes it derives from)."""
    from obnamlib.repo.fmt_6.damage import reporting_damage
    from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
    wrapper_code = reporting_damage(lambda: None).__code__
    public = {}
    for cls in RepositoryFormat6.__mro__:
        if cls.__module__.startswith('obnamlib.repo.fmt_6.'):
            public.update((name, value) for name, value in vars(cls).items()
                          if callable(value) and not name.startswith('_'))
    assert len(public) >= 45
    assert [name for name, method in sorted(public.items())
            if method.__code__ is not wrapper_code] == []


def test_reporting_damage_turns_larch_errors_into_corruption():
    from obnamlib import errors, larch
    from obnamlib.repo.fmt_6.damage import reporting_damage

    @reporting_damage
    def read_node():
        raise larch.NodeMissing('clientlist', 7)

    with pytest.raises(errors.RepositoryCorrupt) as e:
        read_node()
    assert isinstance(e.value.__cause__, larch.NodeMissing)
    assert 'clientlist' in str(e.value)


def test_a_plain_generation_number_means_the_client_last_used(tmp_path):
    from obnamlib.repo.fmt_6.gen_id import GenId, client_name_of
    from tests.obnamlib.repo_interface_conformance import dir_md
    assert client_name_of(GenId(3, 'c')) == 'c'
    assert client_name_of(3) is None
    repo = _repository_of_generations(str(tmp_path / 'repo'), 1)
    gen = repo.get_generation_ids('c')[0]
    assert repo.get_metadata(int(gen), b'/') == repo.get_metadata(gen, b'/')
    assert repo.get_metadata(int(gen), b'/').st_mode == dir_md().st_mode


def test_a_chunk_list_of_the_wrong_size_is_corruption(tmp_path):
    """A stored chunk-id list whose length is no multiple of 8 (a flipped
    byte in a node can make one) is RepositoryCorrupt, not a crash
    (found by the fuzz hunt: 'unpack requires a buffer of 40 bytes')."""
    from obnamlib import errors
    from obnamlib.repo.fmt_6 import keys
    from tests.obnamlib.repo_interface_conformance import dir_md
    url = str(tmp_path / 'repo')
    repo = new_repository(url, 'c')
    repo.lock_client('c')
    gen = repo.create_generation('c')
    repo.set_metadata(gen, b'/', dir_md())
    repo.set_metadata(gen, b'/f', dir_md())
    repo.set_file_chunk_ids(gen, b'/f', [1, 2])
    tree = repo._writable_generation(gen)
    file_id = tree.file_id(b'/f')
    tree.tree.insert(keys.file_key(file_id, keys.FILE_CHUNKS), b'\0' * 41)
    with pytest.raises(errors.RepositoryCorrupt) as e:
        repo.get_file_chunk_ids(gen, b'/f')
    assert 'not a multiple of 8' in str(e.value)
