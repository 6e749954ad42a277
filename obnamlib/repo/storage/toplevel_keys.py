"""The symmetric keys of an encrypted repository's toplevels (format-6.md
§4, §10.1): the `keys` object RepositoryFS asks for passphrases.

Each toplevel has `key` (its random key as hex text, encrypted to every
public key in its keyring) and `userkeys` (that keyring, symmetrically
encrypted with the key itself, no filter tag).  Keys are decrypted with the
user's secret key on first use and cached for the process.

Rules (a repository is all-encrypted or all-clear, cli.md §3.10):
reading an encrypted repository needs only a secret key that decrypts
`key`; writing into one needs --encrypt-with; --encrypt-with on an existing
unencrypted repository is refused.  All checks happen before anything is
written.
"""

import concurrent.futures
import math
import os
import re
import threading

from obnamlib import errors
from obnamlib.crypto import gpg, gpg_agent, openpgp
from obnamlib.repo.storage.key_store import KeyStore

KEY = 'key'
USERKEYS = 'userkeys'
UNENCRYPTED_TOPLEVELS = ('metadata',)
# Toplevels that every client shares (and every command reading or
# writing a repository uses).
SHARED_TOPLEVELS = ('chunklist', 'chunks', 'chunksums', 'clientlist')
# More toplevels than this: read the shared toplevels' keys ahead only.
MANY_TOPLEVELS = 8


class EncryptionKeyRequired(errors.ObnamError):
    code = 'R2687BX'
    msg = ('Repository is encrypted: writing to it needs --encrypt-with '
           '(toplevel {toplevel})')


class RepositoryNotEncrypted(errors.ObnamError):
    code = 'R4E074X'
    msg = ('--encrypt-with={keyid} given, but the repository is not '
           'encrypted; encryption cannot be turned on for an existing '
           'repository')


class ToplevelNotEncrypted(errors.ObnamError):
    code = 'R5C0B3X'
    msg = 'Toplevel {toplevel} is not encrypted'


class BadSymmetricKey(errors.ObnamError):
    code = 'R507C2X'
    msg = ('Toplevel {toplevel}: its key file does not hold a symmetric key '
           'as Obnam writes one (hex text); refusing to use it')


# What random_key_text makes: an even number of hex digits (Obnam 1.x
# wrote lowercase; bits may differ from our --symmetric-key-bits, since
# another run or another Obnam may have created the toplevel).
_KEY_TEXT = re.compile(rb'(?:[0-9a-fA-F]{2})+')


class _NotDecryptedAhead(errors.ObnamError):
    """Internal: a key the shared gpg run did not decrypt; it is tried
    alone when asked for, which gives gpg's own error."""
    code = 'R3B1A0X'
    msg = 'Toplevel {toplevel}: key not decrypted ahead'


def _order_of_need(toplevel):
    """Commands read the client list first, then their client's tree,
    then the shared chunk toplevels (a key decrypted ahead is settled as
    soon as it is, so the first needed goes first)."""
    if toplevel == 'clientlist':
        return (0, toplevel)
    if toplevel in SHARED_TOPLEVELS:
        return (2, SHARED_TOPLEVELS.index(toplevel))
    return (1, toplevel)


def _no_key():
    """The settled Future of a toplevel without a key file."""
    run = concurrent.futures.Future()
    run.set_result(None)
    return run


class BadSymmetricKeyBits(errors.ObnamError):
    code = 'R4A7CCX'
    msg = ('--symmetric-key-bits={bits} is not a positive whole number of '
           'bits')


def key_bits(value):
    """The --symmetric-key-bits setting (a string in Obnam 1.x) as an int;
    empty means 256."""
    if value in (None, ''):
        return 256
    try:
        bits = int(value)
    except (TypeError, ValueError):
        bits = 0
    if bits <= 0:
        raise BadSymmetricKeyBits(bits=value)
    return bits


def valid_key_text(toplevel, plain):
    """The passphrase text of a decrypted `key` file, or BadSymmetricKey:
    a foreign or garbled key must not be used as a passphrase."""
    text = plain.strip(b' \t\r\n')
    if not _KEY_TEXT.fullmatch(text):
        raise BadSymmetricKey(toplevel=toplevel)
    return text.decode('ascii')


def random_key_text(bits=256, weak_random=True):
    """Random bytes as lowercase hex text: the toplevel passphrase (§4.1)."""
    count = int(math.ceil(int(bits) / 8.0))
    if weak_random:
        raw = os.urandom(count)
    else:
        with open('/dev/random', 'rb') as f:
            raw = f.read(count)
    return raw.hex()


def _from_settings(settings, name, default):
    try:
        value = settings[name]
    except (KeyError, TypeError, IndexError, AttributeError):
        return default
    return default if value in (None, '') else value


class ToplevelKeys(KeyStore):
    """Passphrases per toplevel, created for new toplevels when encrypting.

    base: the raw StorageFS of the repository root (key and userkeys are
    never filtered).  The second argument may also be a settings object
    (the application's Settings or a dict with Obnam's setting names)."""

    def __init__(self, base, encrypt_with=None, gnupghome=None,
                 symmetric_key_bits=256, weak_random=True, cipher=None):
        if encrypt_with is not None and not isinstance(encrypt_with, str):
            settings = encrypt_with
            encrypt_with = _from_settings(settings, 'encrypt-with', None)
            gnupghome = _from_settings(settings, 'gnupghome', gnupghome)
            symmetric_key_bits = _from_settings(
                settings, 'symmetric-key-bits', symmetric_key_bits)
            weak_random = _from_settings(settings, 'weak-random', weak_random)
        self.base = base
        self.encrypt_with = encrypt_with or None
        self.gnupghome = gnupghome or None
        self.bits = key_bits(symmetric_key_bits)
        self.weak_random = weak_random
        self.cipher = cipher or openpgp.SymmetricCipher()
        self.cache = {}
        self.running = {}       # toplevel -> Future of its key text
        self.others_read = False  # the likely toplevels' runs were started
        self.pool = None
        self.secret_check = None    # Future of the --encrypt-with check
        self.lock = threading.Lock()
        self._check()

    # --- checks before anything is written -------------------------------

    def _check(self):
        if self.encrypt_with is None:
            return
        if self.repository_is_encrypted():
            # this check, then the keys' decryption, go on while the
            # command starts; writing waits for the check
            with self.lock:
                self.secret_check = self._pool().submit(
                    gpg.require_secret_key, self.encrypt_with,
                    self.gnupghome)
                self._start_likely_toplevels()
            return
        gpg.require_secret_key(self.encrypt_with, self.gnupghome)
        if self._repository_is_clear():
            raise RepositoryNotEncrypted(keyid=self.encrypt_with)

    def check_before_writing(self):
        """Raise the check's error (R0C79EX: --encrypt-with names a key
        whose secret half the user lacks) before anything is written:
        RepositoryFS calls this before every write, lock files too."""
        if self.secret_check is not None:
            self.secret_check.result()

    def close(self):
        """Stop the gpg threads (a run nobody waits for any more is not
        waited for at exit either)."""
        with self.lock:
            pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def repository_is_encrypted(self):
        return self.base.exists('clientlist/' + KEY)

    def _repository_is_clear(self):
        """An existing repository with data but no clientlist key."""
        if self.repository_is_encrypted():
            return False
        return any(not self._is_new(toplevel)
                   for toplevel in self._existing_toplevels())

    def _existing_toplevels(self):
        try:
            names = self.base.listdir('.')
        except FileNotFoundError:
            return []
        return [name for name in names
                if name not in UNENCRYPTED_TOPLEVELS and
                self.base.isdir(name)]

    def _is_new(self, toplevel):
        """No such directory, or nothing in it but a lock (§10.1), a
        `userkeys` or temporary files left by a crash while creating keys."""
        try:
            names = self.base.listdir(toplevel)
        except FileNotFoundError:
            return True
        return all(name in ('lock', USERKEYS) or name.startswith(('tmp', '.tmp'))
                   for name in names)

    # --- the keys protocol of RepositoryFS -----------------------------------

    def is_encrypted(self, toplevel):
        return self.base.exists(self._path(toplevel, KEY))

    def symmetric_key(self, toplevel):
        """The toplevel's passphrase text, or None if it has no key
        (`metadata` has one only in format 5).  The first call (or, with
        --encrypt-with, opening the repository) also starts gpg for the
        toplevels every command uses; each waits only for its own run."""
        with self.lock:
            if toplevel in self.cache:
                return self.cache[toplevel]
            if not self.others_read:
                self._start_likely_toplevels()
            run = self.running.get(toplevel) or self._start(toplevel)
        try:
            text = self._result(toplevel, run)
        except _NotDecryptedAhead:
            with self.lock:     # not decrypted with the others: alone
                run = self.running.get(toplevel) or self._start(toplevel)
            text = self._result(toplevel, run)
        with self.lock:
            self.cache[toplevel] = text
            self.running.pop(toplevel, None)
        return text

    def _result(self, toplevel, run):
        """The run's key text.  A failed run is forgotten: asking again
        runs gpg again."""
        try:
            return run.result()
        except Exception:
            with self.lock:
                if self.running.get(toplevel) is run:
                    del self.running[toplevel]
            raise

    def _likely_toplevels(self):
        """The toplevels a command probably needs keys for: the shared
        ones, and in a repository of one or a few clients every client's
        (a key this user cannot read costs one failed gpg run meanwhile)."""
        existing = self._existing_toplevels()
        if len(existing) <= MANY_TOPLEVELS:
            return existing
        return list(SHARED_TOPLEVELS)

    def _start_likely_toplevels(self):
        """Start gpg for the likely toplevels' keys: one gpg run for them
        all (a run costs ~8 ms of CPU, each key in it ~1.5 ms).  A key
        file that cannot be read now, or that this run does not decrypt,
        is read again (and gpg's error reported) when it is asked for."""
        self.others_read = True
        wanted = {}
        for name in self._likely_toplevels():
            if name in self.cache or name in self.running:
                continue
            try:
                encrypted = self._encrypted_key(name)
            except (OSError, errors.ObnamError):
                continue
            if encrypted is None:
                self.running[name] = _no_key()
            else:
                run = self.running[name] = concurrent.futures.Future()
                wanted[name] = (encrypted, run)
        if wanted:
            self._pool().submit(self._decrypt_together, wanted)

    def _decrypt_together(self, wanted):
        """Settle each toplevel's Future: through gpg-agent where it can
        (no gpg process), each as soon as it is decrypted and in the
        order commands need them, the others in one gpg run.  A key
        neither decrypted is _NotDecryptedAhead: it is decrypted alone
        when asked for, which gives gpg's own error."""
        names = sorted(wanted, key=_order_of_need)
        runs = [wanted[name][1] for name in names]
        plains = [None] * len(names)

        def settle(i, plain):
            self._settle(names[i], runs[i], plain)
        try:
            messages = [wanted[name][0] for name in names]
            plains = self._decrypted_by_agent(messages, settle)
            rest = [i for i, run in enumerate(runs) if not run.done()]
            if rest:
                by_gpg = gpg.decrypt_many([messages[i] for i in rest],
                                          self.gnupghome)
                for i, plain in zip(rest, by_gpg):
                    plains[i] = plain
        except Exception:   # every Future is settled, whatever happens
            pass
        finally:
            for i, plain in enumerate(plains):
                if not runs[i].done():
                    settle(i, plain)

    @staticmethod
    def _settle(name, run, plain):
        """A bad key text is tried alone too: then it is reported."""
        try:
            run.set_result(valid_key_text(name, plain))
        except Exception:   # None, or not a key: every Future is settled
            run.set_exception(_NotDecryptedAhead(toplevel=name))

    def _decrypted_by_agent(self, messages, each):
        """Plaintexts (None where not) of the messages for the secret
        keys --encrypt-with names, which its check listed; each(i,
        plaintext) as soon as one is decrypted."""
        if self.secret_check is None:
            return [None] * len(messages)
        try:
            listing = self.secret_check.result()
            return gpg_agent.decrypt_many(
                messages, gpg_agent.parse_secret_listing(listing),
                self.gnupghome, each)
        except Exception:   # a failed check, or an agent problem
            return [None] * len(messages)

    def _start(self, toplevel):
        """A Future of the toplevel's key text.  The key file is read in
        this thread (an SFTP connection is not shared between threads);
        gpg runs in the pool.  Called with the lock held."""
        encrypted = self._encrypted_key(toplevel)
        run = _no_key() if encrypted is None else self._pool().submit(
            self._decrypted_key, toplevel, encrypted)
        self.running[toplevel] = run
        return run

    def _pool(self):
        if self.pool is None:
            self.pool = concurrent.futures.ThreadPoolExecutor(
                MANY_TOPLEVELS + 1, thread_name_prefix='gpg')
        return self.pool

    def _encrypted_key(self, toplevel):
        try:
            return self.base.read_file(self._path(toplevel, KEY))
        except FileNotFoundError:
            return None

    def _decrypted_key(self, toplevel, encrypted):
        plain = gpg.decrypt(encrypted, self.gnupghome,
                            what='the repository key %s/key' % toplevel)
        return valid_key_text(toplevel, plain)

    def prepare_toplevel(self, toplevel):
        """Create key and userkeys of a new toplevel before its first
        filtered file (§10.1); refuse to write unencrypted data into an
        encrypted repository."""
        if toplevel in UNENCRYPTED_TOPLEVELS:
            return
        self.check_before_writing()
        if self.encrypt_with is None:
            if self.repository_is_encrypted():
                raise EncryptionKeyRequired(toplevel=toplevel)
            return
        if self.is_encrypted(toplevel):
            return
        if not self._is_new(toplevel):
            raise RepositoryNotEncrypted(keyid=self.encrypt_with)
        self._create_keys(toplevel)

    def _create_keys(self, toplevel):
        keyring = gpg.export_public_key(self.encrypt_with, self.gnupghome)
        text = random_key_text(self.bits, self.weak_random)
        self._write_keys(toplevel, text, keyring)
        with self.lock:
            self.cache[toplevel] = text

    def _write_keys(self, toplevel, text, keyring):
        self.check_before_writing()
        encrypted_key = gpg.encrypt_to_keyring(text.encode('ascii'), keyring)
        userkeys = self.cipher.encrypt(keyring, text)
        self.base.makedirs(toplevel)
        self.base.write_file(self._path(toplevel, USERKEYS), userkeys)
        self.base.write_file(self._path(toplevel, KEY), encrypted_key)

    # --- key management (add-key, remove-key, list-keys) ---------------------

    def _keyring(self, toplevel):
        text = self.symmetric_key(toplevel)
        if text is None:
            raise ToplevelNotEncrypted(toplevel=toplevel)
        data = self.base.read_file(self._path(toplevel, USERKEYS))
        return text, self.cipher.decrypt(data, text)

    def list_keys(self, toplevel):
        """Primary key ids (16 hex) allowed to read the toplevel."""
        _, keyring = self._keyring(toplevel)
        return gpg.keyring_key_ids(keyring)

    def key_user_ids(self, toplevel, keyid):
        _, keyring = self._keyring(toplevel)
        return gpg.keyring_user_ids(keyring, keyid)

    def add_key(self, toplevel, keyid):
        """Allow public key `keyid` (from the user's keyring) to read."""
        text, keyring = self._keyring(toplevel)
        added = gpg.export_public_key(keyid, self.gnupghome)
        self._write_keys(toplevel, text, gpg.keyring_add(keyring, added))

    def remove_key(self, toplevel, keyid):
        """Stop key `keyid` from reading new keys (absent: no-op)."""
        text, keyring = self._keyring(toplevel)
        smaller = gpg.keyring_remove(keyring, keyid)
        if smaller != keyring:
            self._write_keys(toplevel, text, smaller)

    @staticmethod
    def _path(toplevel, name):
        return '%s/%s' % (toplevel, name)
