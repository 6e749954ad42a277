import errno
import os
import stat
import threading

import pytest

import obnamlib.errors
import obnamlib.vfs.base
import obnamlib.vfs.factory
import obnamlib.vfs.local
from tests.obnamlib.mount_tables import local_fs_on
from tests.obnamlib.restore_helpers import new_repository
from tests.obnamlib.vfs_conformance import VfsConformance


class TestLocalFSConformance(VfsConformance):

    def make_vfs(self, root):
        return obnamlib.vfs.local.LocalFS(root)


def test_open_vfs_plain_path_is_local(tmp_path):
    vfs = obnamlib.vfs.factory.open_vfs(str(tmp_path))
    assert isinstance(vfs, obnamlib.vfs.local.LocalFS)
    assert vfs.root == str(tmp_path)


def test_open_vfs_relative_path_is_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    vfs = obnamlib.vfs.factory.open_vfs('repo')
    assert vfs.root == os.path.join(str(tmp_path), 'repo')


@pytest.mark.parametrize('url', ['file:///tmp/x', 'ssh://host/x', 'foo:bar/x'])
def test_open_vfs_unknown_scheme(url):
    with pytest.raises(obnamlib.errors.UnknownVFSError) as info:
        obnamlib.vfs.factory.open_vfs(url)
    assert str(info.value) == 'R826A1X: Unknown VFS type: %s' % url


def test_root_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / 'file'
    path.write_bytes(b'')
    with pytest.raises(obnamlib.errors.RootIsNotADirectory) as info:
        obnamlib.vfs.local.LocalFS(str(path))
    assert info.value.code == 'RA4F35X'


def test_lock_without_hardlinks_falls_back_to_exclusive_create(tmp_path, monkeypatch):
    vfs = obnamlib.vfs.local.LocalFS(str(tmp_path))

    def no_link(*args, **kwargs):
        raise PermissionError(1, 'Operation not permitted')
    monkeypatch.setattr(os, 'link', no_link)
    vfs.lock('lock')
    with pytest.raises(obnamlib.errors.LockFail):
        vfs.lock('lock')
    assert os.listdir(str(tmp_path)) == ['lock']


def leftovers(root):
    """Temporary files anywhere below root."""
    return [os.path.join(d, n) for d, _, names in os.walk(str(root))
            for n in names if n.startswith(obnamlib.vfs.local.TEMP_PREFIX)]


def test_create_file_is_exclusive_private_and_complete(tmp_path):
    vfs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    vfs.create_file('chunks/1/2/3/abc', b'data')
    with pytest.raises(FileExistsError):
        vfs.create_file('chunks/1/2/3/abc', b'other')
    path = tmp_path / 'chunks/1/2/3/abc'
    assert path.read_bytes() == b'data'
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / 'chunks/1').stat().st_mode & 0o777 == 0o700
    assert vfs.bytes_written == 4
    assert leftovers(tmp_path) == []


def test_create_file_remakes_a_directory_removed_behind_its_back(tmp_path):
    vfs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    vfs.create_file('chunks/0/0/0/1', b'one')
    os.remove(str(tmp_path / 'chunks/0/0/0/1'))
    os.rmdir(str(tmp_path / 'chunks/0/0/0'))
    vfs.create_file('chunks/0/0/0/2', b'two')
    vfs.write_file('chunks/0/0/0/3', b'three')
    assert sorted(os.listdir(str(tmp_path / 'chunks/0/0/0'))) == ['2', '3']


def test_failed_write_leaves_no_temporary_file(tmp_path):
    vfs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    os.makedirs(str(tmp_path / 'd/taken'))
    with pytest.raises(OSError):
        vfs.write_file('d/taken', b'x')
    assert leftovers(tmp_path) == []
    vfs.write_file('d/f', b'x')
    vfs.write_file('d/f', b'y')
    assert sorted(os.listdir(str(tmp_path / 'd'))) == ['f', 'taken']
    assert (tmp_path / 'd/f').read_bytes() == b'y'


def test_temporary_files_left_by_a_crash_are_not_nodes_or_chunks(tmp_path):
    """A crash between writing a temporary file and renaming or linking it
    leaves tmp...: larch's listings, the journal and the chunk enumeration
    ignore such names, so the repository reads and checks as before, and
    journal recovery removes those in new/."""
    from obnamlib.engine import fsck_engine
    from obnamlib.repo import factory as repo_factory
    from obnamlib.repo.fmt_6.chunk_store import idpath
    from tests.obnamlib.repo_interface_conformance import file_md
    url = str(tmp_path / 'repo')
    repo = new_repository(url, 'c')
    repo.lock_client('c')
    gen = repo.create_generation('c')
    chunk = repo.put_chunk_content(b'content')
    repo.set_metadata(gen, b'/f', file_md(size=7))
    repo.set_file_chunk_ids(gen, b'/f', [chunk])
    repo.commit_client('c')
    client_dir = os.path.join(url, str(repo.get_client_id('c')))
    before = fsck_engine.Fsck(repo).run()
    repo.close()

    def leave_temp_file(*where):
        dirname = os.path.join(*where)
        os.makedirs(dirname, exist_ok=True)
        with open(obnamlib.vfs.local.temp_name(dirname), 'wb') as f:
            f.write(b'\0half a file')
    leave_temp_file(os.path.dirname(os.path.join(url, idpath(chunk))))
    leave_temp_file(url, 'chunks')
    leave_temp_file(client_dir, 'nodes', '0', '0', '0')
    leave_temp_file(client_dir, 'refcounts')
    leave_temp_file(url, 'clientlist', 'nodes', '0', '0', '0')
    reader = repo_factory.open_repository(url=url, lock_timeout=0)
    assert reader.get_chunk_ids() == [chunk]
    [gen] = reader.get_generation_ids('c')
    assert reader.get_chunk_content(
        reader.get_file_chunk_ids(gen, b'/f')[0]) == b'content'
    assert fsck_engine.Fsck(reader).run() == before
    reader.close()

    # An interrupted commit (new/metadata, the commit flag, is there) whose
    # new/ holds a temporary file: readers overlay new/ without it, and
    # finishing the commit must not move it among the nodes.
    leave_temp_file(client_dir, 'new', 'nodes', '0', '0', '0')
    with open(os.path.join(client_dir, 'metadata'), 'rb') as f:
        flag = f.read()
    with open(os.path.join(client_dir, 'new', 'metadata'), 'wb') as f:
        f.write(flag)
    reader = repo_factory.open_repository(url=url, lock_timeout=0)
    assert len(reader.get_generation_ids('c')) == 1
    reader.close()
    writer = repo_factory.open_repository(url=url, lock_timeout=0)
    writer.lock_client('c')
    writer.unlock_client('c')
    writer.close()
    assert not any('/new/' in path for path in leftovers(url))
    assert len(leftovers(url)) == 5


def test_rename_remakes_a_target_directory_removed_behind_its_back(tmp_path):
    vfs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    vfs.write_file('a/b/x', b'1')
    vfs.rename('a/b/x', 'c/d/x')
    os.remove(str(tmp_path / 'c/d/x'))
    os.rmdir(str(tmp_path / 'c/d'))
    vfs.write_file('a/b/y', b'2')
    vfs.rename('a/b/y', 'c/d/y')
    assert (tmp_path / 'c/d/y').read_bytes() == b'2'
    with pytest.raises(FileNotFoundError):
        vfs.rename('a/b/missing', 'c/d/z')


def directory_flags(path):
    import array
    import fcntl
    fd = os.open(str(path), os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = array.array('i', [0])
        fcntl.ioctl(fd, obnamlib.vfs.local._FS_IOC_GETFLAGS, flags, True)
        return flags[0]
    finally:
        os.close(fd)


def test_spread_subdirectories_marks_a_top_directory(tmp_path):
    vfs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    if not vfs.spread_subdirectories('chunks'):
        pytest.skip('this filesystem has no top-directory flag')
    top = obnamlib.vfs.local._FS_TOPDIR_FL
    assert directory_flags(tmp_path / 'chunks') & top
    assert (tmp_path / 'chunks').stat().st_mode & 0o777 == 0o700
    assert vfs.spread_subdirectories('chunks')
    vfs.create_file('chunks/1/2/3/4', b'x')
    assert not directory_flags(tmp_path / 'chunks/1') & top


@pytest.mark.parametrize('size', [0, 1, 4096, 3 << 20])
def test_read_file_reads_every_byte(tmp_path, size):
    data = os.urandom(size)
    (tmp_path / 'f').write_bytes(data)
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    assert fs.read_file('f') == data
    assert fs.bytes_read == size


def test_read_file_does_not_trust_the_size_a_file_claims():
    # files in /proc say they are empty but are not
    got = obnamlib.vfs.local.LocalFS('/').read_file('proc/self/status')
    assert got.startswith(b'Name:') and len(got) > 100


@pytest.mark.parametrize('path', ['d/f', './d/f', 'd//f', '/d/f', 'd/./f'])
def test_relative_paths_are_below_the_root_however_spelt(tmp_path, path):
    (tmp_path / 'd').mkdir()
    (tmp_path / 'd' / 'f').write_bytes(b'data')
    assert obnamlib.vfs.local.LocalFS(str(tmp_path)).read_file(path) == \
        b'data'


def test_relative_paths_below_the_filesystem_root():
    fs = obnamlib.vfs.local.LocalFS('/')
    assert fs.read_file('proc/self/status').startswith(b'Name:')
    assert fs.exists('proc') and fs.exists('./proc/')


def test_read_file_of_a_directory_names_it(tmp_path):
    (tmp_path / 'd').mkdir()
    with pytest.raises(IsADirectoryError) as info:
        obnamlib.vfs.local.LocalFS(str(tmp_path)).read_file('d')
    assert info.value.filename == str(tmp_path / 'd')


class TestLocalFSOnANetworkMountConformance(VfsConformance):
    """Everything holds with reads and creates in flight together."""

    def make_vfs(self, root):
        fs = local_fs_on(root)
        assert obnamlib.vfs.base.CREATES_IN_PARALLEL in fs.capabilities
        return fs


def test_a_local_disk_reads_and_creates_one_at_a_time(tmp_path):
    fs = local_fs_on(tmp_path, 'ext4')
    assert not fs.reads_in_batches
    assert obnamlib.vfs.base.CREATES_IN_PARALLEL not in fs.capabilities


@pytest.mark.parametrize('fstype, advises', [
    ('ext4', True), ('nfs4', True), ('tmpfs', False), ('ramfs', False)])
def test_reads_are_advised_except_in_memory(tmp_path, fstype, advises):
    fs = local_fs_on(tmp_path, fstype)
    assert (obnamlib.vfs.base.ADVISES_READS in fs.capabilities) is advises
    assert fs.prefetch_size == (
        obnamlib.vfs.local.PREFETCH_LIVE_BYTES if advises else 0)


def test_without_a_mount_table_reads_are_advised(tmp_path):
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path),
                                    mountinfo=str(tmp_path / 'none'))
    assert obnamlib.vfs.base.ADVISES_READS in fs.capabilities


@pytest.mark.timeout(60)
def test_reads_on_a_network_mount_are_in_flight_together(
        tmp_path, monkeypatch):
    fs = local_fs_on(tmp_path)
    assert fs.reads_in_batches
    count = obnamlib.vfs.local.IN_FLIGHT
    names = ['f%d' % i for i in range(2 * count)]
    for name in names:
        (tmp_path / name).write_bytes(name.encode() * 1000)
    together = threading.Barrier(count, timeout=20)
    read_whole = obnamlib.vfs.local._read_whole

    def read_when_all_are_reading(full):
        together.wait()         # broken (an error) if reads came one by one
        return read_whole(full)
    monkeypatch.setattr(obnamlib.vfs.local, '_read_whole',
                        read_when_all_are_reading)
    try:
        assert fs.read_files(names) == [n.encode() * 1000 for n in names]
        assert fs.bytes_read == sum(len(n) * 1000 for n in names)
    finally:
        fs.close()


def test_read_files_on_a_network_mount_raises_for_the_first_missing(
        tmp_path):
    fs = local_fs_on(tmp_path)
    (tmp_path / 'a').write_bytes(b'a')
    try:
        with pytest.raises(FileNotFoundError) as info:
            fs.read_files(['a', 'missing1', 'missing2'])
        assert info.value.filename == str(tmp_path / 'missing1')
    finally:
        fs.close()


def open_fds():
    return len(os.listdir('/proc/self/fd'))


@pytest.fixture
def cold(monkeypatch):
    """The page cache holds none of the files (as after drop_caches)."""
    monkeypatch.setattr(obnamlib.vfs.local, '_must_wait_for_disk',
                        lambda fd: True)


def test_files_advised_are_read_through_the_descriptor_kept_open(
        tmp_path, cold):
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    for i in range(3):
        (tmp_path / ('c%d' % i)).write_bytes(b'%d' % i * 5000)
    before = open_fds()
    fs.advise_reads(['c0', 'c1', 'missing', 'c2', 'c1'])
    assert open_fds() == before + 3
    assert [fs.read_file('c%d' % i) for i in range(3)] == \
        [b'%d' % i * 5000 for i in range(3)]
    assert open_fds() == before
    assert fs.bytes_read == 15000
    with pytest.raises(FileNotFoundError) as info:
        fs.read_file('missing')
    assert info.value.filename == str(tmp_path / 'missing')


def test_advised_files_kept_open_are_bounded_and_closed_at_close(
        tmp_path, cold):
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    names = ['f%d' % i for i in range(obnamlib.vfs.local.ADVISED_FILES + 9)]
    for name in names:
        (tmp_path / name).write_bytes(name.encode())
    before = open_fds()
    fs.advise_reads(names)
    assert open_fds() == before + obnamlib.vfs.local.ADVISED_FILES
    assert fs.read_file(names[0]) == names[0].encode()   # opened again
    fs.close()
    assert open_fds() == before


def test_a_file_advised_and_then_changed_by_us_reads_as_it_is_now(tmp_path):
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    for name in ('removed', 'rewritten', 'renamed', 'target'):
        fs.write_file(name, b'old ' + name.encode())
    fs.advise_reads(['removed', 'rewritten', 'renamed', 'target'])
    fs.remove('removed')
    fs.write_file('rewritten', b'new')
    fs.rename('renamed', 'target')
    with pytest.raises(FileNotFoundError):
        fs.read_file('removed')
    with pytest.raises(FileNotFoundError):
        fs.read_file('renamed')
    assert fs.read_file('rewritten') == b'new'
    assert fs.read_file('target') == b'old renamed'
    assert fs.advised == {}


@pytest.fixture
def warm(monkeypatch):
    """The page cache holds every file; the hints given, recorded."""
    monkeypatch.setattr(obnamlib.vfs.local, '_must_wait_for_disk',
                        lambda fd: False)
    hinted = []
    monkeypatch.setattr(obnamlib.vfs.local, '_advise_willneed',
                        hinted.append)
    return hinted


def test_with_a_warm_cache_only_the_first_file_is_opened_and_no_hint_given(
        tmp_path, warm):
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    for i in range(3):
        (tmp_path / ('c%d' % i)).write_bytes(b'%d' % i)
    before = open_fds()
    fs.advise_reads(['missing', 'c0', 'c1', 'c2'])
    assert open_fds() == before + 1 and warm == []
    assert [fs.read_file('c%d' % i) for i in range(3)] == [b'0', b'1', b'2']
    assert open_fds() == before


def test_a_file_dropped_from_the_page_cache_must_wait_for_the_disk(
        tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(os.urandom(1 << 20))
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            os.preadv(fd, [bytearray(1)], 0, os.RWF_NOWAIT)
        except OSError:
            pytest.skip('this filesystem cannot tell what is cached')
        assert not obnamlib.vfs.local._must_wait_for_disk(fd)
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        assert obnamlib.vfs.local._must_wait_for_disk(fd)
    finally:
        os.close(fd)


def test_an_open_file_takes_its_attributes_through_its_descriptor(tmp_path):
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    assert obnamlib.vfs.base.SETS_ATTRIBUTES_OF_OPEN_FILES in fs.capabilities
    path = os.fsencode(tmp_path / 'f')
    with fs.open_write(path) as f:
        f.write(b'data')
        st = os.fstat(f.fileno())
        assert f.set_attributes(owner=(st.st_uid, st.st_gid), mode=0o4750,
                                times=(10 ** 9, 2 * 10 ** 9)) == {}
        assert f.set_attributes() == {}
    st = os.lstat(path)
    assert stat.S_IMODE(st.st_mode) == 0o4750
    assert (st.st_atime_ns, st.st_mtime_ns) == (10 ** 9, 2 * 10 ** 9)


def test_an_open_files_failures_are_those_of_its_path(tmp_path, monkeypatch):
    """Each failed step as LocalFS.set_attributes reports it by path, and
    the later steps still run."""
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    path = os.fsencode(tmp_path / 'f')

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EPERM, os.strerror(errno.EPERM))
    for name in ('chown', 'fchown', 'chmod', 'fchmod'):
        monkeypatch.setattr(os, name, refuse)
    attributes = dict(owner=(0, 0), mode=0o600, times=(10 ** 9, 10 ** 9))
    with fs.open_write(path) as f:
        through_file = f.set_attributes(**attributes)
    by_path = fs.set_attributes(path, **attributes)
    assert sorted(through_file) == sorted(by_path) == ['mode', 'owner']
    for name in through_file:
        assert str(through_file[name]) == str(by_path[name])
        assert through_file[name].code == by_path[name].code
    assert os.lstat(path).st_mtime_ns == 10 ** 9


def test_live_files_prefetched_on_a_cold_cache_are_each_hinted(
        tmp_path, cold, monkeypatch):
    fs = obnamlib.vfs.local.LocalFS('/')
    for i in range(3):
        (tmp_path / ('f%d' % i)).write_bytes(b'%d' % i)
    os.symlink('f0', tmp_path / 'link')
    hinted = []
    monkeypatch.setattr(obnamlib.vfs.local, '_advise_willneed',
                        lambda fd: hinted.append(os.readlink(
                            '/proc/self/fd/%d' % fd)))
    before = open_fds()
    fs.prefetch([os.fsencode(tmp_path / name)
                 for name in ('missing', 'f0', 'link', 'f1', 'f2')])
    assert hinted == [str(tmp_path / name) for name in ('f0', 'f1', 'f2')]
    assert open_fds() == before     # none kept: the backup opens its own


def test_live_files_prefetched_on_a_warm_cache_get_no_hint(tmp_path, warm):
    fs = obnamlib.vfs.local.LocalFS('/')
    for i in range(3):
        (tmp_path / ('f%d' % i)).write_bytes(b'%d' % i)
    before = open_fds()
    fs.prefetch([os.fsencode(tmp_path / ('f%d' % i)) for i in range(3)])
    assert warm == [] and open_fds() == before


def test_the_prefetch_probe_leaves_atime_alone(tmp_path):
    """It reads a byte of the first file (to see whether the page cache
    has it): as the backup's own reads, without updating its atime."""
    fs = obnamlib.vfs.local.LocalFS('/')
    path = tmp_path / 'mbox'
    path.write_bytes(b'new mail')
    old = os.stat(path).st_mtime_ns - 2 * 86400 * 10**9
    os.utime(path, ns=(old, os.stat(path).st_mtime_ns))
    fs.prefetch([os.fsencode(path)])
    assert os.stat(path).st_atime_ns == old


@pytest.mark.timeout(30)
def test_a_prefetched_file_that_became_a_fifo_is_not_waited_for(
        tmp_path, cold):
    fs = obnamlib.vfs.local.LocalFS('/')
    os.mkfifo(tmp_path / 'was-a-file')
    (tmp_path / 'f').write_bytes(b'x')
    before = open_fds()
    fs.prefetch([os.fsencode(tmp_path / name) for name in ('was-a-file', 'f')])
    assert open_fds() == before
