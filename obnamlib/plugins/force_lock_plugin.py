"""force-lock: remove every lock file in the repository (§5.12)."""

from obnamlib import plugin


class ForceLockPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.add_subcommand('force-lock', self.force_lock)

    def force_lock(self, args):
        """Force a locked repository to be open"""
        self.not_implemented('force-lock')
