"""`obnam verify` (cli.md §5.9, §9): output channels and exit codes."""

import os

import pytest

from obnamlib.engine.listing import local_time
from tests.obnamlib.cli.plugins.test_backup_plugin import obnam, repo_arg


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
        '(%s vs %s)\n' % (backed_up, local_time(old // 10 ** 9),
                          local_time(1)))


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


def test_no_paths_and_no_root_setting_is_R39951X(tmp_path, backed_up):
    result = obnam(tmp_path, repo_arg(tmp_path), 'verify')
    assert result.returncode == 1
    assert result.stderr == \
        b'ERROR: R39951X: Setting root has no value, but one is required\n'


# --- a damaged repository (issue 7) ----------------------------------------

@pytest.fixture
def damaged(tmp_path):
    """Three files backed up by `obnam backup` in 4 KiB chunks;
    (live, repository, generation)."""
    from tests.obnamlib.cli.plugins.test_backup_plugin import latest
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'a').write_bytes(b'alpha')
    (live / 'big').write_bytes(os.urandom(4096 * 3))
    (live / 'z').write_bytes(b'zed')
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet',
                   '--chunk-size=4096', 'backup', live)
    assert result.returncode == 0, result.stderr
    repo, gen = latest(tmp_path)
    return live, repo, gen


def big_chunk(tmp_path, repo, gen, live, index):
    from tests.obnamlib import restore_helpers as rh
    chunk_ids = repo.get_file_chunk_ids(gen, os.fsencode(str(live / 'big')))
    return chunk_ids[index], rh.chunk_file(tmp_path / 'repo', chunk_ids[index])


def test_missing_chunk_is_a_failure_line_and_the_rest_is_verified(
        tmp_path, damaged):
    from obnamlib.repo.fmt_6.chunk_store import idpath
    live, repo, gen = damaged
    lost, filename = big_chunk(tmp_path, repo, gen, live, 1)
    os.remove(filename)
    old_mtime = os.stat(live / 'z').st_mtime_ns
    (live / 'z').write_bytes(b'zee')     # after the damaged file: still seen
    os.utime(live / 'z', ns=(0, 0))
    result = obnam(tmp_path, repo_arg(tmp_path), 'verify', live)
    assert (result.returncode, result.stderr) == (1, b'')
    assert result.stdout.decode().splitlines() == [
        "verify failure: RDF30DX: %s: R43272X: Repository doesn't contain "
        "chunk %x. It is expected at %s" % (live / 'big', lost, idpath(lost)),
        'verify failure: RDF30DX: %s: metadata change: st_mtime_sec '
        '(%s vs %s)' % (live / 'z', local_time(old_mtime // 10 ** 9),
                        local_time(0)),
    ]


def test_flipped_bit_is_a_failure_on_stderr_when_quiet(tmp_path, damaged):
    import hashlib
    from tests.obnamlib import restore_helpers as rh
    live, repo, gen = damaged
    _, filename = big_chunk(tmp_path, repo, gen, live, 2)
    rh.flip_last_bit(filename)
    good = (live / 'big').read_bytes()
    wrong = bytearray(good)
    wrong[-1] ^= 1
    result = obnam(tmp_path, repo_arg(tmp_path), '--quiet', 'verify', live)
    assert (result.returncode, result.stdout) == (1, b'')
    assert result.stderr.decode() == (
        'verify failure: RDF30DX: %s: backed-up data damaged: whole-file '
        'checksum mismatch (%s vs %s)\n' % (
            live / 'big', hashlib.md5(wrong).hexdigest(),
            hashlib.md5(good).hexdigest()))


def test_missing_repository_is_one_fatal_error(tmp_path, damaged):
    live, _, _ = damaged
    result = obnam(tmp_path, '--repository=%s' % (tmp_path / 'nowhere'),
                   'verify', live)
    assert result.returncode == 1
    assert result.stdout == b''
    assert result.stderr.decode() == (
        'ERROR: RD5FA4X: System error: %s: 2: No such file or directory\n'
        % (tmp_path / 'nowhere'))
