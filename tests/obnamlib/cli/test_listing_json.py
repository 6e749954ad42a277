"""The JSON documents of clients, generations, genids, ls and diff, built
from small real repositories."""

import base64
import stat

from obnamlib.cli import listing_json
from obnamlib.repo.metadata import Metadata

from tests.obnamlib import show_helpers as h
from tests.obnamlib.show_helpers import repo  # noqa: F401 (fixture)

T1 = 1445970090             # 2015-10-27 18:21:30 UTC
T2 = T1 + 86400


def spec(gen_id):
    """The id as the text spells it."""
    return '%d' % int(gen_id)


def test_clients_with_exact_bytes_of_a_name_that_is_not_utf8():
    assert listing_json.clients_document(['a', 'b\udce9']) == {
        'clients': [{'name': 'a'},
                    {'name': 'b\ufffd', 'name_b64': 'Yuk='}]}
    assert listing_json.clients_document([]) == {'clients': []}


def test_generations_carry_counts_into_checkpoints_as_the_text_does(repo):
    g1 = h.add_generation(repo, h.tree(), T1, T1 + 5, file_count=4,
                          total_data=10)
    g2 = h.add_generation(repo, h.tree(), T2, checkpoint=True)
    doc = listing_json.generations_document(repo, 'havelock', [g1, g2])
    assert doc == {'client': 'havelock', 'generations': [
        {'id': spec(g1), 'started': T1,
         'started_utc': '2015-10-27T18:21:30Z', 'ended': T1 + 5,
         'ended_utc': '2015-10-27T18:21:35Z', 'files': 4, 'bytes': 10,
         'checkpoint': False},
        {'id': spec(g2), 'started': T2,
         'started_utc': '2015-10-28T18:21:30Z', 'ended': T2 + 5,
         'ended_utc': '2015-10-28T18:21:35Z', 'files': 4, 'bytes': 10,
         'checkpoint': True}]}


def test_genids_and_empty_lists(repo):
    g1 = h.add_generation(repo, h.tree(), T1)
    g2 = h.add_generation(repo, h.tree(), T2)
    assert listing_json.genids_document(repo, 'havelock', [g1, g2]) == {
        'client': 'havelock', 'generation_ids': [spec(g1), spec(g2)]}
    assert listing_json.genids_document(repo, 'x', []) == {
        'client': 'x', 'generation_ids': []}
    assert listing_json.generations_document(repo, 'x', []) == {
        'client': 'x', 'generations': []}


def test_file_fields_of_a_regular_file():
    md = Metadata(st_mode=stat.S_IFREG | 0o4755, st_nlink=2, st_uid=1000,
                  st_gid=100, username=b'liw', groupname=b'users',
                  st_size=5000, st_mtime_sec=T1, st_mtime_nsec=123456789)
    assert listing_json.file_fields(b'/home/liw/a b', md) == {
        'path': '/home/liw/a b', 'type': 'file', 'mode': 0o104755,
        'permissions': '-rwsr-xr-x', 'nlink': 2, 'uid': 1000, 'gid': 100,
        'user': 'liw', 'group': 'users', 'size': 5000,
        'mtime': T1 + 0.123456789, 'mtime_utc': '2015-10-27T18:21:30Z',
        'mtime_ns': T1 * 10**9 + 123456789}


def test_file_fields_symlink_target_and_names_not_utf8():
    md, _ = h.link(b'caf\xe9')
    fields = listing_json.file_fields(b'/caf\xe9', md)
    assert fields['type'] == 'symlink'
    assert base64.b64decode(fields['path_b64']) == b'/caf\xe9'
    assert fields['target'] == 'caf\ufffd'
    assert base64.b64decode(fields['target_b64']) == b'caf\xe9'
    md.groupname = b'gr\xfcn'
    assert listing_json.file_fields(b'/x', md)['group_b64'] == 'Z3L8bg=='


def test_file_fields_unknown_values_are_null():
    fields = listing_json.file_fields(b'/x', Metadata())
    assert fields == {
        'path': '/x', 'type': 'unknown', 'mode': None,
        'permissions': '?---------', 'nlink': None, 'uid': None,
        'gid': None, 'user': None, 'group': None, 'size': None,
        'mtime': None, 'mtime_utc': None, 'mtime_ns': None}


def test_ls_every_generation_and_path_in_text_order(repo):
    sub = {b'/home/liw/sub': h.dir_(), b'/home/liw/sub/s': h.reg(b's')}
    g1 = h.add_generation(repo, h.tree(sub), T1)
    g2 = h.add_generation(repo, h.tree(sub), T2)
    doc = listing_json.ls_document(repo, 'havelock', [g2, g1],
                                   [b'/home/liw/sub', b'/home/liw/foo'])
    assert [g['id'] for g in doc['generations']] == [spec(g2), spec(g1)]
    paths = [[e['path'] for e in g['entries']] for g in doc['generations']]
    assert paths[1] == ['/home/liw/sub', '/home/liw/sub/s', '/home/liw/foo']
    assert doc['generations'][1]['started'] == T1
    whole = listing_json.ls_document(repo, 'havelock', [g2], [b'/'])
    assert [e['path'] for e in whole['generations'][0]['entries']] == [
        '/', '/home', '/home/liw', '/home/liw/foo', '/home/liw/sub',
        '/home/liw/sub/s']


def test_diff_changes_with_the_metadata_of_new_or_removed_entries(repo):
    g1 = h.add_generation(repo, h.tree({
        b'/home/liw/gone': h.reg(b'old', st_size=3),
        b'/home/liw/same': h.reg(b'x'),
        b'/home/liw/edit': h.reg(b'1')}), T1)
    g2 = h.add_generation(repo, h.tree({
        b'/home/liw/new': h.reg(b'newer'),
        b'/home/liw/same': h.reg(b'x'),
        b'/home/liw/edit': h.reg(b'22')}), T2)
    doc = listing_json.diff_document(repo, 'havelock', g1, g2)
    assert (doc['old_generation'], doc['new_generation']) == (
        spec(g1), spec(g2))
    assert [(c['change'], c['path'], c['size']) for c in doc['changes']] == [
        ('changed', '/home/liw/edit', 2),
        ('added', '/home/liw/new', 5),
        ('removed', '/home/liw/gone', 3)]
    assert doc['changes'][0]['permissions'] == '-rw-r--r--'
    assert listing_json.diff_document(repo, 'havelock', g2, g2)[
        'changes'] == []
