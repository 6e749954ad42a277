"""Lock files: exclusive, sorted, all-or-nothing, retried once a second."""

import os
import re

import pytest

from obnamlib import errors
from obnamlib.vfs.local import LocalFS as PlainLocalStorage
from obnamlib.repo.storage import lockmgr
from obnamlib.repo.storage.lockmgr import LockManager, lock_path


class FakeClock:
    """Time that advances only when the lock manager sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self):
        return self.now


@pytest.fixture
def fs(tmp_path):
    return PlainLocalStorage(str(tmp_path))


def manager(fs, timeout=0, clock=None):
    clock = clock or FakeClock()
    return LockManager(fs, timeout, sleep=clock.sleep, clock=clock)


def test_lock_paths():
    assert lock_path('.') == 'lock'
    assert lock_path('123') == '123/lock'
    assert lock_path('chunks') == 'chunks/lock'


def test_lock_creates_file_with_owner_text(fs, tmp_path):
    m = manager(fs)
    m.lock(['.', 'chunks'])
    content = (tmp_path / 'lock').read_bytes()
    assert content.startswith(b'obnam-lock\nhost=')
    assert b'pid=%d\n' % os.getpid() in content
    assert (tmp_path / 'chunks' / 'lock').exists()
    m.unlock(['.', 'chunks'])
    assert not (tmp_path / 'lock').exists()
    assert not (tmp_path / 'chunks' / 'lock').exists()


def test_second_locker_times_out_after_retrying_each_second(fs):
    manager(fs).lock(['7'])
    clock = FakeClock()
    with pytest.raises(errors.LockFail) as e:
        manager(fs, timeout=3, clock=clock).lock(['7'])
    assert re.fullmatch(
        r"R681AEX: Couldn't create lock 7/lock: timeout; held by host "
        r"\S+, pid %d, for \d+ s; if that obnam is no longer running, "
        r"remove the lock with obnam force-lock" % os.getpid(), str(e.value))
    assert clock.sleeps == [1, 1, 1]


def test_zero_timeout_fails_at_once(fs):
    manager(fs).lock(['.'])
    clock = FakeClock()
    with pytest.raises(errors.LockFail):
        manager(fs, timeout=0, clock=clock).lock(['.'])
    assert clock.sleeps == []


def test_lock_obtained_when_released_during_wait(fs):
    holder = manager(fs)
    holder.lock(['x'])

    class ReleasingClock(FakeClock):
        def sleep(self, seconds):
            super().sleep(seconds)
            holder.unlock(['x'])

    m = manager(fs, timeout=10, clock=ReleasingClock())
    m.lock(['x'])
    assert m.holds('x')


def test_failure_releases_locks_already_taken(fs, tmp_path):
    manager(fs).lock(['chunksums'])
    m = manager(fs)
    with pytest.raises(errors.LockFail):
        m.lock(['chunks', 'chunklist', 'chunksums', '.'])
    assert not (tmp_path / 'lock').exists()
    assert not (tmp_path / 'chunklist' / 'lock').exists()
    assert not (tmp_path / 'chunks' / 'lock').exists()
    assert m.held == set()


def test_locks_taken_in_bytewise_sorted_order(tmp_path):
    order = []

    class Recording(PlainLocalStorage):
        def lock(self, path, content=b''):
            order.append(path)
            super().lock(path, content)

    m = manager(Recording(str(tmp_path)))
    m.lock(['chunksums', 'chunks', '123', '.', 'chunklist'])
    assert order == ['lock', '123/lock', 'chunklist/lock', 'chunks/lock',
                     'chunksums/lock']


def test_break_lock_removes_tokens_dead_breakers_left(fs, tmp_path):
    (tmp_path / 'd').mkdir()
    for name in ('d/lock', 'd/' + lockmgr.TOKEN_PREFIX + 'ab12',
                 lockmgr.TOKEN_PREFIX + 'cd34', 'd/other'):
        (tmp_path / name).write_bytes(b'x')
    manager(fs).break_lock('d')
    assert sorted(os.listdir(tmp_path / 'd')) == ['other']
    manager(fs).break_lock('.')
    assert sorted(os.listdir(tmp_path)) == ['d']
    manager(fs).break_lock('missing')     # no directory: no error


def test_break_lock_removes_someone_elses(fs, tmp_path):
    manager(fs).lock(['.'])
    manager(fs).break_lock('.')
    assert not (tmp_path / 'lock').exists()
    manager(fs).break_lock('.')   # absent: no error


def test_location_shown_in_error(fs):
    manager(fs).lock(['.'])
    m = LockManager(fs, 0, location='/srv/repo')
    with pytest.raises(errors.LockFail) as e:
        m.lock(['.'])
    assert "lock /srv/repo/lock: timeout" in str(e.value)


@pytest.mark.parametrize('dirname', ['.', '42'])
def test_a_lock_file_too_big_to_be_a_lock_is_not_read(fs, tmp_path,
                                                      monkeypatch, dirname):
    """A damaged or hostile repository's huge lock file is not read into
    memory: the lock counts as held by someone unknown."""
    path = lock_path(dirname)
    (tmp_path / dirname).mkdir(exist_ok=True)
    (tmp_path / path).write_bytes(b'x' * (lockmgr.MAX_LOCK_BYTES + 1))
    real_read = fs.read_raw

    def read_raw(name):
        assert name != path, 'the huge lock file was read'
        return real_read(name)
    monkeypatch.setattr(fs, 'read_raw', read_raw)
    with pytest.raises(errors.LockFail) as e:
        manager(fs).lock([dirname])
    assert str(e.value) == \
        "R681AEX: Couldn't create lock %s: timeout" % path
    assert (tmp_path / path).stat().st_size == lockmgr.MAX_LOCK_BYTES + 1


def test_a_lock_file_of_the_biggest_size_allowed_is_read(fs, tmp_path):
    (tmp_path / 'lock').write_bytes(b'x' * lockmgr.MAX_LOCK_BYTES)
    reads = []
    real_read = fs.read_raw

    def read_raw(name):
        reads.append(name)
        return real_read(name)
    fs.read_raw = read_raw
    with pytest.raises(errors.LockFail):
        manager(fs).lock(['.'])
    assert 'lock' in reads
