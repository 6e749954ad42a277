"""forget: remove generations by id or by policy (§5.10, §11)."""

from obnamlib import plugin


class ForgetPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.string(['keep'], 'policy for what generations to '
                                 'keep when forgetting', metavar='POLICY')
        self.app.accept_unimplemented('keep')
        self.app.add_subcommand('forget', self.forget,
                                arg_synopsis='[GENERATION]...')

    def forget(self, args):
        """Forget (remove) specified backup generations"""
        self.not_implemented('forget')
