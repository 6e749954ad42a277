"""Staying on the backup root's file system (§3.4, §7)."""

from obnamlib.cli import plugin


class OneFileSystemPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.boolean(
            ['one-file-system'], 'exclude directories (and their subdirs) '
            'that are in a different filesystem', group='Backing up')
