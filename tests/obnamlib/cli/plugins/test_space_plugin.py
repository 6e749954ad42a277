"""space through bin/obnam: the table, the JSON, no locks, and its
only-here bytes against what forget then frees."""

import json
import os
import shutil

from tests.obnamlib import show_helpers as h
from tests.obnamlib.cli.plugins.show_forget_helpers import (
    disk_usage, run, snapshot)

START = 1433116800          # 2015-06-01 00:00 UTC


def make_repo(path):
    """Client havelock: three generations (a file each, one shared by
    all); client other: one, sharing the first generation's file."""
    repo = h.open_repo(path, create=True)
    for i in range(3):
        files = h.tree({b'/own': h.reg(b'own %d ' % i * (100 * (i + 1))),
                        b'/all': h.reg(b'in every one ' * 50)})
        h.add_generation(repo, files, START + 3600 * i - 5,
                         START + 3600 * i, total_data=1000 * (i + 1))
    h.add_generation(repo, h.tree({b'/x': h.reg(b'own 0 ' * 100)}), START,
                     client='other', total_data=600)
    repo.close()
    return path


def space_json(path, client='havelock'):
    result = run(path, 'space', '--output-format=json', client=client)
    assert (result.returncode, result.stderr) == (0, b''), result.stderr
    return json.loads(result.stdout)


def test_space_text(tmp_path):
    path = make_repo(tmp_path / 'repo')
    before = snapshot(path)
    result = run(path, 'space', tz='UTC')
    assert (result.returncode, result.stderr) == (0, b'')
    lines = result.stdout.decode().splitlines()
    assert lines[0].split() == ['generation', 'ended', 'file', 'data',
                                'stored', 'only', 'here']
    assert [line.split()[:3] for line in lines[1:4]] == [
        ['2', '2015-06-01', '00:00:00'], ['5', '2015-06-01', '01:00:00'],
        ['8', '2015-06-01', '02:00:00']]
    assert lines[1].split()[4:6] == ['1000.0', 'B']
    assert lines[5].startswith('Chunk files in the repository: 5, ')
    assert snapshot(path) == before


def test_space_json_numbers(tmp_path):
    path = make_repo(tmp_path / 'repo')
    document = space_json(path)
    genids = run(path, 'genids').stdout.decode().split()
    assert [g['id'] for g in document['generations']] == genids
    assert [g['bytes'] for g in document['generations']] == [1000, 2000, 3000]
    first, second, _ = document['generations']
    assert first['unique_bytes'] == 0           # other holds its own file
    assert second['unique_bytes'] > 0
    assert second['stored_bytes'] > second['unique_bytes']
    repository = document['repository']
    assert repository['chunk_bytes'] == disk_usage(path / 'chunks')
    assert (repository['chunk_count'], repository['generation_count'],
            repository['client_count'], repository['generations_bytes']) == \
        (5, 4, 2, 6600)
    assert repository['ratio'] == 6600 / repository['chunk_bytes']


def test_unique_bytes_are_what_forgetting_the_generation_frees(tmp_path):
    path = make_repo(tmp_path / 'repo')
    for gen in space_json(path)['generations']:
        copy = shutil.copytree(path, tmp_path / ('copy' + gen['id']))
        before = disk_usage(copy / 'chunks')
        result = run(copy, 'forget', gen['id'], '--output-format=json')
        assert result.returncode == 0, result.stderr
        shrunk = before - disk_usage(copy / 'chunks')
        assert gen['unique_bytes'] == shrunk == \
            json.loads(result.stdout)['freed_bytes_total']


def test_unknown_client(tmp_path):
    path = make_repo(tmp_path / 'repo')
    result = run(path, 'space', client='nobody')
    assert result.returncode == 1
    assert b'nobody' in result.stderr


def test_space_of_the_other_client(tmp_path):
    path = make_repo(tmp_path / 'repo')
    [gen] = space_json(path, client='other')['generations']
    assert gen['unique_bytes'] == 0 and gen['stored_bytes'] > 0
    assert os.path.isdir(path / 'chunks')


def test_over_sftp_the_numbers_are_the_same(tmp_path):
    """Chunk sizes come from the SFTP listings (all in flight together):
    space and forget --pretend say over sftp:// what they say locally."""
    from tests.obnamlib.vfs.test_sftp import shared_sshd
    from tests.obnamlib.vfs.test_sftp_end_to_end import obnam, ok
    path = make_repo(tmp_path / 'repo')
    sshd = shared_sshd()
    (tmp_path / 'home').mkdir()
    for command in (['space'], ['forget', '--pretend', '--keep=1h']):
        args = command + ['--client-name', 'havelock',
                          '--output-format=json']
        local = json.loads(run(path, *args).stdout)
        remote = json.loads(ok(obnam(sshd, tmp_path / 'home', '-r',
                                     sshd.url(str(path)), *args)))
        assert remote == local
