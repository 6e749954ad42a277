"""SSH/SFTP access settings (§3.12); the transport is obnamlib/vfs_sftp.py."""

from obnamlib import plugin

GROUP = 'SSH/SFTP'
DEVEL_GROUP = 'Development of Obnam itself'


class SftpPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string(['ssh-key'], 'use FILENAME as the ssh RSA private key for '
                 'sftp access', metavar='FILENAME', group=GROUP)
        s.choice(['ssh-host-keys-check'], ['ssh-config', 'yes', 'no', 'ask'],
                 'if "no", accept any ssh host key; if "ask", ask the user; '
                 'if "yes", the host key must be known; "ssh-config" lets '
                 'the ssh configuration decide', metavar='VALUE', group=GROUP)
        s.boolean(['strict-ssh-host-keys'], 'deprecated; use '
                  '--ssh-host-keys-check=yes', group=GROUP)
        s.string(['ssh-known-hosts'], 'filename of the user\'s known hosts '
                 'file', metavar='FILENAME', group=GROUP,
                 default=_expanded('~/.ssh/known_hosts'))
        s.string(['ssh-command'], 'alternative executable to be used '
                 'instead of "ssh" (no arguments)', metavar='EXECUTABLE',
                 group=GROUP)
        s.boolean(['pure-paramiko'], 'do not use the openssh client, only '
                  'paramiko', group=GROUP)
        s.integer(['sftp-delay'], 'add an artificial delay of N '
                  'milliseconds to each SFTP round trip (testing)',
                  metavar='N', group=DEVEL_GROUP)


def _expanded(path):
    import os
    return os.path.expanduser(path)
