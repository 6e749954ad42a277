"""A tampered repository (names that escape, nodes that loop): every
command ends quickly with one error line, restore creates nothing outside
--to, fsck names the damage.  Real repositories, real commands."""

import os
import subprocess

import pytest

from tests.obnamlib import hostile_repo
from tests.obnamlib.restore_helpers import CLIENT, back_up
from tests import paths

ROOT = paths.CHECKOUT
OBNAM = os.path.join(ROOT, 'bin', 'obnam')
COMMAND_TIMEOUT = 30


def obnam(tmp_path, *args):
    """bin/obnam ARGS with the test's own config; (exit code, stdout,
    stderr)."""
    result = subprocess.run(
        ['/usr/bin/python3', OBNAM, '--no-default-configs', '--quiet',
         '--client-name', CLIENT, '--log', str(tmp_path / 'obnam.log')]
        + list(args),
        capture_output=True, timeout=COMMAND_TIMEOUT,
        env=dict(os.environ, HOME=str(tmp_path)))
    return (result.returncode, result.stdout.decode(errors='replace'),
            result.stderr.decode(errors='replace'))


def everything_under(top):
    found = set()
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            found.add(os.path.join(dirpath, name))
    return found


@pytest.fixture
def world(tmp_path):
    """live/d/{a,s/x}, backed up; returns (tmp, live, repo path)."""
    live = tmp_path / 'live'
    (live / 'd' / 's').mkdir(parents=True)
    (live / 'd' / 'a').write_bytes(b'file a\n')
    (live / 'd' / 's' / 'x').write_bytes(b'PWNED\n')
    (live / 'd' / 'b').write_bytes(b'file b\n')
    repo_path = tmp_path / 'repo'
    repo, _ = back_up(repo_path, live)
    repo.close()
    return tmp_path, live, repo_path


def restore(tmp_path, repo_path, *paths):
    target = tmp_path / 'target'
    before = everything_under(tmp_path) - {str(tmp_path / 'obnam.log')}
    code, out, err = obnam(tmp_path, 'restore', '-r', str(repo_path),
                           '--to', str(target), *paths)
    after = everything_under(tmp_path) - {str(tmp_path / 'obnam.log')}
    outside = {p for p in after - before
               if p != str(target)
               and not p.startswith(str(target) + os.sep)}
    assert outside == set()
    return code, err, target


def live_path(live, *parts):
    return os.fsencode(os.path.join(str(live), *parts))


@pytest.mark.timeout(120)
@pytest.mark.parametrize('name', [b'..', b'.', b'', b'../../../../PWNED',
                                  b'e/f'])
def test_escaping_name_is_refused_and_the_rest_restored(world, name):
    tmp_path, live, repo_path = world
    hostile_repo.rename(repo_path, CLIENT, live_path(live, 'd', 'a'), name)
    code, err, target = restore(tmp_path, repo_path)
    assert code == 1
    lines = err.splitlines()
    assert lines[0].startswith('Failed to restore ' + str(live) + '/d/"')
    assert 'R452C9X: Client client, generation 2: ' in lines[0]
    assert lines[1:] == ['ERROR: RD6259X: There were errors when restoring',
                         '', 'See previous error messages for details.']
    restored = str(target) + str(live)
    assert open(os.path.join(restored, 'd', 'b'), 'rb').read() == b'file b\n'
    assert not os.path.exists(os.path.join(restored, 'd', 'a'))
    assert 'Traceback' not in err


@pytest.mark.timeout(120)
def test_a_name_through_a_symlink_of_the_same_restore(world, tmp_path):
    """d/s restored as a symlink to a place outside, then "s/x" below d:
    refused, nothing written there."""
    tmp, live, repo_path = world
    outside = tmp_path / 'outside'
    outside.mkdir()
    hostile_repo.make_symlink(repo_path, CLIENT, live_path(live, 'd', 's'),
                              os.fsencode(str(outside)))
    hostile_repo.rename(repo_path, CLIENT, live_path(live, 'd', 's', 'x'),
                        b's/x', parent=live_path(live, 'd'))
    code, err, target = restore(tmp, repo_path)
    assert code == 1 and 'R452C9X' in err and 'Traceback' not in err
    assert os.listdir(outside) == []
    assert os.path.islink(str(target) + str(live) + '/d/s')


@pytest.mark.timeout(120)
def test_a_path_asked_for_below_a_restored_symlink(world, tmp_path):
    """Paths asked for by name: /d/s (a symlink now) then /d/s/x."""
    tmp, live, repo_path = world
    outside = tmp_path / 'outside'
    outside.mkdir()
    hostile_repo.make_symlink(repo_path, CLIENT, live_path(live, 'd', 's'),
                              os.fsencode(str(outside)))
    code, err, target = restore(tmp, repo_path, str(live / 'd' / 's'),
                                str(live / 'd' / 's' / 'x'))
    assert code == 1 and 'Not a directory' in err, err
    assert 'Traceback' not in err
    assert os.listdir(outside) == []


@pytest.mark.timeout(120)
def test_fsck_verify_and_ls_on_an_escaping_name(world):
    tmp_path, live, repo_path = world
    hostile_repo.rename(repo_path, CLIENT, live_path(live, 'd', 'a'),
                        b'../../x')
    code, out, err = obnam(tmp_path, 'fsck', '-r', str(repo_path))
    assert code == 1
    assert 'unsafe name stored' in out + err
    assert '/d/"../../x"' in out + err
    code, out, err = obnam(tmp_path, 'verify', '-r', str(repo_path),
                           str(live))
    assert code == 1 and 'R452C9X' in err and 'Traceback' not in err
    code, out, err = obnam(tmp_path, 'ls', '-r', str(repo_path))
    assert 'Traceback' not in err


def loop(repo_path, how):
    changed = 0
    for forest in hostile_repo.client_dirs(repo_path):
        changed += how(forest)
    assert changed


@pytest.mark.timeout(300)
@pytest.mark.parametrize('how', [hostile_repo.point_at_itself,
                                 hostile_repo.point_at_each_other])
def test_looping_nodes_end_every_command_with_one_line(world, how):
    tmp_path, live, repo_path = world
    repo, _ = back_up(repo_path, live)      # a second generation: 2 roots
    repo.close()
    loop(repo_path, how)
    for args in (['generations'], ['ls'], ['fsck'], ['verify', str(live)],
                 ['restore', '--to', str(tmp_path / 'target')]):
        code, out, err = obnam(tmp_path, args[0], '-r', str(repo_path),
                               *args[1:])
        assert code != 0, args
        assert 'Traceback' not in out + err, args
        if args[0] == 'fsck':
            assert 'loops' in out + err, out + err
        else:
            errors = [l for l in err.splitlines() if l.startswith('ERROR')]
            assert len(errors) == 1, (args, err)


@pytest.mark.timeout(300)
@pytest.mark.parametrize('listed', ['d', '/'])
def test_a_directory_listing_itself_or_the_root_ends_every_walk(world,
                                                                listed):
    tmp_path, live, repo_path = world
    above = (live_path(live, 'd') if listed == 'd' else b'/')
    hostile_repo.list_again(repo_path, CLIENT, live_path(live, 'd'), above,
                            b'loop')
    for args in (['ls'], ['fsck'], ['verify', str(live)],
                 ['restore', '--to', str(tmp_path / 'target')]):
        code, out, err = obnam(tmp_path, args[0], '-r', str(repo_path),
                               *args[1:])
        assert code == 1, (args, out, err)
        assert 'Traceback' not in out + err, args
        assert 'the tree loops' in err, (args, err)
    restored = str(tmp_path / 'target') + str(live)
    assert open(os.path.join(restored, 'd', 'b'), 'rb').read() == b'file b\n'


@pytest.mark.timeout(120)
def test_a_path_asked_for_through_a_stored_dot_dot(world):
    """The name '..' is stored, so /.../d/.. exists in the generation;
    asking for it is refused before anything is restored."""
    tmp_path, live, repo_path = world
    hostile_repo.rename(repo_path, CLIENT, live_path(live, 'd', 'a'), b'..')
    code, err, target = restore(tmp_path, repo_path,
                                str(live / 'd') + '/..')
    assert code == 1
    assert err.startswith('ERROR: R452C9X: '), err
    assert len(err.splitlines()) == 1
    assert not os.path.exists(str(target) + str(live) + '/d')
