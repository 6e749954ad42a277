"""SSH/SFTP access settings (cli.md §3.12).

The settings are read where a connection is opened (obnamlib/vfs/sftp/ssh_auth.py,
through obnamlib.vfs.factory.open_vfs); this plugin only declares them.  Host keys
are never trusted silently: an unknown host is refused unless
--ssh-host-keys-check=no, and a changed key is always refused.
"""

import os

from obnamlib.cli import plugin

GROUP = 'SSH/SFTP'
DEVEL_GROUP = 'Development of Obnam itself'


class SftpPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string(['ssh-key'], 'use FILENAME as the ssh private key for '
                 'sftp access (besides ssh-agent and the default keys)',
                 metavar='FILENAME', group=GROUP)
        s.choice(['ssh-host-keys-check'], ['ssh-config', 'yes', 'no', 'ask'],
                 'checking of the server\'s host key against the known '
                 'hosts file: "ssh-config" lets the ssh configuration '
                 'decide (StrictHostKeyChecking, by default "ask"); "yes" '
                 'refuses unknown hosts; "ask" lets ssh ask on a terminal '
                 'and otherwise refuses (paramiko never asks); "no" accepts '
                 'an unknown host (ssh records it). A changed host key is '
                 'always refused', metavar='VALUE', group=GROUP)
        s.boolean(['strict-ssh-host-keys'], 'deprecated; use '
                  '--ssh-host-keys-check=yes', group=GROUP)
        s.string(['ssh-known-hosts'], 'filename of the user\'s known hosts '
                 'file', metavar='FILENAME', group=GROUP,
                 default=os.path.expanduser('~/.ssh/known_hosts'))
        s.string(['ssh-command'], 'alternative executable to be used '
                 'instead of "ssh" (no arguments)', metavar='EXECUTABLE',
                 group=GROUP)
        s.boolean(['pure-paramiko'], 'do not use the openssh client, only '
                  'paramiko', group=GROUP)
        s.integer(['sftp-delay'], 'add an artificial delay of N '
                  'milliseconds to each SFTP round trip (testing)',
                  metavar='N', group=DEVEL_GROUP)
