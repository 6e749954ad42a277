"""mount: a read-only FUSE view of the generations (§5.13)."""

from obnamlib import plugin

GROUP = 'Mounting with FUSE'


class FusePlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.string_list(
            ['fuse-opt'], 'options to pass directly to FUSE', metavar='FUSE',
            group=GROUP)
        self.app.accept_unimplemented('fuse-opt')
        self.app.add_subcommand('mount', self.mount, arg_synopsis='[ROOT]')

    def mount(self, args):
        """Mount backup repository as a user-space filesystem"""
        self.not_implemented('mount')
