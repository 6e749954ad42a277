"""Behaviour every Repository implementation must show.

Subclass `RepositoryConformance` in a `Test...` class and define
`open_repo(self, path)` returning a fresh Repository object on the storage
at `path` (an existing empty directory on first call), with lock timeout 0.
Two objects opened on the same path act like two obnam processes.
"""

import errno
import stat

import pytest

from obnamlib import errors
from obnamlib.repo import interface as ri
from obnamlib.repo.metadata import Metadata

CLIENT = 'havelock'


def file_md(size=3, **changes):
    md = Metadata(st_mode=stat.S_IFREG | 0o644, st_mtime_sec=1234567890,
                  st_mtime_nsec=123456789, st_atime_sec=-5, st_atime_nsec=7,
                  st_nlink=1, st_size=size, st_uid=1000, st_gid=100,
                  st_dev=2049, st_ino=42, st_blocks=8, groupname=b'users',
                  username=b'liw', target=b'', md5=b'\x01' * 16, xattr=None)
    return md.copy(**changes)


def dir_md(**changes):
    return file_md(size=4096, st_mode=stat.S_IFDIR | 0o755, md5=None,
                   **changes)


class RepositoryConformance:

    def open_repo(self, path):
        raise NotImplementedError

    @pytest.fixture
    def path(self, tmp_path):
        d = tmp_path / 'repo'
        d.mkdir()
        return d

    @pytest.fixture
    def repo(self, path):
        r = self.open_repo(path)
        yield r
        r.close()

    def other(self, path):
        return self.open_repo(path)

    # --- helpers -----------------------------------------------------------

    def add_client(self, repo, name=CLIENT, key_id=''):
        repo.lock_client_list()
        repo.add_client(name, key_id)
        repo.commit_client_list()

    def new_generation(self, repo, name=CLIENT, now=1000):
        repo.lock_client(name)
        return repo.create_generation(name, now=now)

    def backup(self, repo, files, name=CLIENT, now=1000):
        """One committed generation holding {path: (metadata, chunk_ids)}."""
        if name not in repo.get_client_names():
            self.add_client(repo, name)
        gen = self.new_generation(repo, name, now)
        for path, (md, chunk_ids) in sorted(files.items()):
            repo.set_metadata(gen, path, md)
            if chunk_ids is not None:
                repo.set_file_chunk_ids(gen, path, chunk_ids)
        repo.commit_client(name, now=now + 10) if _takes_now(repo) \
            else repo.commit_client(name)
        return gen

    # --- client list ---------------------------------------------------

    def test_new_repository_has_no_clients(self, repo):
        assert repo.get_client_names() == []

    def test_adding_client_needs_client_list_lock(self, repo):
        with pytest.raises(errors.RepositoryClientListNotLocked):
            repo.add_client(CLIENT)

    def test_added_client_is_visible_to_another_process(self, repo, path):
        self.add_client(repo)
        assert repo.get_client_names() == [CLIENT]
        assert self.other(path).get_client_names() == [CLIENT]

    def test_client_list_unlock_discards_changes(self, repo, path):
        repo.lock_client_list()
        repo.add_client(CLIENT)
        repo.unlock_client_list()
        assert repo.get_client_names() == []
        assert self.other(path).get_client_names() == []

    def test_adding_existing_client_fails(self, repo):
        self.add_client(repo)
        repo.lock_client_list()
        with pytest.raises(errors.RepositoryClientAlreadyExists) as e:
            repo.add_client(CLIENT)
        assert e.value.code == 'R41CE6X'
        repo.unlock_client_list()

    def test_several_clients_listed(self, repo):
        repo.lock_client_list()
        for name in ('a', 'b', 'c', 'ünï'):
            repo.add_client(name)
        repo.commit_client_list()
        assert sorted(repo.get_client_names()) == ['a', 'b', 'c', 'ünï']

    def test_remove_client(self, repo, path):
        repo.lock_client_list()
        repo.add_client('a')
        repo.add_client('b')
        repo.commit_client_list()
        repo.lock_client_list()
        repo.remove_client('a')
        repo.commit_client_list()
        assert self.other(path).get_client_names() == ['b']

    def test_remove_unknown_client_fails(self, repo):
        repo.lock_client_list()
        with pytest.raises(errors.RepositoryClientDoesNotExist):
            repo.remove_client('nobody')
        repo.unlock_client_list()

    def test_client_key_id(self, repo):
        repo.lock_client_list()
        repo.add_client('plain')
        repo.add_client('secret', '3B1802F81B321347')
        repo.commit_client_list()
        assert repo.get_client_key_id('plain') is None
        assert repo.get_client_key_id('secret') == '3B1802F81B321347'

    def test_unknown_client_has_no_generations_list(self, repo):
        with pytest.raises(errors.RepositoryClientDoesNotExist) as e:
            repo.get_generation_ids('nobody')
        assert e.value.code == 'R24424X'

    # --- locks -----------------------------------------------------------

    def test_client_list_lock_excludes_other_process(self, repo, path):
        repo.lock_client_list()
        other = self.other(path)
        with pytest.raises(errors.LockFail) as e:
            other.lock_client_list()
        assert e.value.code == 'R681AEX'
        assert 'timeout' in str(e.value)
        repo.unlock_client_list()
        other.lock_client_list()
        other.unlock_client_list()

    def test_client_lock_excludes_other_process(self, repo, path):
        self.add_client(repo)
        repo.lock_client(CLIENT)
        other = self.other(path)
        with pytest.raises(errors.LockFail):
            other.lock_client(CLIENT)
        repo.unlock_client(CLIENT)
        other.lock_client(CLIENT)
        other.unlock_client(CLIENT)

    def test_chunk_index_lock_excludes_other_process(self, repo, path):
        repo.lock_chunk_indexes()
        other = self.other(path)
        with pytest.raises(errors.LockFail):
            other.lock_chunk_indexes()
        repo.unlock_chunk_indexes()
        other.lock_chunk_indexes()
        other.unlock_chunk_indexes()

    def test_lock_everything_excludes_everything(self, repo, path):
        self.add_client(repo)
        repo.lock_everything()
        other = self.other(path)
        for take in (other.lock_client_list,
                     lambda: other.lock_client(CLIENT),
                     other.lock_chunk_indexes):
            with pytest.raises(errors.LockFail):
                take()
        repo.unlock_everything()
        other.lock_everything()
        other.commit_everything()

    def test_failed_lock_everything_releases_what_it_took(self, repo, path):
        self.add_client(repo)
        other = self.other(path)
        other.lock_chunk_indexes()
        with pytest.raises(errors.LockFail):
            repo.lock_everything()
        other.unlock_chunk_indexes()
        third = self.other(path)
        third.lock_client_list()
        third.lock_client(CLIENT)
        third.unlock_client(CLIENT)
        third.unlock_client_list()

    def test_force_locks_removes_all_locks(self, repo, path):
        self.add_client(repo)
        repo.lock_everything()
        other = self.other(path)
        other.force_locks()
        other.lock_everything()
        other.unlock_everything()

    def test_close_releases_locks(self, repo, path):
        self.add_client(repo)
        repo.lock_client(CLIENT)
        repo.lock_chunk_indexes()
        repo.close()
        other = self.other(path)
        other.lock_client(CLIENT)
        other.lock_chunk_indexes()
        other.close()

    def test_readers_need_no_locks(self, repo, path):
        gen = self.backup(repo, {b'/': (dir_md(), None)})
        repo.lock_everything()
        reader = self.other(path)
        assert reader.get_client_names() == [CLIENT]
        assert reader.get_generation_ids(CLIENT) == [gen]
        assert reader.get_metadata(gen, b'/') == dir_md()
        reader.close()
        repo.unlock_everything()

    def test_changing_client_needs_lock(self, repo):
        self.add_client(repo)
        with pytest.raises(errors.RepositoryClientNotLocked) as e:
            repo.create_generation(CLIENT)
        assert e.value.code == 'R0BE94X'

    def test_changing_committed_generation_after_unlock_fails(self, repo):
        gen = self.backup(repo, {b'/': (dir_md(), None)})
        with pytest.raises(errors.RepositoryClientNotLocked):
            repo.set_metadata(gen, b'/x', file_md())

    def test_index_changes_need_lock(self, repo):
        self.add_client(repo)
        chunk_id = repo.put_chunk_content(b'data')
        with pytest.raises(errors.RepositoryChunkIndexesNotLocked) as e:
            repo.put_chunk_into_indexes(chunk_id, b'data', CLIENT)
        assert e.value.code == 'RE187FX'

    # --- generations -----------------------------------------------------

    def test_new_client_has_no_generations(self, repo):
        self.add_client(repo)
        assert repo.get_generation_ids(CLIENT) == []
        with pytest.raises(errors.RepositoryClientHasNoGenerations) as e:
            repo.interpret_generation_spec(CLIENT, 'latest')
        assert e.value.code == 'REFB32X'

    def test_generations_are_listed_oldest_first(self, repo, path):
        g1 = self.backup(repo, {b'/': (dir_md(), None)}, now=100)
        g2 = self.backup(repo, {b'/': (dir_md(), None)}, now=200)
        ids = self.other(path).get_generation_ids(CLIENT)
        assert ids == [g1, g2]
        assert int(g1) < int(g2)
        assert repo.interpret_generation_spec(CLIENT, 'latest') == g2
        spec = repo.make_generation_spec(g1)
        assert spec == str(int(g1))
        assert repo.interpret_generation_spec(CLIENT, spec) == g1

    def test_unknown_generation_spec(self, repo):
        self.backup(repo, {b'/': (dir_md(), None)})
        for spec in ('12345', 'foo'):
            with pytest.raises(errors.RepositoryGenerationDoesNotExist) as e:
                repo.interpret_generation_spec(CLIENT, spec)
            assert e.value.code == 'R0B15DX'

    def test_generation_keys(self, repo, path):
        self.add_client(repo)
        gen = self.new_generation(repo, now=1000)
        assert repo.get_generation_key(gen, ri.GEN_STARTED) == 1000
        assert repo.get_generation_key(gen, ri.GEN_ID) == int(gen)
        assert repo.get_generation_key(gen, ri.GEN_ENDED) is None
        repo.set_generation_key(gen, ri.GEN_FILE_COUNT, 17)
        repo.set_generation_key(gen, ri.GEN_TOTAL_DATA, 2 ** 40)
        repo.set_generation_key(gen, ri.GEN_IS_CHECKPOINT, 0)
        repo.commit_client(CLIENT)
        other = self.other(path)
        gen2 = other.get_generation_ids(CLIENT)[0]
        assert other.get_generation_key(gen2, ri.GEN_FILE_COUNT) == 17
        assert other.get_generation_key(gen2, ri.GEN_TOTAL_DATA) == 2 ** 40
        assert other.get_generation_key(gen2, ri.GEN_IS_CHECKPOINT) == 0
        assert other.get_generation_key(gen2, ri.GEN_ENDED) is not None

    def test_explicit_end_time_is_kept_at_commit(self, repo, path):
        self.add_client(repo)
        gen = self.new_generation(repo, now=1000)
        repo.set_generation_key(gen, ri.GEN_ENDED, 1500)
        repo.commit_client(CLIENT)
        gen = self.other(path).get_generation_ids(CLIENT)[0]
        assert self.other(path).get_generation_key(gen, ri.GEN_ENDED) == 1500

    def test_new_generation_does_not_inherit_counters(self, repo):
        self.add_client(repo)
        gen = self.new_generation(repo)
        repo.set_generation_key(gen, ri.GEN_FILE_COUNT, 5)
        repo.set_generation_key(gen, ri.GEN_IS_CHECKPOINT, 1)
        repo.commit_client(CLIENT)
        gen2 = self.new_generation(repo, now=2000)
        assert repo.get_generation_key(gen2, ri.GEN_FILE_COUNT) is None
        assert repo.get_generation_key(gen2, ri.GEN_IS_CHECKPOINT) is None
        assert repo.get_generation_key(gen2, ri.GEN_STARTED) == 2000
        repo.unlock_client(CLIENT)

    def test_unlock_client_discards_generation(self, repo, path):
        self.add_client(repo)
        self.new_generation(repo)
        repo.unlock_client(CLIENT)
        assert repo.get_generation_ids(CLIENT) == []
        assert self.other(path).get_generation_ids(CLIENT) == []

    def test_remove_generation(self, repo, path):
        g1 = self.backup(repo, {b'/': (dir_md(), None)})
        g2 = self.backup(repo, {b'/': (dir_md(), None)})
        repo.lock_client(CLIENT)
        repo.remove_generation(g1)
        repo.commit_client(CLIENT)
        assert self.other(path).get_generation_ids(CLIENT) == [g2]

    def test_two_clients_have_separate_generations(self, repo):
        ga = self.backup(repo, {b'/': (dir_md(), None),
                                b'/a': (file_md(), None)}, name='a')
        gb = self.backup(repo, {b'/': (dir_md(), None),
                                b'/b': (file_md(), None)}, name='b')
        assert repo.file_exists(ga, b'/a') and not repo.file_exists(ga, b'/b')
        assert repo.file_exists(gb, b'/b') and not repo.file_exists(gb, b'/a')
        assert repo.get_generation_ids('a') == [ga]
        assert repo.get_generation_ids('b') == [gb]

    def test_checkpoint_then_final_generation(self, repo, path):
        """The backup pattern: checkpoint, continue in a clone, then drop
        the checkpoint under lock_everything."""
        self.add_client(repo)
        chunk = repo.put_chunk_content(b'first')
        gen = self.new_generation(repo, now=100)
        repo.set_metadata(gen, b'/a', file_md())
        repo.set_file_chunk_ids(gen, b'/a', [chunk])
        repo.lock_chunk_indexes()
        repo.put_chunk_into_indexes(chunk, None, CLIENT)
        repo.set_generation_key(gen, ri.GEN_IS_CHECKPOINT, 1)
        repo.commit_client(CLIENT)
        repo.commit_chunk_indexes()
        checkpoint = gen
        repo.lock_client(CLIENT)
        gen = repo.create_generation(CLIENT, now=200)
        assert repo.file_exists(gen, b'/a')
        repo.set_metadata(gen, b'/b', file_md())
        repo.set_generation_key(gen, ri.GEN_IS_CHECKPOINT, 0)
        repo.commit_client(CLIENT)
        repo.lock_everything()
        candidates = repo.get_generation_chunk_ids(checkpoint)
        repo.remove_generation(checkpoint)
        assert repo.remove_unused_chunks(CLIENT, candidates) == []
        repo.commit_everything()
        other = self.other(path)
        [final] = other.get_generation_ids(CLIENT)
        assert final == gen
        assert other.get_file_children(final, b'/') == [b'a', b'b']
        assert other.get_chunk_content(chunk) == b'first'
        assert other.get_generation_key(final, ri.GEN_STARTED) == 200

    # --- files -----------------------------------------------------------

    def test_metadata_round_trip(self, repo, path):
        md = file_md(xattr=b'\0' * 8, target=b'', st_mtime_sec=-86400 * 365)
        gen = self.backup(repo, {b'/': (dir_md(), None),
                                 b'/f\xff': (md, None)})
        other = self.other(path)
        gen = other.get_generation_ids(CLIENT)[0]
        assert other.get_metadata(gen, b'/f\xff') == md
        assert other.file_exists(gen, b'/f\xff')
        assert not other.file_exists(gen, b'/nope')

    def test_absent_fields_stay_absent(self, repo):
        md = Metadata(st_mode=stat.S_IFDIR | 0o777)
        gen = self.backup(repo, {b'/': (md, None)})
        assert repo.get_metadata(gen, b'/') == md

    def test_missing_file_error(self, repo):
        gen = self.backup(repo, {b'/': (dir_md(), None)})
        with pytest.raises(errors.RepositoryFileDoesNotExistInGeneration) as e:
            repo.get_metadata(gen, b'/nope')
        assert e.value.code == 'R3E151X'
        assert '/nope' in str(e.value) and CLIENT in str(e.value)

    def test_children_sorted_bytewise(self, repo):
        names = [b'b', b'a', b'\xff', b'C', b'a b']
        files = {b'/': (dir_md(), None), b'/d': (dir_md(), None)}
        files.update({b'/d/' + n: (file_md(), None) for n in names})
        gen = self.backup(repo, files)
        assert repo.get_file_children(gen, b'/d') == sorted(names)
        assert repo.get_file_children(gen, b'/') == [b'd']
        assert repo.get_file_children(gen, b'/d/a') == []

    def test_setting_deep_path_creates_ancestors(self, repo):
        self.add_client(repo)
        gen = self.new_generation(repo)
        repo.set_metadata(gen, b'/a/b/c', file_md())
        assert repo.get_file_children(gen, b'/') == [b'a']
        assert repo.get_file_children(gen, b'/a') == [b'b']
        assert repo.get_metadata(gen, b'/a') == Metadata()
        repo.set_metadata(gen, b'/a', dir_md())
        assert repo.get_metadata(gen, b'/a') == dir_md()
        assert repo.get_file_children(gen, b'/') == [b'a']
        repo.unlock_client(CLIENT)

    def test_replacing_metadata(self, repo):
        self.add_client(repo)
        gen = self.new_generation(repo)
        repo.set_metadata(gen, b'/', dir_md())
        repo.set_metadata(gen, b'/f', file_md(size=1))
        repo.set_metadata(gen, b'/f', file_md(size=2))
        assert repo.get_metadata(gen, b'/f').st_size == 2
        assert repo.get_file_children(gen, b'/') == [b'f']
        repo.unlock_client(CLIENT)

    def test_chunk_ids_round_trip(self, repo, path):
        gen = self.backup(repo, {b'/': (dir_md(), None),
                                 b'/f': (file_md(), [5, 3, 5, 2 ** 64 - 2]),
                                 b'/g': (file_md(), [])})
        other = self.other(path)
        gen = other.get_generation_ids(CLIENT)[0]
        assert other.get_file_chunk_ids(gen, b'/f') == [5, 3, 5, 2 ** 64 - 2]
        assert other.get_file_chunk_ids(gen, b'/g') == []
        assert other.get_generation_chunk_ids(gen) == {5, 3, 2 ** 64 - 2}
        assert other.get_file_data(gen, b'/f') is None

    def test_replacing_chunk_ids_drops_old_references(self, repo):
        self.add_client(repo)
        gen = self.new_generation(repo)
        repo.set_metadata(gen, b'/', dir_md())
        repo.set_metadata(gen, b'/f', file_md())
        repo.set_file_chunk_ids(gen, b'/f', [1, 2, 3])
        repo.set_file_chunk_ids(gen, b'/f', [4])
        assert repo.get_file_chunk_ids(gen, b'/f') == [4]
        assert repo.get_generation_chunk_ids(gen) == {4}
        repo.unlock_client(CLIENT)

    def test_appending_chunk_ids(self, repo):
        if not hasattr(repo, 'append_file_chunk_ids'):
            pytest.skip('optional method')
        self.add_client(repo)
        gen = self.new_generation(repo)
        repo.set_metadata(gen, b'/f', file_md())
        repo.append_file_chunk_ids(gen, b'/f', [7])
        repo.append_file_chunk_ids(gen, b'/f', [8, 9])
        assert repo.get_file_chunk_ids(gen, b'/f') == [7, 8, 9]
        repo.unlock_client(CLIENT)

    def test_remove_file_is_recursive(self, repo):
        files = {b'/': (dir_md(), None), b'/d': (dir_md(), None),
                 b'/d/e': (dir_md(), None), b'/d/e/f': (file_md(), [1]),
                 b'/d/g': (file_md(), [2]), b'/keep': (file_md(), [3])}
        self.backup(repo, files)
        gen = self.new_generation(repo, now=2000)
        repo.remove_file(gen, b'/d')
        for p in (b'/d', b'/d/e', b'/d/e/f', b'/d/g'):
            assert not repo.file_exists(gen, p)
        assert repo.get_file_children(gen, b'/') == [b'keep']
        assert repo.get_generation_chunk_ids(gen) == {3}
        repo.commit_client(CLIENT)
        old = repo.get_generation_ids(CLIENT)[0]
        assert repo.file_exists(old, b'/d/e/f')
        assert repo.get_file_chunk_ids(old, b'/d/e/f') == [1]

    def test_new_generation_starts_as_copy_of_previous(self, repo):
        files = {b'/': (dir_md(), None), b'/f': (file_md(size=1), [1])}
        g1 = self.backup(repo, files)
        g2 = self.new_generation(repo, now=2000)
        assert repo.get_metadata(g2, b'/f') == file_md(size=1)
        repo.set_metadata(g2, b'/f', file_md(size=2))
        repo.set_file_chunk_ids(g2, b'/f', [2])
        repo.commit_client(CLIENT)
        assert repo.get_metadata(g1, b'/f').st_size == 1
        assert repo.get_file_chunk_ids(g1, b'/f') == [1]
        assert repo.get_metadata(g2, b'/f').st_size == 2
        assert repo.get_file_chunk_ids(g2, b'/f') == [2]

    # --- chunks ----------------------------------------------------------

    def test_chunk_round_trip(self, repo, path):
        self.add_client(repo)
        ids = [repo.put_chunk_content(b'chunk %d' % i) for i in range(5)]
        assert len(set(ids)) == 5
        other = self.other(path)
        for i, chunk_id in enumerate(ids):
            assert other.has_chunk(chunk_id)
            assert other.get_chunk_content(chunk_id) == b'chunk %d' % i
        assert sorted(other.get_chunk_ids()) == sorted(ids)

    def test_missing_chunk(self, repo):
        assert not repo.has_chunk(12345)
        with pytest.raises(errors.RepositoryChunkDoesNotExist) as e:
            repo.get_chunk_content(12345)
        assert e.value.code == 'R43272X'

    def test_remove_chunk(self, repo):
        chunk_id = repo.put_chunk_content(b'x')
        repo.remove_chunk(chunk_id)
        assert not repo.has_chunk(chunk_id)
        assert repo.get_chunk_ids() == []

    def test_uncommitted_chunks_are_removed_and_committed_ones_kept(
            self, repo):
        self.add_client(repo)
        gen = self.new_generation(repo)
        kept = repo.put_chunk_content(b'kept')
        repo.set_file_chunk_ids(gen, b'/f', [kept])
        repo.commit_client(CLIENT)
        assert repo.remove_uncommitted_chunks() == 0
        gen = self.new_generation(repo)
        doomed = [repo.put_chunk_content(b'doomed %d' % i) for i in range(3)]
        repo.set_file_chunk_ids(gen, b'/g', doomed)
        assert repo.remove_uncommitted_chunks() == 3
        repo.unlock_client(CLIENT)
        assert repo.get_chunk_ids() == [kept]
        assert repo.get_chunk_content(kept) == b'kept'

    def test_chunks_indexed_by_a_commit_are_not_uncommitted(self, repo):
        self.add_client(repo)
        repo.lock_chunk_indexes()
        chunk_id = repo.put_chunk_content(b'indexed')
        repo.put_chunk_into_indexes(chunk_id, b'indexed', CLIENT)
        repo.commit_chunk_indexes()
        assert repo.remove_uncommitted_chunks() == 0
        assert repo.get_chunk_ids() == [chunk_id]

    def test_dedup_lookup_after_index_commit(self, repo, path):
        self.add_client(repo)
        chunk_id = repo.put_chunk_content(b'same')
        assert repo.find_chunk_ids_by_content(b'same') == [chunk_id]
        repo.lock_chunk_indexes()
        repo.put_chunk_into_indexes(chunk_id, b'same', CLIENT)
        repo.commit_chunk_indexes()
        other = self.other(path)
        assert other.find_chunk_ids_by_content(b'same') == [chunk_id]
        assert other.find_chunk_ids_by_content(b'other') == []

    def test_unindexed_chunk_not_found_by_other_process(self, repo, path):
        self.add_client(repo)
        repo.put_chunk_content(b'same')
        assert self.other(path).find_chunk_ids_by_content(b'same') == []

    def test_index_unlock_discards(self, repo, path):
        self.add_client(repo)
        chunk_id = repo.put_chunk_content(b'same')
        repo.lock_chunk_indexes()
        repo.put_chunk_into_indexes(chunk_id, b'same', CLIENT)
        repo.unlock_chunk_indexes()
        assert self.other(path).find_chunk_ids_by_content(b'same') == []

    def test_md5_variants(self, repo, path):
        import hashlib
        self.add_client(repo)
        digest = hashlib.md5(b'data').digest()
        chunk_id = repo.put_chunk_content(b'data')
        repo.lock_chunk_indexes()
        repo.put_chunk_md5_into_indexes(chunk_id, digest, CLIENT)
        repo.commit_chunk_indexes()
        other = self.other(path)
        assert other.find_chunk_ids_by_md5(digest) == [chunk_id]
        assert other.find_chunk_ids_by_content(b'data') == [chunk_id]

    def _forget_setup(self, repo):
        """Client a: gen1 uses chunks x,y; gen2 uses y,z.  Client b uses z."""
        contents = {'x': b'xx', 'y': b'yy', 'z': b'zz'}
        self.add_client(repo, 'a')
        self.add_client(repo, 'b')
        ids = {k: repo.put_chunk_content(v) for k, v in contents.items()}
        repo.lock_chunk_indexes()
        for k in 'xyz':
            repo.put_chunk_into_indexes(ids[k], contents[k], 'a')
        repo.put_chunk_into_indexes(ids['z'], contents['z'], 'b')
        repo.commit_chunk_indexes()
        g1 = self.backup(repo, {b'/f': (file_md(), [ids['x'], ids['y']])},
                         name='a')
        g2 = self.backup(repo, {b'/f': (file_md(), [ids['y'], ids['z']])},
                         name='a')
        self.backup(repo, {b'/f': (file_md(), [ids['z']])}, name='b')
        return ids, g1, g2

    def test_remove_unused_chunks(self, repo, path):
        ids, g1, g2 = self._forget_setup(repo)
        repo.lock_everything()
        candidates = repo.get_generation_chunk_ids(g1)
        assert candidates == {ids['x'], ids['y']}
        repo.remove_generation(g1)
        removed = repo.remove_unused_chunks('a', candidates)
        assert list(removed) == [ids['x']]
        repo.commit_everything()
        other = self.other(path)
        assert not other.has_chunk(ids['x'])
        assert other.has_chunk(ids['y']) and other.has_chunk(ids['z'])
        assert other.find_chunk_ids_by_content(b'xx') == []
        assert other.find_chunk_ids_by_content(b'yy') == [ids['y']]

    def test_chunk_shared_with_other_client_survives(self, repo, path):
        ids, g1, g2 = self._forget_setup(repo)
        repo.lock_everything()
        for gen in (g1, g2):
            candidates = repo.get_generation_chunk_ids(gen)
            repo.remove_generation(gen)
            repo.remove_unused_chunks('a', candidates)
        repo.commit_everything()
        other = self.other(path)
        assert other.get_generation_ids('a') == []
        assert not other.has_chunk(ids['x']) and not other.has_chunk(ids['y'])
        assert other.get_chunk_content(ids['z']) == b'zz'
        assert other.find_chunk_ids_by_content(b'zz') == [ids['z']]

    def test_chunk_reused_from_other_client_survives_its_forget(self, repo,
                                                                 path):
        """b re-uses a's chunk (found by content) without indexing it
        itself; when a forgets everything, b's file must stay readable."""
        self.add_client(repo, 'a')
        self.add_client(repo, 'b')
        chunk = repo.put_chunk_content(b'shared')
        repo.lock_chunk_indexes()
        repo.put_chunk_into_indexes(chunk, b'shared', 'a')
        repo.commit_chunk_indexes()
        ga = self.backup(repo, {b'/f': (file_md(), [chunk])}, name='a')
        other = self.other(path)
        [found] = other.find_chunk_ids_by_content(b'shared')
        other.lock_client('b')
        gb = other.create_generation('b')
        other.set_metadata(gb, b'/f', file_md())
        other.set_file_chunk_ids(gb, b'/f', [found])
        other.lock_chunk_indexes()
        other.commit_client('b')
        other.commit_chunk_indexes()
        repo.lock_everything()
        candidates = repo.get_generation_chunk_ids(ga)
        repo.remove_generation(ga)
        assert repo.remove_unused_chunks('a', candidates) == []
        repo.commit_everything()
        third = self.other(path)
        gb = third.get_generation_ids('b')[0]
        [chunk_id] = third.get_file_chunk_ids(gb, b'/f')
        assert third.get_chunk_content(chunk_id) == b'shared'

    def test_unlock_after_remove_keeps_everything(self, repo, path):
        ids, g1, g2 = self._forget_setup(repo)
        repo.lock_everything()
        candidates = repo.get_generation_chunk_ids(g1)
        repo.remove_generation(g1)
        repo.remove_unused_chunks('a', candidates)
        repo.unlock_everything()
        other = self.other(path)
        assert other.get_generation_ids('a') == [g1, g2]
        assert other.get_chunk_content(ids['x']) == b'xx'

    def test_remove_chunk_from_indexes(self, repo, path):
        self.add_client(repo)
        chunk_id = repo.put_chunk_content(b'c')
        repo.lock_chunk_indexes()
        repo.put_chunk_into_indexes(chunk_id, b'c', CLIENT)
        repo.commit_chunk_indexes()
        repo.lock_chunk_indexes()
        repo.remove_chunk_from_indexes(chunk_id, CLIENT)
        repo.commit_chunk_indexes()
        assert self.other(path).find_chunk_ids_by_content(b'c') == []


def _takes_now(repo):
    import inspect
    try:
        return 'now' in inspect.signature(repo.commit_client).parameters
    except (TypeError, ValueError):
        return False
