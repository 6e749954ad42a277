"""The reference data in shared/reference: where it is, unpacking its
tarballs, and undoing the filters of Obnam 1.x's repositories with real
gpg (a throwaway GNUPGHOME holding the test keys), so tests can look at
the plain files.  The tag chain (format-6.md §3.3) is stripped here, in
test code, independently of obnamlib.repo.storage.repo_fs."""

import os
import shutil
import subprocess
import tarfile
import tempfile
import zlib

_CHECKOUT_SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', '..', 'shared', 'reference')
REFERENCE = os.path.normpath(_CHECKOUT_SHARED) \
    if os.path.isdir(_CHECKOUT_SHARED) else '/work/shared/reference'
OBNAM_1X = os.path.join(REFERENCE, 'obnam-1.x')
LARCH_1X = os.path.join(REFERENCE, 'larch-1.x')

# Files that a repository stores without the tag chain (format-6.md §3).
UNFILTERED_NAMES = ('key', 'userkeys', 'lock')


# Python 3.12 and the security releases of older ones filter what a
# tarball may extract (and 3.14 filters by default); our reference
# tarballs are trusted and must come out exactly as they were made.
TARFILE_HAS_FILTERS = hasattr(tarfile, 'fully_trusted_filter')


def extract_all(tar, dest):
    """Extract an open tarfile into dest exactly as it was archived."""
    if TARFILE_HAS_FILTERS:
        tar.extractall(dest, filter='fully_trusted')
    else:
        tar.extractall(dest)


def unpack(tarball, dest):
    """Extract a tarball (any compression) into dest; returns dest."""
    with tarfile.open(tarball) as tar:
        extract_all(tar, dest)
    return dest


class Gpg:
    """A throwaway GNUPGHOME (short /tmp path, for gpg-agent's socket)
    holding Obnam 1.x's test keys."""

    def __init__(self):
        self.home = tempfile.mkdtemp(prefix='g', dir='/tmp')
        os.chmod(self.home, 0o700)
        keyring = os.path.join(OBNAM_1X, 'test-gpghome')
        self._gpg(['--import', os.path.join(keyring, 'pubring.gpg'),
                   os.path.join(keyring, 'secring.gpg')])

    def _gpg(self, args, data=b'', pass_fds=()):
        result = subprocess.run(
            ['gpg', '--homedir', self.home, '-q', '--batch', '--no-textmode']
            + args, input=data, capture_output=True, pass_fds=pass_fds)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def decrypt_key(self, data):
        """A toplevel's `key` file -> its symmetric passphrase."""
        return self._gpg(['-d'], data)

    def decrypt_symmetric(self, data, passphrase):
        """An encrypt1 payload (CAST5 without MDC in 2013's data)."""
        read_fd, write_fd = os.pipe()
        os.write(write_fd, passphrase + b'\n')
        os.close(write_fd)
        try:
            return self._gpg(['--ignore-mdc-error', '--passphrase-fd',
                              str(read_fd), '-d'], data, (read_fd,))
        finally:
            os.close(read_fd)

    def close(self):
        subprocess.run(['gpgconf', '--homedir', self.home, '--kill',
                        'gpg-agent'], capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)


def unwrap(data, gpg, passphrase):
    """Strip the tag chain of a filtered file; return the payload."""
    while True:
        tag, sep, rest = data.partition(b'\0')
        assert sep, 'no tag terminator'
        if tag == b'':
            return rest
        if tag == b'deflate':
            data = zlib.decompress(rest)
        elif tag == b'encrypt1':
            data = gpg.decrypt_symmetric(rest, passphrase)
        else:
            raise AssertionError('unknown tag %r' % tag)


def toplevel_passphrase(toplevel, gpg):
    """The passphrase in toplevel/key, or None for an unencrypted one."""
    key_file = os.path.join(toplevel, 'key')
    if not os.path.exists(key_file):
        return None
    with open(key_file, 'rb') as f:
        return gpg.decrypt_key(f.read())


def filtered_files(toplevel, gpg):
    """(path, plain payload) of every filtered file below a toplevel."""
    passphrase = toplevel_passphrase(toplevel, gpg)
    for dirpath, _, names in os.walk(toplevel):
        for name in names:
            if name in UNFILTERED_NAMES:
                continue
            path = os.path.join(dirpath, name)
            with open(path, 'rb') as f:
                yield path, unwrap(f.read(), gpg, passphrase)
