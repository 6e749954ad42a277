"""The fsck command: clean on what Obnam 1.x wrote, and loud about damage
to the encryption keys (the one kind of file only encrypted repositories
have; tests/obnamlib/engine/test_fsck_injection.py covers the rest)."""

import io
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from tests.gpg_fixture import reference_gpg_home  # noqa: F401
from tests.reference_data import extract_all
from tests.obnamlib.repo.fmt_6.reference_repos import ENCRYPTED, IN_TREE, REFERENCE
from tests import paths

OBNAM = paths.OBNAM


def fsck(repo, gnupghome, *args):
    env = dict(os.environ, GNUPGHOME=gnupghome)
    return subprocess.run(
        [OBNAM, '--no-default-configs', '-r', str(repo), '--lock-timeout=0',
         'fsck'] + list(args), capture_output=True, env=env)


@pytest.fixture(scope='module')
def reference_repos(tmp_path_factory):
    base = tmp_path_factory.mktemp('ref')
    repos = {}
    for name in (ENCRYPTED, IN_TREE):
        dest = base / name
        with tarfile.open(os.path.join(REFERENCE, name + '.tar.xz')) as tar:
            extract_all(tar, dest)
        repos[name] = dest / 'repo'
    return repos


@pytest.mark.parametrize('name', [ENCRYPTED, IN_TREE])
def test_obnam_1_reference_repositories_are_clean(reference_repos,
                                                   reference_gpg_home, name):
    result = fsck(reference_repos[name], reference_gpg_home.path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b''
    assert result.stdout.endswith(b': no problems\n')
    assert b'1 client(s), 2 generation(s)' in result.stdout


def delete(path, other):
    os.remove(path)


def truncate(path, other):
    os.truncate(path, os.path.getsize(path) // 2)


def flip(path, other):
    with open(path, 'r+b') as f:
        data = bytearray(f.read())
        data[len(data) // 2] ^= 0x10
        f.seek(0)
        f.write(data)


def swap(path, other):
    os.rename(path, path + '.x')
    os.rename(other, path)
    os.rename(path + '.x', other)


@pytest.mark.parametrize('fault', [delete, truncate, flip, swap])
@pytest.mark.parametrize('toplevel', ['clientlist', 'chunks', 'client'])
def test_damaged_key_files_are_reported(reference_repos, reference_gpg_home,
                                        tmp_path, fault, toplevel):
    repo = tmp_path / 'repo'
    shutil.copytree(reference_repos[ENCRYPTED], repo)
    client_dir = [n for n in os.listdir(repo) if n.isdigit()][0]
    name = client_dir if toplevel == 'client' else toplevel
    other = 'chunksums' if toplevel != 'chunksums' else 'chunklist'
    fault(str(repo / name / 'key'), str(repo / other / 'key'))
    result = fsck(repo, reference_gpg_home.path)
    assert result.returncode == 1
    assert result.stderr.startswith(b''), result.stderr
    lines = result.stderr.decode().splitlines()
    assert lines[-1].startswith('ERROR: ') and 'problem(s) that remain' in \
        lines[-1], lines
    shown = 'client havelock' if toplevel == 'client' else toplevel
    assert any(shown in line for line in lines[:-1]), lines


# --- the progress display ----------------------------------------------------

from obnamlib.engine import fsck_engine  # noqa: E402
from obnamlib.cli import ui
from tests.recording_progress import RecordingProgress
from obnamlib.cli.plugins import fsck_plugin  # noqa: E402

CHECKOUT = paths.CHECKOUT


def test_progress_line_names_the_work_and_the_counts():
    stats = fsck_engine.FsckStats(files=1200, chunks=300, chunks_total=900,
                                  chunk_bytes=12 * 1024 * 1024,
                                  phase='client c generation 5 (1/2)')
    assert fsck_plugin.progress_line(stats, 3723.5) == (
        '01h02m03s Checking client c generation 5 (1/2): 1200 files, '
        '300/900 chunks, 12.00 MiB')
    early = fsck_engine.FsckStats(phase='B-trees')
    assert fsck_plugin.progress_line(early, 0) == \
        '00h00m00s Checking B-trees: 0 files'


class FakeClock:

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_reporter_redraws_at_most_ten_times_a_second_and_on_each_phase():
    progress = RecordingProgress()
    user = ui.UserInterface(stdout=io.StringIO(), stderr=io.StringIO(),
                            progress=progress)
    clock = FakeClock()
    reporter = fsck_plugin.UiReporter(user, progress, clock=clock)
    stats = fsck_engine.FsckStats(phase='B-trees')
    reporter.checking('B-trees')
    reporter.counted(stats)
    stats.files = 5
    clock.now += 0.05
    reporter.counted(stats)             # too soon: not drawn
    clock.now += 0.06
    reporter.counted(stats)
    stats.phase = 'chunk indexes'
    reporter.checking('chunk indexes')
    reporter.counted(stats)             # a new phase shows at once
    assert progress.lines == [
        '00h00m00s Checking B-trees: 0 files',
        '00h00m00s Checking B-trees: 5 files',
        '00h00m00s Checking chunk indexes: 5 files']
    assert user.stdout.getvalue() == user.stderr.getvalue() == ''


@pytest.fixture(scope='module')
def small_repo(tmp_path_factory):
    base = tmp_path_factory.mktemp('fsck-progress')
    live = base / 'live'
    (live / 'dir').mkdir(parents=True)
    (live / 'dir' / 'file').write_bytes(b'some content\n' * 1000)
    (live / 'empty').write_bytes(b'')
    repo = base / 'repo'
    subprocess.run([OBNAM, '--no-default-configs', '-r', str(repo),
                    '--client-name=c', '--quiet', 'backup', str(live)],
                   check=True, capture_output=True)
    return repo


def run_on_terminal(tmp_path, argv):
    """Run argv with a pseudo-terminal as its controlling terminal and
    stdout/stderr in files: (terminal bytes, stdout, stderr, exit code)."""
    from tests.terminal import run_on_terminal
    terminal, written, code = run_on_terminal(argv, tmp_path, columns=100)
    return terminal, written[1], written[2], code


def fsck_argv(repo, *args):
    return [OBNAM, '--no-default-configs', '-r', str(repo), '--log=none',
            'fsck'] + list(args)


def test_progress_is_drawn_on_the_terminal_only(small_repo, tmp_path):
    terminal, stdout, stderr, code = run_on_terminal(tmp_path,
                                                     fsck_argv(small_repo))
    assert code == 0, stderr
    # Drawn at most every 0.1 s; the last state is always drawn at the end.
    assert re.search(rb'\d\dh\d\dm\d\ds Checking chunk indexes: \d+ files, '
                     rb'1/1 chunks, 12\.7 KiB', terminal), terminal
    assert stderr == b''
    without = subprocess.run(fsck_argv(small_repo), capture_output=True,
                             start_new_session=True)
    assert stdout == without.stdout
    assert stdout.count(b'\n') == 1 and stdout.endswith(b': no problems\n')


def test_summary_is_the_last_thing_on_the_terminal(small_repo, tmp_path):
    """Issue 28: the status line was drawn again under the summary."""
    from tests.terminal import run_on_terminal as run_with_stdout_there
    terminal, _, code = run_with_stdout_there(
        fsck_argv(small_repo), tmp_path, redirect=(2,))
    assert code == 0
    assert terminal.endswith(b': no problems\r\n'), terminal[-200:]
    assert terminal.count(b'no problems') == 1


def test_quiet_draws_nothing_on_the_terminal(small_repo, tmp_path):
    terminal, stdout, stderr, code = run_on_terminal(
        tmp_path, fsck_argv(small_repo, '--quiet'))
    assert (terminal, stderr, code) == (b'', b'', 0)


def test_without_a_terminal_output_is_only_the_summary(small_repo):
    result = subprocess.run(fsck_argv(small_repo), capture_output=True,
                            start_new_session=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 0
    assert result.stderr == b''
    assert result.stdout.count(b'\n') == 1
    assert result.stdout.startswith(b'fsck checked 1 client(s), '
                                    b'1 generation(s), ')
    assert result.stdout.endswith(b': no problems\n')


def test_node_sizes_are_judged_by_the_forests_own_node_size(tmp_path):
    """A repository written with bigger nodes than this run's --node-size
    is clean (Obnam 1.x judged by the forest's stored node size)."""
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(300):
        (live / ('file-with-a-long-name-%04d' % i)).write_bytes(b'%d' % i)
    repo = tmp_path / 'repo'
    backup = subprocess.run(
        [OBNAM, '--no-default-configs', '-r', str(repo), '--log', 'none',
         '--node-size=65536', 'backup', str(live)], capture_output=True)
    assert backup.returncode == 0, backup.stderr
    biggest = max(os.path.getsize(os.path.join(d, n))
                  for d, _, names in os.walk(repo) for n in names
                  if os.sep + 'nodes' + os.sep in os.path.join(d, n))
    assert biggest > 4096
    result = fsck(repo, str(tmp_path), '--node-size=4096')
    assert (result.returncode, result.stderr) == (0, b'')
    assert result.stdout.endswith(b': no problems\n')


# --- --output-format=json (#28) ---------------------------------------------

def test_json_of_a_clean_repository(small_repo):
    result = subprocess.run(fsck_argv(small_repo, '--output-format=json'),
                            capture_output=True, start_new_session=True)
    assert (result.returncode, result.stderr) == (0, b'')
    document = json.loads(result.stdout)
    assert document['problems'] == []
    assert (document['clients'], document['generations'],
            document['problem_count'], document['fixed_count']) == (1, 1, 0, 0)
    assert document['files'] > 0 and document['chunks'] == 1


def put_unused_chunk(repo):
    directory = repo / 'chunks' / '0' / '0' / '0'
    directory.mkdir(parents=True, exist_ok=True)
    (directory / 'abcdef').write_bytes(b'\0not used by any file')


def test_json_lists_problems_also_told_on_stderr_and_exits_1(small_repo,
                                                             tmp_path):
    repo = tmp_path / 'repo'
    shutil.copytree(small_repo, repo)
    put_unused_chunk(repo)
    result = subprocess.run(fsck_argv(repo, '--quiet', '--output-format=json'),
                            capture_output=True, start_new_session=True)
    assert result.returncode == 1
    assert result.stderr.decode().splitlines() == [
        'chunk abcdef not used by anyone',
        'ERROR: R1E173X: fsck found 1 problem(s) that remain']
    document = json.loads(result.stdout)
    assert document['problems'] == [
        {'text': 'chunk abcdef not used by anyone', 'fixed': False}]
    assert (document['problem_count'], document['fixed_count']) == (1, 0)


def test_json_repairs_are_notices_on_stderr_silenced_by_quiet(small_repo,
                                                              tmp_path):
    repo = tmp_path / 'repo'
    shutil.copytree(small_repo, repo)
    put_unused_chunk(repo)
    argv = fsck_argv(repo, '--fsck-rm-unused', '--output-format=json')
    result = subprocess.run(argv, capture_output=True,
                            start_new_session=True)
    assert result.returncode == 0
    assert result.stderr == b'chunk abcdef not used by anyone; deleting\n'
    document = json.loads(result.stdout)
    assert document['problems'] == [
        {'text': 'chunk abcdef not used by anyone; deleting', 'fixed': True}]
    assert (document['problem_count'], document['fixed_count']) == (1, 1)
    put_unused_chunk(repo)
    quiet = subprocess.run(argv + ['--quiet'], capture_output=True,
                           start_new_session=True)
    assert (quiet.returncode, quiet.stderr) == (0, b'')
    assert json.loads(quiet.stdout)['fixed_count'] == 1
