"""Encryption settings and key management commands (cli.md §3.10, §5.15).

The encryption itself happens in the storage layer (obnamlib.repo.storage.repo_fs with
obnamlib.repo.storage.toplevel_keys); these commands show and edit which public keys may
read each toplevel of the repository.
"""

from obnamlib import errors
from obnamlib.crypto import gpg
from obnamlib.cli import plugin
from obnamlib.repo.storage.toplevel_keys import SHARED_TOPLEVELS

GROUP = 'Encryption'
NOT_TOPLEVELS = ('metadata',)


class KeyIdRequired(errors.ObnamError):
    code = 'R32D76X'
    msg = '{command} needs --keyid=KEYID'


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
        add = self.app.add_subcommand
        add('client-keys', self.client_keys)
        add('list-keys', self.list_keys)
        add('list-toplevels', self.list_toplevels)
        add('add-key', self.add_key, arg_synopsis='[CLIENT-NAME]...')
        add('remove-key', self.remove_key, arg_synopsis='[CLIENT-NAME]...')
        add('remove-client', self.remove_client,
            arg_synopsis='[CLIENT-NAME]...')

    # --- helpers -----------------------------------------------------------

    def _in_use(self):
        """True if --encrypt-with is set; otherwise say so (exit 0)."""
        if self.app.settings['encrypt-with']:
            return True
        self.app.ui.output.write('Warning: Encryption not in use.\n'
                                 '(Use --encrypt-with to set key.)\n')
        return False

    def _gnupghome(self):
        return self.app.settings['gnupghome'] or None

    @staticmethod
    def _keys(repo):
        """The repository storage's key store (None: not encrypted)."""
        return repo.fs.keys

    @staticmethod
    def _toplevels(repo):
        return sorted(name for name in repo.fs.toplevel_names()
                      if name not in NOT_TOPLEVELS)

    def _readable_keys(self, keys, toplevel):
        """Key ids of a toplevel, or None if it is not encrypted or the
        caller cannot decrypt its key."""
        if keys is None or not keys.is_encrypted(toplevel):
            return None
        try:
            return keys.list_keys(toplevel)
        except errors.ObnamError:
            return None

    def _shown_key(self, keyid, keyring_uids=None):
        if not self.app.settings['key-details']:
            return keyid
        uids = gpg.user_ids(keyid, self._gnupghome())
        if not uids and keyring_uids is not None:
            uids = keyring_uids(keyid)
        return '%s (%s)' % (keyid, ', '.join(uids))

    def _keyid(self, command):
        keyid = self.app.settings['keyid']
        if not keyid:
            raise KeyIdRequired(command=command)
        return keyid

    def _client_toplevels(self, repo, client_names):
        return ['%d' % repo.get_client_id(name) for name in client_names]

    # --- commands ------------------------------------------------------------

    def client_keys(self, args):
        """List clients and their keys in the repository"""
        if not self._in_use():
            return
        with self.app.open_repository() as repo:
            for name in sorted(repo.get_client_names()):
                keyid = repo.get_client_key_id(name)
                if isinstance(keyid, bytes):
                    keyid = keyid.decode('utf-8', 'replace')
                shown = self._shown_key(keyid) if keyid else 'no key'
                self.app.ui.stdout.write('%s %s\n' % (name, shown))

    def list_keys(self, args):
        """List keys and the repository toplevels they're used in"""
        if not self._in_use():
            return
        with self.app.open_repository() as repo:
            keys = self._keys(repo)
            users = {}
            details = {}
            for toplevel in self._toplevels(repo):
                for keyid in self._readable_keys(keys, toplevel) or []:
                    users.setdefault(keyid, []).append(toplevel)
                    details.setdefault(keyid, toplevel)
            out = self.app.ui.output
            for keyid in sorted(users):
                top = details[keyid]
                out.write('key: %s\n' % self._shown_key(
                    keyid, lambda k: keys.key_user_ids(top, k)))
                for toplevel in users[keyid]:
                    out.write('  %s\n' % toplevel)

    def list_toplevels(self, args):
        """List repository toplevel directories and their keys"""
        if not self._in_use():
            return
        with self.app.open_repository() as repo:
            keys = self._keys(repo)
            out = self.app.ui.output
            for toplevel in self._toplevels(repo):
                out.write('toplevel: %s\n' % toplevel)
                for keyid in self._readable_keys(keys, toplevel) or []:
                    out.write('  %s\n' % self._shown_key(
                        keyid, lambda k: keys.key_user_ids(toplevel, k)))

    def add_key(self, args):
        """Add a key to the repository"""
        self._change_keys(args, 'add-key', lambda keys, top, keyid:
                          keys.add_key(top, keyid))

    def remove_key(self, args):
        """Remove a key from the repository"""
        self._change_keys(args, 'remove-key', lambda keys, top, keyid:
                          keys.remove_key(top, keyid))

    def _change_keys(self, args, command, change):
        """Like Obnam 1.x: shared toplevels plus the named clients'
        directories; takes no locks."""
        if not self._in_use():
            return
        keyid = self._keyid(command)
        with self.app.open_repository() as repo:
            keys = self._keys(repo)
            toplevels = list(SHARED_TOPLEVELS) + \
                self._client_toplevels(repo, args)
            for toplevel in toplevels:
                if keys is not None and keys.is_encrypted(toplevel):
                    change(keys, toplevel, keyid)

    def remove_client(self, args):
        """Remove client and its key from repository"""
        if not self._in_use():
            return
        with self.app.open_repository() as repo:
            repo.lock_client_list()
            existing = repo.get_client_names()
            for name in args:
                if name not in existing:
                    raise errors.RepositoryClientDoesNotExist(client_name=name)
                repo.remove_client(name)
            repo.commit_client_list()
