"""Throwaway GnuPG homes for tests: real gpg, short /tmp paths (gpg-agent
refuses long socket paths), agents killed afterwards.

Use as pytest fixtures (import them into a test module):

    from tests.gpg_fixture import gpg_home, reference_gpg_home  # noqa: F401

`gpg_home` is a fresh home with two passphrase-less keys (Alice, Bob);
`reference_gpg_home` holds Obnam 1.x's test keys (3B1802F81B321347 and
DF3D13AA11E69900) imported from shared/reference/obnam-1.x/test-gpghome.
Both are session-scoped: key generation and imports happen once.
"""

import os
import shutil
import subprocess
import tempfile

import pytest

from tests.reference_data import OBNAM_1X as REFERENCE_DIR
REFERENCE_KEY = '3B1802F81B321347'
REFERENCE_SECOND_KEY = 'DF3D13AA11E69900'


class GpgHome:
    """One GNUPGHOME directory and helpers to run gpg in it."""

    def __init__(self, prefix='g'):
        self.path = tempfile.mkdtemp(prefix=prefix, dir='/tmp')
        os.chmod(self.path, 0o700)
        self.keys = {}      # name -> primary key fingerprint

    def gpg(self, *args, input=None, passphrase=None, check=True):
        """Run gpg in this home; returns the CompletedProcess."""
        cmd = ['gpg', '--homedir', self.path, '--batch', '--no-tty']
        fds = ()
        if passphrase is not None:
            read_fd, write_fd = os.pipe()
            os.write(write_fd, passphrase.encode() + b'\n')
            os.close(write_fd)
            cmd += ['--passphrase-fd', str(read_fd)]
            fds = (read_fd,)
        try:
            result = subprocess.run(cmd + list(args), input=input,
                                    capture_output=True, pass_fds=fds)
        finally:
            for fd in fds:
                os.close(fd)
        if check and result.returncode != 0:
            raise AssertionError('gpg %s failed: %s' % (
                ' '.join(args), result.stderr.decode(errors='replace')))
        return result

    def generate_key(self, name, algorithm='future-default'):
        """A passphrase-less key; returns its fingerprint.  By default
        ed25519 with a cv25519 encryption subkey; 'default' is this gpg's
        own choice (rsa3072 with gpg 2.2, ed25519 + cv25519 with 2.4)."""
        uid = '%s <%s@example.com>' % (name, name.lower())
        self.gpg('--passphrase', '', '--pinentry-mode', 'loopback',
                 '--quick-gen-key', uid, algorithm, 'default', 'never')
        fpr = self.fingerprint(uid)
        self.keys[name] = fpr
        return fpr

    def version(self):
        """This gpg's version as a tuple of ints."""
        first = self.gpg('--version').stdout.decode().splitlines()[0]
        return tuple(int(part) for part in first.split()[-1].split('.'))

    def add_encryption_subkey(self, fpr, algorithm):
        """A new encryption subkey (e.g. rsa2048, nistp256, cv25519) of
        key fpr; returns its 16-hex key id."""
        self.gpg('--passphrase', '', '--pinentry-mode', 'loopback',
                 '--quick-add-key', fpr, algorithm, 'encr', 'never')
        out = self.gpg('--with-colons', '--list-keys', fpr).stdout.decode()
        return [line.split(':')[4] for line in out.splitlines()
                if line.startswith('sub:')][-1]

    def fingerprint(self, who):
        out = self.gpg('--with-colons', '--list-keys', who).stdout.decode()
        for line in out.splitlines():
            if line.startswith('fpr:'):
                return line.split(':')[9]
        raise AssertionError('no key for %s' % who)

    def import_reference(self, dirname='test-gpghome'):
        """Import an Obnam 1.x legacy home (pubring.gpg + secring.gpg)."""
        home = os.path.join(REFERENCE_DIR, dirname)
        files = [os.path.join(home, name)
                 for name in ('pubring.gpg', 'secring.gpg')]
        self.gpg('--import', *files)

    def export_public(self, who):
        return self.gpg('--export', who).stdout

    def decrypt(self, data, passphrase=None, ignore_mdc=False):
        args = ['-q', '--no-textmode']
        if ignore_mdc:
            args.append('--ignore-mdc-error')
        return self.gpg(*(args + ['-d']), input=data, passphrase=passphrase)

    def list_packets(self, data, passphrase=None):
        return self.gpg('--list-packets', input=data, passphrase=passphrase,
                        check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()

    def cleanup(self):
        subprocess.run(['gpgconf', '--homedir', self.path, '--kill',
                        'gpg-agent'], capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)


@pytest.fixture(scope='session')
def gpg_home():
    home = GpgHome('gk')
    home.generate_key('Alice')
    home.generate_key('Bob')
    yield home
    home.cleanup()


@pytest.fixture(scope='session')
def subkeys_gpg_home():
    """A home with one key (Carol) holding RSA, NIST P-256 and Curve25519
    encryption subkeys; `home.subkeys` maps algorithm -> key id."""
    home = GpgHome('gu')
    fpr = home.generate_key('Carol')
    home.subkeys = {algorithm: home.add_encryption_subkey(fpr, algorithm)
                    for algorithm in ('rsa2048', 'nistp256', 'cv25519')}
    yield home
    home.cleanup()


@pytest.fixture(scope='session')
def reference_gpg_home():
    home = GpgHome('gr')
    home.import_reference()
    yield home
    home.cleanup()


@pytest.fixture(scope='session')
def plain_gpg_home():
    """A home without keys, shared (symmetric encryption needs no keys)."""
    home = GpgHome('gp')
    yield home
    home.cleanup()


@pytest.fixture
def empty_gpg_home():
    home = GpgHome('ge')
    yield home
    home.cleanup()
