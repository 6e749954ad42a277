"""Writing forests make what they wrote durable before the commit flag."""

import obnamlib.vfs.local
from obnamlib.repo.storage import repo_fs
from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
from tests.obnamlib.repo_interface_conformance import file_md


class RecordingLocalFS(obnamlib.vfs.local.LocalFS):
    """A real local storage that logs creates, writes and syncs in order."""

    def __init__(self, root):
        super().__init__(root)
        self.log = []

    def create_file(self, path, data):
        super().create_file(path, data)
        self.log.append(('create', path))

    def write_file(self, path, data):
        self.log.append(('write', path))
        super().write_file(path, data)

    def sync(self):
        self.log.append(('sync', None))
        super().sync()


def repository_with_client(tmp_path):
    """(recording storage, repository) with client 'c' added."""
    base = RecordingLocalFS(str(tmp_path))
    base.write_file('metadata/format', b'6\n')
    repo = RepositoryFormat6(repo_fs.RepositoryFS(base), lock_timeout=0)
    repo.lock_client_list()
    repo.add_client('c')
    repo.commit_client_list()
    return base, repo


def test_chunks_and_nodes_are_synced_before_each_commit_flag(tmp_path):
    base, repo = repository_with_client(tmp_path)
    repo.lock_client('c')
    gen = repo.create_generation('c')
    ids = [repo.put_chunk_content(b'%d' % i * 1000) for i in range(30)]
    repo.set_metadata(gen, b'/f', file_md(size=30000))
    repo.set_file_chunk_ids(gen, b'/f', ids)
    repo.commit_client('c')
    repo.close()
    flags = [i for i, (what, path) in enumerate(base.log)
             if what == 'write' and path.endswith('/new/metadata')]
    assert [base.log[i][1] for i in flags] == [
        'clientlist/new/metadata', '%d/new/metadata' % repo.get_client_id(
            'c')]
    for i in flags:
        assert base.log[i - 1] == ('sync', None)
    last_chunk = max(i for i, (what, _) in enumerate(base.log)
                     if what == 'create')
    assert last_chunk < flags[-1] - 1
    assert sum(1 for what, _ in base.log if what == 'sync') == 2


def test_readers_never_sync(tmp_path):
    base, writer = repository_with_client(tmp_path)
    writer.close()
    base.log = []
    reader = RepositoryFormat6(repo_fs.RepositoryFS(base), lock_timeout=0)
    assert reader.get_client_names() == ['c']
    assert base.log == []


def test_only_writing_forests_sync_before_their_commit_flag(tmp_path):
    from obnamlib.repo.fmt_6 import forests
    base = RecordingLocalFS(str(tmp_path))
    writer = forests.open_forest(base, 'w', 8, 4096, allow_writes=True)
    reader = forests.open_forest(base, 'w', 8, 4096, allow_writes=False)
    assert isinstance(writer.vfs, forests.SyncBeforeCommit)
    assert reader.vfs is base


def test_client_readers_start_small_and_may_grow_writers_do_not(tmp_path):
    """A read-only client forest keeps few nodes until its reads show it
    needs more (Obnam 1.x trees, random file ids); a writing one keeps
    its fixed number."""
    from obnamlib.repo.fmt_6 import forests
    from obnamlib.repo.fmt_6.client_forest import ClientForest
    base, repo = repository_with_client(tmp_path)
    client_id = repo.get_client_id('c')
    repo.close()
    reader = ClientForest(base, client_id).forest.node_store
    assert reader.cache_size == forests.READER_START_NODES
    assert reader.cache_limit == forests.READER_CACHE_NODES
    assert reader.dropped is not None
    writer = ClientForest(base, client_id, allow_writes=True).forest
    assert writer.node_store.cache_size == forests.CLIENT_CACHE_NODES
    assert writer.node_store.dropped is None


def test_chunk_index_readers_start_small_and_may_grow_writers_do_not(
        tmp_path):
    """fsck reads the chunk indexes through and looks chunks up in
    batches: few nodes do; a backup's dedup looks up random checksums."""
    from obnamlib.repo.fmt_6 import forests
    from obnamlib.repo.fmt_6.chunk_indexes import ChunkIndexes
    base, repo = repository_with_client(tmp_path)
    repo.close()
    reader = ChunkIndexes(repo_fs.RepositoryFS(base), None)
    reader._open(allow_writes=False)
    for forest in (reader.list_forest, reader.sums_forest):
        assert forest.node_store.cache_size == \
            forests.INDEX_READER_START_NODES
        assert forest.node_store.cache_limit == forests.INDEX_CACHE_NODES
        assert forest.node_store.dropped is not None
    writer = ChunkIndexes(repo_fs.RepositoryFS(base), None)
    writer._open(allow_writes=True)
    for forest in (writer.list_forest, writer.sums_forest):
        assert forest.node_store.cache_size == forests.INDEX_CACHE_NODES
        assert forest.node_store.dropped is None
