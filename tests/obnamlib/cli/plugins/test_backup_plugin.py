"""`obnam backup` as people run it: roots, errors, summary, log, exclusion."""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.nobody import NOBODY, as_nobody, why_python_cannot_run_as_nobody
from tests.obnamlib.backup_helpers import (
    generation_manifest, live_manifest, open_repository)
from tests import paths

OBNAM = paths.OBNAM

SUMMARY = [
    r'Backed up \d+ files \(of \d+ found\), containing \d+\.0 (B|KiB|MiB)\.',
    r'Uploaded \d+\.0 (B|KiB|MiB) file data in (\d+s)? at \d+\.\d '
    r'(B|KiB|MiB|GiB)/s average speed\.',
    r'Total download amount \d+\.0 (B|KiB|MiB)\.',
    r'Total upload amount \d+\.0 (B|KiB|MiB)\. Overhead was \d+\.0 '
    r'(B|KiB|MiB) \(\d+\.\d %\)\.',
]


def obnam(tmp_path, *args, config=None, cwd=None):
    argv = [sys.executable, OBNAM, '--no-default-configs',
            '--client-name=testclient', '--lock-timeout=0',
            '--log', str(tmp_path / 'obnam.log'), '--log-level=debug']
    if config is not None:
        path = tmp_path / 'obnam.conf'
        path.write_text(config)
        argv += ['--config', str(path)]
    argv += [str(a) for a in args]
    return subprocess.run(argv, capture_output=True, cwd=cwd,
                          env=dict(os.environ, LC_ALL='C.UTF-8'))


def repo_arg(tmp_path):
    return '--repository=%s' % (tmp_path / 'repo')


def created(repo):
    """What the first backup into a new repository says on stderr."""
    return 'Created a new repository at %s\n' % repo


def latest(tmp_path):
    repo, _ = open_repository(tmp_path / 'repo')
    return repo, repo.get_generation_ids('testclient')[-1]


@pytest.fixture
def live(tmp_path):
    top = tmp_path / 'live'
    top.mkdir()
    (top / 'a').write_bytes(b'alpha')
    (top / 'dir').mkdir()
    (top / 'dir' / 'b').write_bytes(b'beta' * 1000)
    return top


def test_backup_prints_summary_and_restores_exactly(tmp_path, live):
    result = obnam(tmp_path, repo_arg(tmp_path), 'backup', live)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 4
    for pattern, line in zip(SUMMARY, lines):
        assert re.fullmatch(pattern, line), line
    assert lines[0] == 'Backed up 4 files (of 4 found), containing 3.0 KiB.'
    repo, gen = latest(tmp_path)
    assert generation_manifest(repo, gen, live) == live_manifest(live)


def test_no_change_backup_logs_zero_files_backed_up(tmp_path, live):
    assert obnam(tmp_path, repo_arg(tmp_path), 'backup', live).returncode == 0
    result = obnam(tmp_path, repo_arg(tmp_path), 'backup', live)
    assert result.returncode == 0
    log = (tmp_path / 'obnam.log').read_text()
    assert re.search(r'INFO \* files backed up: 0$', log, re.M)
    assert re.search(r'INFO \* files found: 4$', log, re.M)
    assert result.stdout.decode().startswith(
        'Backed up 0 files (of 4 found)')


def test_quiet_suppresses_summary_and_output_redirects_it(tmp_path, live):
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet', 'backup', live)
    assert (result.returncode, result.stdout, result.stderr.decode()) == (
        0, b'', created(tmp_path / 'repo'))
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet', 'backup', live)
    assert (result.returncode, result.stdout, result.stderr) == (0, b'', b'')
    out = tmp_path / 'out'
    result = obnam(tmp_path, repo_arg(tmp_path), '--output', out,
                   'backup', live)
    assert result.stdout == b''
    assert out.read_text().startswith('Backed up 0 files (of 4 found)')


def test_roots_from_config_and_arguments_relative_and_slashed(tmp_path,
                                                               live):
    (tmp_path / 'other').mkdir()
    (tmp_path / 'other' / 'c').write_bytes(b'c')
    config = '[config]\nroot = %s\n' % (tmp_path / 'other')
    result = obnam(tmp_path, repo_arg(tmp_path), 'backup', 'live/',
                   config=config, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    repo, gen = latest(tmp_path)
    assert repo.get_file_children(gen, os.fsencode(tmp_path)) == [
        b'live', b'other']


def test_no_roots_is_R338F2X(tmp_path):
    result = obnam(tmp_path, repo_arg(tmp_path), 'backup')
    assert result.returncode == 1
    assert result.stderr == b'ERROR: R338F2X: No backup roots specified\n'


def test_missing_repository_setting_is_R01F56X(tmp_path, live):
    result = obnam(tmp_path, 'backup', live)
    assert result.returncode == 1
    assert result.stderr.decode().startswith('ERROR: R01F56X: No --repository')


def test_nonexistent_root_is_R79ED6X_before_a_repository_is_made(tmp_path):
    result = obnam(tmp_path, repo_arg(tmp_path), 'backup', tmp_path / 'nope')
    assert result.returncode == 1
    assert result.stderr.decode() == (
        'ERROR: R79ED6X: Backup root does not exist or is not a directory: '
        '%s\n' % (tmp_path / 'nope'))
    assert not (tmp_path / 'repo').exists()


def test_file_errors_go_to_stderr_and_exit_1_but_commit(tmp_path, live):
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet',
                   '--testing-fail-matching=/a$', 'backup', live)
    assert result.returncode == 1
    assert result.stderr.decode() == created(tmp_path / 'repo') + (
        "ERROR: Can't back up %s/a: RCE08AX: I/O error: %s/a: 2: "
        "No such file or directory\n"
        "ERROR: R4C3BCX: There were errors during the backup\n"
        % (live, live))
    repo, gen = latest(tmp_path)
    assert repo.get_file_children(gen, os.fsencode(live)) == [b'dir']


def test_exclude_include_and_exclude_from(tmp_path, live):
    (live / 'x.mp3').write_bytes(b'm')
    (live / 'keep.mp3').write_bytes(b'k')
    (live / 'junk').write_bytes(b'j')
    patterns = tmp_path / 'patterns'
    patterns.write_text('# comment\n\n  /junk$  \n')
    result = obnam(tmp_path, repo_arg(tmp_path), r'--exclude=\.mp3$',
                   '--include=keep', '--exclude-from', patterns,
                   'backup', live)
    assert result.returncode == 0, result.stderr
    repo, gen = latest(tmp_path)
    assert repo.get_file_children(gen, os.fsencode(live)) == [
        b'a', b'dir', b'keep.mp3']
    log = (tmp_path / 'obnam.log').read_text()
    assert 'Exclude (\\.mp3$): %s/x.mp3' % live in log


def test_missing_exclude_from_file_aborts(tmp_path, live):
    result = obnam(tmp_path, repo_arg(tmp_path), '--exclude-from',
                   tmp_path / 'missing', 'backup', live)
    assert result.returncode == 1
    assert result.stderr.decode() == (
        'ERROR: RCE08AX: I/O error: %s: 2: No such file or directory\n'
        % (tmp_path / 'missing'))


def test_log_file_is_excluded_automatically(tmp_path):
    top = tmp_path
    (top / 'f').write_bytes(b'f')
    result = obnam(tmp_path, '--repository=/%s' % (tmp_path / 'repo'),
                   '--exclude=/repo$', 'backup', top)
    assert result.returncode == 0, result.stderr
    repo, gen = latest(tmp_path)
    assert repo.get_file_children(gen, os.fsencode(top)) == [b'f']


def test_exclude_caches_setting(tmp_path, live):
    (live / 'dir' / 'CACHEDIR.TAG').write_bytes(
        b'Signature: 8a477f597d28d172789f06886806bc55')
    result = obnam(tmp_path, repo_arg(tmp_path), '--exclude-caches',
                   'backup', live)
    assert result.returncode == 0, result.stderr
    repo, gen = latest(tmp_path)
    assert repo.get_file_children(gen, os.fsencode(live)) == [b'a']


def tree_snapshot(directory):
    result = {}
    for dirpath, dirnames, names in os.walk(directory):
        for name in [''] + dirnames + names:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            content = b''
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, 'rb') as f:
                    content = f.read()
            result[path] = (st.st_mode, st.st_mtime_ns, st.st_size, content)
    return result


def test_pretend_leaves_repository_byte_identical(tmp_path, live):
    assert obnam(tmp_path, repo_arg(tmp_path), 'backup', live).returncode == 0
    before = tree_snapshot(tmp_path / 'repo')
    (live / 'new').write_bytes(b'new file')
    result = obnam(tmp_path, repo_arg(tmp_path), '--pretend', 'backup', live)
    assert result.returncode == 0, result.stderr
    assert tree_snapshot(tmp_path / 'repo') == before
    # nothing was backed up or uploaded, and the summary says so, in 1.x's
    # four lines; the line before says what a real run would back up
    lines = result.stdout.decode().splitlines()
    assert lines[0] == (
        'Pretending: would back up 2 files, 8.0 B of file data (before '
        'compression and de-duplication); nothing was written.')
    assert len(lines) == 5
    for pattern, line in zip(SUMMARY, lines[1:]):
        assert re.fullmatch(pattern, line), line
    assert lines[1] == 'Backed up 0 files (of 5 found), containing 3.0 KiB.'
    assert lines[2].startswith('Uploaded 0.0 B file data in ')
    assert lines[4].startswith('Total upload amount 0.0 B. ')
    quiet = obnam(tmp_path, repo_arg(tmp_path), '--pretend', '--quiet',
                  'backup', live)
    assert (quiet.returncode, quiet.stdout) == (0, b'')


def summary_numbers(stdout):
    """(U, R, W, O, P) of a summary, sizes in bytes as shown."""
    units = {'B': 1, 'KiB': 1024, 'MiB': 1024 ** 2, 'GiB': 1024 ** 3}
    sizes = [float(n) * units[u] for n, u in
             re.findall(r'(\d+\.0) (B|KiB|MiB|GiB)\b(?!/s)', stdout)]
    percent = float(re.search(r'\((\d+\.\d) %\)', stdout).group(1))
    return sizes[1:] + [percent]


def chunk_file_bytes(repo):
    return sum(os.path.getsize(os.path.join(d, name))
               for d, _, names in os.walk(repo / 'chunks') for name in names)


def test_summary_counts_uploads_as_stored_and_overhead_as_a_share(tmp_path):
    """Compressed: the file data uploaded is what was stored, so part of
    the total upload; the overhead is what moved beyond it, a share of
    all that moved (issue 28: 'Uploaded 83 MiB ... Total upload 45 MiB
    ... Overhead 0.0 B', and '3.0 MiB (4810.5 %)' for no change)."""
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(8):
        (live / ('f%d' % i)).write_bytes(b'compressible %d\n' % i * 20000)
    result = obnam(tmp_path, repo_arg(tmp_path), '--compress-with=deflate',
                   'backup', live)
    assert result.returncode == 0, result.stderr
    uploaded, read, written, overhead, percent = summary_numbers(
        result.stdout.decode())
    log = (tmp_path / 'obnam.log').read_text()
    exact = int(re.search(r'uploaded chunk data: (\d+) bytes', log).group(1))
    total = int(re.search(r'total uploaded data .*: (\d+) bytes',
                          log).group(1))
    assert chunk_file_bytes(tmp_path / 'repo') <= exact < total
    assert exact < 8 * 320000 / 10          # stored compressed
    assert 0 < overhead <= written and percent < 100.0
    assert uploaded <= written
    result = obnam(tmp_path, repo_arg(tmp_path), '--compress-with=deflate',
                   'backup', live)
    uploaded, read, written, overhead, percent = summary_numbers(
        result.stdout.decode())
    assert uploaded == 0 and overhead > 0 and percent == 100.0


def test_pretend_without_repository_fails_with_hint(tmp_path, live):
    result = obnam(tmp_path, repo_arg(tmp_path), '--pretend', 'backup', live)
    assert result.returncode == 1
    assert b"--pretend without an existing backup repository" in \
        result.stderr
    assert not (tmp_path / 'repo').exists()


def test_locked_client_fails_with_R681AEX_and_force_lock_frees_it(
        tmp_path, live):
    assert obnam(tmp_path, repo_arg(tmp_path), 'backup', live).returncode == 0
    repo, _ = open_repository(tmp_path / 'repo')
    repo.lock_client('testclient')      # another process holds it
    result = obnam(tmp_path, repo_arg(tmp_path), 'backup', live)
    assert result.returncode == 1
    assert re.fullmatch(rb'ERROR: R681AEX: Couldn\'t create lock .*/lock: '
                        rb'timeout; held by host \S+, pid %d, for \d+ s; if '
                        rb'that obnam is no longer running, remove the lock '
                        rb'with obnam force-lock\n' % os.getpid(),
                        result.stderr), result.stderr
    repo.force_locks()
    assert obnam(tmp_path, repo_arg(tmp_path), 'backup', live).returncode == 0


def test_checkpoints_removed_after_successful_command(tmp_path, live):
    (live / 'big').write_bytes(os.urandom(50000))
    result = obnam(tmp_path, repo_arg(tmp_path), '--checkpoint=1k',
                   '--chunk-size=4k', 'backup', live)
    assert result.returncode == 0, result.stderr
    repo, _ = open_repository(tmp_path / 'repo')
    assert len(repo.get_generation_ids('testclient')) == 1


def test_sftp_root_backs_up_remote_live_data(tmp_path, live):
    from tests.sshd_server import SshdServer
    with SshdServer() as server:
        url = server.url(str(live))
        result = obnam(tmp_path, repo_arg(tmp_path),
                       '--ssh-key', server.client_key,
                       '--ssh-known-hosts', server.known_hosts,
                       'backup', url + '/')
    assert result.returncode == 0, result.stderr
    with SshdServer() as server:
        result = obnam(tmp_path, repo_arg(tmp_path),
                       '--ssh-key', server.client_key,
                       '--ssh-known-hosts', server.known_hosts,
                       'verify', server.url(str(live)))
    assert (result.returncode, result.stdout) == (
        0, b'Verify did not find problems.\n'), result.stdout
    repo, gen = latest(tmp_path)
    # SFTP (protocol 3) carries whole-second times only.
    assert whole_seconds(generation_manifest(repo, gen, live)) == \
        whole_seconds(live_manifest(live))


def whole_seconds(manifest):
    return {path: facts[:1] + (facts[1] // 10 ** 9,) + facts[2:]
            for path, facts in manifest.items()}


def test_repository_over_sftp(tmp_path, live):
    from tests.sshd_server import SshdServer
    with SshdServer() as server:
        ssh = ['--ssh-key', server.client_key,
               '--ssh-known-hosts', server.known_hosts]
        remote = '--repository=%s' % server.url(str(tmp_path / 'repo'))
        result = obnam(tmp_path, remote, *ssh, 'backup', live)
        assert result.returncode == 0, result.stderr
        result = obnam(tmp_path, remote, *ssh, 'verify', live)
        assert result.returncode == 0, result.stderr
    repo, gen = latest(tmp_path)
    assert generation_manifest(repo, gen, live) == live_manifest(live)


def relative_manifest(root):
    root_b = os.fsencode(root)
    return {os.path.relpath(path, root_b): facts
            for path, facts in live_manifest(root).items()}


def test_each_generation_restores_to_its_own_manifest(tmp_path):
    """Every object type; append, overwrite in the middle, truncate,
    delete, rename, chmod, touch and an xattr-only change."""
    from tests.obnamlib.engine.test_backup_engine import make_everything
    live = tmp_path / 'live'
    make_everything(live)
    first = relative_manifest(live)
    assert obnam(tmp_path, repo_arg(tmp_path), '--chunk-size=4k',
                 'backup', live).returncode == 0
    with open(live / 'big', 'r+b') as f:
        f.seek(4100)
        f.write(b'overwritten in the middle')
    os.truncate(live / 'one', 0)
    os.remove(live / 'empty')
    os.rename(live / 'sub', live / 'moved')
    os.chmod(live / 'old', 0o600)
    os.utime(live / 'nanos')                                # touch
    with open(live / 'big', 'ab') as f:
        f.write(b'appended')
    try:
        os.setxattr(live / 'setuid', 'user.only', b'xattr change')
    except OSError:
        pass                # no user xattrs on this file system
    second = relative_manifest(live)
    result = obnam(tmp_path, repo_arg(tmp_path), '--chunk-size=4k',
                   'backup', live)
    assert result.returncode == 0, result.stderr
    repo, _ = open_repository(tmp_path / 'repo')
    gens = repo.get_generation_ids('testclient')
    for gen, expected in zip(gens, (first, second)):
        target = tmp_path / ('restored-%d' % gen)
        result = obnam(tmp_path, repo_arg(tmp_path), 'restore',
                       '--generation=%d' % gen, '--to', target)
        assert result.returncode == 0, result.stderr
        assert relative_manifest(str(target) + str(live)) == expected


def test_bad_exclude_pattern_is_reported_ignored_and_exit_1(tmp_path, live):
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet', '--exclude=(',
                   r'--exclude=/a$', 'backup', live)
    assert result.returncode == 1
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 3
    assert lines[0].startswith('ERROR: ') and "'('" in lines[0]
    assert lines[1] + '\n' == created(tmp_path / 'repo')
    assert lines[2] == 'ERROR: R4C3BCX: There were errors during the backup'
    repo, gen = latest(tmp_path)
    assert repo.get_file_children(gen, os.fsencode(live)) == [b'dir']


@pytest.mark.skipif(why_python_cannot_run_as_nobody() is not None,
                    reason=str(why_python_cannot_run_as_nobody()))
def test_unreadable_file_and_directory_as_an_ordinary_user():
    """Real EACCES: the errors of cli.md §6.8 with their codes, the rest is
    committed, exit 1; verify afterwards finds no problems."""
    import shutil
    import tempfile
    top = tempfile.mkdtemp(prefix='obnam-nobody-', dir='/tmp')
    try:
        os.chmod(top, 0o755)
        live = os.path.join(top, 'live')
        os.mkdir(live)
        with open(os.path.join(live, 'fine'), 'wb') as f:
            f.write(b'fine')
        with open(os.path.join(live, 'unreadable-file'), 'wb') as f:
            f.write(b'secret')
        os.mkdir(os.path.join(live, 'unreadable-dir'))
        for dirpath, dirnames, filenames in os.walk(top):
            for name in [dirpath] + [os.path.join(dirpath, n)
                                     for n in dirnames + filenames]:
                os.lchown(name, NOBODY, NOBODY)
        os.chmod(os.path.join(live, 'unreadable-file'), 0)
        os.chmod(os.path.join(live, 'unreadable-dir'), 0)
        obnam = as_nobody([sys.executable, OBNAM, '--no-default-configs',
                           '--client-name=nobody', '--quiet',
                           '--repository=%s/repo' % top])
        result = subprocess.run(obnam + ['backup', live],
                                capture_output=True)
        assert result.returncode == 1
        assert sorted(result.stderr.decode().splitlines()) == [
            created(top + '/repo').rstrip('\n'),
            "ERROR: Can't back up %s/unreadable-dir: RD5FA4X: System error: "
            "%s/unreadable-dir: 13: Permission denied" % (live, live),
            "ERROR: Can't back up %s/unreadable-file: RCE08AX: I/O error: "
            "%s/unreadable-file: 13: Permission denied" % (live, live),
            'ERROR: R4C3BCX: There were errors during the backup',
        ]
        result = subprocess.run(obnam + ['verify', live],
                                capture_output=True)
        assert (result.returncode, result.stdout) == (
            0, b'Verify did not find problems.\n'), result.stderr
    finally:
        os.chmod(os.path.join(top, 'live', 'unreadable-dir'), 0o755)
        shutil.rmtree(top)


@pytest.mark.timeout(60)
def test_backup_refuses_a_non_empty_directory_that_is_not_a_repository(
        tmp_path, live):
    from tests.obnamlib.repo.test_factory import tree_state
    target = tmp_path / 'etc'
    target.mkdir()
    (target / 'passwd').write_bytes(b'root:x:0:0\n')
    before = tree_state(target)
    result = obnam(tmp_path, '--repository=%s' % target, 'backup', live)
    assert (result.returncode, result.stdout) == (1, b'')
    assert result.stderr.decode() == (
        'ERROR: RE7199X: %s is not an Obnam repository and not empty: '
        'refusing to create a repository in it; give a new or empty '
        'directory\n' % target)
    assert tree_state(target) == before
    result = obnam(tmp_path, '--repository=%s' % target, 'generations')
    assert result.stderr.decode() == (
        'ERROR: RA920EX: %s does not seem to be an Obnam repository\n'
        % target)


@pytest.mark.timeout(60)
def test_backup_into_an_empty_directory_says_so_once(tmp_path, live):
    target = tmp_path / 'mnt'
    target.mkdir()
    result = obnam(tmp_path, '--repository=%s' % target, 'backup', live)
    assert (result.returncode, result.stderr.decode()) == (0, created(target))
    result = obnam(tmp_path, '--repository=%s' % target, 'backup', live)
    assert (result.returncode, result.stderr) == (0, b'')


@pytest.mark.timeout(60)
def test_created_notice_names_the_absolute_path(tmp_path, live):
    result = obnam(tmp_path, '--repository=repo', 'backup', live,
                   cwd=tmp_path)
    assert (result.returncode, result.stderr.decode()) == (
        0, created(tmp_path / 'repo'))


# --- --output-format=json (#28) ---------------------------------------------

def json_backup(tmp_path, live, *args):
    """A quiet backup writing JSON: (result, its document)."""
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet',
                   '--output-format=json', *args, 'backup', live)
    return result, json.loads(result.stdout)


def test_json_summary_names_the_new_generation_as_genids_does(tmp_path,
                                                               live):
    result, document = json_backup(tmp_path, live)
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode() == created(tmp_path / 'repo')
    genids = obnam(tmp_path, repo_arg(tmp_path), 'genids')
    assert document['generation_id'] == \
        genids.stdout.decode().splitlines()[-1]
    assert (document['client'], document['pretend']) == ('testclient', False)
    assert (document['files_found'], document['files_backed_up'],
            document['bytes_found'], document['errors']) == (4, 4, 4005, 0)
    assert 0 < document['bytes_uploaded'] <= document['bytes_written_total']
    assert document['started'] <= document['ended']


def test_json_summary_counts_file_errors_and_exits_1(tmp_path, live):
    result, document = json_backup(tmp_path, live,
                                   '--testing-fail-matching=/a$')
    assert result.returncode == 1
    assert "ERROR: Can't back up %s/a: " % live in result.stderr.decode()
    assert document['errors'] == 1
    assert document['files_backed_up'] == 3


def test_json_pretend_summary_is_the_only_thing_on_stdout(tmp_path, live):
    assert obnam(tmp_path, repo_arg(tmp_path), 'backup', live).returncode == 0
    (live / 'new').write_bytes(b'new file')
    result = obnam(tmp_path, repo_arg(tmp_path), '--pretend',
                   '--output-format=json', 'backup', live)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document['generation_id'], document['pretend'],
            document['files_backed_up']) == (None, True, 0)
    assert (document['files_to_back_up'], document['bytes_to_back_up']) == \
        (2, 8)
    assert result.stderr == b''


def test_json_summary_goes_to_the_output_file(tmp_path, live):
    out = tmp_path / 'out'
    result = obnam(tmp_path, repo_arg(tmp_path), '--output', out,
                   '--output-format=json', 'backup', live)
    assert (result.returncode, result.stdout) == (0, b'')
    assert json.loads(out.read_text())['files_found'] == 4
