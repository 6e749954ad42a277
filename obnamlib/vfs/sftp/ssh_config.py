"""What the ssh configuration says about a host: the name and port to
connect to, the user and the host-key policy (and, for paramiko, the
identity files).

The OpenSSH client answers for itself (`ssh -G`): the rules it follows
when it connects (Include, Match, %-tokens, /etc/ssh/ssh_config, its
defaults) all apply, and paramiko need not be loaded.  --pure-paramiko
never runs ssh, so paramiko reads ~/.ssh/config; so it does when ssh
cannot answer (not installed, too old for -G, a --ssh-command that
refuses it).  Both answers have the form of paramiko's SSHConfig.lookup:
lower-case keys, string values.
"""

import logging
import subprocess

log = logging.getLogger(__name__)

# ssh -G does not connect; a --ssh-command wrapper still might.
OPENSSH_TIMEOUT = 30
# ssh -G's words for what a config file says as yes and no.
OPENSSH_POLICY_WORDS = {'true': 'yes', 'false': 'no'}
# Its identity files are left out: -G lists OpenSSH's default files
# too, and only the paramiko transport, which reads its own, uses them.
OPENSSH_FIELDS = ('hostname', 'port', 'user', 'stricthostkeychecking',
                  'ciphers')


def lookup(alias, port=None, user=None, ssh_command='ssh',
           pure_paramiko=False):
    """The configuration for `alias` (a dict; empty if none can be read).
    `port` and `user` are the URL's, which override the configuration."""
    if not pure_paramiko:
        found = from_openssh(ssh_command, alias, port, user)
        if found is not None:
            return found
    return from_paramiko(alias)


def from_openssh(ssh_command, alias, port=None, user=None):
    """What `ssh -G` says about `alias`, or None if it cannot say."""
    argv = [ssh_command, '-G']
    if port:
        argv += ['-p', str(port)]
    if user:
        argv += ['-l', user]
    argv.append(alias)
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=OPENSSH_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        log.debug('Cannot run %r: %s', argv, e)
        return None
    if done.returncode != 0:
        log.debug('%r failed: %s', argv, done.stderr.decode('utf-8',
                                                            'replace'))
        return None
    return parse_openssh(done.stdout.decode('utf-8', 'replace'), alias)


def parse_openssh(text, alias):
    """The fields obnam uses from `ssh -G` output ("keyword value" lines);
    None if it is not that (e.g. a wrapper that printed something else)."""
    found = {}
    for line in text.splitlines():
        keyword, _, value = line.strip().partition(' ')
        if keyword in OPENSSH_FIELDS:
            found[keyword] = value.strip()
    if 'hostname' not in found or not found.get('port', '').isdigit():
        return None
    if found['hostname'] == alias.lower():
        found['hostname'] = alias   # ssh lowercases; keep the URL's spelling
    policy = found.get('stricthostkeychecking')
    if policy is not None:
        found['stricthostkeychecking'] = OPENSSH_POLICY_WORDS.get(policy,
                                                                  policy)
    return found


def from_paramiko(alias):
    """~/.ssh/config as paramiko reads it; empty without paramiko."""
    try:
        from obnamlib.vfs.sftp import ssh_paramiko
    except ImportError as e:
        log.debug('Cannot read the ssh configuration without paramiko: %s',
                  e)
        return {}
    return ssh_paramiko.config_for(alias)
