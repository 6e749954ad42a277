"""Public-key work with the user's GnuPG (format-6.md §4): exporting the
user's public key, encrypting a toplevel's symmetric key to every key of a
keyring, decrypting it with the user's secret key, and editing keyrings.

Runs the gpg binary (these operations happen a few times per run, never per
file).  Keyring blobs are worked on in a throwaway GNUPGHOME under /tmp
with a short name (gpg-agent refuses long socket paths); any agent started
there is stopped afterwards.  `gnupghome=None` means gpg's default
($GNUPGHOME or ~/.gnupg).
"""

import fcntl
import logging
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time

from obnamlib import errors
from obnamlib.crypto import openpgp_packets, openpgp_pubkey

_log = logging.getLogger(__name__)

GPG = 'gpg'
PUBLIC_KEY = 6


class GpgMissing(errors.ObnamError):
    code = 'R8CB25X'
    msg = 'Cannot run gpg ({reason}); encryption needs GnuPG installed'


class UnreadableKeyFile(errors.ObnamError):
    code = 'R88F9FX'
    msg = ('gpg encrypted a toplevel key as {found}, which GnuPG 2.2 and '
           'Obnam 1.x cannot read, and obnam cannot write it itself '
           '({reason}); nothing was written.  Remove AEAD from the key\'s '
           'preferences: gpg --edit-key KEYID setpref AES256 AES192 AES '
           'SHA512 SHA256 ZLIB ZIP Uncompressed')


# What to do when a GnuPG home lacks a key, after "import it" or
# "import the secret key".
_IMPORT_ADVICE = ('(gpg --import), or point --gnupghome at the keyring that '
                  'has it')


def no_secret_key(keyid, gnupghome):
    """Obnam 1.x's code (R0C79EX), in one line naming the key, the home
    and what to do."""
    return _missing_key(keyid, gnupghome, 'secret')


def no_public_key(keyid, gnupghome):
    return _missing_key(keyid, gnupghome, 'public')


def _missing_key(keyid, gnupghome, kind):
    home = _shown_home(gnupghome)
    return errors.GpgError(
        returncode=2, stderr='gpg: %s: No %s key (GnuPG home %s)' % (
            keyid, kind, home),
        explanation='GnuPG home %s has no %s key %s; import it %s' % (
            home, kind, keyid, _IMPORT_ADVICE))


def _environment():
    env = dict(os.environ)
    env['LC_ALL'] = 'C'
    env['LANGUAGE'] = 'C'
    return env


def run(args, data=b'', gnupghome=None, passphrase=None):
    """stdout of gpg run with args; GpgError carrying stderr on failure."""
    cmd = [GPG, '--batch', '--no-tty', '-q']
    if gnupghome:
        cmd += ['--homedir', gnupghome]
    fds = ()
    if passphrase is not None:
        read_fd, write_fd = os.pipe()
        os.write(write_fd, passphrase + b'\n')
        os.close(write_fd)
        cmd += ['--passphrase-fd', str(read_fd)]
        fds = (read_fd,)
    try:
        with home_turn(gnupghome):
            result = subprocess.run(cmd + list(args), input=data,
                                    capture_output=True, pass_fds=fds,
                                    env=_environment())
    except OSError as e:
        raise GpgMissing(reason='%s: %s' % (GPG, e.strerror))
    finally:
        for fd in fds:
            os.close(fd)
    if result.returncode != 0:
        raise errors.GpgError(
            returncode=result.returncode,
            stderr=result.stderr.decode('utf-8', 'replace').rstrip('\n'))
    return result.stdout


def _shown_home(gnupghome):
    """The GnuPG home gpg uses for gnupghome (None: gpg's default), as
    people write it."""
    return gnupghome or os.environ.get('GNUPGHOME') or '~/.gnupg'


def home_dir(gnupghome=None):
    """The GnuPG home gpg uses for gnupghome, as a path (gpg expands a
    leading ~ itself)."""
    return os.path.expanduser(_shown_home(gnupghome))


# --- one user of a GnuPG home at a time -------------------------------------

_turns = {}
_turns_guard = threading.Lock()
# Seconds to wait for another process's turn in a GnuPG home before
# running beside it (a gpg waiting for a passphrase in another obnam
# must not stop a backup from cron for good).
HOME_WAIT = 30


def home_turn(gnupghome=None):
    """The turn held by whatever runs gpg, or talks to gpg-agent, in a
    GnuPG home: a context manager, one per home directory.

    Why: the first time gpg-agent uses a secret key imported from gpg
    1.x's secring.gpg (the keys Obnam 1.x users have), it stores the key
    anew, and a second gpg decrypting meanwhile may find "No secret key".
    Measured with GnuPG 2.2.40 on a fresh import: of a `gpg -d` beside a
    `gpg --decrypt-files`, one missed the key in 5 of 50 tries; after a
    first use, 0 of 60."""
    home = os.path.realpath(home_dir(gnupghome))
    with _turns_guard:
        return _turns.setdefault(home, _HomeTurn(home))


class _HomeTurn:
    """Threads of this process take turns by a lock, processes by
    flock(2) on the home directory itself, so nothing is written there.
    The flock is best effort: a home that cannot be opened (not made
    yet) or locked (a file system without locks) has the first only,
    and after HOME_WAIT seconds we go on beside the other process."""

    def __init__(self, home):
        self.home = home
        self.lock = threading.Lock()
        self.fd = None

    def locked(self):
        return self.lock.locked()

    def __enter__(self):
        self.lock.acquire()
        try:
            self.fd = _locked_directory(self.home, HOME_WAIT)
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc_info):
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)        # which releases the flock
        self.lock.release()


def _locked_directory(path, wait):
    """An fd of directory path with an exclusive flock on it, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    deadline = time.monotonic() + wait
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                _log.warning('GnuPG home %s is still in use by another '
                             'process after %s s: going on beside it',
                             path, wait)
                break
        except OSError:
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    os.close(fd)
    return None


# --- the user's keyring -----------------------------------------------------

_exported = {}


def export_public_key(keyid, gnupghome=None):
    """The user's public key `keyid` (id, fingerprint or user id), binary;
    remembered for the process (a run creates several toplevels)."""
    wanted = (keyid, gnupghome, os.environ.get('GNUPGHOME'))
    if wanted not in _exported:
        _exported[wanted] = _export(keyid, gnupghome)
    return _exported[wanted]


def _export(keyid, gnupghome):
    try:
        blob = run(['--export', keyid], gnupghome=gnupghome)
    except errors.GpgError:
        blob = b''
    if not blob:
        raise no_public_key(keyid, gnupghome)
    return blob


def secret_key_listing(keyid, gnupghome=None):
    """gpg's colon listing of the secret keys keyid names, with keygrips
    (obnamlib.crypto.gpg_agent reads it); b'' if gpg knows none."""
    try:
        return run(['--with-colons', '--with-keygrip', '--list-secret-keys',
                    keyid], gnupghome=gnupghome)
    except errors.GpgError:
        return b''


def has_secret_key(keyid, gnupghome=None):
    return _lists_secret_key(secret_key_listing(keyid, gnupghome))


def _lists_secret_key(listing):
    return any(line.startswith(b'sec:') for line in listing.splitlines())


def require_secret_key(keyid, gnupghome=None):
    """The secret_key_listing of keyid; R0C79EX if it lists no secret
    key."""
    listing = secret_key_listing(keyid, gnupghome)
    if not _lists_secret_key(listing):
        raise no_secret_key(keyid, gnupghome)
    return listing


def decrypt(data, gnupghome=None, what='the data'):
    """Decrypt public-key encrypted data with the user's secret key.  When
    this GnuPG home has none of the secret keys it is for, the error is
    one line naming them and what to do (`what` names the data)."""
    try:
        return run(['--no-textmode', '-d'], data, gnupghome=gnupghome)
    except errors.GpgError as e:
        if 'No secret key' not in str(e.stderr):
            raise
        _log.error('gpg: %s', e.stderr)
        raise errors.GpgError(
            returncode=e.returncode, stderr=e.stderr,
            explanation=missing_secret_key_text(data, gnupghome, what)) from e


def missing_secret_key_text(message, gnupghome, what):
    keyids = recipients(message)
    return ('Cannot decrypt %s: it is encrypted for key %s, and GnuPG home '
            '%s has no secret key for %s; import the secret key %s' % (
                what, ', '.join(keyids) or '(unknown)', _shown_home(gnupghome),
                'it' if len(keyids) < 2 else 'any of them', _IMPORT_ADVICE))


def recipients(message):
    """The key ids (hex) a public-key encrypted message names in its
    PKESK packets: encryption subkeys, which `gpg --list-secret-keys ID`
    finds too."""
    found = []
    try:
        for tag, body in openpgp_packets.iter_packets(message):
            if tag == openpgp_packets.MARKER:
                continue
            if tag != openpgp_packets.PKESK:
                break
            if len(body) >= 9 and body[0] == 3:
                found.append(bytes(body[1:9]).hex().upper())
    except errors.ObnamError:
        pass        # damaged: the names found so far
    return found


def decrypt_many(messages, gnupghome=None):
    """Decrypt several public-key encrypted messages with one gpg run: a
    list with the plaintext of each, or None where gpg did not decrypt
    it (decrypt() that one alone for gpg's error).

    Why: a gpg process costs ~8 ms of CPU, mostly starting up; each more
    message in the same run ~1.5 ms.  The plaintexts leave gpg through
    named pipes in a private directory, so they never reach a file.  We
    hold each pipe open for writing too (Linux), so reading it never
    sees an end before gpg has written; gpg's stderr ending tells that
    it is done."""
    if not messages:
        return []
    workdir = tempfile.mkdtemp(prefix='obd', dir=_private_dir())
    fifos = []
    try:
        names = []
        for i, data in enumerate(messages):
            name = os.path.join(workdir, str(i))
            with open(name + '.gpg', 'wb') as f:
                f.write(data)
            os.mkfifo(name, 0o600)
            fifos.append(os.open(name, os.O_RDWR | os.O_NONBLOCK))
            names.append(name + '.gpg')
        with home_turn(gnupghome):
            return _run_decrypt_files(names, fifos, gnupghome)
    finally:
        for fd in fifos:
            os.close(fd)
        shutil.rmtree(workdir, ignore_errors=True)


# A decrypted toplevel key is hex text of a few hundred bits: a "key"
# decrypting to more than this is not one (and must not fill memory).
MAX_PLAINTEXT = 1 << 16


def _run_decrypt_files(names, fifos, gnupghome):
    cmd = [GPG, '--batch', '--no-tty', '-q', '--yes', '--status-fd', '1']
    if gnupghome:
        cmd += ['--homedir', gnupghome]
    try:
        proc = subprocess.Popen(
            cmd + ['--no-textmode', '--decrypt-files'] + names,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=_environment())
    except OSError as e:
        raise GpgMissing(reason='%s: %s' % (GPG, e.strerror))
    outputs = [bytearray() for _ in fifos]
    status = bytearray()
    with proc:
        talking = {proc.stdout.fileno(): status, proc.stderr.fileno(): None}
        while talking:
            ready, _, _ = select.select(list(talking) + fifos, [], [])
            for fd in ready:
                if fd in talking:
                    more = os.read(fd, 65536)
                    if not more:
                        del talking[fd]
                    elif talking[fd] is not None:
                        talking[fd] += more
                else:
                    _read_available(fd, outputs[fifos.index(fd)])
    for fd, output in zip(fifos, outputs):
        _read_available(fd, output)
    decrypted = _decrypted_files(status)
    return [bytes(output) if name in decrypted and
            0 < len(output) <= MAX_PLAINTEXT else None
            for name, output in zip(names, outputs)]


def _decrypted_files(status):
    """The input files gpg's status lines say it decrypted and checked
    (DECRYPTION_OKAY, no failure or bad MDC): gpg writes a file's
    plaintext before it knows, and leaves it when the check fails."""
    done = set()
    name, good = None, False
    for line in status.decode('utf-8', 'surrogateescape').splitlines():
        words = line.split(' ', 3)
        if words[0] != '[GNUPG:]' or len(words) < 2:
            continue
        if words[1] == 'FILE_START' and len(words) == 4:
            name, good = words[3], False
        elif words[1] == 'DECRYPTION_OKAY':
            good = name is not None
        elif words[1] in ('DECRYPTION_FAILED', 'BADMDC', 'ERROR'):
            name = None
        elif words[1] == 'FILE_DONE':
            if good and name is not None:
                done.add(name)
            name, good = None, False
    return done


def _read_available(fd, output):
    """Read what the pipe holds; beyond MAX_PLAINTEXT keep reading (gpg
    must never block on a full pipe) but keep no more."""
    while True:
        try:
            more = os.read(fd, 65536)
        except BlockingIOError:
            return
        if not more:
            return
        if len(output) <= MAX_PLAINTEXT:
            output += more[:MAX_PLAINTEXT + 1 - len(output)]


def _private_dir():
    """A directory in memory for the named pipes, if the system has one
    (nothing is stored in them; this keeps their names off disks)."""
    for candidate in (os.environ.get('XDG_RUNTIME_DIR'), '/dev/shm'):
        if candidate and os.path.isdir(candidate) and \
                os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return None


def user_ids(keyid, gnupghome=None):
    """User ids of a key in the user's keyring (for --key-details)."""
    try:
        out = run(['--with-colons', '--list-keys', keyid], gnupghome=gnupghome)
    except errors.GpgError:
        return []
    return _colon_uids(out)


# --- keyring blobs (userkeys) -------------------------------------------------

class TemporaryHome:
    """A throwaway GNUPGHOME with a short /tmp path, optionally holding a
    keyring; removed (and its agent stopped) on exit."""

    def __init__(self, keyring=b''):
        self.keyring = keyring
        self.path = None

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix='obg', dir='/tmp')
        os.chmod(self.path, 0o700)
        if self.keyring:
            run(['--import'], self.keyring, gnupghome=self.path)
        return self

    def __exit__(self, *exc):
        if any(name.startswith('S.') for name in os.listdir(self.path)):
            subprocess.run(['gpgconf', '--homedir', self.path, '--kill',
                            'gpg-agent'], capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)

    def run(self, args, data=b''):
        return run(args, data, gnupghome=self.path)

    def primary_keys(self):
        """(key id, fingerprint) of every primary key, in keyring order."""
        out = self.run(['--with-colons', '--fixed-list-mode', '--list-keys'])
        return _colon_primaries(out)

    def export_all(self):
        return self.run(['--export']) if self.primary_keys() else b''


def _colon_primaries(out):
    found = []
    keyid = None
    for line in out.decode('utf-8', 'replace').splitlines():
        fields = line.split(':')
        if fields[0] == 'pub':
            keyid = fields[4]
        elif fields[0] == 'fpr' and keyid is not None:
            found.append((keyid, fields[9]))
            keyid = None
    return found


def _colon_uids(out):
    return [line.split(':')[9]
            for line in out.decode('utf-8', 'replace').splitlines()
            if line.startswith('uid:')]


def split_keyring(keyring):
    """The transferable public keys of a keyring blob, each as bytes
    (GnuPG trust packets dropped)."""
    keys = []
    pos = 0
    while pos < len(keyring):
        start = pos
        tag, _, pos = openpgp_packets.read_packet(keyring, pos)
        if tag == openpgp_packets.TRUST:
            continue
        if tag == PUBLIC_KEY or not keys:
            keys.append(bytearray())
        keys[-1] += keyring[start:pos]
    return [bytes(key) for key in keys]


def key_fingerprint(key):
    """Fingerprint (hex) of the primary key of a transferable key; v4
    keys are read directly, others are asked of gpg."""
    tag, body, _ = openpgp_packets.read_packet(key)
    if tag == PUBLIC_KEY and body[:1] == b'\x04':
        return openpgp_pubkey.v4_fingerprint(body).hex().upper()
    with TemporaryHome(key) as home:
        return home.primary_keys()[0][1]


def keyring_key_ids(keyring):
    """Primary key ids (16 hex digits) in a keyring blob, in order."""
    return [key_fingerprint(key)[-16:] for key in split_keyring(keyring)]


def keyring_user_ids(keyring, keyid):
    with TemporaryHome(keyring) as home:
        try:
            out = home.run(['--with-colons', '--list-keys', keyid])
        except errors.GpgError:
            return []
        return _colon_uids(out)


def encrypt_to_keyring(data, keyring):
    """Encrypt data to every primary key in the keyring blob (binary,
    RFC 4880 packets, no armour, trust not consulted).  One gpg process:
    each key is given as a --recipient-file, nothing is imported."""
    keys = split_keyring(keyring)
    if not keys:
        raise errors.GpgError(returncode=2,
                              stderr='no public keys to encrypt to')
    with TemporaryHome() as home:
        recipients = []
        for number, key in enumerate(keys):
            name = os.path.join(home.path, 'r%d' % number)
            with open(name, 'wb') as f:
                f.write(key)
            recipients += ['--recipient-file', name]
        encrypted = home.run(
            ['--no-textmode', '--trust-model', 'always', '--force-mdc',
             '--no-encrypt-to', '--no-default-recipient', '-e'] + recipients,
            data)
    if is_rfc4880_message(encrypted):
        return encrypted
    return _rewritten_without_aead(data, keyring, encrypted)


# GnuPG 2.3 and later write OCB (tag 20, or SEIPD version 2) when every
# recipient key advertises the AEAD feature, and no option of theirs turns
# that off (--rfc4880 does not; --force-mdc is a no-op since 2.2.8, kept for
# older gpg).  So we look at what gpg wrote, and if old gpg could not read
# it, we write the message ourselves for the (sub)keys gpg chose.
def is_rfc4880_message(message):
    """PKESK v3 packets followed by one SEIPD v1 packet (with MDC)?"""
    shapes = packet_shapes(message)
    return len(shapes) >= 2 and shapes[-1] == 'SEIPD v1' and \
        all(shape == 'PKESK v3' for shape in shapes[:-1])


def packet_shapes(message):
    """Names and versions of the packets of a message, for errors."""
    try:
        return [_packet_shape(tag, body)
                for tag, body in openpgp_packets.iter_packets(message)]
    except openpgp_packets.OpenPgpFormatError:
        return ['malformed data']


def _packet_shape(tag, body):
    names = {openpgp_packets.PKESK: 'PKESK', openpgp_packets.SEIPD: 'SEIPD',
             openpgp_packets.AEAD: 'AEAD (tag 20)'}
    name = names.get(tag, 'tag %d' % tag)
    if tag in (openpgp_packets.PKESK, openpgp_packets.SEIPD) and body:
        return '%s v%d' % (name, body[0])
    return name


def _rewritten_without_aead(data, keyring, encrypted):
    try:
        keyids = [bytes(body[1:9])
                  for tag, body in openpgp_packets.iter_packets(encrypted)
                  if tag == openpgp_packets.PKESK and body[:1] == b'\x03']
        if not keyids:
            raise openpgp_pubkey.UnsupportedRecipient(
                keyid='(none)', reason='no recipient key ids')
        return openpgp_pubkey.encrypt_to_public_keys(data, keyring, keyids)
    except (openpgp_pubkey.UnsupportedRecipient,
            openpgp_packets.OpenPgpFormatError) as e:
        raise UnreadableKeyFile(
            found=', '.join(packet_shapes(encrypted)) or 'nothing',
            reason=e.message())


def keyring_add(keyring, key_blob):
    """The keyring with the keys of key_blob added (or merged)."""
    with TemporaryHome(keyring) as home:
        home.run(['--import'], key_blob)
        return home.export_all()


def _matches(wanted, keyid, fingerprint):
    wanted = wanted.upper()
    if wanted.startswith('0X'):
        wanted = wanted[2:]
    return fingerprint.upper().endswith(wanted) and len(wanted) >= 8


def keyring_remove(keyring, wanted):
    """The keyring without key `wanted` (id or fingerprint); absent: same."""
    with TemporaryHome(keyring) as home:
        doomed = [fpr for keyid, fpr in home.primary_keys()
                  if _matches(wanted, keyid, fpr)]
        if not doomed:
            return keyring
        home.run(['--yes', '--delete-keys'] + doomed)
        return home.export_all()
