"""Restoring what real Obnam 1.x wrote (issue 3, "Must show").

Generations 1 and 2 of both format-6 reference repositories are restored
with the restore engine, and the restored trees are compared field by field
with the summain manifests that came with the repositories (Name, Mtime to
the nanosecond, Mode, Nlink, Size, SHA1, Target, Xattrs; the manifests leave
out the three symlinks to directories, which must be restored too).

Two ways in: through obnam's own decryption (repo_factory with the
reference keyring as --gnupghome), and through copies decrypted here with
real gpg (tests/obnamlib/repo/fmt_6/reference_repos.py), so the restore side is
proven even where the decryption layer is the thing that breaks.
"""

import base64
import calendar
import hashlib
import os
import stat
import subprocess
import sys
import time
import urllib.parse

import pytest

import obnamlib.engine.restorer
import obnamlib.vfs.local
from obnamlib.repo import factory as repo_factory
from tests.gpg_fixture import reference_gpg_home  # noqa: F401
from tests.reference_data import extract_all
from tests.obnamlib.repo.fmt_6 import reference_repos as rr
from tests import paths

CLIENT = 'havelock'
DIR_SYMLINKS = {'symlink-remote-exists', 'symlink-to-dot',
                'symlink-to-subdir'}
REPOS = (rr.ENCRYPTED, rr.IN_TREE)
OBNAM = paths.OBNAM


# --- summain manifests --------------------------------------------------------

def parse_summain(text):
    """{name: {field: value}} from summain's stanzas (blank-line separated
    `Field: value` lines; indented lines continue the previous field)."""
    entries = {}
    for stanza in text.split('\n\n'):
        fields = {}
        last = None
        for line in stanza.splitlines():
            if line.startswith(' ') and last is not None:
                fields[last] = (fields[last] + '\n' + line.strip()).strip()
            elif line:
                last, _, value = line.partition(':')
                fields[last] = value.strip()
        if 'Name' in fields:
            entries[urllib.parse.unquote(fields.pop('Name'))] = fields
    return entries


def expected_facts(fields):
    """A manifest stanza as comparable values."""
    stamp, _, zone = fields['Mtime'].rpartition(' ')
    assert zone == '+0000'
    whole, _, fraction = stamp.partition('.')
    mtime_ns = (calendar.timegm(time.strptime(whole, '%Y-%m-%d %H:%M:%S'))
                * 10**9 + int(fraction.ljust(9, '0')))
    xattrs = {}
    for line in fields.get('Xattrs', '').splitlines():
        name, _, value = line.partition('=')
        assert value.startswith('0s'), value
        xattrs[name] = base64.b64decode(value[2:])
    return {
        'mtime_ns': mtime_ns,
        'mode': int(fields['Mode'], 8),
        'nlink': int(fields['Nlink']),
        'size': int(fields['Size']) if 'Size' in fields else None,
        'sha1': fields.get('SHA1'),
        'target': fields.get('Target'),
        'xattrs': xattrs,
    }


def restored_facts(path):
    """The same values of a restored object."""
    st = os.lstat(path)
    sha1 = target = None
    if stat.S_ISREG(st.st_mode):
        with open(path, 'rb') as f:
            sha1 = hashlib.sha1(f.read()).hexdigest()
    elif stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
    return {
        'mtime_ns': st.st_mtime_ns,
        'mode': st.st_mode,
        'nlink': st.st_nlink,
        'size': None if stat.S_ISDIR(st.st_mode) else st.st_size,
        'sha1': sha1,
        'target': target,
        'xattrs': {n: os.getxattr(path, n, follow_symlinks=False)
                   for n in os.listxattr(path, follow_symlinks=False)},
    }


def restored_names(root):
    names = {'.'}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            names.add(os.path.relpath(os.path.join(dirpath, name), root))
    return names


def assert_matches_manifest(data_dir, manifest_path):
    with open(manifest_path, encoding='utf-8') as f:
        manifest = parse_summain(f.read())
    assert len(manifest) >= 18
    assert restored_names(data_dir) == set(manifest) | DIR_SYMLINKS
    for name, fields in manifest.items():
        got = restored_facts(os.path.join(data_dir, name))
        assert got == expected_facts(fields), name
    for name in DIR_SYMLINKS:
        assert stat.S_ISLNK(os.lstat(os.path.join(data_dir, name)).st_mode)


def find_data_dir(target):
    """The restored live-data directory (it held file-four-kibibytes)."""
    for dirpath, dirnames, filenames in os.walk(target):
        if 'file-four-kibibytes' in filenames:
            return dirpath
    raise AssertionError('no restored data below %s' % target)


def unpack(name, dest):
    rr.unpack(name, str(dest))
    return dest


def restore(repo, index, target):
    gen = repo.get_generation_ids(CLIENT)[index]
    engine = obnamlib.engine.restorer.Restorer(
        repo, gen, obnamlib.vfs.local.LocalFS('/'), os.fsencode(str(target)),
        client_name=CLIENT)
    stats = engine.restore()
    assert stats.files >= 22
    return find_data_dir(str(target))


# --- through obnam's own decryption -------------------------------------------

@pytest.fixture(scope='module', params=REPOS)
def unpacked(request, tmp_path_factory):
    return unpack(request.param, tmp_path_factory.mktemp(request.param))


@pytest.mark.parametrize('index', [0, 1])
def test_restore_reference_generation_via_obnam_decryption(
        unpacked, reference_gpg_home, tmp_path, index):
    repo = repo_factory.open_repository(
        {'gnupghome': reference_gpg_home.path},
        url=str(unpacked / 'repo'))
    data_dir = restore(repo, index, tmp_path / 'target')
    assert_matches_manifest(data_dir,
                            str(unpacked / ('manifest-%d' % (index + 1))))


# --- through copies decrypted here with gpg -----------------------------------

@pytest.fixture(scope='module')
def plain_copies(tmp_path_factory):
    gpg = rr.Gpg()
    try:
        copies = {}
        for name in REPOS:
            dest = tmp_path_factory.mktemp('plain-' + name)
            rr.unpack(name, str(dest))
            rr.make_plain_copy(str(dest / 'repo'), gpg)
            copies[name] = dest
        return copies
    finally:
        gpg.close()


@pytest.mark.parametrize('name', REPOS)
@pytest.mark.parametrize('index', [0, 1])
def test_restore_reference_generation_from_plain_copy(
        plain_copies, tmp_path, name, index):
    copy = plain_copies[name]
    repo = repo_factory.open_repository(url=str(copy / 'repo'))
    data_dir = restore(repo, index, tmp_path / 'target')
    assert_matches_manifest(data_dir, str(copy / ('manifest-%d' % (index + 1))))


def test_manifest_parser_reads_every_field():
    text = ('Name: a%20b\nMtime: 2013-12-28 21:11:07.8832 +0000\n'
            'Mode: 100664\nNlink: 2\nSize: 0\nXattrs: \n'
            '  user.foo=0sc29tZSB2YWx1ZQ==\n'
            'SHA1: da39a3ee5e6b4b0d3255bfef95601890afd80709\n\n'
            'Name: l\nMtime: 1970-01-01 00:00:01.000000001 +0000\n'
            'Mode: 120777\nNlink: 1\nSize: 3\nTarget: x y\n')
    parsed = parse_summain(text)
    assert set(parsed) == {'a b', 'l'}
    facts = expected_facts(parsed['a b'])
    assert facts['mtime_ns'] == 1388265067883200000
    assert facts['mode'] == 0o100664 and facts['nlink'] == 2
    assert facts['xattrs'] == {'user.foo': b'some value'}
    assert facts['sha1'] == 'da39a3ee5e6b4b0d3255bfef95601890afd80709'
    assert expected_facts(parsed['l'])['target'] == 'x y'
    assert expected_facts(parsed['l'])['mtime_ns'] == 1000000001


# --- the command, as people run it -------------------------------------------

def test_obnam_restore_command_on_encrypted_reference(
        reference_gpg_home, tmp_path):
    ref = unpack(rr.ENCRYPTED, tmp_path / 'ref')
    for index, gen in ((1, '2'), (2, '5')):
        target = tmp_path / ('restored-%d' % index)
        result = subprocess.run(
            [sys.executable, OBNAM, '--no-default-configs',
             '--client-name', CLIENT, '--repository', str(ref / 'repo'),
             '--gnupghome', reference_gpg_home.path,
             '--log', str(tmp_path / 'obnam.log'),
             'restore', '--generation', gen, '--to', str(target)],
            capture_output=True, env=dict(os.environ, LC_ALL='C.UTF-8'))
        assert result.returncode == 0, result.stderr
        assert result.stderr == b''
        assert result.stdout.startswith(b'Restored ')
        assert_matches_manifest(find_data_dir(str(target)),
                                str(ref / ('manifest-%d' % index)))


# --- format 5 (Obnam 0.27-era beta), read-only ---------------------------------

def test_restore_format_5_reference(reference_gpg_home, tmp_path):
    """Its one generation matches data.summain (Ino and Dev left out)."""
    import tarfile
    with tarfile.open(os.path.join(
            rr.REFERENCE, 'repo-format-5-encrypted-gzipped.tar.gz')) as tar:
        extract_all(tar, str(tmp_path / 'ref'))
    repo = repo_factory.open_repository(
        {'gnupghome': reference_gpg_home.path}, url=str(tmp_path / 'ref' / 'repo'))
    gen = repo.get_generation_ids('rainyday')[-1]
    target = tmp_path / 'target'
    obnamlib.engine.restorer.Restorer(
        repo, gen, obnamlib.vfs.local.LocalFS('/'), os.fsencode(str(target)),
        client_name='rainyday').restore()
    with open(tmp_path / 'ref' / 'data.summain', encoding='utf-8') as f:
        manifest = parse_summain(f.read())
    assert len(manifest) == 5
    data = [d for d, names, _ in os.walk(target) if 'data' in names]
    assert len(data) == 1
    base = data[0]
    found = {os.path.relpath(os.path.join(d, n), base)
             for d, dirs, files in os.walk(os.path.join(base, 'data'))
             for n in dirs + files} | {'data'}
    assert found == set(manifest)
    for name, fields in manifest.items():
        assert restored_facts(os.path.join(base, name)) == \
            expected_facts(fields), name
