"""`obnam verify` (cli.md §5.9, §9): output channels and exit codes."""

import os

import pytest

from tests.obnamlib.plugins.test_backup_plugin import obnam, repo_arg


@pytest.fixture
def backed_up(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'f').write_bytes(b'data')
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet', 'backup', live)
    assert result.returncode == 0, result.stderr
    return live


def test_success_line_on_stdout(tmp_path, backed_up):
    result = obnam(tmp_path, repo_arg(tmp_path), 'verify', backed_up)
    assert (result.returncode, result.stdout, result.stderr) == (
        0, b'Verify did not find problems.\n', b'')


def test_mtime_change_fails_on_stderr_when_quiet(tmp_path, backed_up):
    old = os.lstat(backed_up / 'f').st_mtime_ns
    os.utime(backed_up / 'f', ns=(0, 10 ** 9 + old % 10 ** 9))
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet', 'verify',
                   backed_up)
    assert result.returncode == 1
    assert result.stdout == b''
    assert result.stderr.decode() == (
        'verify failure: RDF30DX: %s/f: metadata change: st_mtime_sec '
        '(%d vs 1)\n' % (backed_up, old // 10 ** 9))


def test_failure_on_stdout_when_not_quiet(tmp_path, backed_up):
    st = os.lstat(backed_up / 'f')
    with open(backed_up / 'f', 'ab') as f:
        f.write(b'+')
    os.utime(backed_up / 'f', ns=(st.st_atime_ns, st.st_mtime_ns))
    result = obnam(tmp_path, repo_arg(tmp_path), 'verify', backed_up / 'f')
    assert result.returncode == 1
    assert result.stdout.decode() == (
        'verify failure: RDF30DX: %s/f: more data at end of file\n'
        % backed_up)


def test_verify_randomly(tmp_path, backed_up):
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet',
                   '--verify-randomly=1', 'verify', backed_up)
    assert (result.returncode, result.stdout) == (
        0, b'Verify did not find problems.\n')


def test_two_generations_is_R3B42AX(tmp_path, backed_up):
    result = obnam(tmp_path, repo_arg(tmp_path), '--generation=latest',
                   '--generation=latest', 'verify', backed_up)
    assert result.returncode == 1
    assert result.stderr == \
        b'ERROR: R3B42AX: verify must be given exactly one generation\n'


def test_no_paths_and_no_root_setting(tmp_path, backed_up):
    result = obnam(tmp_path, repo_arg(tmp_path), 'verify')
    assert result.returncode == 1
    assert result.stderr == \
        b'ERROR: Setting root has no value, but one is required\n'
