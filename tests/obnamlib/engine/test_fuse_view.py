"""The mount's filesystem logic, against real repositories, no mount."""

import errno
import os
import stat
import subprocess
import sys

import pytest

import obnamlib.repo.factory
from obnamlib.engine import fuse_view
from obnamlib.repo import interface as repo_interface
from obnamlib.repo.fmt_6 import metadata_codec
from tests.obnamlib import restore_helpers as rh
from tests import paths

OBNAM = paths.OBNAM
CLIENT = 'viewclient'
CHUNK = 4096


def obnam(repo, *args):
    argv = [sys.executable, OBNAM, '--no-default-configs', '--quiet',
            '--client-name', CLIENT, '--repository', str(repo)]
    result = subprocess.run(argv + [str(a) for a in args],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def make_live_tree(live):
    (live / 'sub' / 'deeper').mkdir(parents=True)
    (live / 'small').write_bytes(b'small file\n')
    (live / 'empty').write_bytes(b'')
    big = bytes((i * 7 + i // 4096) % 251 for i in range(5 * CHUNK + 123))
    (live / 'sub' / 'big').write_bytes(big)
    (live / 'exact').write_bytes(b'x' * (2 * CHUNK))
    os.symlink('sub/big', live / 'link')
    os.mkfifo(live / 'fifo')
    os.setxattr(live / 'small', b'user.colour', b'blue')
    os.setxattr(live / 'small', b'user.empty', b'')
    os.utime(live / 'sub' / 'deeper', ns=(0, -5 * 10 ** 9))
    os.utime(live / 'small', ns=(1234567891, 1500000000123456789))


@pytest.fixture(scope='module')
def backup(tmp_path_factory):
    """(repository dir, live dir) after one `obnam backup`."""
    base = tmp_path_factory.mktemp('fuseview')
    live = base / 'live'
    make_live_tree(live)
    obnam(base / 'repo', 'backup', '--chunk-size=%d' % CHUNK, live)
    return base / 'repo', live


def open_view(repo_dir, **kwargs):
    return fuse_view.BackupView(
        lambda: obnamlib.repo.factory.open_repository(url=str(repo_dir)),
        CLIENT, **kwargs)


def in_view(view, live_path):
    return b'/' + view.latest + os.fsencode(str(live_path))


def test_root_lists_generations_latest_and_pid(backup):
    view = open_view(backup[0], pid=4321)
    assert list(view.generations) == [view.latest]
    assert view.listdir(b'/') == [view.latest, b'latest', b'.pid']
    assert view.readlink(b'/latest') == view.latest
    assert view.read(b'/.pid', 0, 100) == b'4321\n'
    assert view.getattr(b'/.pid').st_size == 5
    assert stat.S_ISLNK(view.getattr(b'/latest').st_mode)
    root = view.getattr(b'/')
    assert stat.S_ISDIR(root.st_mode) and root.st_nlink == 3


def test_generation_directory_is_dated_by_its_end(backup):
    view = open_view(backup[0])
    gen = view.generations[view.latest]
    ended = view.repo.get_generation_key(gen, repo_interface.GEN_ENDED)
    attrs = view.getattr(b'/' + view.latest)
    assert stat.S_ISDIR(attrs.st_mode)
    assert attrs.st_mtime_ns == attrs.st_ctime_ns == ended * 10 ** 9
    root_md = view.repo.get_metadata(gen, b'/')
    assert attrs.st_uid == root_md.st_uid
    assert view.listdir(b'/' + view.latest) == \
        list(view.repo.get_file_children(gen, b'/'))


def test_every_live_object_matches(backup):
    repo_dir, live = backup
    view = open_view(repo_dir)
    for dirpath, dirnames, filenames in os.walk(live):
        for name in [''] + dirnames + filenames:
            path = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(path)
            mounted = in_view(view, path)
            attrs = view.getattr(mounted)
            assert attrs.st_mode == st.st_mode, path
            assert attrs.st_uid == st.st_uid and attrs.st_gid == st.st_gid
            assert attrs.st_mtime_ns == max(st.st_mtime_ns, 0), path
            if not stat.S_ISDIR(st.st_mode):
                assert attrs.st_size == st.st_size, path
                assert attrs.st_nlink == st.st_nlink
            if stat.S_ISREG(st.st_mode):
                with open(path, 'rb') as f:
                    assert view.read(mounted, 0, st.st_size + 10) == f.read()
            if stat.S_ISLNK(st.st_mode):
                assert view.readlink(mounted) == os.readlink(os.fsencode(path))
            if stat.S_ISDIR(st.st_mode):
                assert sorted(view.listdir(mounted)) == \
                    sorted(os.fsencode(n) for n in os.listdir(path))


def test_nanosecond_and_negative_times(backup):
    repo_dir, live = backup
    view = open_view(repo_dir)
    small = view.getattr(in_view(view, live / 'small'))
    assert small.st_mtime_ns == 1500000000123456789
    assert small.st_atime_ns == 1234567891
    assert view.getattr(in_view(view, live / 'sub' / 'deeper')).st_mtime_ns == 0


def test_reads_at_odd_offsets_cross_chunk_boundaries(backup):
    repo_dir, live = backup
    data = (live / 'sub' / 'big').read_bytes()
    view = open_view(repo_dir)
    content = view.open(in_view(view, live / 'sub' / 'big'))
    assert content.fixed == CHUNK
    for offset in (0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK - 7,
                   5 * CHUNK - 1, 5 * CHUNK + 100, len(data) - 1, len(data),
                   len(data) + 50):
        for length in (1, 2, 13, CHUNK, 2 * CHUNK + 3, 10 ** 6):
            assert content.read(offset, length) == \
                data[offset:offset + length], (offset, length)


def test_a_read_goes_straight_to_its_chunk(backup):
    repo_dir, live = backup
    data = (live / 'sub' / 'big').read_bytes()
    view = open_view(repo_dir)
    content = view.open(in_view(view, live / 'sub' / 'big'))
    fetched = view.cache.fetches         # the first chunk, for its length
    assert content.read(4 * CHUNK + 5, 10) == data[4 * CHUNK + 5:][:10]
    assert view.cache.fetches == fetched + 1
    assert content.read(4 * CHUNK + 100, 10) == data[4 * CHUNK + 100:][:10]
    assert view.cache.fetches == fetched + 1     # from the cache


def test_file_of_exact_chunk_multiple_and_empty_file(backup):
    repo_dir, live = backup
    view = open_view(repo_dir)
    exact = view.open(in_view(view, live / 'exact'))
    assert exact.read(CHUNK - 2, 4) == b'xxxx'
    assert exact.read(2 * CHUNK - 1, 10) == b'x'
    assert exact.read(2 * CHUNK, 10) == b''
    assert view.read(in_view(view, live / 'empty'), 0, 10) == b''


@pytest.mark.parametrize('bounds', [
    (0, 1000, 1300, 4000, 10240),    # the first chunk shows the pattern fails
    (0, 1000, 1500, 3000, 4000),     # it looks fixed until chunk 1 is read
])
def test_unequal_chunks_are_located_by_their_lengths(tmp_path, bounds):
    live = tmp_path / 'live'
    live.mkdir()
    data = (bytes(range(256)) * 40)[:bounds[-1]]
    (live / 'f').write_bytes(data)
    repo = rh.new_repository(tmp_path / 'repo')
    gen = rh.store_tree(repo, str(live), chunk_size=1000)
    path = os.fsencode(str(live / 'f'))
    repo.lock_client(rh.CLIENT)
    repo.lock_chunk_indexes()
    gen = repo.create_generation(rh.CLIENT)
    ids = []
    for start, end in zip(bounds, bounds[1:]):
        ids.append(repo.put_chunk_content(data[start:end]))
        repo.put_chunk_into_indexes(ids[-1], data[start:end], rh.CLIENT)
    repo.set_file_chunk_ids(gen, path, ids)
    repo.commit_chunk_indexes()
    repo.commit_client(rh.CLIENT)
    repo.close()
    view = fuse_view.BackupView(
        lambda: obnamlib.repo.factory.open_repository(
            url=str(tmp_path / 'repo')), rh.CLIENT)
    content = view.open(b'/' + view.latest + path)
    for offset in (10, 999, 1000, 1299, 1300, 1499, 2999, 3999, 4000, 10000,
                   10239, 0):
        assert content.read(offset, 700) == data[offset:offset + 700]
    assert content.fixed is None and content.starts == list(bounds[:-1])


def test_xattrs(backup):
    repo_dir, live = backup
    view = open_view(repo_dir)
    small = in_view(view, live / 'small')
    assert sorted(view.listxattr(small)) == [b'user.colour', b'user.empty']
    assert view.getxattr(small, b'user.colour') == b'blue'
    assert view.getxattr(small, b'user.empty') == b''
    with pytest.raises(OSError) as e:
        view.getxattr(small, b'user.absent')
    assert e.value.errno == errno.ENODATA
    assert view.listxattr(in_view(view, live / 'exact')) == []
    assert view.listxattr(b'/.pid') == []


def test_xattr_blob_decoder_agrees_with_the_format():
    pairs = [(b'user.a', b'1'), (b'user.bb', b''), (b'security.x', b'\0\xff')]
    blob = metadata_codec.encode_xattrs(pairs)
    assert fuse_view.decode_xattr_blob(blob) == pairs
    assert fuse_view.decode_xattr_blob(None) == []
    with pytest.raises(OSError):
        fuse_view.decode_xattr_blob(b'\0\0')


def test_missing_paths_and_wrong_types(backup):
    repo_dir, live = backup
    view = open_view(repo_dir)
    for path in (b'/nosuch', b'/999', b'/' + view.latest + b'/no/such/file',
                 b'/.pid/x'):
        with pytest.raises(fuse_view.FuseFileNotFound) as e:
            view.getattr(path)
        assert str(e.value) == ('R7B8D0X: FUSE: File not found: %s'
                                % path.decode())
    small = in_view(view, live / 'small')
    with pytest.raises(OSError) as e:
        view.listdir(small)
    assert e.value.errno == errno.ENOTDIR
    with pytest.raises(OSError) as e:
        view.readlink(small)
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        view.open(in_view(view, live / 'sub'))
    assert e.value.errno == errno.EISDIR


def test_statfs_reports_the_newest_generation(backup):
    view = open_view(backup[0])
    gen = view.generations[view.latest]
    total = view.repo.get_generation_key(gen, repo_interface.GEN_TOTAL_DATA)
    fields = view.statfs()
    assert fields['f_bsize'] == 4096
    assert fields['f_blocks'] == (total + 4095) // 4096 > 0
    assert fields['f_bfree'] == 0
    assert fields['f_files'] == view.repo.get_generation_key(
        gen, repo_interface.GEN_FILE_COUNT) > 0


def test_refresh_sees_new_generations_and_skips_checkpoints(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'f').write_bytes(b'one')
    repo = rh.new_repository(tmp_path / 'repo')
    first = rh.store_tree(repo, str(live))
    view = fuse_view.BackupView(
        lambda: obnamlib.repo.factory.open_repository(
            url=str(tmp_path / 'repo')), rh.CLIENT)
    assert list(view.generations) == [b'%d' % first]
    (live / 'f').write_bytes(b'two')
    second = rh.store_tree(repo, str(live))
    repo.lock_client(rh.CLIENT)
    checkpoint = repo.create_generation(rh.CLIENT)
    repo.set_generation_key(checkpoint, repo_interface.GEN_IS_CHECKPOINT, 1)
    repo.commit_client(rh.CLIENT)
    repo.close()
    assert list(view.generations) == [b'%d' % first]   # frozen
    view.refresh()
    assert list(view.generations) == [b'%d' % first,
                                      b'%d' % second]
    assert view.latest == b'%d' % second
    path = os.fsencode(str(live / 'f'))
    assert view.read(b'/' + view.latest + path, 0, 10) == b'two'
    assert view.read(b'/' + b'%d' % first + path, 0, 10) == b'one'
    view.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize('name', [b'..', b'x/../../y', b''])
def test_a_directory_with_an_unsafe_stored_name_is_not_listed(tmp_path,
                                                              name):
    """A tampered name must not reach the kernel: the listing fails with
    R452C9X naming the path; the other names still resolve."""
    from obnamlib import errors
    from tests.obnamlib import hostile_repo
    live = tmp_path / 'live'
    make_live_tree(live)
    obnam(tmp_path / 'repo', 'backup', '--chunk-size=%d' % CHUNK, live)
    hostile_repo.rename(tmp_path / 'repo', CLIENT,
                        os.fsencode(str(live / 'small')), name)
    view = open_view(tmp_path / 'repo')
    with pytest.raises(errors.UnsafeStoredName) as caught:
        view.listdir(in_view(view, live))
    assert str(live) in str(caught.value)
    assert view.getattr(in_view(view, live / 'empty')).st_size == 0
