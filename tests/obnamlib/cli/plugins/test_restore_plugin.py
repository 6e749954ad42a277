"""`obnam restore` as people run it: settings, errors, output, exit codes."""

import base64
import json
import os
import re
import subprocess
import sys

import pytest

from tests.gpg_fixture import empty_gpg_home  # noqa: F401
from tests.obnamlib import restore_helpers as rh
from tests import paths

OBNAM = paths.OBNAM
SUMMARY = re.compile(
    r'^Restored (\d+) files, downloaded \d+\.0 (B|KiB|MiB) in (\d+s)? at '
    r'\d+\.\d (B|KiB|MiB|GiB)/s average speed\n$')


def obnam(tmp_path, *args):
    argv = [sys.executable, OBNAM, '--no-default-configs',
            '--client-name', rh.CLIENT, '--repository', str(tmp_path / 'repo'),
            '--log', str(tmp_path / 'obnam.log'), '--log-level=debug']
    argv += [str(a) for a in args]
    return subprocess.run(argv, capture_output=True, text=True,
                          env=dict(os.environ, LC_ALL='C.UTF-8'))


@pytest.fixture
def backed_up(tmp_path):
    """A repository with two generations of a small tree; (live, gens)."""
    live = tmp_path / 'live'
    (live / 'dir').mkdir(parents=True)
    (live / 'dir' / 'f').write_bytes(b'first')
    (live / 'g').write_bytes(b'gee')
    repo = rh.new_repository(tmp_path / 'repo')
    first = rh.store_tree(repo, str(live))
    (live / 'dir' / 'f').write_bytes(b'second version')
    second = rh.store_tree(repo, str(live))
    return live, repo, [first, second]


def restored(target, live, *names):
    return target / str(live).lstrip('/') / os.path.join(*names)


def test_restore_latest_by_default(tmp_path, backed_up):
    live, _, _ = backed_up
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x')
    assert result.returncode == 0, result.stderr
    assert result.stderr == ''
    match = SUMMARY.match(result.stdout)
    assert match, result.stdout
    ancestors = len(str(live).strip('/').split('/'))
    assert int(match.group(1)) == 1 + ancestors + 3
    assert restored(tmp_path / 'x', live, 'dir', 'f').read_bytes() == \
        b'second version'
    log = (tmp_path / 'obnam.log').read_text()
    assert re.search(r' INFO Restore performance statistics:\n', log)
    assert re.search(r' INFO \* files restored: %s\n' % match.group(1), log)
    assert re.search(r' INFO \* downloaded data: \d+ bytes \(\d+\.0 \w+\)\n', log)
    assert re.search(r' INFO \* duration: [0-9.e-]+ s \(\w*\)\n', log)
    assert re.search(r' INFO \* average speed: \d+\.\d \S+\n', log)


def test_restore_chosen_generation_and_file(tmp_path, backed_up):
    live, repo, gens = backed_up
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x',
                   '--generation', repo.make_generation_spec(gens[0]),
                   str(live / 'dir') + '/')
    assert result.returncode == 0, result.stderr
    assert restored(tmp_path / 'x', live, 'dir', 'f').read_bytes() == b'first'
    assert not restored(tmp_path / 'x', live, 'g').exists()


def test_quiet_suppresses_summary(tmp_path, backed_up):
    result = obnam(tmp_path, '--quiet', 'restore', '--to', tmp_path / 'x')
    assert (result.returncode, result.stdout, result.stderr) == (0, '', '')


def test_pretend_creates_nothing_but_summarises(tmp_path, backed_up):
    result = obnam(tmp_path, 'restore', '--pretend', '--to', tmp_path / 'x')
    assert result.returncode == 0, result.stderr
    assert SUMMARY.match(result.stdout), result.stdout
    assert not (tmp_path / 'x').exists()


def test_missing_to(tmp_path, backed_up):
    result = obnam(tmp_path, 'restore')
    assert result.returncode == 1
    assert result.stderr == (
        'ERROR: R7A971X: The restore command wants a target set with --to\n')


def test_summary_is_the_only_thing_left_on_the_terminal(tmp_path):
    """Issue 28: the status line was drawn again under the summary; now
    it is erased before it (its last state was stale)."""
    from tests.terminal import run_on_terminal
    live = tmp_path / 'live'
    live.mkdir()
    for i in range(30):
        (live / ('f%d' % i)).write_bytes(b'%d' % i * 1000)
    assert obnam(tmp_path, 'backup', live).returncode == 0
    argv = [OBNAM, '--no-default-configs', '--client-name', rh.CLIENT,
            '--repository', str(tmp_path / 'repo'), '--log=none',
            'restore', '--to', str(tmp_path / 'x')]
    terminal, _, code = run_on_terminal(argv, tmp_path, redirect=(2,))
    assert code == 0
    summary = terminal.rindex(b'Restored ')
    assert terminal[summary - 4:summary] == b'\r\x1b[K'    # line erased
    assert terminal[summary:].count(b'\n') == 1
    assert terminal.endswith(b' average speed\r\n'), terminal[-200:]


def test_restore_to_stdout_is_an_error_that_names_cat(tmp_path, backed_up):
    result = obnam(tmp_path, 'restore', '--to', '-')
    assert result.returncode == 1
    assert result.stderr == (
        'ERROR: RB0378X: restore --to - would make a directory named "-": '
        'restore writes into a directory; for one file, use obnam cat PATH '
        '> file\n')
    assert not (tmp_path / '-').exists()


@pytest.mark.parametrize('left, rate, shown', [
    (80, 1.0, 'ETA 1m20s'), (3723, 1.0, 'ETA 1h2m3s'), (0, 5.0, 'ETA 0s'),
    (-3, 5.0, 'ETA 0s'), (10, 0.0, 'ETA ?')])
def test_eta(left, rate, shown):
    from obnamlib.cli.plugins import restore_plugin
    assert restore_plugin.eta(left, rate) == shown


def test_two_generations(tmp_path, backed_up):
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x',
                   '--generation=latest', '--generation=latest')
    assert result.returncode == 1
    assert result.stderr == ('ERROR: R2FA37X: The restore command wants '
                             'exactly one generation option\n')
    assert not (tmp_path / 'x').exists()


def test_target_not_empty(tmp_path, backed_up):
    (tmp_path / 'x').mkdir()
    (tmp_path / 'x' / '.dot').write_bytes(b'')
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x')
    assert result.returncode == 1
    assert result.stderr == ('ERROR: R3E1C1X: The restore --to directory '
                             '(%s) is not empty.\n' % (tmp_path / 'x'))
    assert os.listdir(tmp_path / 'x') == ['.dot']


def test_file_not_in_generation(tmp_path, backed_up):
    _, repo, gens = backed_up
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x', '/not/here')
    assert result.returncode == 1
    assert result.stderr == (
        'ERROR: R3E151X: Client %s, generation %s does not have file '
        '/not/here\n' % (rh.CLIENT, repo.make_generation_spec(gens[1])))


def test_unknown_generation(tmp_path, backed_up):
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x',
                   '--generation', '999')
    assert result.returncode == 1
    assert result.stderr.startswith('ERROR: R0B15DX: ')


def test_unknown_url_scheme_for_target(tmp_path, backed_up):
    result = obnam(tmp_path, 'restore', '--to', 'ftp://host/x')
    assert result.returncode == 1
    assert result.stderr == 'ERROR: R826A1X: Unknown VFS type: ftp://host/x\n'


def test_missing_chunk_fails_at_the_end(tmp_path, backed_up):
    live, repo, gens = backed_up
    for dirpath, _, names in os.walk(tmp_path / 'repo' / 'chunks'):
        for name in names:
            if name != 'lock':
                os.remove(os.path.join(dirpath, name))
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x')
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert lines[-3:] == ['ERROR: RD6259X: There were errors when restoring',
                          '', 'See previous error messages for details.']
    failed = sorted(line.split(': R43272X: ')[0] for line in lines[:-3])
    assert failed == ['Failed to restore %s' % (live / 'dir' / 'f'),
                      'Failed to restore %s' % (live / 'g')]
    assert SUMMARY.match(result.stdout), result.stdout
    assert restored(tmp_path / 'x', live, 'dir').is_dir()


def test_progress_and_summary_formats(tmp_path, backed_up):
    import io
    from obnamlib.cli import ui as ui_module
    from tests.recording_progress import RecordingProgress
    from obnamlib.cli.plugins import restore_plugin
    _, repo, gens = backed_up
    progress = RecordingProgress()
    ui = ui_module.UserInterface(stdout=io.StringIO(), stderr=io.StringIO(),
                                 progress=progress)
    now = [100.0]
    reporter = restore_plugin.UiReporter(ui, repo, gens[1], full=True,
                                         clock=lambda: now[0])
    reporter.total_bytes = 17   # as a generation's total_data key says
    reporter.downloaded(14)
    now[0] += 8
    reporter.restored(b'/some/path', None)
    # 14 B in 8 s: the 3 B left take 2 s more
    assert progress.lines == [
        'ETA 2s 1 files 14.0 B (82 %) 1.8 B/s /some/path']
    reporter.total_bytes = None     # a part of a generation: no total
    now[0] += 1
    reporter.restored(b'/other', None)
    assert progress.lines[1] == '2 files 14.0 B 1.6 B/s /other'
    reporter.error('Failed to restore /x: R43272X: gone')
    assert ui.stderr.getvalue() == 'Failed to restore /x: R43272X: gone\n'
    assert restore_plugin.summary_line(25, 3 * 1024 + 5, 3723) == (
        'Restored 25 files, downloaded 3.0 KiB in 1h2m3s at 0.8 B/s '
        'average speed')
    assert restore_plugin.statistics_lines(2, 100, 2.0) == [
        'Restore performance statistics:', '* files restored: 2',
        '* downloaded data: 100 bytes (100.0 B)',
        '* duration: 2.0 s (2s)', '* average speed: 50.0 B/s']


# --- a damaged repository (issue 7) ----------------------------------------

ERRORS_AT_END = ('ERROR: RD6259X: There were errors when restoring\n\n'
                 'See previous error messages for details.\n')


@pytest.fixture
def damaged(tmp_path):
    """A tree backed up by `obnam backup` in 4 KiB chunks;
    (live, {name: content}, repository, generation)."""
    import obnamlib.repo.factory
    live = tmp_path / 'live'
    (live / 'dir').mkdir(parents=True)
    files = {'big': os.urandom(4096 * 3), 'dir/small': b'small',
             'other': os.urandom(5000)}
    for name, data in files.items():
        (live / name).write_bytes(data)
    result = obnam(tmp_path, 'backup', '--chunk-size=4096', live)
    assert result.returncode == 0, result.stderr
    repo = obnamlib.repo.factory.open_repository(url=str(tmp_path / 'repo'))
    return live, files, repo, repo.get_generation_ids(rh.CLIENT)[-1]


def assert_restored_except(target, live, files, broken):
    for name, data in files.items():
        if name == broken:
            assert not os.path.lexists(restored(target, live, name))
        else:
            assert restored(target, live, name).read_bytes() == data, name


def test_missing_chunk_is_named_and_the_rest_restores(tmp_path, damaged):
    from obnamlib.repo.fmt_6.chunk_store import idpath
    live, files, repo, gen = damaged
    lost = repo.get_file_chunk_ids(gen, os.fsencode(str(live / 'big')))[1]
    os.remove(rh.chunk_file(tmp_path / 'repo', lost))
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x')
    assert result.returncode == 1
    failed = ("Failed to restore %s: R43272X: Repository doesn't contain "
              "chunk %x. It is expected at %s" % (live / 'big', lost,
                                                  idpath(lost)))
    assert result.stderr == failed + '\n' + ERRORS_AT_END
    assert SUMMARY.match(result.stdout), result.stdout
    assert_restored_except(tmp_path / 'x', live, files, 'big')
    assert ' ERROR %s\n' % failed in (tmp_path / 'obnam.log').read_text()


@pytest.mark.parametrize('quiet', [False, True])
def test_flipped_bit_is_named_and_the_rest_restores(tmp_path, damaged,
                                                     quiet):
    import hashlib
    live, files, repo, gen = damaged
    rh.flip_last_bit(rh.file_chunk(repo, gen, tmp_path / 'repo',
                                   live / 'big', 2))
    wrong = bytearray(files['big'])
    wrong[-1] ^= 1
    actual = hashlib.md5(wrong).hexdigest()
    recorded = hashlib.md5(files['big']).hexdigest()
    result = obnam(tmp_path, *(['--quiet'] if quiet else []),
                   'restore', '--to', tmp_path / 'x')
    assert result.returncode == 1
    assert result.stderr == (
        'Failed to restore %s: R2F75CX: Backed-up data does not match its '
        'checksum (%s vs %s); the file was not restored\n'
        % (live / 'big', actual, recorded) + ERRORS_AT_END)
    if quiet:
        assert result.stdout == ''
    else:
        notice, summary = result.stdout.split('\n', 1)
        assert notice == 'File checksum restore error: %s (%s vs %s)' % (
            live / 'big', actual, recorded)
        assert SUMMARY.match(summary), summary
    assert_restored_except(tmp_path / 'x', live, files, 'big')


def test_unreadable_generation_is_one_fatal_error(tmp_path, damaged):
    clients = [n for n in os.listdir(tmp_path / 'repo') if n.isdigit()]
    assert len(clients) == 1
    for dirpath, _, names in os.walk(tmp_path / 'repo' / clients[0] / 'nodes'):
        for name in names:
            os.remove(os.path.join(dirpath, name))
    result = obnam(tmp_path, 'restore', '--to', tmp_path / 'x')
    assert result.returncode == 1
    assert re.match(r'^ERROR: RB0D42X: Repository is damaged: B-tree: .*\n$',
                    result.stderr), result.stderr
    assert result.stdout == ''


def test_missing_key_is_one_fatal_error(tmp_path, empty_gpg_home):
    """Obnam 1.x's encrypted reference repository without its keyring:
    one line naming the key (the encryption subkey of 3B1802F81B321347
    that the key files name) and what to do, and nothing restored."""
    from tests.obnamlib.repo.fmt_6 import reference_repos as rr
    rr.unpack(rr.ENCRYPTED, str(tmp_path / 'ref'))
    result = subprocess.run(
        [sys.executable, OBNAM, '--no-default-configs', '--client-name',
         'havelock', '--repository', str(tmp_path / 'ref' / 'repo'),
         '--gnupghome', empty_gpg_home.path, 'restore', '--to',
         str(tmp_path / 'x')],
        capture_output=True, text=True, env=dict(os.environ, LC_ALL='C.UTF-8'))
    assert result.returncode == 1
    assert result.stderr == (
        'ERROR: R0C79EX: Cannot decrypt the repository key clientlist/key: '
        'it is encrypted for key B5F6A289DD4B703C, and GnuPG home %s has no '
        'secret key for it; import the secret key (gpg --import), or point '
        '--gnupghome at the keyring that has it\n' % empty_gpg_home.path)
    assert result.stdout == ''
    assert not (tmp_path / 'x').exists()


# --- --output-format=json (#28) ---------------------------------------------

def test_json_summary_names_the_run_and_counts(tmp_path, backed_up):
    live, repo, gens = backed_up
    result = obnam(tmp_path, '--quiet', '--output-format=json', 'restore',
                   '--to', tmp_path / 'x', str(live / 'dir') + '/')
    assert (result.returncode, result.stderr) == (0, '')
    document = json.loads(result.stdout)
    assert (document['client'], document['generation_id'],
            document['target'], document['pretend']) == (
        rh.CLIENT, repo.make_generation_spec(gens[1]), str(tmp_path / 'x'),
        False)
    assert document['files_restored'] == 2      # dir and dir/f
    assert document['bytes_downloaded'] >= len(b'second version')
    assert document['errors'] == 0
    assert document['started'] <= document['ended']


def test_json_summary_after_a_missing_chunk_counts_the_error(tmp_path,
                                                            damaged):
    live, files, repo, gen = damaged
    lost = repo.get_file_chunk_ids(gen, os.fsencode(str(live / 'big')))[0]
    os.remove(rh.chunk_file(tmp_path / 'repo', lost))
    result = obnam(tmp_path, '--output-format=json', 'restore',
                   '--to', tmp_path / 'x')
    assert result.returncode == 1
    assert result.stderr.startswith('Failed to restore %s: ' % (live / 'big'))
    assert result.stderr.endswith(ERRORS_AT_END)
    document = json.loads(result.stdout)
    assert document['errors'] == 1
    assert document['generation_id'] == repo.make_generation_spec(gen)


def test_json_target_not_utf8_keeps_its_bytes(tmp_path, backed_up):
    target = os.fsencode(str(tmp_path)) + b'/x\xe9'
    result = subprocess.run(
        [sys.executable, OBNAM, '--no-default-configs', '--quiet',
         '--client-name', rh.CLIENT, '--repository', str(tmp_path / 'repo'),
         '--log=none', '--output-format=json', 'restore', '--to', target],
        capture_output=True, env=dict(os.environ, LC_ALL='C.UTF-8'))
    assert (result.returncode, result.stderr) == (0, b'')
    document = json.loads(result.stdout)
    assert base64.b64decode(document['target_b64']) == target
    assert document['target'] == os.fsdecode(target[:-1]) + '\ufffd'
    assert os.path.isdir(target)
