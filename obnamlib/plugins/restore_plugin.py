"""restore: copy a generation's files out of the repository (§5.2, §8)."""

from obnamlib import plugin


class RestorePlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string(['to'], 'where to restore or FUSE mount; for restores, '
                 'must be empty or must not exist', metavar='DIR')
        s.string_list(['generation'], 'which generation to restore or '
                      'list', default=['latest'], metavar='GENERATION')
        s.boolean(['always-restore-setuid'], 'restore setuid/setgid bits '
                  'even when not root and not the owner')
        self.app.accept_unimplemented('to', 'always-restore-setuid')
        self.app.add_subcommand('restore', self.restore,
                                arg_synopsis='[DIRECTORY]...')

    def restore(self, args):
        """Restore some or all files from a generation"""
        self.not_implemented('restore')
