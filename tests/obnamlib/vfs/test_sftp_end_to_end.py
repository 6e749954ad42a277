"""Repositories over sftp:// against a real OpenSSH sshd on 127.0.0.1.

The Repository conformance suite runs on a format-6 repository reached
through SftpFS; the command-line tests back up to, restore from, verify and
forget in an sftp:// repository, pull from an sftp:// root, restore to an
sftp:// target, refuse an unknown host, and survive a connection cut in the
middle of a backup.
"""

import hashlib
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import time

import pytest

from obnamlib.repo import factory as repo_factory
from obnamlib.vfs.sftp import ssh_auth
from obnamlib.engine.backup_engine import ancestors
from obnamlib.vfs.sftp.fs import SftpFS
from tests.gpg_fixture import gpg_home  # noqa: F401 (a fixture)
from tests.obnamlib.repo_interface_conformance import RepositoryConformance
from tests.obnamlib.vfs.test_sftp import (  # noqa: F401 (a fixture)
    isolated_ssh_user, IS_ROOT, kill_sessions, settings_for, shared_sshd,
    small_tmpfs, world_readable_dir)
from tests import paths



class TestFormat6OverSftp(RepositoryConformance):
    """Over paramiko's transport.  Two Repository objects on one path share
    the SSH connection but nothing else: locks and files live on the
    server, as with two processes."""

    connection = None

    def open_repo(self, path):
        sshd = shared_sshd()
        url = sshd.url(str(path))
        settings = settings_for(sshd, 'paramiko')
        cls = type(self)
        if cls.connection is None or not cls.connection.is_alive():
            cls.connection = ssh_auth.open_sftp(ssh_auth.SshTarget(
                sshd.host, sshd.port, sshd.user, settings))
        fs = SftpFS(url, settings, connection=cls.connection)
        return repo_factory.open_repository(
            settings, vfs=fs, url=url, create=True, node_size=4096,
            lock_timeout=0)


# --- the obnam command over sftp:// -----------------------------------------

OBNAM = paths.OBNAM


def obnam(sshd, home, *args, known_hosts=None):
    """Run bin/obnam with the test server's key; (exit code, out, err)."""
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
           'HOME': str(home), 'LC_ALL': 'C.UTF-8'}
    argv = [sys.executable, OBNAM, '--no-default-configs', '--quiet',
            '--ssh-key', sshd.client_key,
            '--ssh-known-hosts', known_hosts or sshd.known_hosts,
            '--lock-timeout', '0'] + list(args)
    p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout, p.stderr


def ok(result):
    code, out, err = result
    assert (code, without_created_notice(err)) == (0, b''), \
        err.decode(errors='replace')
    return out


def without_created_notice(err):
    """stderr less the line a backup says when it makes the repository."""
    if err.startswith(b'Created a new repository at '):
        return err.partition(b'\n')[2]
    return err


def make_live_tree(root):
    """Files of every kind SFTP can carry, with odd names and times."""
    os.makedirs(os.path.join(root, 'sub', 'empty'))
    with open(os.path.join(root, 'big'), 'wb') as f:
        f.write(os.urandom(2 * 1024 * 1024 + 11))
    with open(os.path.join(root, 'sub', 'small'), 'wb') as f:
        f.write(b'hello\n')
    with open(os.fsencode(root) + b'/sub/caf\xe9', 'wb') as f:
        f.write(b'latin-1 name\n')
    os.symlink('small', os.path.join(root, 'sub', 'link'))
    os.chmod(os.path.join(root, 'sub', 'small'), 0o640)
    for path in (b'/big', b'/sub/small', b'/sub/caf\xe9', b'/sub/empty'):
        os.utime(os.fsencode(root) + path, (1500000000, 1600000000))


def manifest(root, whole_seconds=False):
    """relative path -> (mode, content or link target, mtime)."""
    result = {}
    base = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(base):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                content, mtime = os.readlink(path), None
            else:
                content = None
                if stat.S_ISREG(st.st_mode):
                    with open(path, 'rb') as f:
                        content = hashlib.sha256(f.read()).hexdigest()
                mtime = (st.st_mtime_ns // 10**9 if whole_seconds
                         else st.st_mtime_ns)
                if stat.S_ISDIR(st.st_mode):
                    mtime = None    # restoring children touches them
            result[os.path.relpath(path, base)] = (st.st_mode, content, mtime)
    return result


@pytest.fixture
def work(tmp_path):
    live = tmp_path / 'live'
    make_live_tree(str(live))
    return tmp_path


@pytest.mark.slow
def test_push_backup_to_sftp_and_restore(work):
    """Over the OpenSSH client (the default); the API-level tests above
    cover --pure-paramiko."""
    sshd = shared_sshd()
    repo = sshd.url(str(work / 'repo'))
    extra = []
    live = str(work / 'live')
    code, _, err = obnam(sshd, work / 'home', 'backup', '-r', repo,
                         '--client-name', 'laptop', live, *extra)
    assert (code, err.decode()) == (
        0, 'Created a new repository at %s\n' % repo)
    with open(work / 'live' / 'sub' / 'small', 'ab') as f:
        f.write(b'more\n')
    ok(obnam(sshd, work / 'home', 'backup', '-r', repo, '--client-name',
             'laptop', live, *extra))
    assert (work / 'repo' / 'metadata' / 'format').read_bytes() == b'6\n'
    gens = ok(obnam(sshd, work / 'home', 'genids', '-r', repo,
                    '--client-name', 'laptop', *extra)).split()
    assert len(gens) == 2
    ok(obnam(sshd, work / 'home', 'restore', '-r', repo, '--client-name',
             'laptop', '--to', str(work / 'restored'), *extra))
    assert manifest(str(work / 'restored') + live) == manifest(live)
    out = ok(obnam(sshd, work / 'home', 'verify', '-r', repo,
                   '--client-name', 'laptop', live, *extra))
    assert out == b'Verify did not find problems.\n'
    ok(obnam(sshd, work / 'home', 'forget', '-r', repo, '--client-name',
             'laptop', gens[0].decode(), *extra))
    assert ok(obnam(sshd, work / 'home', 'genids', '-r', repo,
                    '--client-name', 'laptop', *extra)).split() == gens[1:]


@pytest.mark.slow
def test_encrypted_backup_over_sftp_then_fsck(work, gpg_home):  # noqa: F811
    sshd = shared_sshd()
    repo = sshd.url(str(work / 'repo'))
    live = str(work / 'live')
    gpg = ['--gnupghome', gpg_home.path]
    ok(obnam(sshd, work / 'home', 'backup', '-r', repo, '--client-name', 'c',
             '--encrypt-with', gpg_home.keys['Alice'], live, *gpg))
    for dirpath, _, files in os.walk(work / 'repo' / 'chunks'):
        for name in files:
            with open(os.path.join(dirpath, name), 'rb') as f:
                assert b'hello' not in f.read()
    ok(obnam(sshd, work / 'home', 'restore', '-r', repo, '--client-name', 'c',
             '--to', str(work / 'restored'), *gpg))
    assert manifest(str(work / 'restored') + live) == manifest(live)
    out = ok(obnam(sshd, work / 'home', 'fsck', '-r', repo, *gpg))
    assert out.endswith(b': no problems\n')


def test_pull_backup_from_sftp_root(work):
    sshd = shared_sshd()
    live = str(work / 'live')
    local_repo = str(work / 'repo')
    ok(obnam(sshd, work / 'home', 'backup', '-r', local_repo,
             '--client-name', 'webserver', sshd.url(live)))
    out = ok(obnam(sshd, work / 'home', 'clients', '-r', local_repo))
    assert out == b'webserver\n'
    ok(obnam(sshd, work / 'home', 'restore', '-r', local_repo,
             '--client-name', 'webserver', '--to', str(work / 'restored')))
    restored = manifest(str(work / 'restored') + live, whole_seconds=True)
    assert restored == manifest(live, whole_seconds=True)
    listing = ok(obnam(sshd, work / 'home', 'ls', '-r', local_repo,
                       '--client-name', 'webserver'))
    owner = pwd.getpwuid(os.getuid()).pw_name.encode()
    assert b' %s ' % owner in listing


def test_restore_to_sftp_target(work):
    sshd = shared_sshd()
    live = str(work / 'live')
    local_repo = str(work / 'repo')
    ok(obnam(sshd, work / 'home', 'backup', '-r', local_repo,
             '--client-name', 'c', live))
    ok(obnam(sshd, work / 'home', 'restore', '-r', local_repo,
             '--client-name', 'c', '--to', sshd.url(str(work / 'there'))))
    restored = manifest(str(work / 'there') + live, whole_seconds=True)
    assert restored == manifest(live, whole_seconds=True)


def test_unknown_host_key_refused_before_anything_is_written(work):
    sshd = shared_sshd()
    empty = work / 'empty_known_hosts'
    empty.write_text('')
    code, out, err = obnam(sshd, work / 'home', 'backup', '-r',
                           sshd.url(str(work / 'repo')), str(work / 'live'),
                           known_hosts=str(empty))
    assert (code, out) == (1, b'')
    assert err == b'ERROR: R5F98AX: No known host key for [127.0.0.1]:%d\n' % (
        sshd.port)
    assert not (work / 'repo').exists()


@pytest.mark.slow
def test_dropped_connection_mid_backup_then_resume(work):
    """Kill the session's sshd while a slowed-down backup runs; the error
    is one line, force-lock clears the dead run's locks, and the next run
    completes."""
    sshd = shared_sshd()
    for i in range(300):
        with open(work / 'live' / ('f%03d' % i), 'wb') as f:
            f.write(os.urandom(100) + b'%d' % i)
    repo_dir = work / 'repo'
    repo = sshd.url(str(repo_dir))
    _backup_cut_mid_run(sshd, work, repo_dir, 20, 1, 'backup', '-r', repo,
                        '--client-name', 'c', str(work / 'live'))
    ok(obnam(sshd, work / 'home', 'force-lock', '-r', repo,
             '--client-name', 'c'))
    ok(obnam(sshd, work / 'home', 'backup', '-r', repo, '--client-name', 'c',
             str(work / 'live')))
    ok(obnam(sshd, work / 'home', 'restore', '-r', repo, '--client-name',
             'c', '--to', str(work / 'restored')))
    live = str(work / 'live')
    assert manifest(str(work / 'restored') + live) == manifest(live)
    # The cut run's chunk files were orphans after a crash in Obnam 1.x
    # (and here until its chunk record): the next backup of the client
    # reuses or removes them, so fsck is clean without --fsck-rm-unused.
    out = ok(obnam(sshd, work / 'home', 'fsck', '-r', repo))
    assert out.endswith(b': no problems\n')


@pytest.mark.slow
def test_two_clients_back_up_at_once(work):
    """Both runs finish (the chunk-index locks wait for each other) and the
    repository checks clean."""
    sshd = shared_sshd()
    repo = sshd.url(str(work / 'repo'))
    ok(obnam(sshd, work / 'home', 'backup', '-r', repo, '--client-name',
             'first', str(work / 'live')))
    for name in ('a', 'b'):
        tree = work / name
        tree.mkdir()
        for i in range(50):
            (tree / str(i)).write_bytes(os.urandom(2000))
    runs = [subprocess.Popen(
        [sys.executable, OBNAM, '--no-default-configs', '--quiet',
         '--ssh-key', sshd.client_key, '--ssh-known-hosts', sshd.known_hosts,
         '--checkpoint', '20k', 'backup', '-r', repo, '--client-name', name,
         str(work / name)],
        env={'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
             'HOME': str(work / 'home'), 'LC_ALL': 'C.UTF-8'},
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE) for name in ('a', 'b')]
    results = [(p.wait(120), p.stdout.read(), p.stderr.read()) for p in runs]
    for p in runs:
        p.stdout.close()
        p.stderr.close()
    assert results == [(0, b'', b''), (0, b'', b'')]
    out = ok(obnam(sshd, work / 'home', 'fsck', '-r', repo))
    assert out.endswith(b': no problems\n')
    ok(obnam(sshd, work / 'home', 'restore', '-r', repo, '--client-name',
             'b', '--to', str(work / 'rb')))
    tree = str(work / 'b')
    assert manifest(str(work / 'rb') + tree) == manifest(tree)


def _backup_cut_mid_run(sshd, work, repo_dir, delay_ms, chunks, *args):
    """Run obnam with `args`, each round trip slowed by `delay_ms`; kill
    the sshd sessions once `chunks` chunk files are in repo_dir; check
    it ends with the one-line lost-connection error."""
    argv = [sys.executable, OBNAM, '--no-default-configs', '--quiet',
            '--ssh-key', sshd.client_key, '--ssh-known-hosts',
            sshd.known_hosts, '--lock-timeout', '0', '--sftp-delay',
            str(delay_ms)] + list(args)
    env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
           'HOME': str(work / 'home'), 'LC_ALL': 'C.UTF-8'}
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for_chunk_files(repo_dir, p, count=chunks)
        assert kill_sessions(sshd) > 0
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 1
    lines = without_created_notice(err).decode().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(
        'ERROR: R305A1X: Lost the SSH connection to 127.0.0.1: ')


def _wait_for_chunk_files(repo_dir, process, count=1):
    """Block until the backup has stored `count` chunk files (or ended)."""
    chunks = repo_dir / 'chunks'
    while process.poll() is None:
        if _chunk_file_count(chunks) >= count:
            return
        time.sleep(0.01)
    raise AssertionError('backup ended before the connection was cut: %r'
                         % (process.communicate(),))


def _chunk_file_count(chunks):
    return sum(1 for _, _, files in os.walk(chunks) for n in files
               if n != 'lock' and not n.startswith('tmp'))


@pytest.mark.slow
def test_pull_backup_ends_at_a_dropped_connection_then_resumes(work):
    """Kill the client's sshd session while a pull backup into a local
    repository runs: one error line, no locks left, the checkpoints kept;
    the next run completes and restores exactly."""
    sshd = shared_sshd()
    live = work / 'live'
    for i in range(200):
        (live / ('f%03d' % i)).write_bytes(os.urandom(4096))
    repo_dir = work / 'repo'
    # 30 chunks of 4 KiB: past the first checkpoint's commit, in the first
    # of four batches of files fetched (200 ms per round trip).
    _backup_cut_mid_run(sshd, work, repo_dir, 200, 30, '--checkpoint', '64k',
                        'backup', '-r', str(repo_dir), '--client-name',
                        'client', sshd.url(str(live)))
    assert not [n for _, _, ns in os.walk(repo_dir) for n in ns
                if n == 'lock']
    checkpoints = ok(obnam(sshd, work / 'home', 'genids', '-r',
                           str(repo_dir), '--client-name', 'client')).split()
    assert checkpoints
    ok(obnam(sshd, work / 'home', 'backup', '-r', str(repo_dir),
             '--client-name', 'client', sshd.url(str(live))))
    gens = ok(obnam(sshd, work / 'home', 'genids', '-r', str(repo_dir),
                    '--client-name', 'client')).split()
    assert gens[:-1] == checkpoints
    ok(obnam(sshd, work / 'home', 'restore', '-r', str(repo_dir),
             '--client-name', 'client', '--to', str(work / 'restored')))
    assert manifest(str(work / 'restored') + str(live), whole_seconds=True) \
        == manifest(str(live), whole_seconds=True)
    out = ok(obnam(sshd, work / 'home', 'fsck', '-r', str(repo_dir)))
    assert out.endswith(b': no problems\n')


# What SFTP v3 (OpenSSH) cannot carry: sub-second times, device and inode
# numbers (per-path stand-ins), block counts, extended attributes.
NOT_OVER_SFTP = ('st_mtime_nsec', 'st_atime_nsec', 'st_atime_sec', 'st_dev',
                 'st_ino', 'st_blocks', 'xattr')


def _generation_metadata(repo_dir, client, root):
    """{path: Metadata without NOT_OVER_SFTP} of the client's newest
    generation, from `root` (bytes) and its ancestors."""
    repo = repo_factory.open_repository(url=str(repo_dir), lock_timeout=0)
    gen = repo.get_generation_ids(client)[-1]
    result = {}
    pending = [b'/']
    while pending:
        path = pending.pop()
        md = repo.get_metadata(gen, path)
        result[path] = md.copy(**{name: None for name in NOT_OVER_SFTP})
        if md.isdir():
            pending.extend(os.path.join(path, name) for name in
                           repo.get_file_children(gen, path))
    return result


def test_pull_backup_records_what_a_local_backup_does(work):
    """Owner and group names, link counts, modes, sizes, whole-second
    times, link targets and checksums as a local backup of the same tree
    records them, for the root and its ancestors too."""
    sshd = shared_sshd()
    live = work / 'live'
    os.link(live / 'big', live / 'big-link')
    os.setxattr(live / 'big', 'user.colour', b'blue')
    if os.getuid() == 0:
        os.chown(live / 'sub' / 'small', 65534, 65534)
    repo_dir = work / 'repo'
    ok(obnam(sshd, work / 'home', 'backup', '-r', str(repo_dir),
             '--client-name', 'local', str(live)))
    ok(obnam(sshd, work / 'home', 'backup', '-r', str(repo_dir),
             '--client-name', 'pulled', sshd.url(str(live))))
    local = _generation_metadata(repo_dir, 'local', os.fsencode(live))
    pulled = _generation_metadata(repo_dir, 'pulled', os.fsencode(live))
    assert sorted(pulled) == sorted(local)
    for path, md in local.items():
        if path in ancestors(os.fsencode(live)):
            # Other tests change /tmp and pytest's directories meanwhile.
            md = md.copy(st_nlink=pulled[path].st_nlink,
                         st_size=pulled[path].st_size,
                         st_mtime_sec=pulled[path].st_mtime_sec)
        assert pulled[path] == md, path
    root = local[os.fsencode(live)]
    assert root.username == pwd.getpwuid(os.getuid()).pw_name.encode()
    assert local[os.fsencode(live) + b'/big'].st_nlink == 2


@pytest.fixture
def public_dir():
    """A directory the ssh user `nobody` can reach, with a live tree."""
    path = world_readable_dir()
    make_live_tree(str(path / 'live'))
    yield path
    shutil.rmtree(path)


@pytest.mark.skipif(not IS_ROOT, reason='logging in as nobody needs root')
def test_permission_denied_on_the_server_is_one_line_naming_the_path(
        work, public_dir):
    """As `nobody` on the server: a repository directory that user cannot
    create, or a repository it cannot read, is one clear error."""
    sshd = shared_sshd(user='nobody')
    live = str(public_dir / 'live')
    parent = public_dir / 'root-only'
    parent.mkdir(mode=0o755)
    repo = sshd.url(str(parent / 'repo'))
    code, out, err = obnam(sshd, work / 'home', 'backup', '-r', repo,
                           '--client-name', 'c', live)
    assert (code, out, err) == (1, b'', b'ERROR: RD5FA4X: System error: %s: '
                                b'13: Permission denied\n' % repo.encode())
    assert not (parent / 'repo').exists()
    ok(obnam(sshd, work / 'home', 'backup', '-r', str(parent / 'repo'),
             '--client-name', 'c', live))
    code, out, err = obnam(sshd, work / 'home', 'backup', '-r', repo,
                           '--client-name', 'c', live)
    assert (code, out, err) == (1, b'', b'ERROR: RD5FA4X: System error: '
                                b'%s/metadata/format: 13: Permission '
                                b'denied\n' % repo.encode())


@pytest.mark.skipif(not IS_ROOT, reason='logging in as nobody needs root')
def test_pull_backup_of_a_file_the_ssh_user_cannot_read(work, public_dir):
    sshd = shared_sshd(user='nobody')
    live = public_dir / 'live'
    (live / 'sub' / 'small').chmod(0o644)
    (live / 'secret').write_bytes(b'no')
    (live / 'secret').chmod(0o600)
    code, out, err = obnam(sshd, work / 'home', 'backup', '-r',
                           str(work / 'repo'), '--client-name', 'c',
                           sshd.url(str(live)))
    assert (code, out) == (1, b'')
    assert without_created_notice(err).decode().splitlines() == [
        "ERROR: Can't back up %s/secret: RCE08AX: I/O error: %s/secret: 13: "
        "Permission denied" % (live, live),
        'ERROR: R4C3BCX: There were errors during the backup']
    ok(obnam(sshd, work / 'home', 'restore', '-r', str(work / 'repo'),
             '--client-name', 'c', '--to', str(work / 'restored')))
    (live / 'secret').unlink()
    assert manifest(str(work / 'restored') + str(live), whole_seconds=True) \
        == manifest(str(live), whole_seconds=True)


@pytest.mark.skipif(not IS_ROOT, reason='mounting needs root')
def test_full_disk_on_the_server_stops_the_backup_cleanly(work):
    """A first backup fits, a second does not: one error line naming the
    file, no locks left, the first generation intact and checking clean."""
    sshd = shared_sshd()
    live = work / 'live'
    with small_tmpfs(work / 'small', size='2m') as small:
        repo = sshd.url(str(small / 'repo'))
        ok(obnam(sshd, work / 'home', 'backup', '-r', repo, '--client-name',
                 'c', str(live / 'sub')))
        (live / 'sub' / 'huge').write_bytes(os.urandom(3 * 1024 * 1024))
        code, out, err = obnam(sshd, work / 'home', 'backup', '-r', repo,
                               '--client-name', 'c', str(live / 'sub'))
        assert (code, out) == (1, b'')
        assert re.fullmatch(
            'ERROR: R5EE7DX: Backup stopped: cannot write to the repository: '
            '%s/chunks/[0-9a-f/]+: 28: No space left on device\n'
            % re.escape(repo), err.decode()), err
        assert not [n for _, _, ns in os.walk(small) for n in ns
                    if n == 'lock' or n.startswith('tmp')]
        gens = ok(obnam(sshd, work / 'home', 'genids', '-r', repo,
                        '--client-name', 'c')).split()
        assert len(gens) == 1
        out = ok(obnam(sshd, work / 'home', 'fsck', '-r', repo))
        assert out.endswith(b': no problems\n')


def _home_url(sshd, path):
    """sftp://USER@HOST:PORT/~/REL for an absolute `path` on the server."""
    home = pwd.getpwnam(sshd.user).pw_dir
    if not os.path.isdir(home):
        home = '/'      # sshd starts such users in /
    return 'sftp://%s@%s:%d/~/%s' % (sshd.user, sshd.host, sshd.port,
                                     os.path.relpath(path, home))


def test_home_relative_urls_for_repository_and_pull_root(work):
    sshd = shared_sshd()
    live = str(work / 'live')
    repo = _home_url(sshd, str(work / 'repo'))
    assert '/~/' in repo
    ok(obnam(sshd, work / 'home', 'backup', '-r', repo, '--client-name',
             'c', _home_url(sshd, live)))
    assert (work / 'repo' / 'metadata' / 'format').read_bytes() == b'6\n'
    ok(obnam(sshd, work / 'home', 'restore', '-r', repo, '--client-name',
             'c', '--to', str(work / 'restored')))
    assert manifest(str(work / 'restored') + live, whole_seconds=True) == \
        manifest(live, whole_seconds=True)
