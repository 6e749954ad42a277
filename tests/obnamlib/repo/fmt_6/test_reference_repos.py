"""Reading the repositories real Obnam 1.x wrote, through the Repository API.

Both reference repositories are encrypted; here they are first decrypted
with real gpg into plain copies (reference_repos.py) so that this test is
about the B-tree contents.  Each generation must match its summain manifest
field by field: mode, mtime to the nanosecond, nlink, size, symlink target,
xattrs and the SHA-1 of the contents.
"""

import base64
import calendar
import hashlib
import os
import subprocess
import time

import pytest

from obnamlib.repo import factory as repo_factory, interface as ri
from obnamlib.repo.fmt_6.metadata_codec import decode_xattrs
from tests.gpg_fixture import reference_gpg_home  # noqa: F401
from tests.reference_data import extract_all
from tests.obnamlib.backup_helpers import read_back
from tests.obnamlib.repo.fmt_6 import reference_repos as rr
from tests.obnamlib.repo.fmt_6.reference_repos import (  # noqa: F401
    plain_copies, reference)

DIR_SYMLINKS = {'symlink-remote-exists', 'symlink-to-dot', 'symlink-to-subdir'}


def open_ref(reference):
    return repo_factory.open_repository(url=os.path.join(reference, 'repo'))


def data_root(repo, gen):
    """The backed-up directory: follow single children down from '/'."""
    path = b'/'
    while True:
        children = repo.get_file_children(gen, path)
        if len(children) != 1:
            return path
        path = path.rstrip(b'/') + b'/' + children[0]


def walk(repo, gen, root):
    """{relative name: path} of everything below root, root as '.'."""
    found = {'.': root}
    stack = [root]
    while stack:
        path = stack.pop()
        for name in repo.get_file_children(gen, path):
            child = path.rstrip(b'/') + b'/' + name
            found[os.fsdecode(os.path.relpath(child, root))] = child
            stack.append(child)
    return found


def manifest_mtime(text):
    stamp, _, _ = text.rpartition(' ')
    seconds, _, fraction = stamp.partition('.')
    sec = calendar.timegm(time.strptime(seconds, '%Y-%m-%d %H:%M:%S'))
    return sec, int(fraction.ljust(9, '0'))


def manifest_xattrs(text):
    pairs = []
    for line in text.splitlines():
        name, _, value = line.partition('=')
        assert value.startswith('0s')
        pairs.append((name.encode(), base64.b64decode(value[2:])))
    return sorted(pairs)


def test_client_and_generations(reference):
    repo = open_ref(reference)
    assert repo.get_client_names() == ['havelock']
    assert [int(g) for g in repo.get_generation_ids('havelock')] == [2, 5]
    assert repo.get_client_key_id('havelock') == '3B1802F81B321347'
    latest = repo.interpret_generation_spec('havelock', 'latest')
    assert int(latest) == 5
    assert repo.get_generation_key(latest, ri.GEN_IS_CHECKPOINT) == 0
    assert repo.get_generation_key(latest, ri.GEN_FILE_COUNT) == 25


@pytest.mark.parametrize('index', [0, 1])
def test_generation_matches_manifest(reference, index):
    check_manifest(open_ref(reference), reference, index)


@pytest.fixture(scope='module')
def encrypted_originals(tmp_path_factory):
    return {name: rr.unpack(name, str(tmp_path_factory.mktemp(name)))
            for name in (rr.IN_TREE, rr.ENCRYPTED)}


@pytest.mark.parametrize('name', [rr.IN_TREE, rr.ENCRYPTED])
def test_encrypted_original_through_the_whole_stack(
        name, encrypted_originals, reference_gpg_home):
    """open_repository with the user's keyring: RepositoryFS, toplevel
    keys and the CAST5/no-MDC data of 2013 all the way up."""
    reference = encrypted_originals[name]
    repo = repo_factory.open_repository(
        url=os.path.join(reference, 'repo'),
        gnupghome=reference_gpg_home.path)
    assert repo.get_client_names() == ['havelock']
    for index in (0, 1):
        check_manifest(repo, reference, index)


def check_manifest(repo, reference, index):
    gen = repo.get_generation_ids('havelock')[index]
    manifest = rr.parse_manifest(
        os.path.join(reference, 'manifest-%d' % (index + 1)))
    root = data_root(repo, gen)
    assert root.endswith(b'/data')
    found = walk(repo, gen, root)
    assert set(found) - DIR_SYMLINKS == set(manifest)
    checked = 0
    for name, expected in manifest.items():
        md = repo.get_metadata(gen, found[name])
        assert (md.st_mtime_sec, md.st_mtime_nsec) == \
            manifest_mtime(expected['Mtime']), name
        assert '%o' % md.st_mode == expected['Mode'], name
        assert md.st_nlink == int(expected['Nlink']), name
        if 'Size' in expected:
            assert md.st_size == int(expected['Size']), name
        if 'Target' in expected:
            assert md.target == os.fsencode(expected['Target']), name
        elif md.islink():
            pytest.fail('%s: unexpected symlink' % name)
        if 'SHA1' in expected:
            data = read_back(repo, gen, found[name])
            assert hashlib.sha1(data).hexdigest() == expected['SHA1'], name
            assert hashlib.md5(data).digest() == md.md5, name
        if 'Xattrs' in expected:
            assert sorted(decode_xattrs(md.xattr)) == \
                manifest_xattrs(expected['Xattrs']), name
        else:
            assert md.xattr is None, name
        checked += 1
    assert checked == len(manifest) >= 18


@pytest.mark.parametrize('name', [rr.IN_TREE, rr.ENCRYPTED])
def test_file_content_is_its_data_in_the_tree_or_its_chunks(
        name, plain_copies):
    """get_file_content in one look: what get_file_data, then
    get_file_chunk_ids say."""
    repo = open_ref(plain_copies[name])
    in_tree = 0
    for gen in repo.get_generation_ids('havelock'):
        for path in walk(repo, gen, b'/').values():
            data = repo.get_file_data(gen, path)
            expected = (data, None) if data is not None else (
                None, repo.get_file_chunk_ids(gen, path))
            assert repo.get_file_content(gen, path) == expected, path
            in_tree += data is not None
    assert (in_tree > 0) is (name == rr.IN_TREE)


def test_in_tree_repository_has_no_chunks(plain_copies):
    repo = open_ref(plain_copies[rr.IN_TREE])
    assert repo.get_chunk_ids() == []
    gen = repo.get_generation_ids('havelock')[0]
    assert repo.get_generation_chunk_ids(gen) == set()


def test_chunked_repository_indexes(plain_copies):
    repo = open_ref(plain_copies[rr.ENCRYPTED])
    chunk_ids = repo.get_chunk_ids()
    assert chunk_ids
    gens = repo.get_generation_ids('havelock')
    used = set().union(*(repo.get_generation_chunk_ids(g) for g in gens))
    assert used == set(chunk_ids)
    for chunk_id in chunk_ids:
        data = repo.get_chunk_content(chunk_id)
        assert chunk_id in repo.find_chunk_ids_by_content(data)


def test_continuing_an_obnam_repository(plain_copies, tmp_path):
    """A new generation on top of Obnam's keeps the old ones readable."""
    import shutil
    url = str(tmp_path / 'repo')
    shutil.copytree(os.path.join(plain_copies[rr.ENCRYPTED], 'repo'), url)
    repo = repo_factory.open_repository(url=url, lock_timeout=0)
    old_gens = repo.get_generation_ids('havelock')
    before = {int(g): walk(repo, g, data_root(repo, g)) for g in old_gens}
    repo.lock_client('havelock')
    gen = repo.create_generation('havelock', now=2000000000)
    assert int(gen) > 5
    root = data_root(repo, gen)
    repo.remove_file(gen, root + b'/file-one-byte')
    chunk_id = repo.put_chunk_content(b'new')
    repo.set_metadata(gen, root + b'/new', repo.get_metadata(
        gen, root + b'/file-empty').copy(st_size=3))
    repo.set_file_chunk_ids(gen, root + b'/new', [chunk_id])
    repo.lock_chunk_indexes()
    repo.put_chunk_into_indexes(chunk_id, b'new', 'havelock')
    repo.commit_client('havelock')
    repo.commit_chunk_indexes()
    again = repo_factory.open_repository(url=url)
    gens = again.get_generation_ids('havelock')
    assert gens[:2] == old_gens and len(gens) == 3
    for g in old_gens:
        assert walk(again, g, data_root(again, g)) == before[int(g)]
    new = walk(again, gens[2], root)
    assert 'file-one-byte' not in new and 'new' in new
    assert read_back(again, gens[2], root + b'/new') == b'new'


def test_format5_detected_and_read(tmp_path, reference_gpg_home):
    import tarfile
    with tarfile.open(os.path.join(
            rr.REFERENCE, 'repo-format-5-encrypted-gzipped.tar.gz')) as tar:
        extract_all(tar, str(tmp_path))
    repo = repo_factory.open_repository(url=str(tmp_path / 'repo'),
                                        gnupghome=reference_gpg_home.path)
    assert repo.get_client_names() == ['rainyday']
    gen = repo.get_generation_ids('rainyday')[-1]
    manifest = rr.parse_manifest(str(tmp_path / 'data.summain'))
    root = [p for p in walk(repo, gen, b'/').values()
            if p.endswith(b'/data')]
    assert len(root) == 1
    found = {os.path.normpath('data/' + name): path
             for name, path in walk(repo, gen, root[0]).items()}
    assert set(found) == set(manifest)
    for name, facts in manifest.items():
        md = repo.get_metadata(gen, found[name])
        assert '%o' % md.st_mode == facts['Mode']
        assert (md.st_mtime_sec, md.st_mtime_nsec) == \
            manifest_mtime(facts['Mtime'])
        assert md.st_nlink == int(facts['Nlink'])


def test_unencrypted_read_of_encrypted_repository_without_key_fails(
        encrypted_originals, tmp_path):
    """No secret key in an empty keyring: a coded error, not garbage."""
    from obnamlib import errors
    home = tmp_path / 'g'
    home.mkdir(mode=0o700)
    repo = repo_factory.open_repository(
        url=os.path.join(encrypted_originals[rr.ENCRYPTED], 'repo'),
        gnupghome=str(home))
    try:
        with pytest.raises(errors.ObnamError):
            repo.get_client_names()
    finally:
        repo.close()
        # gpg started an agent for the empty home: leave none behind.
        subprocess.run(['gpgconf', '--homedir', str(home), '--kill',
                        'gpg-agent'], capture_output=True)
