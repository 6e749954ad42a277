from obnamlib import larch
from obnamlib.larch.journal import Journal


def committed(vfs):
    return {p: d for p, d in vfs.files.items()}


def test_writes_go_to_new_until_commit():
    vfs = larch.MemoryFS()
    j = Journal(vfs, 'f', True)
    j.write('nodes/0/0/0/1', b'node')
    assert vfs.files == {'f/new/nodes/0/0/0/1': b'node'}
    assert j.read('nodes/0/0/0/1') == b'node'
    j.commit(b'meta')
    assert vfs.files == {'f/nodes/0/0/0/1': b'node', 'f/metadata': b'meta'}
    assert vfs.isdir('f/new/nodes/0/0/0')


def test_deleting_committed_file_leaves_marker_until_commit():
    vfs = larch.MemoryFS()
    vfs.write_file('f/nodes/0/0/0/1', b'old')
    j = Journal(vfs, 'f', True)
    j.remove('nodes/0/0/0/1', committed=True)
    assert vfs.files['f/delete/nodes/0/0/0/1'] == b''
    assert not j.exists('nodes/0/0/0/1')
    assert vfs.exists('f/nodes/0/0/0/1')
    j.commit(b'meta')
    assert sorted(vfs.files) == ['f/metadata']


def test_deleting_uncommitted_file_removes_it_from_new():
    vfs = larch.MemoryFS()
    j = Journal(vfs, 'f', True)
    j.write('nodes/0/0/0/2', b'x')
    j.remove('nodes/0/0/0/2', committed=False)
    assert vfs.files == {}


def interrupted(vfs):
    """An old state plus a journal whose commit flag is already written."""
    vfs.write_file('f/metadata', b'old meta')
    vfs.write_file('f/nodes/0/0/0/1', b'old node 1')
    vfs.write_file('f/nodes/0/0/0/2', b'node 2')
    vfs.write_file('f/new/nodes/0/0/0/1', b'new node 1')
    vfs.write_file('f/new/nodes/0/0/0/3', b'node 3')
    vfs.write_file('f/delete/nodes/0/0/0/2', b'')
    vfs.write_file('f/new/metadata', b'new meta')


def test_opening_for_writing_finishes_interrupted_commit():
    vfs = larch.MemoryFS()
    interrupted(vfs)
    vfs.write_file('f/new/nodes/0/0/0/tmpabc', b'half')
    assert Journal(vfs, 'f', True).recover() is False
    assert vfs.files == {
        'f/metadata': b'new meta',
        'f/nodes/0/0/0/1': b'new node 1',
        'f/nodes/0/0/0/3': b'node 3',
    }


def test_opening_for_writing_rolls_back_without_commit_flag():
    vfs = larch.MemoryFS()
    interrupted(vfs)
    vfs.remove('f/new/metadata')
    Journal(vfs, 'f', True).recover()
    assert vfs.files == {
        'f/metadata': b'old meta',
        'f/nodes/0/0/0/1': b'old node 1',
        'f/nodes/0/0/0/2': b'node 2',
    }


def test_read_only_overlays_interrupted_commit_without_changing_it():
    vfs = larch.MemoryFS()
    interrupted(vfs)
    before = dict(vfs.files)
    j = Journal(vfs, 'f', False)
    assert j.recover() is True
    assert j.read('metadata') == b'new meta'
    assert j.read('nodes/0/0/0/1') == b'new node 1'
    assert j.read('nodes/0/0/0/3') == b'node 3'
    assert not j.exists('nodes/0/0/0/2')
    assert j.listdir('nodes/0/0/0') == ['1', '3']
    assert vfs.files == before


def test_read_only_ignores_journal_without_commit_flag():
    vfs = larch.MemoryFS()
    interrupted(vfs)
    vfs.remove('f/new/metadata')
    j = Journal(vfs, 'f', False)
    assert j.recover() is False
    assert j.read('metadata') == b'old meta'
    assert j.read('nodes/0/0/0/1') == b'old node 1'
    assert j.exists('nodes/0/0/0/2')
    assert j.listdir('nodes/0/0/0') == ['1', '2']


def test_leftovers_lists_journal_files():
    vfs = larch.MemoryFS()
    interrupted(vfs)
    assert sorted(Journal(vfs, 'f', False).leftovers()) == [
        'delete/nodes/0/0/0/2', 'new/metadata', 'new/nodes/0/0/0/1',
        'new/nodes/0/0/0/3']


class _BatchFS(larch.MemoryFS):
    """Storage that reads many files in one go (as SFTP does)."""
    reads_in_batches = True

    def __init__(self):
        super().__init__()
        self.batches = []

    def read_files(self, paths):
        self.batches.append(list(paths))
        return [self.read_file(path) for path in paths]


class _ReadAheadFS(larch.MemoryFS):
    """Storage that is told of reads to come (encrypted, local)."""

    def __init__(self):
        super().__init__()
        self.hints = []

    def read_ahead(self, paths):
        self.hints.append(list(paths))


def _journal_with_a_new_and_a_deleted_file(vfs):
    for name in ('a', 'b', 'c'):
        vfs.write_file('f/' + name, name.encode())
    j = Journal(vfs, 'f', True)
    j.write('n', b'new')
    j.remove('c', committed=True)
    return j


def test_read_together_reads_committed_files_in_one_batch():
    vfs = _BatchFS()
    j = _journal_with_a_new_and_a_deleted_file(vfs)
    assert j.read_together(['a', 'n', 'c', 'b']) == {'a': b'a', 'b': b'b'}
    assert vfs.batches == [['f/a', 'f/b']]
    assert j.read_together(['a']) == {}     # one file: read() it
    assert j.read('n') == b'new'


def test_read_together_hints_storage_that_reads_ahead():
    vfs = _ReadAheadFS()
    j = _journal_with_a_new_and_a_deleted_file(vfs)
    assert j.read_together(['b', 'n', 'a']) == {}
    assert vfs.hints == [['f/b', 'f/a']]
