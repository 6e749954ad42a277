"""verify: compare backed-up data with live data (§5.9, §9)."""

from obnamlib import plugin


class VerifyPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.integer(['verify-randomly'], 'verify N files '
                                  'chosen at random (0 = all)',
                                  metavar='N')
        self.app.accept_unimplemented('verify-randomly')
        self.app.add_subcommand('verify', self.verify,
                                arg_synopsis='[DIRECTORY]...')

    def verify(self, args):
        """Verify that live data and backed up data match"""
        self.not_implemented('verify')
