"""GenerationTree's new names: file ids handed out in blocks, and no
lookups below a directory made in the same session."""

from obnamlib.repo import factory as repo_factory
from obnamlib.repo.fmt_6 import client_tree, keys
from tests.obnamlib.repo_interface_conformance import dir_md, file_md
from tests.obnamlib.restore_helpers import new_repository


class FixedStarts:
    """An rng whose randint gives the listed file id starts in turn."""

    def __init__(self, *starts):
        self.starts = list(starts)

    def randint(self, lo, hi):
        return self.starts.pop(0)


def _writable(url, *starts):
    repo = new_repository(url, 'c')
    repo.lock_client('c')
    gen = repo.create_generation('c')
    tree = repo._writable_generation(gen)
    tree.rng = FixedStarts(*starts)
    return repo, gen, tree


def _id(tree, path):
    return keys.unpack_u64(tree.file_id(path))


def _reread(repo, url, gen_paths):
    repo.commit_client('c')
    reader = repo_factory.open_repository(url=url)
    gen = reader.get_generation_ids('c')[-1]
    return {path: reader.get_metadata(gen, path).st_size
            for path in gen_paths}


def test_ids_count_up_from_one_start(tmp_path):
    repo, gen, tree = _writable(str(tmp_path / 'repo'), 0x1000)
    repo.set_metadata(gen, b'/', dir_md())
    for name in (b'/a', b'/b', b'/c'):
        repo.set_metadata(gen, name, file_md())
    assert [_id(tree, p) for p in (b'/', b'/a', b'/b', b'/c')] == \
        [0x1000, 0x1001, 0x1002, 0x1003]


def test_a_block_holding_an_older_id_is_not_used(tmp_path):
    """An id of an earlier generation inside the block the start would
    give: a new start is drawn, and the old file keeps its id alone."""
    url = str(tmp_path / 'repo')
    repo, gen, tree = _writable(url, 0x2000)
    repo.set_metadata(gen, b'/', dir_md())
    repo.set_metadata(gen, b'/old', file_md(size=1))
    old_id = _id(tree, b'/old')
    repo.commit_client('c')
    repo.lock_client('c')
    gen = repo.create_generation('c')
    tree = repo._writable_generation(gen)
    tree.rng = FixedStarts(old_id - 10, 0x90000)
    repo.set_metadata(gen, b'/new', file_md(size=2))
    assert _id(tree, b'/new') == 0x90000
    assert _reread(repo, url, [b'/old', b'/new']) == {b'/old': 1, b'/new': 2}


def test_a_name_slot_ahead_in_the_block_ends_it(tmp_path):
    """A name's slot key lies among the ids still to be handed out: that
    id is then found taken, as one id at a time would find it."""
    url = str(tmp_path / 'repo')
    slot = keys.unpack_u64(keys.default_file_id(b'/d/x'))
    repo, gen, tree = _writable(url, slot - 3, 0x70000)
    repo.set_metadata(gen, b'/', dir_md())        # slot - 3
    repo.set_metadata(gen, b'/d', dir_md())       # slot - 2
    repo.set_metadata(gen, b'/d/x', file_md())    # slot - 1, slot used
    for name in (b'/d/y', b'/d/z'):
        repo.set_metadata(gen, name, file_md(size=5))
    ids = {_id(tree, p) for p in (b'/', b'/d', b'/d/x', b'/d/y', b'/d/z')}
    assert slot not in ids
    assert _id(tree, b'/d/y') == 0x70000
    assert _reread(repo, url, [b'/d/x', b'/d/y', b'/d/z']) == \
        {b'/d/x': 3, b'/d/y': 5, b'/d/z': 5}


def test_children_of_a_new_directory_are_not_looked_up(tmp_path,
                                                        monkeypatch):
    repo, gen, tree = _writable(str(tmp_path / 'repo'), 0x3000)
    repo.set_metadata(gen, b'/', dir_md())
    repo.set_metadata(gen, b'/d', dir_md())
    lookups = []
    real = tree.tree.lookup_range
    monkeypatch.setattr(tree.tree, 'lookup_range',
                        lambda *r: lookups.append(r) or real(*r))
    for i in range(5):
        repo.set_metadata(gen, b'/d/f%d' % i, file_md())
        repo.set_file_chunk_ids(gen, b'/d/f%d' % i, [i])
    assert lookups == []


def test_after_the_id_cache_is_dropped_names_are_looked_up(tmp_path,
                                                           monkeypatch):
    """The fallback: once the cache of ids is cleared, a path below a new
    directory is looked up again, and found, not made twice."""
    monkeypatch.setattr(client_tree, 'ID_CACHE_LIMIT', 4)
    url = str(tmp_path / 'repo')
    repo, gen, tree = _writable(url, 0x4000)
    repo.set_metadata(gen, b'/', dir_md())
    repo.set_metadata(gen, b'/d', dir_md())
    names = [b'/d/f%d' % i for i in range(6)]
    for name in names:
        repo.set_metadata(gen, name, file_md(size=1))
    first_ids = {name: _id(tree, name) for name in names}
    for name in names:
        repo.set_metadata(gen, b'/d', dir_md())     # its id known again
        repo.set_metadata(gen, name, file_md(size=2))
        repo.set_file_chunk_ids(gen, name, [7])
    assert {name: _id(tree, name) for name in names} == first_ids
    assert repo.get_file_children(gen, b'/d') == sorted(
        name[3:] for name in names)
    assert _reread(repo, url, names) == {name: 2 for name in names}


def test_a_forgotten_path_below_a_new_directory_is_found_again(tmp_path):
    """forget (a reader done with paths) also forgets which names were
    made here: the path is looked up, not made a second time."""
    url = str(tmp_path / 'repo')
    repo, gen, tree = _writable(url, 0x5000)
    repo.set_metadata(gen, b'/', dir_md())
    repo.set_metadata(gen, b'/d', dir_md())
    repo.set_metadata(gen, b'/d/f', file_md(size=1))
    first = _id(tree, b'/d/f')
    tree.forget([b'/d/f'])
    repo.set_metadata(gen, b'/d/f', file_md(size=2))
    assert _id(tree, b'/d/f') == first
    assert repo.get_file_children(gen, b'/d') == [b'f']
    assert _reread(repo, url, [b'/d/f']) == {b'/d/f': 2}


def test_content_is_data_in_the_tree_before_any_chunk_list(tmp_path):
    """One walk of a file's keys answers as file_data, then chunk_ids:
    data in the tree wins, and then its chunk list is not even read."""
    import pytest
    from obnamlib import errors
    repo, gen, tree = _writable(str(tmp_path / 'repo'), 0x2000)
    repo.set_metadata(gen, b'/', dir_md())
    for name in (b'/chunks', b'/data', b'/both', b'/bad', b'/none'):
        repo.set_metadata(gen, name, file_md())
    repo.set_file_chunk_ids(gen, b'/chunks', [7, 2 ** 64 - 1, 7])
    repo.set_file_chunk_ids(gen, b'/both', [9])
    for name in (b'/data', b'/both'):
        tree.tree.insert(keys.file_key(tree.file_id(name), keys.FILE_DATA),
                         b'kept ' + name)
    tree.tree.insert(keys.file_key(tree.file_id(b'/both'), keys.FILE_CHUNKS,
                                   1), b'odd')
    tree.tree.insert(keys.file_key(tree.file_id(b'/bad'), keys.FILE_CHUNKS),
                     b'odd')
    tree.tree.insert(keys.file_key(tree.file_id(b'/none'), keys.FILE_DATA,
                                   1), b'not the data key')
    assert tree.content(b'/chunks') == (None, [7, 2 ** 64 - 1, 7])
    assert tree.content(b'/data') == (b'kept /data', None)
    assert tree.content(b'/both') == (b'kept /both', None)
    assert tree.content(b'/none') == (None, [])
    assert tree.content(b'/absent') is None
    for path in (b'/chunks', b'/data', b'/both', b'/none'):
        data = tree.file_data(path)
        assert tree.content(path) == (
            (data, None) if data is not None else (None, tree.chunk_ids(path)))
    with pytest.raises(errors.RepositoryCorrupt):
        tree.content(b'/bad')
    with pytest.raises(errors.RepositoryCorrupt):
        tree.chunk_ids(b'/bad')
    repo.unlock_client('c')
