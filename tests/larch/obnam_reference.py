"""Decrypt the larch forests of the Obnam 1.x reference repositories.

Real gpg (throwaway GNUPGHOME under /tmp), keys from
shared/reference/obnam-1.x/test-gpghome. The tag chain (format-6.md 3.3) is
stripped here, in the test code, not by larch.
"""

import os
import shutil
import subprocess
import tarfile
import tempfile
import zlib

import larch

REFERENCE = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                         'shared', 'reference')
if not os.path.isdir(REFERENCE):
    REFERENCE = '/work/shared/reference'
OBNAM = os.path.join(REFERENCE, 'obnam-1.x')
LARCH = os.path.join(REFERENCE, 'larch-1.x')

FOREST_KEY_SIZES = {'clientlist': 25, 'chunklist': 8, 'chunksums': 48}
CLIENT_KEY_SIZE = 18


class Gpg:

    def __init__(self):
        self.home = tempfile.mkdtemp(prefix='g', dir='/tmp')
        os.chmod(self.home, 0o700)
        src = os.path.join(OBNAM, 'test-gpghome')
        self._run(['--import', os.path.join(src, 'pubring.gpg'),
                   os.path.join(src, 'secring.gpg')])

    def _run(self, args, data=b'', pass_fd=None):
        cmd = ['gpg', '--homedir', self.home, '-q', '--batch'] + args
        return subprocess.run(cmd, input=data, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, check=True,
                              pass_fds=pass_fd or ()).stdout

    def decrypt_key(self, data):
        return self._run(['-d'], data).strip()

    def decrypt_symmetric(self, data, passphrase):
        read_fd, write_fd = os.pipe()
        os.write(write_fd, passphrase + b'\n')
        os.close(write_fd)
        try:
            return self._run(['--no-textmode', '--ignore-mdc-error',
                              '--passphrase-fd', str(read_fd), '-d'],
                             data, pass_fd=(read_fd,))
        finally:
            os.close(read_fd)

    def close(self):
        subprocess.run(['gpgconf', '--homedir', self.home, '--kill',
                        'gpg-agent'], stderr=subprocess.DEVNULL)
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


def extract(tarball, dest):
    with tarfile.open(tarball) as tar:
        tar.extractall(dest)
    return os.path.join(dest, 'repo')


def decrypted_forests(repo, gpg):
    """{toplevel: (MemoryFS with the plain forest under toplevel, key size)}"""
    result = {}
    for top in sorted(os.listdir(repo)):
        if top in ('chunks', 'metadata') or not os.path.isdir(
                os.path.join(repo, top)):
            continue
        base = os.path.join(repo, top)
        with open(os.path.join(base, 'key'), 'rb') as f:
            passphrase = gpg.decrypt_key(f.read())
        vfs = larch.MemoryFS()
        for dirpath, dirnames, filenames in os.walk(base):
            for name in filenames:
                if name in ('key', 'userkeys', 'lock'):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, repo)
                with open(full, 'rb') as f:
                    vfs.write_file(rel, unwrap(f.read(), gpg, passphrase))
            for name in dirnames:
                vfs.makedirs(os.path.relpath(os.path.join(dirpath, name),
                                             repo))
        result[top] = (vfs, FOREST_KEY_SIZES.get(top, CLIENT_KEY_SIZE))
    return result
