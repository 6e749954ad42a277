"""_lock: take repository locks and keep them (a test aid, §5.18)."""

from obnamlib import plugin


class LockPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.add_subcommand('_lock', self.lock, hidden=True)

    def lock(self, args):
        """Add locks to the repository (for testing only)"""
        self.not_implemented('_lock')
