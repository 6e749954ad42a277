"""A minimal writer for restore tests: store a live tree as one generation
through the Repository API (metadata read with live_metadata), so tests
control chunk sizes and can damage chunks and checksums afterwards."""

import hashlib
import os
import stat

import obnamlib.live_metadata
import obnamlib.repo_factory
import obnamlib.vfs_local

CLIENT = 'client'


def new_repository(path):
    repo = obnamlib.repo_factory.open_repository(
        url=str(path), create=True, lock_timeout=0)
    repo.lock_client_list()
    repo.add_client(CLIENT)
    repo.commit_client_list()
    return repo


def store_tree(repo, root, chunk_size=4096, zero_chunk=None):
    """One new generation holding root (absolute str) and its ancestors;
    returns the generation id."""
    fs = obnamlib.vfs_local.LocalFS('/')
    reader = obnamlib.live_metadata.MetadataReader(fs)
    repo.lock_client(CLIENT)
    repo.lock_chunk_indexes()
    gen = repo.create_generation(CLIENT)
    root = os.fsencode(root)
    ancestors = []
    parent = os.path.dirname(root)
    while parent != b'/':
        ancestors.append(parent)
        parent = os.path.dirname(parent)
    for path in [b'/'] + ancestors[::-1]:
        repo.set_metadata(gen, path, reader.read(path))
    pending = [root]
    while pending:
        path = pending.pop()
        md = reader.read(path)
        chunk_ids = []
        if stat.S_ISREG(md.st_mode):
            with open(path, 'rb') as f:
                data = f.read()
            md.md5 = hashlib.md5(data).digest()
            for pos in range(0, len(data), chunk_size):
                chunk = data[pos:pos + chunk_size]
                chunk_ids.append(repo.put_chunk_content(chunk))
                repo.put_chunk_into_indexes(chunk_ids[-1], chunk, CLIENT)
        repo.set_metadata(gen, path, md)
        if chunk_ids:
            repo.set_file_chunk_ids(gen, path, chunk_ids)
        if stat.S_ISDIR(md.st_mode):
            pending.extend(os.path.join(path, n)
                           for n in sorted(os.listdir(path)))
    repo.commit_chunk_indexes()
    repo.commit_client(CLIENT)
    return gen
