"""generations, genids, ls and kdirstat on the repositories real Obnam
1.x wrote (decrypted copies, so this is about what the commands print):
every ls line must agree with the summain manifest of that backup."""

import calendar
import os
import re
import stat
import time

import pytest

from obnamlib.engine import listing
from tests.obnamlib.repo.fmt_6 import reference_repos as rr
from tests.obnamlib.repo.fmt_6.reference_repos import (  # noqa: F401
    plain_copies, reference)
from tests.obnamlib.cli.plugins.show_forget_helpers import run

LS_LINE = re.compile(
    r'^(?P<mode>\S{10}) +(?P<nlink>\d+) (?P<user>.{8,}?) (?P<group>.{8,}?) '
    r'+(?P<size>\d+) (?P<mtime>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) (?P<path>.*)$')
GENERATION = re.compile(
    r'^(2|5)\t(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000) \.\. '
    r'(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0000) \(\d+ files, \d+ bytes\) $')


def obnam(reference, *args):
    result = run(os.path.join(reference, 'repo'), *args, tz='UTC')
    assert result.returncode == 0, result.stderr
    assert result.stderr == b''
    return result.stdout.decode('utf-8', 'surrogateescape')


def test_generations_and_genids(reference):
    assert obnam(reference, 'genids') == '2\n5\n'
    lines = obnam(reference, 'generations').splitlines()
    assert [GENERATION.match(line).group(1) for line in lines] == ['2', '5']
    for line in lines:
        start, end = GENERATION.match(line).group(2, 3)
        assert start.startswith(('2013-12-', '2014-01-')) and start <= end


def manifest_seconds(text):
    """'2013-12-28 21:11:08.427223629 +0000' -> Unix seconds."""
    return calendar.timegm(time.strptime(text[:19], '%Y-%m-%d %H:%M:%S'))


@pytest.mark.parametrize('genspec, manifest', [('2', 'manifest-1'),
                                               ('5', 'manifest-2')])
def test_ls_agrees_with_manifest(reference, genspec, manifest):
    out = obnam(reference, 'ls', '--generation', genspec).splitlines()
    stamp = r'201[34]-\d\d-\d\d \d\d:\d\d:\d\d \+0000'
    assert re.match(r'^Generation %s \(%s - %s\)$' % (genspec, stamp, stamp),
                    out[0])
    entries = [LS_LINE.match(line).groupdict() for line in out[1:]]
    by_path = {e['path'].split(' -> ')[0]: e for e in entries}
    root = os.path.dirname(min(
        (p for p in by_path if p.endswith('/file-empty')), key=len))
    expected = rr.parse_manifest(os.path.join(reference, manifest))
    for name, fields in expected.items():
        path = root if name == '.' else root + '/' + name
        entry = by_path[path]
        mode = int(fields['Mode'], 8)
        assert entry['mode'] == listing.mode_string(mode), name
        assert int(entry['nlink']) == int(fields['Nlink']), name
        if 'Size' in fields and not stat.S_ISDIR(mode):
            assert int(entry['size']) == int(fields['Size']), name
        assert entry['mtime'] == time.strftime(
            '%Y-%m-%d %H:%M:%S',
            time.gmtime(manifest_seconds(fields['Mtime']))), name
        if stat.S_ISLNK(mode):
            assert entry['path'] == path + ' -> ' + fields['Target'], name
    # the parents of the backup root come first, from '/' down
    assert entries[0]['path'] == '/'
    # setuid/setgid/sticky and a FIFO are in the data
    modes = {e['mode'][0] for e in entries} | {e['mode'][3] for e in entries}
    assert {'d', '-', 'l', 'p', 's'} <= modes


def test_ls_order_is_directory_files_then_subdirectories(reference):
    out = obnam(reference, 'ls').splitlines()[1:]
    entries = [LS_LINE.match(line).groupdict() for line in out]
    seen_subdir = {}
    for e in entries:
        path = e['path'].split(' -> ')[0]
        parent = os.path.dirname(path)
        if e['mode'].startswith('d') and path != '/':
            seen_subdir[parent] = True
        else:
            assert not seen_subdir.get(parent), path   # files before subdirs


def test_kdirstat_lists_what_ls_lists(reference):
    ls = obnam(reference, 'ls').splitlines()[1:]
    kd = obnam(reference, 'kdirstat').splitlines()
    assert kd[0] == '[kdirstat 4.0 cache file]'
    entries = kd[7:]
    assert len(entries) == len(ls) - 1          # '/' is left out
    for line in entries:
        assert re.match(r'^(F\t|D |L\t|FIFO\t|Socket\t|CharDev\t|BlockDev\t)'
                        r'\S+\t\d+\t(0|-?0x[0-9a-f]+)$', line), line
