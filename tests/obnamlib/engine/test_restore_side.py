"""restore's second process (obnamlib.engine.restore_side): files it
writes are restored exactly, with the same messages in the same order, as
by one process; when it cannot start, fails or dies, the first process
writes its files itself; an interrupted restore kills it and leaves no
part of a file."""

import os
import signal
import stat

import pytest

import obnamlib.repo.factory
from obnamlib.engine import restore_side, restorer as restorer_module
from obnamlib.engine import side_process
from obnamlib.engine.restore_reporting import WalkOrder
from obnamlib.repo.fmt_6.repo_fmt_6 import RepositoryFormat6
from tests.gpg_fixture import reference_gpg_home  # noqa: F401
from tests.sshd_fixture import sshd  # noqa: F401
from tests.obnamlib import restore_helpers as rh
from tests.obnamlib.restore_helpers import Collect
from tests.obnamlib.engine.test_restorer import (
    facts, make_funny_farm, restorer, write)


@pytest.fixture
def eager(monkeypatch):
    """The second process from the first file on, in batches of 3."""
    monkeypatch.setattr(restore_side, 'SIDE_AFTER_FILES', 0)
    monkeypatch.setattr(restore_side, 'SIDE_AFTER_BYTES', 0)
    monkeypatch.setattr(restore_side, 'BATCH_FILES', 3)


@pytest.fixture
def backed_up(tmp_path):
    """(live tree, repository path, generation's client) on disk: every
    kind of object, and directories of files with their own times."""
    live = tmp_path / 'live'
    live.mkdir()
    make_funny_farm(live)
    for d in range(4):
        sub = live / ('d%d' % d)
        sub.mkdir()
        for i in range(7):
            write(sub / ('f%d' % i), os.urandom(100 * i + 4096 * (i % 3)),
                  mtime_ns=1500000000000000000 + i)
        os.chmod(sub / 'f1', 0o400)
        os.utime(sub, ns=(7, 1600000000000000000 + d))
    os.utime(live, ns=(9, 1700000000000000000))
    rh.back_up(tmp_path / 'repo', live)
    return live, tmp_path / 'repo'


def run_restore(repo_path, target, monkeypatch, side=True, settings=None,
                client=rh.CLIENT):
    """(reporter, files the second process wrote, batches given back,
    whether it failed)."""
    written, given_back = [], []
    real_answered = restore_side.SideFiles.answered

    def counting_answered(self, wait=False):
        answers = real_answered(self, wait)
        for results, batch in answers:
            (written if results is not None else given_back).extend(batch)
        return answers

    with monkeypatch.context() as m:
        m.setattr(restore_side.SideFiles, 'answered', counting_answered)
        if not side:
            m.setattr(restore_side.SideFiles, 'claim', lambda self, md: None)
        repo = obnamlib.repo.factory.open_repository(
            settings, url=str(repo_path))
        try:
            gen = repo.get_generation_ids(client)[-1]
            r, rep = restorer(repo, gen, target)
            try:
                r.restore()
                failed = False
            except restorer_module.RestoreErrors:
                failed = True
        finally:
            repo.close()
    return rep, len(written), len(given_back), failed


def assert_same_restore(tmp_path, repo_path, monkeypatch, given_back=False,
                        **kwargs):
    """Restore with and without the second process; the same trees, the
    same messages in the same order.  The one-process reporter."""
    one, _, _, one_failed = run_restore(
        repo_path, tmp_path / 'one', monkeypatch, side=False, **kwargs)
    two, written, back, two_failed = run_restore(
        repo_path, tmp_path / 'two', monkeypatch, **kwargs)
    assert written > 0 or given_back
    assert bool(back) == given_back
    assert facts(tmp_path / 'two') == facts(tmp_path / 'one')
    assert (two.errors, two.notes, two.done) == (
        one.errors, one.notes, one.done)
    assert two_failed == one_failed
    return one


def test_files_written_by_two_processes_are_as_by_one(
        tmp_path, backed_up, eager, monkeypatch):
    live, repo_path = backed_up
    rep = assert_same_restore(tmp_path, repo_path, monkeypatch)
    assert rep.errors == []
    assert facts(tmp_path / 'two' / str(live).lstrip('/')) == facts(live)


def test_damage_is_said_in_the_walk_order_as_by_one_process(
        tmp_path, backed_up, eager, monkeypatch):
    live, repo_path = backed_up
    repo = obnamlib.repo.factory.open_repository(url=str(repo_path))
    gen = repo.get_generation_ids(rh.CLIENT)[-1]
    for name in ('d0/f1', 'd1/f4', 'd1/f5', 'd3/f2', 'multi'):
        os.remove(rh.file_chunk(repo, gen, repo_path, live / name))
    repo.close()
    rh.flip_last_bit(rh.file_chunk(repo, gen, repo_path, live / 'd2/f5', 1))
    rh.garble_metadata(repo_path, live / 'd1' / 'f3')
    rep = assert_same_restore(tmp_path, repo_path, monkeypatch)
    assert [line.split(': R')[0] for line in rep.errors] == [
        'Failed to restore %s' % (live / name) for name in (
            'd0/f1', 'd1/f3', 'd1/f4', 'd1/f5', 'd2/f5', 'd3/f2', 'multi')]


def test_a_small_restore_starts_no_second_process(
        tmp_path, backed_up, monkeypatch):
    _, repo_path = backed_up
    started = []
    monkeypatch.setattr(side_process.SideProcess, '_start',
                        lambda self: started.append(self) or False)
    rep, written, back, failed = run_restore(
        repo_path, tmp_path / 'target', monkeypatch)
    assert (started, written, back, failed, rep.errors) == (
        [], 0, 0, False, [])


def test_one_core_starts_no_second_process(
        tmp_path, backed_up, eager, monkeypatch):
    _, repo_path = backed_up
    monkeypatch.setattr(side_process.os, 'sched_getaffinity',
                        lambda pid: {0})
    rep, written, back, failed = run_restore(
        repo_path, tmp_path / 'target', monkeypatch)
    assert (written, back, failed, rep.errors) == (0, 0, False, [])


def test_a_second_process_that_cannot_open_gives_its_files_back(
        tmp_path, backed_up, eager, monkeypatch):
    _, repo_path = backed_up
    monkeypatch.setattr(
        RepositoryFormat6, 'reopening',
        lambda self: {'url': str(tmp_path / 'nowhere'), 'node_size': 4096})
    assert_same_restore(tmp_path, repo_path, monkeypatch, given_back=True)


def left_behind(target, payload, make):
    """make(path) what a second process that stopped may have left at the
    place of the first file of a batch it was sent; that path."""
    dest = str(target) + os.fsdecode(payload[0][0])
    make(dest)
    return dest


def test_a_second_process_that_dies_gives_its_files_back(
        tmp_path, backed_up, eager, monkeypatch):
    """Killed with batches unanswered: their files are written again,
    over whatever it left (here a symlink, which writing through would
    refuse: the place is emptied first)."""
    _, repo_path = backed_up
    real_submit = side_process.SideProcess.submit
    killed = []

    def submit_then_die(self, payload, kept=None):
        seq = real_submit(self, payload, kept)
        if len(self.sent) == side_process.BACKLOG and not killed:
            self.proc.kill()
            self.proc.wait()
            killed.append(left_behind(
                tmp_path / 'two', payload,
                lambda dest: os.symlink(str(tmp_path / 'elsewhere'), dest)))
        return seq

    monkeypatch.setattr(side_process.SideProcess, 'submit', submit_then_die)
    assert_same_restore(tmp_path, repo_path, monkeypatch, given_back=True)
    assert killed and os.path.isfile(killed[0])
    assert not os.path.lexists(tmp_path / 'elsewhere')


def test_an_interrupted_restore_kills_it_and_leaves_no_part_of_a_file(
        tmp_path, backed_up, eager, monkeypatch):
    live, repo_path = backed_up
    real_submit = side_process.SideProcess.submit
    processes = []

    def submit_then_interrupt(self, payload, kept=None):
        """Ctrl-C with two batches sent, the second process stopped with
        part of a file of the second written."""
        seq = real_submit(self, payload, kept)
        processes.append(self.proc)
        if len(processes) == 2:
            os.kill(self.proc.pid, signal.SIGSTOP)
            os.waitpid(self.proc.pid, os.WUNTRACED)
            partial.append(left_behind(
                tmp_path / 'target', payload,
                lambda dest: open(dest, 'wb').write(b'part')))
            raise KeyboardInterrupt()
        return seq

    partial = []
    monkeypatch.setattr(side_process.SideProcess, 'submit',
                        submit_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_restore(repo_path, tmp_path / 'target', monkeypatch)
    assert processes[0].returncode == -signal.SIGKILL
    assert not os.path.lexists(partial[0])
    restored = facts(tmp_path / 'target' / str(live).lstrip('/'))
    whole = facts(live)
    for path, fact in restored.items():
        if fact[0].startswith('0o100'):      # a regular file
            assert fact[6] == whole[path][6], path


def test_an_encrypted_repository_is_restored_with_its_keys_handed_over(
        tmp_path, reference_gpg_home, eager, monkeypatch):
    """Obnam 1.x's encrypted repository, one chunk damaged."""
    from tests.obnamlib.repo.fmt_6 import reference_repos as rr
    rr.unpack(rr.ENCRYPTED, str(tmp_path / 'ref'))
    repo_path = tmp_path / 'ref' / 'repo'
    settings = {'gnupghome': reference_gpg_home.path}
    repo = obnamlib.repo.factory.open_repository(settings,
                                                 url=str(repo_path))
    gen = repo.get_generation_ids('havelock')[-1]
    ids = [repo.get_file_chunk_ids(gen, path)
           for path, md in _regular_files(repo, gen)]
    repo.close()
    rh.flip_bit(rh.chunk_file(repo_path, [i for i in ids if i][0][0]), -13)
    rep = assert_same_restore(tmp_path, repo_path, monkeypatch,
                              settings=settings, client='havelock')
    assert rep.errors and all('Decryption failed' in line
                              for line in rep.errors)


def _regular_files(repo, gen, path=b'/'):
    for name in repo.get_file_children(gen, path):
        child = os.path.join(path, name)
        md = repo.get_metadata(gen, child)
        if md.isdir():
            yield from _regular_files(repo, gen, child)
        elif stat.S_ISREG(md.st_mode or 0):
            yield child, md


def test_messages_wait_for_the_places_before_them():
    said = Collect()
    order = WalkOrder(said)
    order.error('first')
    place = order.reserve()
    order.error('third')
    later = order.reserve()
    order.notify('fifth')
    assert said.errors == ['first']
    order.fill(place, [('error', ('second',))])
    assert said.errors == ['first', 'second', 'third']
    with order.filling(later):
        order.error('fourth')
    assert (said.errors, said.notes) == (
        ['first', 'second', 'third', 'fourth'], ['fifth'])


def test_a_run_that_ends_says_what_waits_behind_an_open_place():
    said = Collect()
    order = WalkOrder(said)
    order.reserve()
    order.error('after')
    assert said.errors == []
    order.flush()
    assert said.errors == ['after']


def test_an_sftp_repository_is_restored_by_two_connections(
        tmp_path, backed_up, eager, sshd, monkeypatch):
    """The second process connects by itself with the same settings."""
    monkeypatch.delenv('SSH_AUTH_SOCK', raising=False)
    _, repo_path = backed_up
    settings = {'ssh-key': sshd.client_key,
                'ssh-known-hosts': sshd.known_hosts}
    rep = assert_same_restore(tmp_path, sshd.url(str(repo_path)),
                              monkeypatch, settings=settings)
    assert rep.errors == []


def test_a_second_connection_that_would_ask_the_user_gives_its_files_back(
        tmp_path, backed_up, eager, sshd, monkeypatch):
    """Without the key the first process was given, ssh would ask for a
    password: it is not asked (BatchMode), the first process does the
    work."""
    monkeypatch.delenv('SSH_AUTH_SOCK', raising=False)
    _, repo_path = backed_up
    settings = {'ssh-key': sshd.client_key,
                'ssh-known-hosts': sshd.known_hosts}
    real = side_process.SideProcess._start

    def without_the_key(self):
        reopening = self.repo.reopening

        def keyless():
            found = reopening()
            found['settings'] = dict(found['settings'], **{
                'ssh-key': str(tmp_path / 'no-such-key')})
            return found
        self.repo.reopening = keyless
        return real(self)

    monkeypatch.setattr(side_process.SideProcess, '_start', without_the_key)
    assert_same_restore(tmp_path, sshd.url(str(repo_path)), monkeypatch,
                        given_back=True, settings=settings)
