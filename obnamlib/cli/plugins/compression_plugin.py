"""Compression of repository files on writing (cli.md §3.11).

Reading needs no setting: every stored file is tagged.  repo_factory reads
`compress-with` when it builds the storage filters (`gzip` is taken as
`deflate`); this plugin registers the setting and says, once per run,
that the `gzip` name is deprecated.
"""

from obnamlib.cli import plugin

GZIP_NOTICE = ('--compress-with=gzip is deprecated.  '
               'Use --compress-with=deflate instead')


class CompressionPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.choice(
            ['compress-with'], ['none', 'deflate', 'gzip'],
            'compress repository files with PROGRAM (none, deflate; gzip '
            'is a deprecated name for deflate)', metavar='PROGRAM')

    def settings_ready(self):
        if self.app.settings['compress-with'] == 'gzip':
            self.app.ui.notify(GZIP_NOTICE)
