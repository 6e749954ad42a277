"""Which order of ciphers obnam asks OpenSSH to offer.

OpenSSH's default puts chacha20-poly1305 first, which is the faster
cipher on a processor without AES instructions.  With them, AES-GCM costs
a fraction of the CPU: a backup or restore over sftp:// to a server on
the same two-core machine measured about 10% faster, ssh and the server
both spending less.  So where the processor has AES instructions and
the user's ssh configuration leaves the ciphers at OpenSSH's default,
obnam asks for the same ciphers with AES-GCM first.  A Ciphers line of
the user's (anything but the default list) is left alone, and so is
every other machine.
"""

import functools

# OpenSSH's default client cipher lists, as `ssh -G` prints them: Debian
# 12's OpenSSH 9.2, and Debian 13's 10.0 (AES-GCM moved before AES-CTR,
# ChaCha20 still first).  Another list is left alone.
OPENSSH_DEFAULTS = (
    ('chacha20-poly1305@openssh.com', 'aes128-ctr', 'aes192-ctr',
     'aes256-ctr', 'aes128-gcm@openssh.com', 'aes256-gcm@openssh.com'),
    ('chacha20-poly1305@openssh.com', 'aes128-gcm@openssh.com',
     'aes256-gcm@openssh.com', 'aes128-ctr', 'aes192-ctr', 'aes256-ctr'),
)
AES_FIRST = ('aes128-gcm@openssh.com', 'aes256-gcm@openssh.com')
CPUINFO = '/proc/cpuinfo'


def preferred(configured, has_aes=None):
    """The cipher list to give ssh (-oCiphers=), or None to leave it to
    ssh.  configured: `ssh -G`'s ciphers value, or None where unknown."""
    names = tuple(configured.split(',')) if configured else None
    if names not in OPENSSH_DEFAULTS:
        return None
    if not (cpu_has_aes() if has_aes is None else has_aes):
        return None
    return ','.join(AES_FIRST + tuple(
        name for name in names if name not in AES_FIRST))


@functools.lru_cache(maxsize=None)
def cpu_has_aes():
    """Whether the processor has AES instructions (Linux: the aes flag of
    x86 or arm64 in /proc/cpuinfo); False where that cannot be read."""
    try:
        with open(CPUINFO, 'rb') as f:
            text = f.read(1 << 20)
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(b':')
        if key.strip() in (b'flags', b'Features') and \
                b'aes' in value.split():
            return True
    return False
