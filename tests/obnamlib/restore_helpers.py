"""A minimal writer for restore tests: store a live tree as one generation
through the Repository API (metadata read with live_metadata), so tests
control chunk sizes and can damage chunks and checksums afterwards."""

import hashlib
import os
import stat

import obnamlib.engine.live_metadata
import obnamlib.repo.factory
import obnamlib.engine.restorer
import obnamlib.vfs.local

CLIENT = 'client'


def new_repository(path, client=CLIENT):
    """A new local repository at path with one client."""
    repo = obnamlib.repo.factory.open_repository(
        url=str(path), create=True, lock_timeout=0)
    repo.lock_client_list()
    repo.add_client(client)
    repo.commit_client_list()
    return repo


def store_tree(repo, root, chunk_size=4096, zero_chunk=None):
    """One new generation holding root (absolute str) and its ancestors;
    returns the generation id."""
    fs = obnamlib.vfs.local.LocalFS('/')
    reader = obnamlib.engine.live_metadata.MetadataReader(fs)
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


# --- damage: what restore, verify and fsck tests inject ----------------------

def rewrite_metadata(repo, gen, path, **changes):
    """Commit path's stored metadata with `changes` (Metadata fields), as
    a repository written by another tool or damaged might hold it."""
    repo.lock_client(CLIENT)
    md = repo.get_metadata(gen, path)
    repo.set_metadata(gen, path, md.copy(**changes))
    repo.commit_client(CLIENT)


def back_up(repo_path, live, chunk_size=4096, **settings):
    """One generation of live (a directory) made by the real backup engine,
    as client CLIENT; returns (repository, generation id).  settings:
    repository settings such as compress_with='deflate'."""
    import obnamlib.engine.backup_engine
    import obnamlib.cli.backup_progress
    import obnamlib.vfs.local
    repo = obnamlib.repo.factory.open_repository(
        url=str(repo_path), create=True, lock_timeout=0, **settings)
    obnamlib.engine.backup_engine.BackupEngine(
        repo, obnamlib.vfs.local.LocalFS('/'),
        obnamlib.engine.backup_engine.BackupOptions(CLIENT, chunk_size=chunk_size),
        obnamlib.cli.backup_progress.BackupProgress(), repo_io=repo.fs,
    ).run([os.fsencode(str(live))])
    repo = obnamlib.repo.factory.open_repository(url=str(repo_path),
                                                 **settings)
    return repo, repo.get_generation_ids(CLIENT)[-1]


def chunk_file(repo_path, chunk_id):
    """Where a chunk is stored (format 6 default idpath)."""
    from obnamlib.repo.fmt_6.chunk_store import idpath
    return os.path.join(str(repo_path), idpath(chunk_id))


def file_chunk(repo, gen, repo_path, path, index=0):
    """The chunk file holding chunk number index of path (a str)."""
    chunk_ids = repo.get_file_chunk_ids(gen, os.fsencode(str(path)))
    return chunk_file(repo_path, chunk_ids[index])


def delete(filename):
    os.remove(filename)


def truncate(filename):
    """Keep the first half (a chunk cut short by a crash or a full disk)."""
    size = os.path.getsize(filename)
    os.truncate(filename, size // 2)


def flip_last_bit(filename):
    """One bit of the stored payload changed (bit rot)."""
    flip_bit(filename, -1)


def flip_bit(filename, offset):
    """Flip the lowest bit of the byte at offset (negative: from the end)."""
    with open(filename, 'r+b') as f:
        f.seek(offset, os.SEEK_END if offset < 0 else os.SEEK_SET)
        where = f.tell()
        byte = f.read(1)[0]
        f.seek(where)
        f.write(bytes([byte ^ 1]))


def garble_metadata(repo_path, path):
    """Replace the stored metadata of path (str) in the latest generation
    with a value that cannot be decoded; other files stay intact."""
    from obnamlib.repo.fmt_6 import keys
    repo = obnamlib.repo.factory.open_repository(url=str(repo_path),
                                                 lock_timeout=0)
    repo.lock_client(CLIENT)
    gen = repo.get_generation_ids(CLIENT)[-1]
    tree = repo._writable_generation(gen)
    file_id = tree.file_id(os.fsencode(str(path)))
    tree.tree.insert(keys.file_key(file_id, keys.FILE_METADATA), b'garbage')
    repo.commit_client(CLIENT)


class Collect(obnamlib.engine.restorer.RestoreReporter):
    """A restore reporter that keeps what it is told, for assertions."""

    def __init__(self):
        self.errors, self.notes, self.logs, self.done = [], [], [], []

    def error(self, text):
        self.errors.append(text)

    def notify(self, text):
        self.notes.append(text)

    def log(self, text):
        self.logs.append(text)

    def restored(self, path, metadata):
        self.done.append(path)


def restore_latest(repo_dir, client, target, **settings):
    """Restore `client`'s newest generation of the repository at repo_dir
    below target; every per-file error fails the test."""
    repo = obnamlib.repo.factory.open_repository(url=str(repo_dir),
                                                 **settings)
    try:
        gen = repo.get_generation_ids(client)[-1]
        reporter = Collect()
        obnamlib.engine.restorer.Restorer(
            repo, gen, obnamlib.vfs.local.LocalFS('/'),
            os.fsencode(str(target)), reporter=reporter).restore()
        assert reporter.errors == []
    finally:
        repo.close()
