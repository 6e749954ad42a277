"""Encryption settings and key management commands (§3.10, §5.15)."""

from obnamlib import plugin

GROUP = 'Encryption'


class EncryptionPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string(['encrypt-with'], 'PGP key with which to encrypt data in '
                 'the backup repository', metavar='KEYID', group=GROUP)
        s.string(['keyid'], 'PGP key id to add to or remove from the '
                 'repository', metavar='KEYID', group=GROUP)
        s.boolean(['weak-random'], 'use /dev/urandom instead of /dev/random '
                  'to generate symmetric keys', default=True, group=GROUP)
        s.boolean(['key-details'], 'show the user ids of keys too',
                  group=GROUP)
        s.string(['symmetric-key-bits'], 'size of symmetric keys to make '
                 '(default 256)', metavar='BITS', group=GROUP)
        s.string(['gnupghome'], 'home directory for GnuPG', default=None,
                 metavar='DIR', group=GROUP)
        self.app.accept_unimplemented('keyid', 'key-details')
        add = self.app.add_subcommand
        add('client-keys', self.client_keys)
        add('list-keys', self.list_keys)
        add('list-toplevels', self.list_toplevels)
        add('add-key', self.add_key, arg_synopsis='[CLIENT-NAME]...')
        add('remove-key', self.remove_key, arg_synopsis='[CLIENT-NAME]...')
        add('remove-client', self.remove_client,
            arg_synopsis='[CLIENT-NAME]...')

    def client_keys(self, args):
        """List clients and their keys in the repository"""
        self.not_implemented('client-keys')

    def list_keys(self, args):
        """List keys and the repository toplevels they're used in"""
        self.not_implemented('list-keys')

    def list_toplevels(self, args):
        """List repository toplevel directories and their keys"""
        self.not_implemented('list-toplevels')

    def add_key(self, args):
        """Add a key to the repository"""
        self.not_implemented('add-key')

    def remove_key(self, args):
        """Remove a key from the repository"""
        self.not_implemented('remove-key')

    def remove_client(self, args):
        """Remove client and its key from repository"""
        self.not_implemented('remove-client')
