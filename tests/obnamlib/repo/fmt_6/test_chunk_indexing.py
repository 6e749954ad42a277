"""ChunkIndexing: a client's id is looked up once per reading of the
client list, and again whenever the list may have changed."""

import gc
import hashlib

from obnamlib.repo.fmt_6 import keys
from tests.obnamlib.restore_helpers import new_repository


def _index(repo, data, client):
    chunk = repo.put_chunk_content(data)
    repo.put_chunk_md5_into_indexes(chunk, hashlib.md5(data).digest(),
                                    client)
    return chunk


def test_a_client_added_again_is_indexed_under_its_new_id(tmp_path):
    repo = new_repository(str(tmp_path / 'repo'), 'a')
    repo.lock_everything()
    first = _index(repo, b'one', 'a')
    old_id = repo.get_client_id('a')
    repo.remove_client('a')
    repo.add_client('a')
    new_id = repo.get_client_id('a')
    assert new_id != old_id
    second = _index(repo, b'two', 'a')
    repo.commit_everything()
    users = {user for _, chunk, user in repo.get_chunk_index_entries()[1]
             if chunk == second}
    assert users == {new_id}
    assert {user for _, chunk, user in repo.get_chunk_index_entries()[1]
            if chunk == first} == {old_id}


def test_each_commit_of_a_run_indexes_under_the_client(tmp_path):
    repo = new_repository(str(tmp_path / 'repo'), 'a')
    client_id = repo.get_client_id('a')
    chunks = []
    for data in (b'one', b'two'):
        repo.lock_client('a')
        repo.lock_chunk_indexes()
        chunks.append(_index(repo, data, 'a'))
        chunks.append(_index(repo, data + b'!', 'a'))
        repo.commit_chunk_indexes()
        repo.unlock_client('a')
    users = {chunk: user for _, chunk, user in
             repo.get_chunk_index_entries()[1]}
    assert users == {chunk: client_id for chunk in chunks}


def test_chunks_of_one_checksum_are_found_until_each_is_indexed_or_gone(
        tmp_path):
    """A session's unindexed chunks are kept per checksum as one id or a
    tuple of them: every one is found, each once, until it is indexed or
    removed, and removing one leaves the others.  A checksum of one chunk
    (nearly all of them) costs no object the garbage collector visits."""
    repo = new_repository(str(tmp_path / 'repo'), 'a')
    repo.lock_everything()
    data = b'the same content'
    digest = hashlib.md5(data).digest()
    first, second, third = (repo.put_chunk_content(data, md5_digest=digest)
                            for _ in range(3))
    other = repo.put_chunk_content(b'other')
    unindexed = repo.chunk_indexing.unindexed
    assert not gc.is_tracked(unindexed[keys.content_checksum(b'other')])
    assert repo.find_chunk_ids_by_md5(digest) == [first, second, third]
    repo.remove_chunk(second)
    assert repo.find_chunk_ids_by_md5(digest) == [first, third]
    repo.put_chunk_md5_into_indexes(third, digest, 'a')
    assert sorted(repo.find_chunk_ids_by_md5(digest)) == sorted(
        [first, third])
    assert not gc.is_tracked(unindexed[keys.checksum_of_digest(digest)])
    repo.remove_chunk(first)
    assert repo.find_chunk_ids_by_md5(digest) == [third]
    assert keys.checksum_of_digest(digest) not in unindexed
    assert repo.find_chunk_ids_by_md5(
        hashlib.md5(b'other').digest()) == [other]
    repo.commit_everything()
    assert repo.find_chunk_ids_by_md5(digest) == [third]
