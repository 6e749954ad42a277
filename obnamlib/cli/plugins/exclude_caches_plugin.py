"""Skipping directories tagged with CACHEDIR.TAG (§3.4, §7)."""

from obnamlib.cli import plugin


class ExcludeCachesPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.boolean(
            ['exclude-caches'], 'exclude directories (and their subdirs) '
            'that contain a CACHEDIR.TAG file', group='Backing up')
