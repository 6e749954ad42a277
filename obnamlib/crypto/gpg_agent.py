"""Decrypting toplevel `key` files through the user's gpg-agent (format-6.md
§4), talking to its socket directly instead of starting gpg.

Why: a gpg process costs ~8 ms of CPU, most of it starting up, and every
encrypted command needs the keys of several toplevels before it can do
anything.  The secret key never leaves the agent: the agent does the
public-key step (PKDECRYPT), and we do what gpg would do around it (RFC
4880 §5.1, RFC 6637 §8 for ECDH): build the request, unwrap the session
key, decrypt the message.

Only what the agent does without asking anyone is done here: the (sub)key
must be stored unprotected or its passphrase cached (KEYINFO), and be RSA
or ECDH on a curve gpg makes keys on, with gpg's default KDF parameters.
Anything else -- a smartcard, a passphrase to ask for, another
algorithm, an unexpected reply, a session key that does not unwrap --
gives None, and the caller runs gpg, which handles every case and words
every error.
"""

import os
import socket
import subprocess

from obnamlib.crypto import (
    cfb, gpg, openpgp, openpgp_algorithms, openpgp_packets, openpgp_pubkey)
from obnamlib.crypto.openpgp_pubkey import ECDH, RSA_ALGORITHMS
from obnamlib.crypto.openpgp_packets import PKESK

# An agent that does not answer within this many seconds is not used.
TIMEOUT = 20

# gpg's curve name -> (OID, bytes of a public point, bytes of its x,
# KDF hash id, key-wrap cipher id): the KDF parameters gpg gives a new
# ECDH key on that curve.
CURVES = {
    'cv25519': (bytes.fromhex('2b060104019755010501'), 33, 32, 8, 7),
    'nistp256': (bytes.fromhex('2a8648ce3d030107'), 65, 32, 8, 7),
    'nistp384': (bytes.fromhex('2b81040022'), 97, 48, 9, 8),
    'nistp521': (bytes.fromhex('2b81040023'), 133, 66, 10, 9),
}


class NotHere(Exception):
    """This key file is not for this module: let gpg do it."""


class SecretSubkey:
    """A secret (sub)key as `gpg -K --with-colons --with-keygrip` lists
    it."""

    def __init__(self, keyid, algorithm, curve, fingerprint, keygrip):
        self.keyid = keyid              # 8 bytes
        self.algorithm = algorithm
        self.curve = curve
        self.fingerprint = fingerprint  # 20 bytes (v4)
        self.keygrip = keygrip          # 40 hex digits


def parse_secret_listing(out):
    """keyid (8 bytes) -> SecretSubkey for every key and subkey of a
    colon listing whose secret half is in the keyring ('+')."""
    found = {}
    current = None
    for line in out.decode('utf-8', 'replace').splitlines():
        fields = line.split(':')
        if fields[0] in ('sec', 'ssb'):
            current = None
            if len(fields) > 16 and fields[14] == '+' and \
                    fields[3].isdigit() and len(fields[4]) == 16:
                current = {'keyid': bytes.fromhex(fields[4]),
                           'algorithm': int(fields[3]),
                           'curve': fields[16]}
        elif current is not None and fields[0] == 'fpr':
            current['fingerprint'] = fields[9]
        elif current is not None and fields[0] == 'grp':
            fingerprint = current.pop('fingerprint', '')
            if len(fingerprint) == 40 and len(fields[9]) == 40:
                found[current['keyid']] = SecretSubkey(
                    fingerprint=bytes.fromhex(fingerprint),
                    keygrip=fields[9], **current)
            current = None
    return found


def socket_path(gnupghome=None):
    """The agent's socket: in the GnuPG home itself unless the system has
    a runtime directory for it, where gpgconf knows it; None if there is
    no socket (no agent running: gpg will start one)."""
    home = gpg.home_dir(gnupghome)
    path = os.path.join(home, 'S.gpg-agent')
    if not os.path.exists(path):
        path = _gpgconf_socket(home)
    return path if path and os.path.exists(path) else None


def _gpgconf_socket(home):
    try:
        out = subprocess.run(
            ['gpgconf', '--homedir', home, '--list-dirs', 'agent-socket'],
            stdin=subprocess.DEVNULL, capture_output=True, timeout=TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    path = out.stdout.decode('utf-8', 'replace').strip()
    return path if out.returncode == 0 and path.startswith('/') else None


def decrypt_many(messages, subkeys, gnupghome=None, each=None):
    """The plaintext of each message that the agent could help decrypt
    (see the module's docstring), else None in its place.  each(i,
    plaintext), if given, is called as soon as message i is decrypted:
    the caller may be waiting for the first while the rest are done."""
    plains = [None] * len(messages)
    path = socket_path(gnupghome)
    if not subkeys or path is None:
        return plains
    with gpg.home_turn(gnupghome):
        _decrypt_through(path, messages, subkeys, plains, each)
    return plains


def _decrypt_through(path, messages, subkeys, plains, each=None):
    """Fill in plains with what the agent at path decrypts."""
    try:
        agent = Agent(path)
    except (OSError, AgentError):
        return
    try:
        for i, message in enumerate(messages):
            try:
                plain = decrypt(agent, message, subkeys)
            except (NotHere, openpgp.DecryptionFailed,
                    openpgp_packets.OpenPgpFormatError):
                continue    # not for the agent, or bad: gpg says why
            if len(plain) <= gpg.MAX_PLAINTEXT:
                plains[i] = plain
                if each is not None:
                    each(i, plain)
    except Exception:   # a reply or the connection went wrong, so the
        pass            # rest is gpg's too (which words any error)
    finally:
        agent.close()


def decrypt(agent, message, subkeys):
    """The plaintext of a public-key encrypted message (PKESK v3 packets,
    then SEIPD, or GnuPG 2.3+'s AEAD packet) for one of subkeys; NotHere
    if none fits."""
    session = None
    for tag, body in openpgp_packets.iter_packets(message):
        if tag == PKESK and session is None:
            session = _session_key(agent, body, subkeys)
        elif tag in openpgp.INTEGRITY_PROTECTED:
            if session is None:
                raise NotHere()
            cipher_id, key = session
            return bytes(openpgp.decrypt_packet(tag, body, cipher_id, key))
        elif tag != openpgp_packets.MARKER and tag != PKESK:
            raise NotHere()
    raise NotHere()


def _session_key(agent, body, subkeys):
    """(cipher id, session key) from a PKESK packet body, or None if it
    is for none of subkeys."""
    if len(body) < 10 or body[0] != 3:
        return None
    subkey = subkeys.get(bytes(body[1:9]))
    if subkey is None or subkey.algorithm != body[9]:
        return None
    if not agent.can_use(subkey.keygrip):
        raise NotHere()
    fields = bytes(body[10:])
    if subkey.algorithm in RSA_ALGORITHMS:
        block = _rsa_block(agent, subkey, fields)
    elif subkey.algorithm == ECDH and subkey.curve in CURVES:
        block = _ecdh_block(agent, subkey, fields)
    else:
        raise NotHere()
    return _checked_session_key(block)


def _rsa_block(agent, subkey, fields):
    value, _ = openpgp_pubkey.read_mpi(fields, 0)
    plain, padding = agent.pkdecrypt(
        subkey.keygrip, sexp(b'enc-val', (b'rsa', (b'a', _signed(value)))))
    if padding == 0:
        return plain
    # PKCS #1 v1.5: [0] 2 nonzero random bytes 0 block (the leading zero
    # is lost when the agent hands back the number).
    pos = 1 if plain[:1] == b'\0' else 0
    if plain[pos:pos + 1] != b'\x02':
        raise NotHere()
    end = plain.find(b'\0', pos + 1)
    if end < 0:
        raise NotHere()
    return plain[end + 1:]


def _ecdh_block(agent, subkey, fields):
    oid, point_bytes, x_bytes, hash_id, kek_id = CURVES[subkey.curve]
    point, pos = openpgp_pubkey.read_mpi(fields, 0)
    size = fields[pos]
    wrapped = fields[pos + 1:pos + 1 + size]
    if len(wrapped) != size or size % 8:
        raise NotHere()
    shared, _ = agent.pkdecrypt(subkey.keygrip, sexp(
        b'enc-val', (b'ecdh', (b's', bytes([size]) + wrapped),
                     (b'e', _signed(point)))))
    if len(shared) == x_bytes:
        x = shared
    elif len(shared) == point_bytes:
        x = shared[1:1 + x_bytes]       # the point's prefix byte dropped
    else:
        raise NotHere()
    kek = openpgp_pubkey.ecdh_kek(x, oid, hash_id, kek_id, subkey.fingerprint)
    block = aes_key_unwrap(kek, wrapped)
    pad = block[-1]
    if not 1 <= pad <= 8 or block[-pad:] != bytes([pad]) * pad:
        raise NotHere()
    return block[:-pad]


def _checked_session_key(block):
    """(cipher id, key) of: cipher id, key, 16-bit sum of the key."""
    if len(block) < 4:
        raise NotHere()
    cipher_id, key = block[0], block[1:-2]
    if cipher_id not in openpgp_algorithms.CIPHERS or \
            len(key) != openpgp_algorithms.key_length(cipher_id) or \
            sum(key) & 0xffff != int.from_bytes(block[-2:], 'big'):
        raise NotHere()
    return cipher_id, key


def _signed(value):
    """An unsigned number as libgcrypt reads one in an S-expression (two's
    complement: a leading zero byte where the top bit is set)."""
    return b'\0' + value if value[:1] >= b'\x80' else value


def aes_key_unwrap(kek, wrapped):
    """RFC 3394 key unwrap (the integrity check failing is NotHere)."""
    count = len(wrapped) // 8 - 1
    if count < 2 or len(wrapped) % 8:
        raise NotHere()
    check = int.from_bytes(wrapped[:8], 'big')
    blocks = [wrapped[8 * i:8 * i + 8] for i in range(1, count + 1)]
    decrypt = cfb.aes_block_decryptor(kek)
    for j in range(5, -1, -1):
        for i in range(count, 0, -1):
            step = (check ^ (count * j + i)).to_bytes(8, 'big')
            out = decrypt(step + blocks[i - 1])
            check = int.from_bytes(out[:8], 'big')
            blocks[i - 1] = out[8:]
    if check != 0xa6a6a6a6a6a6a6a6:
        raise NotHere()
    return b''.join(blocks)


def sexp(*items):
    """A canonical S-expression: bytes atoms, tuples lists."""
    out = b'('
    for item in items:
        out += sexp(*item) if isinstance(item, tuple) else \
            b'%d:%s' % (len(item), item)
    return out + b')'


class AgentError(Exception):
    pass


class Agent:
    """A connection to gpg-agent speaking its Assuan protocol."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.lines = None
        try:
            self.sock.connect(path)
            self.lines = self.sock.makefile('rb')
            if not self._line().startswith(b'OK'):
                raise AgentError('no greeting')
            # never a passphrase dialog: a key that needs one is gpg's
            self.transact(b'OPTION pinentry-mode=cancel')
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.lines is not None:
            self.lines.close()
        self.sock.close()

    def can_use(self, keygrip):
        """Whether the agent holds this key unprotected, or has its
        passphrase cached: then it asks nobody."""
        _, status = self.transact(b'KEYINFO ' + keygrip.encode('ascii'))
        for line in status:
            fields = line.split()
            if len(fields) >= 7 and fields[0] == b'KEYINFO' and \
                    fields[2] == b'D':
                return fields[6] == b'C' or fields[5] == b'1'
        return False

    def pkdecrypt(self, keygrip, ciphertext):
        """(value, padding status or None) of PKDECRYPT with this key."""
        self.transact(b'SETKEY ' + keygrip.encode('ascii'))
        data, status = self.transact(b'PKDECRYPT', {b'CIPHERTEXT': ciphertext})
        padding = None
        for line in status:
            if line.startswith(b'PADDING '):
                padding = int(line.split()[1])
        data = data.rstrip(b'\0')   # the agent may end it with a NUL
        if not data.startswith(b'(5:value') or not data.endswith(b')'):
            raise AgentError('unexpected PKDECRYPT reply')
        size, rest = data[8:-1].split(b':', 1)
        if not size.isdigit() or int(size) != len(rest):
            raise AgentError('unexpected PKDECRYPT reply')
        return rest, padding

    def transact(self, command, inquiries=None):
        """(data, status lines) of one command; AgentError on ERR."""
        self.sock.sendall(command + b'\n')
        data = bytearray()
        status = []
        while True:
            line = self._line()
            if line.startswith(b'OK'):
                return bytes(data), status
            if line.startswith(b'ERR'):
                raise AgentError(line.decode('ascii', 'replace'))
            if line.startswith(b'D '):
                data += _unescape(line[2:])
            elif line.startswith(b'S '):
                status.append(line[2:])
            elif line.startswith(b'INQUIRE '):
                self._answer(line[8:].split(b' ')[0], inquiries or {})
            elif not line.startswith(b'#'):
                raise AgentError('unexpected line from gpg-agent')

    def _answer(self, keyword, inquiries):
        """Send what the agent asks for; cancel (CAN) anything else, so
        that the command ends with ERR."""
        answer = inquiries.get(keyword)
        if answer is None:
            self.sock.sendall(b'CAN\n')
            return
        for start in range(0, len(answer), 300):
            self.sock.sendall(
                b'D ' + _escape(answer[start:start + 300]) + b'\n')
        self.sock.sendall(b'END\n')

    def _line(self):
        line = self.lines.readline(4096)
        if not line.endswith(b'\n'):
            raise AgentError('gpg-agent closed the connection')
        return line[:-1]


def _escape(data):
    return data.replace(b'%', b'%25').replace(b'\r', b'%0D').replace(
        b'\n', b'%0A')


def _unescape(data):
    if b'%' not in data:
        return data
    parts = data.split(b'%')
    out = bytearray(parts[0])
    for part in parts[1:]:
        out.append(int(part[:2], 16))
        out += part[2:]
    return bytes(out)
