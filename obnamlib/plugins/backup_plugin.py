"""backup: store live data in the repository (cli.md §5.1, §6)."""

from obnamlib import plugin

GROUP = 'Backing up'
PERF_GROUP = 'Performance tweaking'
DEVEL_GROUP = 'Development of Obnam itself'


class BackupPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string_list(['root'], 'what to back up (added to the command '
                      'line arguments)', metavar='URL', group=GROUP)
        s.bytesize(['checkpoint'], 'make a checkpoint after SIZE bytes '
                   'written to the repository', default=1024 ** 3,
                   group=GROUP)
        s.choice(['deduplicate'], ['fatalist', 'never', 'verify'],
                 'find duplicate data in the repository: fatalist trusts '
                 'checksums, never stores every chunk, verify compares '
                 'contents', metavar='MODE', group=GROUP)
        s.boolean(['leave-checkpoints'], 'keep the checkpoint generations '
                  'of this run', group=GROUP)
        s.boolean(['small-files-in-btree'], 'deprecated; has no effect',
                  group=GROUP)
        s.integer(['chunkids-per-group'], 'accepted for compatibility; '
                  'unused', default=1024, group=PERF_GROUP)
        s.string_list(['testing-fail-matching'], 'simulate a failure for '
                      'files matching REGEXP (testing)', metavar='REGEXP',
                      group=DEVEL_GROUP)
        self.app.accept_unimplemented(
            'root', 'checkpoint', 'deduplicate', 'leave-checkpoints',
            'testing-fail-matching')
        self.app.add_subcommand('backup', self.backup,
                                arg_synopsis='[DIRECTORY|URL]...')

    def backup(self, args):
        """Backup data to repository"""
        self.not_implemented('backup')
