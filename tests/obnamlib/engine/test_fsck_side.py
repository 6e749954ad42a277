"""fsck's second process (obnamlib.engine.fsck_side): batches it checks
give the same problem lines, in the same order, and the same counts as
checking everything in one process; when it cannot start, fails or dies,
the first process checks its batches itself."""

import os
import pickle
import shutil
import signal

import pytest

from obnamlib import errors
from obnamlib.engine import (fsck_content, fsck_engine, fsck_side,
                              side_process)
from obnamlib.repo import factory as repo_factory
from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
from obnamlib.repo.storage import key_store, repo_fs
from obnamlib.vfs import base as vfs_base
from obnamlib.vfs import local
from tests.obnamlib import restore_helpers as rh
from tests.obnamlib.repo.fmt_6 import reference_repos as rr
from tests.obnamlib.engine.test_fsck_injection import (  # noqa: F401
    delete, files_under, flip, open_repo, pristine)
from tests.gpg_fixture import reference_gpg_home  # noqa: F401
from tests.sshd_fixture import sshd  # noqa: F401


@pytest.fixture(scope='module')
def damaged(pristine, tmp_path_factory):
    """The pristine repository with some chunk files flipped or gone."""
    repo, _ = pristine
    copy = tmp_path_factory.mktemp('fsck-side') / 'repo'
    shutil.copytree(str(repo), str(copy))
    chunk_files = files_under(str(copy), 'chunks', 'chunks')
    assert len(chunk_files) > 20
    for rel in chunk_files[3::7]:
        flip(str(copy), rel, rel)
    delete(str(copy), chunk_files[5], chunk_files[5])
    return copy


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of a few chunks, the second process used from the first."""
    monkeypatch.setattr(fsck_content, 'BATCH_CHUNK_IDS', 4)
    monkeypatch.setattr(fsck_content, 'SIDE_BATCH_CHUNK_IDS', 4)
    monkeypatch.setattr(fsck_content, 'SIDE_AFTER_CHUNK_IDS', 0)


def run_fsck(path, monkeypatch, side=True, settings=None):
    """(problems, stats, batches the second process answered, batches it
    gave back)."""
    merged = []
    given_back = []
    real_merge = fsck_content.ContentCheck._merge
    real_done = fsck_side.SideCheck.done

    def counting_merge(self, findings, files):
        merged.append(findings)
        return real_merge(self, findings, files)

    def counting_done(self, wait=False):
        answered = real_done(self, wait)
        given_back.extend(seq for seq, findings, _ in answered
                          if findings is None)
        return answered

    with monkeypatch.context() as m:
        m.setattr(fsck_content.ContentCheck, '_merge', counting_merge)
        m.setattr(fsck_side.SideCheck, 'done', counting_done)
        if not side:
            m.setattr(fsck_engine, 'SideCheck', lambda repo: None)
        repo = repo_factory.open_repository(settings, url=str(path),
                                            lock_timeout=0)
        try:
            fsck = fsck_engine.Fsck(repo)
            problems = fsck.run()
        finally:
            repo.close()
    return problems, fsck.stats, len(merged), len(given_back)


def assert_same_check(path, monkeypatch, used, given_back=False,
                      settings=None):
    """The check with the second process (used: whether it answered a
    batch, None: either; given_back: whether it gave any back) is the
    check without it."""
    alone, alone_stats, none, _ = run_fsck(path, monkeypatch, side=False,
                                           settings=settings)
    shared, shared_stats, answered, back = run_fsck(path, monkeypatch,
                                                    settings=settings)
    assert none == 0
    assert used is None or (answered > 0) == used
    assert (back > 0) == given_back
    assert shared == alone
    for name in ('files', 'chunks', 'chunks_total', 'problems'):
        assert getattr(shared_stats, name) == getattr(alone_stats, name)
    return shared


def test_a_clean_repository_is_clean_with_two_processes(
        pristine, small_batches, monkeypatch):
    repo, _ = pristine
    assert assert_same_check(repo, monkeypatch, used=True) == []


def test_damage_is_reported_as_by_one_process(damaged, small_batches,
                                               monkeypatch):
    # Which batches the second process gets depends on timing: try a few.
    for _ in range(3):
        problems = assert_same_check(damaged, monkeypatch, used=True)
    assert any('is corrupted' in line for line in problems)
    assert any('does not exist' in line for line in problems)


def test_the_report_does_not_depend_on_the_batches(damaged, monkeypatch):
    """Lines come in the walk's order, not in each batch's reading order."""
    whole, _, _, _ = run_fsck(damaged, monkeypatch, side=False)
    monkeypatch.setattr(fsck_content, 'BATCH_CHUNK_IDS', 3)
    small, _, _, _ = run_fsck(damaged, monkeypatch, side=False)
    assert len(whole) > 3
    assert small == whole


def test_a_small_check_starts_no_second_process(damaged, monkeypatch):
    started = []
    monkeypatch.setattr(fsck_side.SideCheck, '_start',
                        lambda self: started.append(self) or False)
    assert_same_check(damaged, monkeypatch, used=False)
    assert started == []


def test_one_core_starts_no_second_process(damaged, small_batches,
                                           monkeypatch):
    monkeypatch.setattr(side_process.os, 'sched_getaffinity', lambda pid: {0})
    assert_same_check(damaged, monkeypatch, used=False)


def test_a_second_process_that_cannot_open_gives_its_batches_back(
        damaged, small_batches, monkeypatch, tmp_path):
    monkeypatch.setattr(
        RepositoryFormat6, 'reopening',
        lambda self: {'url': str(tmp_path / 'nowhere'), 'node_size': 4096})
    assert_same_check(damaged, monkeypatch, used=False, given_back=True)


def test_a_second_process_that_dies_gives_its_batches_back(
        damaged, small_batches, monkeypatch):
    real_submit = fsck_side.SideCheck.submit
    killed = []

    def submit_then_die(self, files, epoch):
        seq = real_submit(self, files, epoch)
        if len(self.sent) == side_process.BACKLOG and not killed:
            self.proc.kill()
            killed.append(seq)
        return seq

    monkeypatch.setattr(fsck_side.SideCheck, 'submit', submit_then_die)
    assert_same_check(damaged, monkeypatch, used=None, given_back=True)
    assert killed


def test_an_encrypted_repository_is_checked_with_its_keys_handed_over(
        tmp_path, reference_gpg_home, small_batches, monkeypatch):
    """Obnam 1.x's encrypted repository, one chunk damaged."""
    rr.unpack(rr.ENCRYPTED, str(tmp_path / 'ref'))
    path = tmp_path / 'ref' / 'repo'
    chunk_files = files_under(str(path), 'chunks', 'chunks')
    rh.flip_bit(os.path.join(str(path), chunk_files[0]), -13)
    settings = {'gnupghome': reference_gpg_home.path}
    problems = assert_same_check(path, monkeypatch, used=True,
                                 settings=settings)
    assert any('is corrupted' in line for line in problems)


def test_handed_over_keys_read_their_toplevels_only_and_write_nothing():
    keys = key_store.KnownKeys({'chunks': 'secret'})
    assert keys.symmetric_key('chunks') == 'secret'
    with pytest.raises(key_store.KeyNotHandedOver):
        keys.symmetric_key('clientlist')
    with pytest.raises(key_store.WritingWithHandedOverKeys):
        keys.check_before_writing()
    with pytest.raises(key_store.WritingWithHandedOverKeys):
        keys.prepare_toplevel('chunks')


def test_a_local_repository_is_reopened_from_its_directory(pristine):
    repo, _ = pristine
    opened = open_repo(repo)
    try:
        reopening = opened.reopening()
        assert reopening == {'url': os.path.abspath(str(repo)),
                             'settings': {},
                             'node_size': opened.node_size, 'keys': None}
        again = repo_factory.reopen_repository(reopening)
        try:
            assert again.get_client_names() == opened.get_client_names()
        finally:
            again.close()
    finally:
        opened.close()
    memory = repo_fs.RepositoryFS(vfs_base.BasicStorage(object()))
    assert memory.reopening(('chunks',)) is None
    # A key it cannot have is the caller's to report (SideCheck logs it).
    keyless = repo_fs.RepositoryFS(local.LocalFS(str(repo)),
                                   keys=key_store.KnownKeys({}))
    with pytest.raises(key_store.KeyNotHandedOver):
        keyless.reopening(('chunks',))


def test_an_sftp_repository_is_checked_by_two_connections(
        damaged, small_batches, sshd, monkeypatch):
    """The second process connects by itself, with the ssh settings the
    first was given."""
    monkeypatch.delenv('SSH_AUTH_SOCK', raising=False)
    settings = {'ssh-key': sshd.client_key,
                'ssh-known-hosts': sshd.known_hosts}
    problems = assert_same_check(sshd.url(str(damaged)), monkeypatch,
                                 used=True, settings=settings)
    assert any('is corrupted' in line for line in problems)


def test_an_interrupted_check_stops_the_second_process_at_once(
        damaged, small_batches, monkeypatch):
    real_submit = fsck_side.SideCheck.submit
    processes = []

    def submit_then_interrupt(self, files, epoch):
        if processes:
            raise KeyboardInterrupt()
        processes.append(self.proc)
        return real_submit(self, files, epoch)

    monkeypatch.setattr(fsck_side.SideCheck, 'submit', submit_then_interrupt)
    repo = open_repo(damaged)
    try:
        with pytest.raises(KeyboardInterrupt):
            fsck_engine.Fsck(repo).run()
    finally:
        repo.close()
    [proc] = processes
    # Killed, not asked to finish its batch first; and waited for.
    assert proc.returncode == -signal.SIGKILL


def test_a_repository_that_cannot_say_how_to_reopen_it_is_checked_here(
        damaged, small_batches, monkeypatch):
    def damaged_keys(self):
        raise errors.RepositoryCorrupt(what='key file', reason='garbled')

    monkeypatch.setattr(RepositoryFormat6, 'reopening', damaged_keys)
    assert_same_check(damaged, monkeypatch, used=False)


def test_a_garbled_reply_gives_the_batches_back():
    """Whatever ends the reader thread ends the second process's use: a
    check never waits for an answer that cannot come."""
    class Garbled:
        def recv(self):
            raise pickle.UnpicklingError('invalid load key')

        def close(self):
            pass

    side = fsck_side.SideCheck(repo=None)
    side.sent[1] = ['a file']
    side._receive(Garbled())
    assert side.done(wait=True) == [(1, None, ['a file'])]
    assert 'invalid load key' in side.failed
