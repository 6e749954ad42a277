"""ls, kdirstat and generations text, byte for byte (cli.md §5.3-5.7)."""

import os
import stat

import pytest

from obnamlib.engine import listing
from obnamlib.repo.metadata import Metadata

from tests.local_time import helsinki  # noqa: F401
from tests.obnamlib import show_helpers as h
from tests.obnamlib.show_helpers import repo  # noqa: F401 (fixture)


S = stat


@pytest.mark.parametrize('mode, text', [
    (S.S_IFREG | 0o644, '-rw-r--r--'),
    (S.S_IFDIR | 0o755, 'drwxr-xr-x'),
    (S.S_IFLNK | 0o777, 'lrwxrwxrwx'),
    (S.S_IFCHR | 0o620, 'crw--w----'),
    (S.S_IFBLK | 0o660, 'brw-rw----'),
    (S.S_IFIFO | 0o600, 'prw-------'),
    (S.S_IFSOCK | 0o755, '-rwxr-xr-x'),      # sockets show '-' (1.x quirk)
    (0o644, '?rw-r--r--'),
    (None, '?---------'),
    (S.S_IFREG | 0o4755, '-rwsr-xr-x'),
    (S.S_IFREG | 0o4644, '-rwSr--r--'),
    (S.S_IFREG | 0o2755, '-rwxr-sr-x'),
    (S.S_IFREG | 0o2745, '-rwxr-Sr-x'),
    (S.S_IFDIR | 0o1777, 'drwxrwxrwt'),
    (S.S_IFDIR | 0o1776, 'drwxrwxrwT'),
    (S.S_IFREG | 0o7000, '---S--S--T'),
    (S.S_IFREG | 0o7777, '-rwsrwsrwt'),
    (S.S_IFREG | 0, '----------'),
])
def test_mode_string(mode, text):
    assert listing.mode_string(mode) == text


@pytest.mark.parametrize('mode, name', [
    (S.S_IFREG | 0o644, 'file'),
    (S.S_IFDIR | 0o755, 'dir'),
    (S.S_IFLNK | 0o777, 'symlink'),
    (S.S_IFIFO | 0o600, 'fifo'),
    (S.S_IFSOCK | 0o755, 'socket'),      # not the text's '-'
    (S.S_IFCHR | 0o620, 'char-device'),
    (S.S_IFBLK | 0o660, 'block-device'),
    (0o644, 'unknown'),
    (None, 'unknown'),
])
def test_type_name(mode, name):
    assert listing.type_name(mode) == name


def test_ls_line_example_from_spec():
    md = Metadata(st_mode=S.S_IFREG | 0o644, st_nlink=1, username=b'liw',
                  groupname=b'liw', st_size=4096, st_mtime_sec=1445970205)
    assert listing.ls_line(b'/home/liw/foo', md) == (
        '-rw-r--r--     1 liw      liw            4096 2015-10-27 18:23:25 '
        '/home/liw/foo')


def test_ls_line_mtime_is_utc_whatever_the_zone(helsinki):
    md = Metadata(st_mode=S.S_IFREG | 0o644, st_mtime_sec=0)
    assert listing.ls_line(b'/x', md) == (
        '-rw-r--r--     0                            0 1970-01-01 00:00:00 /x')


def test_ls_line_widths_grow_and_unknown_names_are_empty():
    md = Metadata(st_mode=S.S_IFREG | 0o600, st_nlink=123456,
                  username=b'averylongusername', groupname=None,
                  st_size=12345678901, st_mtime_sec=1)
    assert listing.ls_line(b'/f', md) == (
        '-rw------- 123456 averylongusername          12345678901 '
        '1970-01-01 00:00:01 /f')


def test_ls_line_symlink_shows_target():
    md, _ = h.link(b'../target')
    assert listing.ls_line(b'/a/l', md).endswith(' /a/l -> ../target')


def test_ls_line_non_utf8_name_round_trips():
    md, _ = h.reg(b'')
    line = listing.ls_line(b'/caf\xe9', md)
    assert os.fsencode(line).endswith(b' /caf\xe9')


@pytest.mark.parametrize('path, result', [
    (b'/', b'/'), (b'//', b'/'), (b'/home/', b'/home'), (b'/home//', b'/home'),
    (b'/home', b'/home')])
def test_normalise_path(path, result):
    assert listing.normalise_path(path) == result


@pytest.mark.parametrize('number, text', [
    (0, '0'), (1, '0x1'), (0x562fc1ad, '0x562fc1ad'), (-3600, '-0xe10')])
def test_c_hex(number, text):
    assert listing.c_hex(number) == text


@pytest.mark.parametrize('kind, prefix', [
    (S.S_IFREG, 'F\t'), (S.S_IFDIR, 'D '), (S.S_IFLNK, 'L\t'),
    (S.S_IFBLK, 'BlockDev\t'), (S.S_IFCHR, 'CharDev\t'),
    (S.S_IFIFO, 'FIFO\t'), (S.S_IFSOCK, 'Socket\t'), (0, '#UNHANDLED\t')])
def test_kdirstat_types(kind, prefix):
    md = Metadata(st_mode=kind | 0o644, st_size=17, st_mtime_sec=0x562fc1ad)
    assert listing.kdirstat_line(b'/a', md) == prefix + '/a\t17\t0x562fc1ad'


def test_kdirstat_escapes_percent_space_tab():
    md = Metadata(st_mode=S.S_IFREG | 0o644, st_size=0, st_mtime_sec=-3600)
    assert listing.kdirstat_line(b'/a b\tc%d', md) == (
        'F\t/a%20b%09c%25d\t0\t-0xe10')


# --- against a real repository ----------------------------------------------


def test_generations_lines(repo, helsinki):
    # 2015-10-27 20:21:30 EET is 18:21:30 UTC; July is EEST (+0300)
    g1 = h.add_generation(repo, h.tree(), 1445970090, 1445970095,
                          file_count=14, total_data=100000)
    g2 = h.add_generation(repo, h.tree(), 1436000000, 1436000001,
                          checkpoint=True)
    assert listing.generations_line(repo, g1) == (
        '%s\t2015-10-27 20:21:30 +0200 .. 2015-10-27 20:21:35 +0200 '
        '(14 files, 100000 bytes) ' % int(g1))
    assert listing.generations_line(repo, g2) == (
        '%s\t2015-07-04 11:53:20 +0300 .. 2015-07-04 11:53:21 +0300 '
        '(0 files, 0 bytes)  (checkpoint)' % int(g2))
    assert listing.ls_header(repo, g1) == (
        'Generation %s (2015-10-27 20:21:30 +0200 - 2015-10-27 20:21:35 '
        '+0200)' % int(g1))


def test_checkpoint_without_counts_shows_previous_ones(repo):
    g1 = h.add_generation(repo, h.tree(), 1000, file_count=4,
                          total_data=10)
    g2 = h.add_generation(repo, h.tree(), 2000, checkpoint=True)
    g3 = h.add_generation(repo, h.tree(), 3000, checkpoint=True,
                          file_count=2, total_data=3)
    g4 = h.add_generation(repo, h.tree(), 4000)
    g5 = h.add_generation(repo, h.tree(), 5000, checkpoint=True)
    lines = listing.generations_lines(repo, [g1, g2, g3, g4, g5])
    counts = [line.split(' (')[1].split(')')[0] for line in lines]
    assert counts == ['4 files, 10 bytes', '4 files, 10 bytes',
                      '2 files, 3 bytes', '0 files, 0 bytes',
                      '0 files, 0 bytes']
    assert lines[1].endswith(' bytes)  (checkpoint)')
    first_checkpoint = listing.generations_lines(repo, [g2])
    assert '(0 files, 0 bytes)  (checkpoint)' in first_checkpoint[0]
    assert list(listing.generation_counts(repo, [g1, g2, g3, g4, g5])) == [
        (g1, (4, 10), False), (g2, (4, 10), True), (g3, (2, 3), True),
        (g4, (0, 0), False), (g5, (0, 0), True)]


def test_walk_order(repo):
    files = {
        b'/': h.dir_(),
        b'/b': h.dir_(),
        b'/b/z': h.reg(b'z'),
        b'/b/a': h.dir_(),
        b'/b/a/x': h.reg(b'x'),
        b'/c': h.reg(b'c'),
        b'/a': h.reg(b'a'),
        b'/a.d': h.dir_(),
        b'/a.d/1': h.reg(b'1'),
        b'/B': h.link(b'/b'),
    }
    gen = h.add_generation(repo, files, 1000)
    assert [p for p, _ in listing.walk(repo, gen, b'/')] == [
        b'/', b'/B', b'/a', b'/c', b'/a.d', b'/a.d/1', b'/b', b'/b/z',
        b'/b/a', b'/b/a/x']
    assert [p for p, _ in listing.walk(repo, gen, b'/b')] == [
        b'/b', b'/b/z', b'/b/a', b'/b/a/x']
    assert [p for p, _ in listing.walk(repo, gen, b'/c')] == [b'/c']


def test_walk_deep_tree_without_recursion(repo):
    files = {b'/': h.dir_()}
    path = b''
    for _ in range(1200):
        path += b'/d'
        files[path] = h.dir_()
    gen = h.add_generation(repo, files, 1000)
    assert len(list(listing.walk(repo, gen, b'/'))) == 1201


def test_kdirstat_header(repo, helsinki):
    gen = h.add_generation(repo, h.tree(), 1445970090, 1445970095)
    assert '\n'.join(listing.kdirstat_header(repo, gen)) + '\n' == (
        '[kdirstat 4.0 cache file]\n'
        '# Generated by obnam Generation %d (2015-10-27 20:21:30 +0200 - '
        '2015-10-27 20:21:35 +0200)\n'
        '\n'
        '# Do not edit!\n'
        '#\n'
        '# Type  path            size    mtime           <optional fields>\n'
        '\n' % int(gen))


@pytest.mark.parametrize('stored', [10 ** 18, -10 ** 18, 2 ** 70])
def test_a_time_beyond_the_calendar_is_shown_as_unknown(stored):
    """A damaged or hostile repository may store any number."""
    assert listing.utc_time(stored) == listing.UNSHOWABLE_TIME
    assert listing.local_time(stored) == listing.UNSHOWABLE_TIME
