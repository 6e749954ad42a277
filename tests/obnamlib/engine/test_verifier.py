"""verify: compare a generation with the live file system (cli.md §9)."""

import hashlib
import os
import random
import time

import pytest

import obnamlib.errors

from obnamlib.engine import backup_engine, verifier
from obnamlib.engine.listing import local_time
from obnamlib.repo.metadata import Metadata
from obnamlib.cli import backup_progress
from tests.obnamlib.backup_helpers import FatalTestError, live_fs, open_repository


def back_up(tmp_path, live):
    repo, storage = open_repository(tmp_path / 'repo')
    backup_engine.BackupEngine(
        repo, live_fs(), backup_engine.BackupOptions('host', chunk_size=4096),
        backup_progress.BackupProgress(), repo_io=storage,
    ).run([os.fsencode(live)])


def verify(tmp_path, paths, randomly=0):
    repo, _ = open_repository(tmp_path / 'repo')
    gen = repo.get_generation_ids('host')[-1]
    failures = []
    v = verifier.Verifier(repo, live_fs(), gen, failures.append)
    paths = [os.fsencode(p) for p in paths]
    if randomly:
        v.verify_randomly(paths, randomly, random.Random(1))
    else:
        v.verify_paths(paths)
    return [str(f) for f in failures], v.checked


def make_tree(live):
    live.mkdir()
    (live / 'f').write_bytes(b'x' * 10000)
    (live / 'sub').mkdir()
    (live / 'sub' / 'g').write_bytes(b'gg')
    os.symlink('f', live / 'link')
    os.mkfifo(live / 'fifo')


def test_unchanged_tree_verifies(tmp_path):
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    failures, checked = verify(tmp_path, [live])
    assert failures == []
    assert checked == 6


def test_mtime_change_is_reported_with_both_values(tmp_path):
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    old = os.lstat(live / 'sub' / 'g').st_mtime_ns
    os.utime(live / 'sub' / 'g', ns=(1, 1 * 10 ** 9 + old % 10 ** 9))
    failures, _ = verify(tmp_path, [live])
    assert failures == ['RDF30DX: %s/sub/g: metadata change: st_mtime_sec '
                        '(%s vs %s)' % (live, local_time(old // 10 ** 9),
                                        local_time(1))]


def test_mtime_change_shows_local_times_as_ls_does(monkeypatch):
    monkeypatch.setenv('TZ', 'Europe/Helsinki')
    time.tzset()
    try:
        assert verifier.metadata_difference(
            Metadata(st_mtime_sec=1445970090), Metadata(st_mtime_sec=1)) == (
            'metadata change: st_mtime_sec '
            '(2015-10-27 20:21:30 +0200 vs 1970-01-01 02:00:01 +0200)')
        assert verifier.metadata_difference(
            Metadata(st_mtime_nsec=1), Metadata(st_mtime_nsec=2)) == \
            'metadata change: st_mtime_nsec (1 vs 2)'
    finally:
        monkeypatch.undo()
        time.tzset()


def test_appended_byte_with_same_mtime_is_more_data_at_end(tmp_path):
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    st = os.lstat(live / 'f')
    with open(live / 'f', 'ab') as f:
        f.write(b'!')
    os.utime(live / 'f', ns=(st.st_atime_ns, st.st_mtime_ns))
    failures, _ = verify(tmp_path, [live / 'f'])
    assert failures == ['RDF30DX: %s/f: more data at end of file' % live]


def test_changed_content_same_metadata_is_data_changed(tmp_path):
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    st = os.lstat(live / 'f')
    (live / 'f').write_bytes(b'y' * 10000)
    os.utime(live / 'f', ns=(st.st_atime_ns, st.st_mtime_ns))
    failures, _ = verify(tmp_path, [live])
    assert failures == ['RDF30DX: %s/f: data changed' % live]


def test_missing_file_and_changed_symlink_target(tmp_path):
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    os.remove(live / 'sub' / 'g')
    st = os.lstat(live / 'link')
    os.remove(live / 'link')
    os.symlink('g', live / 'link')
    os.utime(live / 'link', ns=(st.st_atime_ns, st.st_mtime_ns),
             follow_symlinks=False)
    failures, _ = verify(tmp_path, [live / 'sub', live / 'link'])
    assert len(failures) == 3
    assert failures[0] == ('RDF30DX: %s/sub/g: missing or inaccessible: '
                           'No such file or directory' % live)
    # Removing g changed its directory too (post-order: after g).
    assert failures[1].startswith(
        'RDF30DX: %s/sub: metadata change: st_mtime_' % live)
    assert failures[2] == (
        "RDF30DX: %s/link: metadata change: target ('f' vs 'g')" % live)


def test_extra_live_files_are_not_reported(tmp_path):
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    st = os.lstat(live)
    (live / 'new').write_bytes(b'n')
    os.utime(live, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert verify(tmp_path, [live]) == ([], 6)


def test_verify_randomly_checks_only_that_many_regular_files(tmp_path):
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    assert verify(tmp_path, [live], randomly=1) == ([], 1)
    assert verify(tmp_path, [live], randomly=100) == ([], 2)


# --- a damaged repository (issue 7): every object is still checked ----------

from tests.obnamlib import restore_helpers as rh    # noqa: E402


def damaged_world(tmp_path):
    """A real backup of a small tree; (live, repo path, repo, gen)."""
    live = tmp_path / 'live'
    (live / 'dir').mkdir(parents=True)
    (live / 'a-broken').write_bytes(os.urandom(4096 * 2 + 100))
    (live / 'b-fine').write_bytes(os.urandom(4096 + 7))
    (live / 'dir' / 'inner').write_bytes(b'inner')
    repo, gen = rh.back_up(tmp_path / 'repo', live)
    return live, tmp_path / 'repo', repo, gen


def verify_damaged(repo_path, live, randomly=0):
    import obnamlib.repo.factory
    repo = obnamlib.repo.factory.open_repository(url=str(repo_path))
    gen = repo.get_generation_ids(rh.CLIENT)[-1]
    failures = []
    v = verifier.Verifier(repo, live_fs(), gen, failures.append)
    if randomly:
        v.verify_randomly([os.fsencode(str(live))], randomly,
                          random.Random(1))
    else:
        v.verify_paths([os.fsencode(str(live))])
    return [str(f) for f in failures], v.checked


def content_md5(repo, gen, path):
    digest = hashlib.md5()
    for chunk_id in repo.get_file_chunk_ids(gen, os.fsencode(str(path))):
        digest.update(repo.get_chunk_content(chunk_id))
    return digest.hexdigest()


def test_missing_chunk_is_one_failure_and_the_rest_is_checked(tmp_path):
    from obnamlib.repo.fmt_6.chunk_store import idpath
    live, repo_path, repo, gen = damaged_world(tmp_path)
    lost = repo.get_file_chunk_ids(gen, os.fsencode(str(live / 'a-broken')))[1]
    os.remove(rh.chunk_file(repo_path, lost))
    failures, checked = verify_damaged(repo_path, live)
    assert failures == [
        "RDF30DX: %s: R43272X: Repository doesn't contain chunk %x. It is "
        "expected at %s" % (live / 'a-broken', lost, idpath(lost))]
    assert checked == 5


@pytest.mark.parametrize('damage', [rh.truncate, rh.flip_last_bit])
def test_damaged_chunk_is_a_checksum_failure_not_a_change(tmp_path, damage):
    live, repo_path, repo, gen = damaged_world(tmp_path)
    damage(rh.file_chunk(repo, gen, repo_path, live / 'a-broken', 1))
    actual = content_md5(repo, gen, live / 'a-broken')
    recorded = hashlib.md5((live / 'a-broken').read_bytes()).hexdigest()
    failures, checked = verify_damaged(repo_path, live)
    assert failures == [
        'RDF30DX: %s: backed-up data damaged: whole-file checksum mismatch '
        '(%s vs %s)' % (live / 'a-broken', actual, recorded)]
    assert checked == 5


def test_damage_after_a_live_change_is_still_reported(tmp_path):
    live, repo_path, repo, gen = damaged_world(tmp_path)
    os.remove(rh.file_chunk(repo, gen, repo_path, live / 'a-broken', 2))
    st = os.lstat(live / 'a-broken')
    with open(live / 'a-broken', 'r+b') as f:
        f.write(b'changed')
    os.utime(live / 'a-broken', ns=(st.st_atime_ns, st.st_mtime_ns))
    failures, _ = verify_damaged(repo_path, live)
    assert len(failures) == 1
    assert failures[0].startswith(
        "RDF30DX: %s: R43272X: Repository doesn't contain chunk "
        % (live / 'a-broken'))


def test_live_change_of_an_intact_backup_is_data_changed(tmp_path):
    live, repo_path, repo, gen = damaged_world(tmp_path)
    st = os.lstat(live / 'a-broken')
    with open(live / 'a-broken', 'r+b') as f:
        f.write(b'changed')
    os.utime(live / 'a-broken', ns=(st.st_atime_ns, st.st_mtime_ns))
    failures, _ = verify_damaged(repo_path, live)
    assert failures == ['RDF30DX: %s: data changed' % (live / 'a-broken')]


def test_unreadable_metadata_of_one_file(tmp_path):
    live, repo_path, _, _ = damaged_world(tmp_path)
    rh.garble_metadata(repo_path, live / 'b-fine')
    failures, checked = verify_damaged(repo_path, live)
    assert failures == [
        'RDF30DX: %s: RB0D42X: Repository is damaged: metadata of %r: '
        'metadata value has 7 bytes, expected at least 144'
        % (live / 'b-fine', os.fsencode(str(live / 'b-fine')))]
    assert checked == 5


def test_unreadable_metadata_of_a_directory_keeps_its_contents(tmp_path):
    live, repo_path, _, _ = damaged_world(tmp_path)
    rh.garble_metadata(repo_path, live / 'dir')
    (live / 'dir' / 'inner').write_bytes(b'INNER')    # seen: still checked
    os.utime(live / 'dir' / 'inner', ns=(0, 0))
    failures, checked = verify_damaged(repo_path, live)
    assert len(failures) == 2
    assert failures[0].startswith(
        'RDF30DX: %s: RB0D42X: Repository is damaged: metadata of '
        % (live / 'dir'))
    assert failures[1].startswith(
        'RDF30DX: %s: metadata change: st_mtime_sec'
        % (live / 'dir' / 'inner'))
    assert checked == 5


def test_verify_randomly_reports_damage(tmp_path):
    live, repo_path, repo, gen = damaged_world(tmp_path)
    os.remove(rh.file_chunk(repo, gen, repo_path, live / 'a-broken', 0))
    failures, checked = verify_damaged(repo_path, live, randomly=10)
    assert checked == 3
    assert len(failures) == 1
    assert failures[0].startswith(
        'RDF30DX: %s: R43272X: ' % (live / 'a-broken'))


def test_unreadable_top_is_one_fatal_error(tmp_path):
    live, repo_path, _, _ = damaged_world(tmp_path)
    rh.garble_metadata(repo_path, live)
    with pytest.raises(obnamlib.errors.ObnamError) as info:
        verify_damaged(repo_path, live)
    assert info.value.code == 'RB0D42X'



def test_fatal_live_error_ends_verify_at_once(tmp_path):
    """A pull verify whose SSH link dies must stop, not fail every file."""
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    fs = live_fs()

    def lost(path, *args, **kwargs):
        raise FatalTestError()

    fs.open_read = lost
    repo, _ = open_repository(tmp_path / 'repo')
    failures = []
    v = verifier.Verifier(repo, fs, repo.get_generation_ids('host')[-1],
                          failures.append)
    with pytest.raises(FatalTestError):
        v.verify_paths([os.fsencode(str(live))])
    assert failures == []


def test_verify_says_it_will_read_chunks(tmp_path):
    live = tmp_path / 'live'
    make_tree(live)
    back_up(tmp_path, live)
    repo, _ = open_repository(tmp_path / 'repo')
    said = []
    read = repo.get_chunk_content
    repo.expect_chunk_reads = lambda: said.append('expect')
    repo.get_chunk_content = lambda chunk_id: (said.append('read'),
                                               read(chunk_id))[1]
    gen = repo.get_generation_ids('host')[-1]
    failures = []
    verifier.Verifier(repo, live_fs(), gen, failures.append).verify_paths(
        [os.fsencode(live)])
    assert failures == [] and said[0] == 'expect'
    assert said.count('expect') == 1 and 'read' in said
