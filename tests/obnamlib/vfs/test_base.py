"""The storage interface: defaults for every optional method, capabilities
instead of probes, and a base that knows no implementation."""

import os
import stat
import subprocess
import sys

import pytest

import obnamlib.errors
import obnamlib.vfs.base as base
import obnamlib.vfs.local
from obnamlib import larch
from tests.obnamlib.mount_tables import local_fs_on
from tests.paths import CHECKOUT


@pytest.fixture
def plain():
    """A Storage over an object that has only the StorageFS table."""
    return base.as_storage(larch.MemoryFS())


def test_a_storage_is_its_own_storage(tmp_path):
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    assert base.as_storage(fs) is fs


def test_plain_storage_has_no_capabilities(plain):
    assert plain.capabilities == frozenset()
    assert plain.reads_in_batches is False


def test_local_storage_writes_from_threads_and_holds_local_files(tmp_path):
    fs = local_fs_on(tmp_path, 'ext4')
    assert fs.capabilities == {base.CREATES_IN_BACKGROUND, base.LOCAL_FILES,
                               base.LIVE_READS_IN_BACKGROUND,
                               base.ADVISES_READS,
                               base.SETS_ATTRIBUTES_OF_OPEN_FILES}
    assert fs.reads_in_batches is False
    assert fs.prefetch_size == obnamlib.vfs.local.PREFETCH_LIVE_BYTES


def test_default_create_is_exclusive(plain):
    plain.create_file('d/f', b'one')
    with pytest.raises(FileExistsError):
        plain.create_file('d/f', b'two')
    assert plain.read_file('d/f') == b'one'


def test_default_lock_fails_on_a_taken_name_and_unlock_removes(plain):
    plain.lock('lock', b'me')
    with pytest.raises(obnamlib.errors.LockFail):
        plain.lock('lock', b'you')
    assert plain.read_raw('lock') == b'me'
    plain.unlock('lock')
    assert not plain.exists('lock')


def test_default_file_sizes_read_the_files(plain):
    plain.write_file('d/f', b'four')
    plain.write_file('d/sub/g', b'x')
    sizes = plain.file_sizes(['d', 'missing'])
    assert sizes[0] == {'f': 4}
    assert isinstance(sizes[1], FileNotFoundError)


def test_default_batches_go_one_by_one(plain):
    plain.write_file('a', b'A')
    results = plain.create_files([('b', b'B'), ('a', b'X')])
    assert results[0] is None
    assert len(results) == 2 and isinstance(results[1], FileExistsError)
    assert plain.read_file('a') == b'A'
    assert isinstance(plain.create_files([('a', b'X')])[0], FileExistsError)
    assert plain.read_files(['a', 'b']) == [b'A', b'B']
    with pytest.raises(FileNotFoundError):
        plain.read_files(['a', 'missing'])


def test_default_hints_do_nothing(plain):
    plain.read_ahead(['a'])
    plain.expect_reads()
    plain.sync()
    assert plain.spread_subdirectories('chunks') is False
    assert plain.listdir('') == []


def test_default_set_attributes_sets_each_and_reports_failures(tmp_path):
    fs = obnamlib.vfs.local.LocalFS(str(tmp_path))
    path = os.fsencode(tmp_path / 'f')
    open(path, 'wb').close()
    st = os.lstat(path)
    failures = fs.set_attributes(path, owner=(-1, st.st_gid), mode=0o640,
                                 times=(10 ** 9, 2 * 10 ** 9))
    assert failures == {}
    st = os.lstat(path)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_mtime_ns == 2 * 10 ** 9
    gone = os.fsencode(tmp_path / 'gone')
    failures = fs.set_attributes(gone, mode=0o600, times=(0, 0))
    assert sorted(failures) == ['mode', 'times']
    assert isinstance(failures['mode'], obnamlib.errors.ObnamSystemError)


def test_attribute_steps_run_in_order_past_failures_and_stop_if_fatal():
    calls = []

    def failing(name, error):
        def setter(*args):
            calls.append((name, args))
            raise error
        return setter
    refused = obnamlib.errors.ObnamSystemError(
        filename='f', errno=1, strerror='refused')
    failures = base.set_attributes_in_steps(
        failing('owner', refused), lambda mode: calls.append(('mode', mode)),
        failing('times', refused), owner=(1, 2), mode=0o600, times=(3, 4))
    assert calls == [('owner', (1, 2)), ('mode', 0o600), ('times', (3, 4))]
    assert failures == {'owner': refused, 'times': refused}

    class Lost(obnamlib.errors.ObnamError):
        fatal = True
    with pytest.raises(Lost):
        base.set_attributes_in_steps(
            failing('owner', Lost()), failing('mode', refused),
            failing('times', refused), owner=(1, 2), mode=0o600)
    assert calls[-1][0] == 'owner'


def test_base_knows_no_implementation_and_local_runs_load_no_sftp():
    code = ('import sys, obnamlib.vfs.base; '
            'assert "obnamlib.vfs.local" not in sys.modules; '
            'import obnamlib.vfs.factory as f; f.open_vfs("/"); '
            'assert not any(m.startswith("obnamlib.vfs.sftp") '
            'for m in sys.modules)')
    subprocess.run([sys.executable, '-c', code], cwd=CHECKOUT, check=True)
