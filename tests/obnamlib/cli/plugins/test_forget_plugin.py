"""forget through bin/obnam: policies, explicit generations, --pretend,
the keep-nothing guard, locks, and the space forgetting frees."""

import json
import os

import pytest

import obnamlib.cli.app
from obnamlib.cli import humanise

from obnamlib import larch
import obnamlib.larch.fsck
from obnamlib.repo.fmt_6 import keys

from tests.obnamlib import show_helpers as h
from tests.obnamlib.cli.plugins.show_forget_helpers import (
    disk_usage, run, snapshot)

START = 1433116800          # 2015-06-01 00:00 UTC


@pytest.fixture
def repo_path(tmp_path):
    """Ten generations seven hours apart, each with a file of its own."""
    path = tmp_path / 'repo'
    repo = h.open_repo(path, create=True)
    for i in range(10):
        files = h.tree({b'/home/liw/own': h.reg(b'own %d' % i)})
        h.add_generation(repo, files,
                         START + i * 7 * 3600 - 5, START + i * 7 * 3600)
    repo.close()
    return path


def genids(path):
    result = run(path, 'genids')
    assert result.returncode == 0, result.stderr
    return result.stdout.decode().split()


def utc(path, *args, **kwargs):
    return run(path, *args, tz='UTC', **kwargs)


# Each generation's own file is one chunk file of 6 bytes as stored.
TABLE = (
    '2\t2015-06-01 00:00:00 +0000\tforget\tfrees 6 bytes (6.0 B)\n'
    '5\t2015-06-01 07:00:00 +0000\tforget\tfrees 6 bytes (6.0 B)\n'
    '8\t2015-06-01 14:00:00 +0000\tforget\tfrees 6 bytes (6.0 B)\n'
    '11\t2015-06-01 21:00:00 +0000\tkeep daily 3/3\n'
    '14\t2015-06-02 04:00:00 +0000\tforget\tfrees 6 bytes (6.0 B)\n'
    '17\t2015-06-02 11:00:00 +0000\tforget\tfrees 6 bytes (6.0 B)\n'
    '20\t2015-06-02 18:00:00 +0000\tkeep daily 2/3\n'
    '23\t2015-06-03 01:00:00 +0000\tkeep hourly 3/3\n'
    '26\t2015-06-03 08:00:00 +0000\tkeep hourly 2/3\n'
    '29\t2015-06-03 15:00:00 +0000\tkeep hourly 1/3, daily 1/3\n'
    'Would free 30 bytes (30.0 B) in total\n')


def test_pretend_prints_table_and_changes_nothing(repo_path):
    before = snapshot(repo_path)
    result = utc(repo_path, 'forget', '--keep=3h,3d', '--pretend')
    assert (result.returncode, result.stderr) == (0, b'')
    assert result.stdout.decode() == TABLE
    assert snapshot(repo_path) == before
    result = utc(repo_path, 'forget', '--keep=12h,7d,3m', '--pretend')
    assert result.returncode == 0
    lines = result.stdout.decode().splitlines()
    assert all(line.split('\t')[2].startswith('keep ')
               for line in lines[:-1])
    assert lines[-1] == 'Would free 0 bytes (0.0 B) in total'
    assert snapshot(repo_path) == before


def test_forget_by_policy_removes_and_shows_table_when_verbose(repo_path):
    result = utc(repo_path, 'forget', '--keep=3h,3d')
    assert (result.returncode, result.stdout, result.stderr) == (0, b'', b'')
    assert genids(repo_path) == ['11', '20', '23', '26', '29']
    result = utc(repo_path, 'forget', '--keep=2d', '--verbose')
    assert result.returncode == 0
    assert result.stdout.decode() == (
        '11\t2015-06-01 21:00:00 +0000\tforget\n'
        '20\t2015-06-02 18:00:00 +0000\tkeep daily 2/2\n'
        '23\t2015-06-03 01:00:00 +0000\tforget\n'
        '26\t2015-06-03 08:00:00 +0000\tforget\n'
        '29\t2015-06-03 15:00:00 +0000\tkeep daily 1/2\n')
    assert genids(repo_path) == ['20', '29']


def test_policy_uses_local_time(repo_path):
    # 21:00 UTC on 1 June is 00:00 on 2 June in Helsinki (EEST, +3)
    result = run(repo_path, 'forget', '--keep=3d', '--pretend',
                 tz='Europe/Helsinki')
    kept = [line.split('\t')[0] for line in result.stdout.decode().splitlines()
            if '\tkeep' in line]
    assert kept == ['8', '20', '29']


def test_policy_from_config_file(repo_path, tmp_path):
    result = utc(repo_path, 'forget', config='[config]\nkeep = 1h\n',
                 tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert genids(repo_path) == ['29']


def test_empty_policy_from_config_file_is_no_policy(repo_path, tmp_path):
    before = snapshot(repo_path)
    result = utc(repo_path, 'forget', config='[config]\nkeep =\n',
                 tmp_path=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, b'', b'')
    assert snapshot(repo_path) == before


KEEPS_NOTHING = (
    'ERROR: RA5AACX: Forget policy {} keeps no generations, refusing to '
    'remove them all: give a count above zero, or name the generations to '
    'forget\n')


@pytest.mark.timeout(60)
def test_keep_nothing_from_config_file_is_refused(repo_path, tmp_path):
    before = snapshot(repo_path)
    result = utc(repo_path, 'forget', config='[config]\nkeep = 0d\n',
                 tmp_path=tmp_path)
    assert result.returncode == 1
    assert result.stderr.decode() == KEEPS_NOTHING.format('0d')
    assert snapshot(repo_path) == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize('option, policy', [
    (['--keep=0d'], '0d'), (['--keep', '0h,0d'], '0h,0d'),
    (['--kee=0d'], '0d'), (['--keep=0d', '--pretend'], '0d')])
def test_keep_nothing_on_command_line_is_refused(repo_path, option, policy):
    before = snapshot(repo_path)
    result = utc(repo_path, 'forget', *option)
    assert (result.returncode, result.stdout) == (1, b'')
    assert result.stderr.decode() == KEEPS_NOTHING.format(policy)
    assert snapshot(repo_path) == before


@pytest.mark.timeout(60)
def test_every_generation_can_still_be_named(repo_path):
    result = utc(repo_path, 'forget', *genids(repo_path))
    assert result.returncode == 0, result.stderr
    assert genids(repo_path) == []
    repo = h.open_repo(repo_path)
    assert repo.get_chunk_ids() == []


@pytest.mark.parametrize('policy, code', [
    ('30d, 52w', 'RFB6DBX'), ('7D', 'R9808DX'), ('1d,1d', 'R45B50X'),
    ('1d2w', 'RB927BX'), ('1d,2x', 'R727A9X'), ('', 'RD8F86X')])
def test_bad_policies_are_refused_before_anything_happens(tmp_path, policy,
                                                          code):
    missing = tmp_path / 'no-repository'
    result = utc(missing, 'forget', '--keep=' + policy)
    assert result.returncode == 1
    assert result.stderr.decode().startswith('ERROR: %s: ' % code)
    assert not missing.exists()


def test_nothing_to_do_does_not_open_repository(tmp_path):
    result = utc(tmp_path / 'no-repository', 'forget')
    assert (result.returncode, result.stdout, result.stderr) == (0, b'', b'')


def test_forget_named_generations(repo_path):
    result = utc(repo_path, 'forget', '5', 'latest', '2')
    assert result.returncode == 0, result.stderr
    assert genids(repo_path) == ['8', '11', '14', '17', '20', '23', '26']


def test_generations_take_precedence_over_keep(repo_path):
    result = utc(repo_path, 'forget', '--keep=1h', '5')
    assert result.returncode == 0, result.stderr
    assert '5' not in genids(repo_path) and len(genids(repo_path)) == 9


def test_pretend_with_named_generations(repo_path):
    before = snapshot(repo_path)
    result = utc(repo_path, 'forget', '--pretend', '5')
    assert result.stdout.decode().splitlines()[:2] == [
        '2\t2015-06-01 00:00:00 +0000\tkeep not named',
        '5\t2015-06-01 07:00:00 +0000\tforget\tfrees 6 bytes (6.0 B)']
    assert result.stdout.decode().splitlines()[-1] == \
        'Would free 6 bytes (6.0 B) in total'
    assert snapshot(repo_path) == before


def test_unknown_generation_removes_nothing(repo_path):
    """An id above every id the client's history reached never named a
    generation: a typo, refused before anything is removed."""
    before = snapshot(repo_path)
    result = utc(repo_path, 'forget', '5', '99999')
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "ERROR: R0B15DX: Cannot find requested generation '99999' for "
        "client havelock\n")
    assert snapshot(repo_path) == before


def test_rerun_of_an_interrupted_forget_goes_on(repo_path):
    """forget 2 5, killed after removing 2, is run again: 2 is gone
    (said on stderr), 5 goes, exit 0."""
    assert utc(repo_path, 'forget', '2').returncode == 0
    result = utc(repo_path, 'forget', '2', '5')
    assert (result.returncode, result.stderr.decode()) == (
        0, 'Generation 2 of client havelock is not in the repository '
        '(forgotten already?): nothing to do for it\n')
    assert '2' not in genids(repo_path) and '5' not in genids(repo_path)


def test_pretend_time_applies_policy_as_of_then(repo_path):
    result = utc(repo_path, 'forget', '--keep=1d', '--pretend',
                 '--pretend-time=2015-06-02 12:00:00')
    verdicts = [line.split('\t')[2] for line in
                result.stdout.decode().splitlines()[:-1]]
    assert verdicts == ['forget', 'forget', 'forget', 'forget', 'forget',
                        'keep daily 1/1'] + ['keep after --pretend-time'] * 4


def test_forget_waits_for_nobody_holding_a_lock(repo_path):
    (repo_path / 'lock').write_bytes(b'')
    before = snapshot(repo_path)
    result = utc(repo_path, 'forget', '--keep=1h')
    assert result.returncode == 1
    assert result.stderr.decode().startswith('ERROR: R681AEX: ')
    assert snapshot(repo_path) == before


def test_forget_releases_its_locks(repo_path):
    assert utc(repo_path, 'forget', '--keep=2h').returncode == 0
    assert not [f for _, _, files in os.walk(repo_path) for f in files
                if f == 'lock']


def parsed_keep(argv, config=None):
    """(value, from the command line?) of --keep after a run's parse of
    argv, as forget sees it."""
    app = obnamlib.cli.app.ObnamApp()
    app.add_settings()
    app.setup_plugin_manager()
    app.enable_plugins()
    app.add_default_subcommands()
    front = ['--no-default-configs'] + (['--config', config] if config
                                        else [])
    app.parse_command_line(front + argv)
    return app.settings['keep'], app.settings.from_command_line('keep')


@pytest.mark.parametrize('argv, value', [
    (['--keep=1d'], '1d'),
    (['--keep', '1d', 'forget'], '1d'),
    (['--kee=2d', '--keep=3d'], '3d'),
    (['forget', '--', '--keep=1d'], None),
    ([], None),
    (['--keep='], ''),
])
def test_keep_from_the_command_line(argv, value):
    """Options, prefixes and `--` as optparse has them: only a --keep the
    command line really gives counts as given there."""
    got, given = parsed_keep(argv)
    assert given == (value is not None)
    assert got == (value if value is not None else '')


@pytest.mark.parametrize('argv', [['--ke=1d'], ['--keepx=1d']])
def test_a_word_that_is_not_keep_is_not_taken_for_it(argv, capsys):
    """--ke is ambiguous (--key-details, --keyid), --keepx unknown: a usage
    error, never a --keep."""
    with pytest.raises(SystemExit) as e:
        parsed_keep(argv)
    assert e.value.code == 2
    assert 'obnam: error: ' in capsys.readouterr().err


def test_keep_from_a_file_is_not_from_the_command_line(tmp_path):
    conf = tmp_path / 'c.conf'
    conf.write_text('[config]\nkeep = 4d\n')
    assert parsed_keep([], str(conf)) == ('4d', False)
    assert parsed_keep(['--keep', '5d'], str(conf)) == ('5d', True)


# --- freeing space ---------------------------------------------------------

def check_consistency(repo_path):
    """larch's fsck on every forest, and chunk files == chunks in use."""
    sizes = {'clientlist': keys.CLIENTLIST_KEY_SIZE,
             'chunklist': keys.CHUNKLIST_KEY_SIZE,
             'chunksums': keys.CHUNKSUMS_KEY_SIZE}
    for top in os.listdir(repo_path):
        if top.isdigit():
            sizes[top] = keys.CLIENT_KEY_SIZE
    repo = h.open_repo(repo_path)
    for top, key_size in sizes.items():
        assert larch.fsck.check_forest(top, vfs=repo.fs,
                                       key_size=key_size) == [], top
    used = set()
    for client in repo.get_client_names():
        for gen in repo.get_generation_ids(client):
            used |= repo.get_generation_chunk_ids(gen)
    assert set(repo.get_chunk_ids()) == used
    for chunk_id in used:
        repo.get_chunk_content(chunk_id)
    return repo


@pytest.mark.slow
def test_forgetting_deleted_100_mib_shrinks_repository(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'keep').write_bytes(b'kept data\n' * 1000)
    for i in range(4):
        (live / ('big%d' % i)).write_bytes(os.urandom(25 * 1024 * 1024))
    repo_path = tmp_path / 'repo'
    assert run(repo_path, 'backup', live, client='c').returncode == 0
    for i in range(4):
        (live / ('big%d' % i)).unlink()
    (live / 'new').write_bytes(b'new\n')
    assert run(repo_path, 'backup', live, client='c').returncode == 0
    before = disk_usage(repo_path)
    result = run(repo_path, 'forget', '--keep=1y', client='c')
    assert result.returncode == 0, result.stderr
    after = disk_usage(repo_path)
    assert before - after >= 95 * 1024 * 1024
    repo = check_consistency(repo_path)
    [gen] = repo.get_generation_ids('c')
    [chunk] = repo.get_file_chunk_ids(gen, os.fsencode(live / 'keep'))
    assert repo.get_chunk_content(chunk) == b'kept data\n' * 1000
    restored = tmp_path / 'restored'
    result = run(repo_path, 'restore', '--to', restored, client='c')
    assert result.returncode == 0, result.stderr
    assert (restored / str(live)[1:] / 'keep').read_bytes() == \
        b'kept data\n' * 1000
    assert sorted(os.listdir(restored / str(live)[1:])) == ['keep', 'new']


def test_other_clients_keep_shared_chunks(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'shared').write_bytes(os.urandom(100000))
    repo_path = tmp_path / 'repo'
    for client in ('a', 'b'):
        assert run(repo_path, 'backup', live, client=client).returncode == 0
    [gen] = h.open_repo(repo_path).get_generation_ids('a')
    result = run(repo_path, 'forget', str(int(gen)), client='a')
    assert result.returncode == 0, result.stderr
    repo = check_consistency(repo_path)
    assert repo.get_generation_ids('a') == []
    [gen] = repo.get_generation_ids('b')
    chunks = repo.get_file_chunk_ids(gen, os.fsencode(live / 'shared'))
    assert b''.join(repo.get_chunk_content(c) for c in chunks) == \
        (live / 'shared').read_bytes()


def test_table_is_shown_on_a_terminal(repo_path):
    """With stdout on a terminal (a pseudo-terminal here) forget shows
    what it did without --verbose; --quiet silences it."""
    import pty
    import subprocess
    import sys
    from tests.obnamlib.cli.plugins.show_forget_helpers import OBNAM

    def on_terminal(*extra):
        master, slave = pty.openpty()
        try:
            proc = subprocess.run(
                [sys.executable, OBNAM, '--no-default-configs',
                 '--client-name=havelock', '--lock-timeout=0',
                 '--repository=%s' % repo_path, 'forget'] + list(extra),
                stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                env=dict(os.environ, TZ='UTC', LC_ALL='C.UTF-8'))
            os.close(slave)
            output = b''
            while True:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                output += chunk
        finally:
            os.close(master)
        assert proc.returncode == 0, proc.stderr
        return output.decode().replace('\r\n', '\n')

    shown = on_terminal('--keep=3d', '--quiet')
    assert '\tkeep' not in shown
    assert genids(repo_path) == ['11', '20', '29']
    shown = on_terminal('--keep=1h')
    assert '11\t2015-06-01 21:00:00 +0000\tforget\n' in shown
    assert '29\t2015-06-03 15:00:00 +0000\tkeep hourly 1/1, ' not in shown
    assert '29\t2015-06-03 15:00:00 +0000\tkeep hourly 1/1\n' in shown
    assert genids(repo_path) == ['29']


def two_clients(tmp_path):
    """havelock: four generations, a file each, one file shared by the
    first two and one by all; other: one generation sharing the first
    generation's own file."""
    path = tmp_path / 'shared-repo'
    repo = h.open_repo(path, create=True)
    for i in range(4):
        files = h.tree({b'/own': h.reg(b'own %d ' % i * (100 * (i + 1))),
                        b'/pair': h.reg(b'pair %d ' % (i // 2) * 300),
                        b'/all': h.reg(b'in every one ' * 50)})
        h.add_generation(repo, files, START + 3600 * i - 5, START + 3600 * i)
    h.add_generation(repo, h.tree({b'/x': h.reg(b'own 0 ' * 100)}), START,
                     client='other')
    repo.close()
    return path


def chunk_usage(path):
    return disk_usage(path / 'chunks')


@pytest.mark.parametrize('args', [['--keep=1h'], ['2'], ['8', '2'],
                                  ['2', '5', '8']])
def test_pretend_total_is_what_forget_frees(tmp_path, args):
    path = two_clients(tmp_path)
    pretend = utc(path, 'forget', '--pretend', *args)
    assert (pretend.returncode, pretend.stderr) == (0, b'')
    total_line = pretend.stdout.decode().splitlines()[-1]
    predicted = json.loads(utc(path, 'forget', '--pretend',
                               '--output-format=json', *args).stdout)
    assert total_line == 'Would free %d bytes (%s) in total' % (
        predicted['frees_bytes_total'],
        humanise.size_decimal(predicted['frees_bytes_total']))
    before = chunk_usage(path)
    real = utc(path, 'forget', '--output-format=json', *args)
    assert (real.returncode, real.stderr) == (0, b'')
    done = json.loads(real.stdout)
    assert predicted['frees_bytes_total'] == before - chunk_usage(path) == \
        done['freed_bytes_total']
    assert [g['frees_bytes'] for g in predicted['generations']] == \
        [g['freed_bytes'] for g in done['generations']]
    assert done['pretend'] is False and predicted['pretend'] is True
    assert predicted['frees_bytes_total'] > 0 or args == ['2']


def test_pretend_does_not_count_what_others_keep(tmp_path):
    """Forgetting the first generation frees nothing: its own file is
    the other client's too, the pair file is in the second one."""
    path = two_clients(tmp_path)
    result = utc(path, 'forget', '--pretend', '2')
    assert result.stdout.decode().splitlines()[1:] == [
        '5\t2015-06-01 01:00:00 +0000\tkeep not named',
        '8\t2015-06-01 02:00:00 +0000\tkeep not named',
        '11\t2015-06-01 03:00:00 +0000\tkeep not named',
        'Would free 0 bytes (0.0 B) in total']
