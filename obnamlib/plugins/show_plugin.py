"""Commands that show what a repository holds (§5.3-§5.8, §5.14)."""

from obnamlib import plugin


class ShowPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string(['warn-age'], 'for nagios-last-backup-age: warn if the '
                 'newest backup is older than AGE (N[smhdw], default unit '
                 'hours)', default='27h', metavar='AGE')
        s.string(['critical-age'], 'for nagios-last-backup-age: critical '
                 'if the newest backup is older than AGE', default='27h',
                 metavar='AGE')
        self.app.accept_unimplemented('warn-age', 'critical-age')
        add = self.app.add_subcommand
        add('clients', self.clients)
        add('generations', self.generations)
        add('genids', self.genids)
        add('ls', self.ls, arg_synopsis='[FILE]...')
        add('kdirstat', self.kdirstat, arg_synopsis='[FILE]...')
        add('diff', self.diff, arg_synopsis='[GENERATION1] GENERATION2')
        add('nagios-last-backup-age', self.nagios_last_backup_age)

    def clients(self, args):
        """List clients using the repository"""
        self.not_implemented('clients')

    def generations(self, args):
        """List backup generations for client"""
        self.not_implemented('generations')

    def genids(self, args):
        """List generation ids for client"""
        self.not_implemented('genids')

    def ls(self, args):
        """List contents of a generation"""
        self.not_implemented('ls')

    def kdirstat(self, args):
        """List contents of a generation in kdirstat cache format"""
        self.not_implemented('kdirstat')

    def diff(self, args):
        """Show difference between two generations"""
        self.not_implemented('diff')

    def nagios_last_backup_age(self, args):
        """Check if the most recent generation is recent enough"""
        self.not_implemented('nagios-last-backup-age')
