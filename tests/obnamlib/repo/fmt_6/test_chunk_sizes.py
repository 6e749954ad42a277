"""Format 6's answers for `space` and `forget --pretend`: chunk files'
stored sizes, the indexes' users of chunks, and what a forget would find
left over, all without locks."""

import os

from obnamlib.repo.fmt_6.chunk_store import ChunkStore, idpath
from tests.obnamlib.repo.fmt_6.test_chunk_store import (
    FixedStarts, local_repo_fs)
from tests.obnamlib.repo.fmt_6 import test_leftover_chunks as leftovers
from tests.obnamlib import show_helpers as h


def file_size(root, chunk_id):
    return os.path.getsize(os.path.join(str(root), idpath(chunk_id)))


def test_sizes_are_the_stored_files_sizes(tmp_path):
    store = ChunkStore(local_repo_fs(tmp_path, compress=True),
                       rng=FixedStarts(0x5000, 0x9000000))
    squeezable = store.put(bytes(100000))
    first_dir = [store.put(os.urandom(300)) for _ in range(2)]
    store.next_id = None
    other_dir = store.put(b'x')
    ids = [squeezable] + first_dir + [other_dir]
    expected = {c: file_size(tmp_path, c) for c in ids}
    assert expected[squeezable] < 1000
    assert store.sizes(ids + [0x5100]) == expected
    assert store.sizes() == expected


def test_a_chunk_at_another_idpath_is_found(tmp_path):
    fs = local_repo_fs(tmp_path)
    fs.write_file('chunks/elsewhere/abc', b'moved')
    store = ChunkStore(fs)
    size = os.path.getsize(tmp_path / 'chunks/elsewhere/abc')
    assert store.sizes([0xabc]) == {0xabc: size}


def test_index_users_and_sizes_through_the_api(tmp_path):
    path = tmp_path / 'repo'
    repo = h.open_repo(path, create=True)
    shared = h.tree({b'/s': h.reg(b'shared')})
    gen = h.add_generation(repo, shared, 1433116800, client='a')
    h.add_generation(repo, shared, 1433116800, client='b')
    repo.close()
    repo = h.open_repo(path)
    [chunk] = repo.get_file_chunk_ids(gen, b'/s')
    assert repo.get_chunk_index_users([chunk, 0x1234]) == {
        chunk: {'a', 'b'}}
    assert repo.get_chunk_sizes([chunk]) == {
        chunk: os.path.getsize(path / idpath(chunk))}
    assert repo.find_forget_leftovers('a') == ([], [])


def test_forget_leftovers_are_found_without_locks(tmp_path):
    path = tmp_path / 'repo'
    leftovers.new_repository_with_client_b(path)
    lost = leftovers.killed_run(path, [b'lost one', b'lost two'])
    before = {p: os.path.getmtime(p) for p in (path / 'chunks').rglob('*')}
    repo = leftovers.open_repo(path)
    assert repo.find_forget_leftovers(leftovers.CLIENT) == ([], lost)
    assert {p: os.path.getmtime(p)
            for p in (path / 'chunks').rglob('*')} == before


def test_all_sizes_list_each_bottom_directory_once(tmp_path):
    """Over SFTP every listing is a round trip or more: the walk stops
    above the bottom directories, which are listed once, with sizes."""
    fs = local_repo_fs(tmp_path)
    store = ChunkStore(fs, rng=FixedStarts(0x5000, 0x9000000))
    ids = [store.put(b'%d' % i) for i in range(3)]
    store.next_id = None
    ids.append(store.put(b'other directory'))
    fs.write_file('chunks/elsewhere/abc', b'a stray')
    listed = []
    for name in ('listdir', 'file_sizes'):
        def counted(arg, real=getattr(fs.base, name), name=name):
            listed.append((name, arg))
            return real(arg)
        setattr(fs.base, name, counted)
    expected = {c: file_size(tmp_path, c) for c in ids}
    expected[0xabc] = os.path.getsize(tmp_path / 'chunks/elsewhere/abc')
    assert ChunkStore(fs).sizes() == expected
    bottoms = sorted(os.path.dirname(idpath(c)) for c in (ids[0], ids[3]))
    listed_dirs = [d for name, arg in listed
                   for d in ([arg] if name == 'listdir' else arg)]
    assert sorted(d for d in listed_dirs if d in bottoms) == bottoms
