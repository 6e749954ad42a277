"""The format-6 repositories written by real Obnam 1.x, made readable for
tests that do not exercise encryption: a copy with every filtered file
decrypted (real gpg, the reference keyring) and inflated, stored with the
plain tag chain (one NUL), and without key/userkeys files."""

import os
import shutil
import subprocess
import tarfile
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = os.path.normpath(os.path.join(
    HERE, '..', '..', '..', '..', 'shared', 'reference', 'obnam-1.x'))
if not os.path.isdir(REFERENCE):
    REFERENCE = '/work/shared/reference/obnam-1.x'

ENCRYPTED = 'repo-format-6-encrypted-deflated'
IN_TREE = 'repo-format-6-in-tree-data'
UNFILTERED_NAMES = ('key', 'userkeys', 'lock')


def unpack(name, dest):
    """Unpack a reference tarball into dest; returns dest."""
    with tarfile.open(os.path.join(REFERENCE, name + '.tar.xz')) as tar:
        tar.extractall(dest)
    return dest


class Gpg:
    """A throwaway GNUPGHOME (short /tmp path) with the test keyring."""

    def __init__(self):
        self.home = tempfile.mkdtemp(prefix='g', dir='/tmp')
        os.chmod(self.home, 0o700)
        src = os.path.join(REFERENCE, 'test-gpghome')
        self.run(['--import', os.path.join(src, 'pubring.gpg'),
                  os.path.join(src, 'secring.gpg')])

    def run(self, args, data=b'', pass_fds=()):
        result = subprocess.run(
            ['gpg', '--homedir', self.home, '-q', '--batch', '--no-textmode']
            + args, input=data, capture_output=True, pass_fds=pass_fds)
        return result

    def decrypt_key(self, data):
        result = self.run(['-d'], data)
        assert result.returncode == 0, result.stderr
        return result.stdout

    def decrypt_symmetric(self, data, passphrase):
        r, w = os.pipe()
        os.write(w, passphrase + b'\n')
        os.close(w)
        try:
            result = self.run(['--ignore-mdc-error', '--passphrase-fd',
                               str(r), '-d'], data, pass_fds=(r,))
        finally:
            os.close(r)
        assert result.stdout, result.stderr
        return result.stdout

    def close(self):
        subprocess.run(['gpgconf', '--homedir', self.home, '--kill',
                        'gpg-agent'], capture_output=True)
        shutil.rmtree(self.home, ignore_errors=True)


def unwrap(data, passphrase, gpg):
    """Undo the tag chain of format-6.md §3.3."""
    while True:
        tag, sep, rest = data.partition(b'\0')
        assert sep, 'no filter tag'
        if tag == b'':
            return rest
        if tag == b'deflate':
            data = zlib.decompress(rest)
        elif tag == b'encrypt1':
            data = gpg.decrypt_symmetric(rest, passphrase)
        else:
            raise AssertionError('unknown tag %r' % tag)


def make_plain_copy(repo_dir, gpg):
    """Rewrite repo_dir in place as an unencrypted, uncompressed repo."""
    for toplevel in os.listdir(repo_dir):
        top = os.path.join(repo_dir, toplevel)
        if toplevel == 'metadata' or not os.path.isdir(top):
            continue
        key_file = os.path.join(top, 'key')
        passphrase = None
        if os.path.exists(key_file):
            with open(key_file, 'rb') as f:
                passphrase = gpg.decrypt_key(f.read())
        for dirpath, _, filenames in os.walk(top):
            for name in filenames:
                path = os.path.join(dirpath, name)
                if name in UNFILTERED_NAMES:
                    os.remove(path)
                    continue
                with open(path, 'rb') as f:
                    payload = unwrap(f.read(), passphrase, gpg)
                with open(path, 'wb') as f:
                    f.write(b'\0' + payload)


def parse_manifest(path):
    """summain output -> {name: {field: value}}."""
    entries = {}
    with open(path, encoding='utf-8') as f:
        blocks = f.read().split('\n\n')
    for block in blocks:
        fields = {}
        current = None
        for line in block.splitlines():
            if line.startswith('  ') and current:
                fields[current] += line.strip() + '\n'
            elif ':' in line:
                current, _, value = line.partition(':')
                fields[current] = value.strip()
        if 'Name' in fields:
            entries[fields['Name']] = fields
    return entries
