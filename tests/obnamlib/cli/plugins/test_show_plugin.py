"""The show commands through bin/obnam, byte for byte (cli.md §5.3-5.8,
§5.14), on repositories built through the Repository API and by backup."""

import json

import pytest

from tests.obnamlib import show_helpers as h
from tests.obnamlib.cli.plugins.show_forget_helpers import run

# 2015-10-27 20:21:30 +0200 in Helsinki
T1 = 1445970090
T2 = T1 + 86400 * 30          # 2015-11-26, still EET


@pytest.fixture
def repo_path(tmp_path):
    path = tmp_path / 'repo'
    repo = h.open_repo(path, create=True)
    h.add_generation(repo, h.tree({
        b'/home/liw/a b': h.reg(b'x' * 5000),
        b'/home/liw/l': h.link(b'foo'),
        b'/home/liw/sub': h.dir_(mode=0o1777),
        b'/home/liw/sub/s': h.reg(b's', mode=0o4755),
    }), T1, T1 + 5, file_count=7, total_data=5007)
    h.add_generation(repo, h.tree({
        b'/home/liw/new': h.reg(b'new'),
        b'/home/liw/sub': h.dir_(mode=0o1777),
        b'/home/liw/sub/s': h.reg(b'changed', mode=0o4755),
    }), T2, T2 + 65, checkpoint=True)
    repo.lock_client_list()
    repo.add_client('empty')
    repo.commit_client_list()
    repo.close()
    return path


def text(result):
    assert result.returncode == 0, result.stderr
    assert result.stderr == b''
    return result.stdout.decode()


def test_clients(repo_path, tmp_path):
    assert text(run(repo_path, 'clients')) == 'havelock\nempty\n'
    out = tmp_path / 'out'
    assert text(run(repo_path, 'clients', '--output', out)) == ''
    assert out.read_text() == 'havelock\nempty\n'


def test_generations_exact_and_ignore_output(repo_path, tmp_path):
    expected = (
        '2\t2015-10-27 20:21:30 +0200 .. 2015-10-27 20:21:35 +0200 '
        '(7 files, 5007 bytes) \n'
        '5\t2015-11-26 20:21:30 +0200 .. 2015-11-26 20:22:35 +0200 '
        '(7 files, 5007 bytes)  (checkpoint)\n')     # counts inherited
    assert text(run(repo_path, 'generations')) == expected
    out = tmp_path / 'out'
    assert text(run(repo_path, 'generations', '--output', out)) == expected
    assert out.read_text() == ''


def test_genids(repo_path):
    assert text(run(repo_path, 'genids')) == '2\n5\n'
    assert text(run(repo_path, 'genids', client='empty')) == ''


def test_unknown_client(repo_path):
    for command in ('generations', 'genids', 'ls', 'kdirstat'):
        result = run(repo_path, command, client='nobody')
        assert result.returncode == 1
        assert result.stderr.decode() == (
            'ERROR: R1CA00X: Client nobody does not exist in repository '
            '%s\n' % repo_path)


LS_2 = (
    'Generation 2 (2015-10-27 20:21:30 +0200 - 2015-10-27 20:21:35 +0200)\n'
    'drwxr-xr-x     2 root     root           4096 2015-10-27 18:03:25 /\n'
    'drwxr-xr-x     2 root     root           4096 2015-10-27 18:03:25 /home\n'
    'drwxr-xr-x     2 liw      liw            4096 2015-10-27 18:03:25 '
    '/home/liw\n'
    '-rw-r--r--     1 liw      liw            5000 2015-10-27 18:03:25 '
    '/home/liw/a b\n'
    '-rw-r--r--     1 liw      liw               6 2015-10-27 18:03:25 '
    '/home/liw/foo\n'
    'lrwxrwxrwx     1 liw      liw               3 2015-10-27 18:03:25 '
    '/home/liw/l -> foo\n'
    'drwxrwxrwt     2 root     root           4096 2015-10-27 18:03:25 '
    '/home/liw/sub\n'
    '-rwsr-xr-x     1 liw      liw               1 2015-10-27 18:03:25 '
    '/home/liw/sub/s\n')


def test_ls_whole_generation(repo_path):
    assert text(run(repo_path, 'ls', '--generation=2')) == LS_2


def test_ls_default_is_latest_and_several_generations(repo_path):
    latest = text(run(repo_path, 'ls'))
    assert latest.startswith('Generation 5 (2015-11-26 20:21:30 +0200 - ')
    both = text(run(repo_path, 'ls', '--generation=2',
                    '--generation=latest'))
    assert both == LS_2 + latest


def test_ls_paths_and_trailing_slashes(repo_path):
    out = text(run(repo_path, 'ls', '--generation=2', '/home/liw/sub/',
                   '/home/liw/foo'))
    assert out.splitlines()[1:] == [
        'drwxrwxrwt     2 root     root           4096 2015-10-27 18:03:25 '
        '/home/liw/sub',
        '-rwsr-xr-x     1 liw      liw               1 2015-10-27 18:03:25 '
        '/home/liw/sub/s',
        '-rw-r--r--     1 liw      liw               6 2015-10-27 18:03:25 '
        '/home/liw/foo']


def test_ls_missing_file(repo_path):
    result = run(repo_path, 'ls', '--generation=2', '/nope')
    assert result.returncode == 1
    assert result.stderr.decode() == (
        'ERROR: R3E151X: Client havelock, generation 2 does not have file '
        '/nope\n')


def test_ls_unknown_generation(repo_path):
    result = run(repo_path, 'ls', '--generation=3')
    assert result.returncode == 1
    assert result.stderr.decode() == (
        "ERROR: R0B15DX: Cannot find requested generation '3' for client "
        "havelock\n")
    result = run(repo_path, 'ls', client='empty')
    assert result.stderr.decode() == (
        'ERROR: REFB32X: Client empty has no generations\n')


def test_kdirstat(repo_path):
    assert text(run(repo_path, 'kdirstat', '--generation=2')) == (
        '[kdirstat 4.0 cache file]\n'
        '# Generated by obnam Generation 2 (2015-10-27 20:21:30 +0200 - '
        '2015-10-27 20:21:35 +0200)\n'
        '\n'
        '# Do not edit!\n'
        '#\n'
        '# Type  path            size    mtime           <optional fields>\n'
        '\n'
        'D /home\t4096\t0x562fbc6d\n'
        'D /home/liw\t4096\t0x562fbc6d\n'
        'F\t/home/liw/a%20b\t5000\t0x562fbc6d\n'
        'F\t/home/liw/foo\t6\t0x562fbc6d\n'
        'L\t/home/liw/l\t3\t0x562fbc6d\n'
        'D /home/liw/sub\t4096\t0x562fbc6d\n'
        'F\t/home/liw/sub/s\t1\t0x562fbc6d\n')


def test_diff_one_and_two_generations(repo_path, tmp_path):
    expected = ('+ /home/liw/new\n'
                '- /home/liw/a b\n'
                '- /home/liw/l\n'
                '* /home/liw/sub/s\n')
    assert text(run(repo_path, 'diff', 'latest')) == expected
    assert text(run(repo_path, 'diff', '2', '5')) == expected
    assert text(run(repo_path, 'diff', '5', '5')) == ''
    out = tmp_path / 'out'
    assert text(run(repo_path, 'diff', '--output', out, '2', '5')) == ''
    assert out.read_text() == expected


def test_diff_verbose(repo_path):
    lines = text(run(repo_path, 'diff', '--verbose', '5')).splitlines()
    assert lines[0] == (
        '+ -rw-r--r--     1 liw      liw               3 2015-10-27 '
        '18:03:25 /home/liw/new')
    assert lines[2] == (
        '- lrwxrwxrwx     1 liw      liw               3 2015-10-27 '
        '18:03:25 /home/liw/l -> foo')


@pytest.mark.parametrize('args, error', [
    (['2'], "ERROR: R91CA1X: Can't show first generation. Use 'obnam ls' "
            "instead\n"),
    ([], 'ERROR: RA5942X: Need one or two generations\n'),
    (['2', '5', '5'], 'ERROR: RA5942X: Need one or two generations\n'),
])
def test_diff_errors(repo_path, args, error):
    result = run(repo_path, 'diff', *args)
    assert result.returncode == 1
    assert result.stderr.decode() == error


# Newest generation started 2015-11-26 20:21:30 local.
@pytest.mark.parametrize('now, more, line, code', [
    ('2015-11-26 20:21:30', [], 'OK: backup is recent.', 0),
    ('2015-11-27 23:21:30', [], 'OK: backup is recent.', 0),     # 27h: not >
    ('2015-11-27 23:21:31', ['--critical-age=2d'],
     'WARNING: backup is old.', 1),
    ('2015-11-27 23:21:31', [], 'CRITICAL: backup is old.', 2),
    ('2015-11-26 20:31:31', ['--warn-age=10m', '--critical-age=1w'],
     'WARNING: backup is old.', 1),
    ('2015-11-26 20:21:40', ['--warn-age=5s', '--critical-age=9s'],
     'CRITICAL: backup is old.', 2),
    ('2015-11-26 22:21:30', ['--warn-age=1', '--critical-age=3'],
     'WARNING: backup is old.', 1),
])
def test_nagios(repo_path, tmp_path, now, more, line, code):
    out = tmp_path / 'out'
    result = run(repo_path, 'nagios-last-backup-age', '--pretend-time', now,
                 '--output', out, *more)
    assert result.returncode == code, result.stderr
    assert out.read_text() == (
        '%s  last backup was 2015-11-26 20:21:30 +0200.\n' % line)


def test_nagios_without_backups_and_unknown_client(repo_path):
    result = run(repo_path, 'nagios-last-backup-age', client='empty')
    assert (result.returncode, result.stdout) == (
        2, b'CRITICAL: no backup found.\n')
    result = run(repo_path, 'nagios-last-backup-age', client='nobody')
    assert (result.returncode, result.stdout.decode()) == (
        2, 'CRITICAL: R1CA00X: Client nobody does not exist in repository '
           '%s\n' % repo_path)


def test_nagios_missing_repository_is_unknown(tmp_path):
    """Nagios plugin convention: exit 3, UNKNOWN (1.x: ERROR, exit 1,
    which monitoring takes for WARNING)."""
    result = run(tmp_path / 'nope', 'nagios-last-backup-age')
    assert result.returncode == 3
    assert result.stdout.decode() == (
        'UNKNOWN: RD5FA4X: System error: %s: 2: No such file or '
        'directory\n' % (tmp_path / 'nope'))
    assert result.stderr == b''


def test_nagios_directory_that_is_no_repository_is_unknown(tmp_path):
    result = run(tmp_path, 'nagios-last-backup-age')
    assert result.returncode == 3
    assert result.stdout.decode() == (
        'UNKNOWN: RA920EX: %s does not seem to be an Obnam repository\n'
        % tmp_path)


def test_nagios_bad_age(repo_path):
    result = run(repo_path, 'nagios-last-backup-age', '--warn-age=soon')
    assert result.returncode == 1
    assert 'warn-age=soon is not an age' in result.stderr.decode()


def test_real_backup_listed(tmp_path):
    live = tmp_path / 'live'
    live.mkdir()
    (live / 'file').write_bytes(b'data')
    repo = tmp_path / 'repo'
    result = run(repo, 'backup', live)
    assert result.returncode == 0, result.stderr
    gens = text(run(repo, 'generations')).splitlines()
    assert len(gens) == 1 and gens[0].endswith(' bytes) ')
    lines = text(run(repo, 'ls', live)).splitlines()
    assert lines[1].endswith(' %s' % live)
    assert lines[2].startswith('-rw')
    assert lines[2].split()[4] == '4'
    assert lines[2].endswith(' %s/file' % live)


def test_names_that_are_not_utf8_come_out_as_stored(tmp_path):
    path = tmp_path / 'repo'
    repo = h.open_repo(path, create=True)
    h.add_generation(repo, h.tree({b'/home/liw/caf\xe9': h.reg(b'x')}), T1)
    h.add_generation(repo, h.tree(), T2)
    repo.close()
    result = run(path, 'ls', '--generation=2', '/home/liw')
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].endswith(b' /home/liw/foo')
    assert b' /home/liw/caf\xe9\n' in result.stdout
    result = run(path, 'diff', 'latest')
    assert result.stdout == b'- /home/liw/caf\xe9\n'
    out = tmp_path / 'out'
    assert run(path, 'kdirstat', '--generation=2', '--output', out
               ).returncode == 0
    assert b'F\t/home/liw/caf\xe9\t1\t0x562fbc6d\n' in out.read_bytes()


# --- --output-format=json ----------------------------------------------------

def json_of(result):
    assert result.returncode == 0, result.stderr
    assert result.stderr == b''
    return json.loads(result.stdout)


def test_json_goes_where_the_text_goes(repo_path, tmp_path):
    assert json_of(run(repo_path, 'clients', '--output-format=json')) == {
        'clients': [{'name': 'havelock'}, {'name': 'empty'}]}
    out = tmp_path / 'out'
    for command in ('genids', 'generations'):      # stdout, as the text
        doc = json_of(run(repo_path, command, '--output-format=json',
                          '--output', out))
        assert doc['client'] == 'havelock'
        assert out.read_text() == ''
    for command in ('clients', 'ls', 'diff'):
        args = ['latest'] if command == 'diff' else []
        result = run(repo_path, command, '--output-format=json',
                     '--output', out, *args)
        assert (result.returncode, result.stdout) == (0, b'')
        assert json.loads(out.read_text()) == json_of(
            run(repo_path, command, '--output-format=json', *args))


def test_json_generations_and_genids(repo_path):
    doc = json_of(run(repo_path, 'generations', '--output-format=json'))
    assert [(g['id'], g['files'], g['bytes'], g['checkpoint'],
             g['started_utc']) for g in doc['generations']] == [
        ('2', 7, 5007, False, '2015-10-27T18:21:30Z'),
        ('5', 7, 5007, True, '2015-11-26T18:21:30Z')]
    assert json_of(run(repo_path, 'genids', '--output-format=json')) == {
        'client': 'havelock', 'generation_ids': ['2', '5']}
    assert json_of(run(repo_path, 'genids', '--output-format=json',
                       client='empty'))['generation_ids'] == []


def test_json_ls_has_the_facts_of_the_text(repo_path):
    doc = json_of(run(repo_path, 'ls', '--output-format=json',
                      '--generation=2', '--generation=latest'))
    assert [g['id'] for g in doc['generations']] == ['2', '5']
    entries = doc['generations'][0]['entries']
    text_lines = LS_2.splitlines()[1:]
    assert len(entries) == len(text_lines)
    for entry, line in zip(entries, text_lines):
        mode, nlink, user, group, size, day, hms, path = line.split(None, 7)
        assert (entry['permissions'], entry['nlink'], entry['user'],
                entry['group'], entry['size'], entry['mtime_utc']) == (
            mode, int(nlink), user, group, int(size),
            '%sT%sZ' % (day, hms))
        assert path.startswith(entry['path'])
    link = [e for e in entries if e['type'] == 'symlink']
    assert [(e['path'], e['target']) for e in link] == [('/home/liw/l',
                                                         'foo')]


def test_json_diff_and_errors_write_no_document(repo_path):
    doc = json_of(run(repo_path, 'diff', '--output-format=json', '5'))
    assert (doc['old_generation'], doc['new_generation']) == ('2', '5')
    assert [(c['change'], c['path']) for c in doc['changes']] == [
        ('added', '/home/liw/new'), ('removed', '/home/liw/a b'),
        ('removed', '/home/liw/l'), ('changed', '/home/liw/sub/s')]
    for args in (['diff', '2'], ['ls', '/nope'], ['diff']):
        result = run(repo_path, *args, '--output-format=json')
        assert (result.returncode, result.stdout) == (1, b'')
