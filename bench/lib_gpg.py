"""A throwaway GnuPG home with one passphrase-less key, for encrypted runs.

The home lives under a short /tmp path because gpg-agent refuses socket
paths longer than about 100 bytes; its agent is stopped on close.
"""

import os
import shutil
import subprocess
import tempfile

from lib_measure import CommandFailed
from lib_service import Service

USER_ID = 'Obnam Bench <bench@example.com>'


class ThrowawayGpgHome(Service):
    """GNUPGHOME with one key; `fingerprint` names it for --encrypt-with."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix='gb', dir='/tmp')
        os.chmod(self.path, 0o700)
        self.fingerprint = None

    def start(self):
        self.fingerprint = self._generate_key()

    def _gpg(self, *args):
        argv = ['gpg', '--homedir', self.path, '--batch', '--no-tty'] + list(
            args)
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL,
                               capture_output=True)
        except OSError as e:
            raise CommandFailed('cannot run gpg: %s' % e)
        if p.returncode != 0:
            raise CommandFailed('gpg %s: %s' % (
                ' '.join(args), p.stderr.decode(errors='replace')[-500:]))
        return p.stdout.decode()

    def _generate_key(self):
        self._gpg('--passphrase', '', '--pinentry-mode', 'loopback',
                  '--quick-gen-key', USER_ID, 'future-default', 'default',
                  'never')
        for line in self._gpg('--with-colons', '--list-keys',
                              USER_ID).splitlines():
            if line.startswith('fpr:'):
                return line.split(':')[9]
        raise CommandFailed('gpg made no key for %s' % USER_ID)

    def close(self):
        subprocess.run(['gpgconf', '--homedir', self.path, '--kill', 'all'],
                       stdin=subprocess.DEVNULL, capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)
