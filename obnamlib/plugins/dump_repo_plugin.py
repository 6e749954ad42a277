"""dump-repo: repository data structures as JSON, for developers (§5.17)."""

from obnamlib import plugin


class DumpRepoPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.boolean(
            ['dump-repo-file-metadata'], 'dump metadata about files too')
        self.app.accept_unimplemented('dump-repo-file-metadata')
        self.app.add_subcommand('dump-repo', self.dump_repo)

    def dump_repo(self, args):
        """Dump (some) data structures from a repository"""
        self.not_implemented('dump-repo')
