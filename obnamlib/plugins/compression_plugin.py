"""Compression of repository files on writing (cli.md §3.11).

Reading needs no setting: every stored file is tagged.  repo_factory reads
`compress-with` when it builds the storage filters; this plugin only
registers the setting and warns about the deprecated `gzip` name.
"""

from obnamlib import plugin


class CompressionPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.choice(
            ['compress-with'], ['none', 'deflate', 'gzip'],
            'compress repository files with PROGRAM (none, deflate; gzip '
            'is a deprecated name for deflate)', metavar='PROGRAM')
