"""Reading one backed-up regular file as a stream (obnam cat's engine)."""

import os

import pytest

import obnamlib.errors
from obnamlib.engine import file_reader, read_ahead
from tests.obnamlib import restore_helpers as rh

CHUNK = 4096


class Recording:
    """A repository that records the chunk hints and reads it is asked for."""

    def __init__(self, repo):
        self.repo = repo
        self.prefetched = []
        self.read = []
        self.expected = 0

    def __getattr__(self, name):
        return getattr(self.repo, name)

    def prefetch_chunks(self, chunk_ids):
        self.prefetched.append(list(chunk_ids))

    def expect_chunk_reads(self):
        self.expected += 1

    def get_chunk_content(self, chunk_id):
        self.read.append(chunk_id)
        return self.repo.get_chunk_content(chunk_id)


@pytest.fixture
def stored(tmp_path):
    """(repo, generation, live directory) of a tree of assorted objects."""
    live = tmp_path / 'live'
    (live / 'dir').mkdir(parents=True)
    contents = {
        'empty': b'',
        'one': os.urandom(1),
        'chunks': os.urandom(3 * CHUNK + 17),
        'exact': os.urandom(2 * CHUNK),
    }
    for name, data in contents.items():
        (live / name).write_bytes(data)
    os.mkfifo(live / 'fifo')
    os.symlink('one', live / 'link')
    repo = rh.new_repository(tmp_path / 'repo')
    gen = rh.store_tree(repo, str(live), chunk_size=CHUNK)
    return repo, gen, live, contents


def path_of(live, name):
    return os.fsencode(str(live / name))


def read_all(reader, path):
    md = reader.regular_file(path)
    return list(reader.content(path, md))


@pytest.mark.parametrize('name', ['empty', 'one', 'chunks', 'exact'])
def test_content_is_the_file_byte_for_byte(stored, name):
    repo, gen, live, contents = stored
    reader = file_reader.FileReader(repo, gen, rh.CLIENT)
    assert b''.join(read_all(reader, path_of(live, name))) == contents[name]


def test_content_streams_one_chunk_at_a_time(stored):
    repo, gen, live, _ = stored
    recording = Recording(repo)
    reader = file_reader.FileReader(recording, gen, rh.CLIENT)
    path = path_of(live, 'chunks')
    md = reader.regular_file(path)
    pieces = reader.content(path, md)
    first = next(pieces)
    assert len(first) == CHUNK
    assert len(recording.read) == 1          # nothing read ahead in memory
    rest = list(pieces)
    assert [len(p) for p in rest] == [CHUNK, CHUNK, 17]
    assert recording.read == repo.get_file_chunk_ids(gen, path)


def test_the_chunks_are_announced_before_they_are_read(stored):
    repo, gen, live, _ = stored
    recording = Recording(repo)
    reader = file_reader.FileReader(recording, gen, rh.CLIENT)
    path = path_of(live, 'chunks')
    read_all(reader, path)
    assert recording.prefetched == [repo.get_file_chunk_ids(gen, path)]
    assert recording.expected == 1


def test_a_long_file_is_announced_window_by_window(tmp_path, monkeypatch):
    monkeypatch.setattr(read_ahead, 'READ_AHEAD_CHUNKS', 4)
    live = tmp_path / 'live'
    live.mkdir()
    data = os.urandom(10 * 64)
    (live / 'f').write_bytes(data)
    repo = rh.new_repository(tmp_path / 'repo')
    gen = rh.store_tree(repo, str(live), chunk_size=64)
    recording = Recording(repo)
    reader = file_reader.FileReader(recording, gen, rh.CLIENT)
    assert b''.join(read_all(reader, path_of(live, 'f'))) == data
    ids = repo.get_file_chunk_ids(gen, path_of(live, 'f'))
    announced = [i for window in recording.prefetched for i in window]
    assert sorted(announced) == sorted(ids)
    assert all(len(window) <= 4 for window in recording.prefetched)


def test_a_sparse_file_comes_out_whole(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    with open(live / 'sparse', 'wb') as f:
        f.seek(1024 * 1024)
        f.write(b'data in the middle')
        f.truncate(2 * 1024 * 1024)
    repo, gen = rh.back_up(tmp_path / 'repo', live, chunk_size=64 * 1024)
    reader = file_reader.FileReader(repo, gen, rh.CLIENT)
    out = b''.join(read_all(reader, path_of(live, 'sparse')))
    assert out == (live / 'sparse').read_bytes()


def test_a_name_that_is_not_utf8(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    name = os.fsencode(str(live)) + b'/caf\xe9'
    with open(name, 'wb') as f:
        f.write(b'latin-1 name')
    repo = rh.new_repository(tmp_path / 'repo')
    gen = rh.store_tree(repo, str(live))
    reader = file_reader.FileReader(repo, gen, rh.CLIENT)
    assert read_all(reader, name) == [b'latin-1 name']


def test_a_damaged_chunk_is_reported_after_the_content(tmp_path, stored):
    repo, gen, live, contents = stored
    path = path_of(live, 'chunks')
    rh.flip_last_bit(rh.file_chunk(repo, gen, tmp_path / 'repo', str(
        live / 'chunks'), index=1))
    reader = file_reader.FileReader(repo, gen, rh.CLIENT)
    md = reader.regular_file(path)
    pieces = []
    with pytest.raises(file_reader.ContentDamaged) as raised:
        for data in reader.content(path, md):
            pieces.append(data)
    assert len(b''.join(pieces)) == len(contents['chunks'])
    assert raised.value.code == 'RDF0F1X'
    assert 'what was written is not the backed-up file' in str(raised.value)


def test_a_missing_file_is_the_usual_error(stored):
    repo, gen, live, _ = stored
    reader = file_reader.FileReader(repo, gen, rh.CLIENT)
    with pytest.raises(
            obnamlib.errors.RepositoryFileDoesNotExistInGeneration) as raised:
        reader.regular_file(path_of(live, 'nosuch'))
    assert str(raised.value) == (
        'R3E151X: Client client, generation %s does not have file %s'
        % (repo.make_generation_spec(gen), live / 'nosuch'))


def test_a_directory_is_refused(stored):
    repo, gen, live, _ = stored
    reader = file_reader.FileReader(repo, gen, rh.CLIENT)
    with pytest.raises(file_reader.IsADirectory) as raised:
        reader.regular_file(path_of(live, 'dir'))
    assert raised.value.first_line().startswith(
        'R39C5AX: %s is a directory in generation ' % (live / 'dir'))


@pytest.mark.parametrize('name, kind', [('fifo', 'a FIFO'),
                                        ('link', 'a symbolic link')])
def test_other_kinds_are_refused(stored, name, kind):
    repo, gen, live, _ = stored
    reader = file_reader.FileReader(repo, gen, rh.CLIENT)
    with pytest.raises(file_reader.NotARegularFile) as raised:
        reader.regular_file(path_of(live, name))
    assert str(raised.value) == (
        'RD6A69X: %s is %s in generation %s; only a regular file can be '
        'written out' % (live / name, kind, repo.make_generation_spec(gen)))
