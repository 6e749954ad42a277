"""verify: compare a generation with the live file system (cli.md §9)."""

import os
import random

from obnamlib import backup_engine, backup_progress, verifier
from tests.obnamlib.backup_helpers import live_fs, open_repository


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
                        '(%d vs 1)' % (live, old // 10 ** 9)]


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
