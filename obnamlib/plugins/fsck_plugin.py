"""fsck: check the repository's consistency (§5.11, §10)."""

from obnamlib import plugin

GROUP = 'Integrity checking (fsck)'

BOOLEANS = (
    ('fsck-fix', 'fix problems found (implies --fsck-rm-unused)'),
    ('fsck-rm-unused', 'remove chunks that no generation uses'),
    ('fsck-ignore-chunks', 'do not check file data chunks'),
    ('fsck-last-generation-only', 'check only the newest generation of '
     'each client'),
    ('fsck-skip-generations', 'do not check any generations'),
    ('fsck-skip-dirs', 'do not check the directories of generations'),
    ('fsck-skip-files', 'do not check files in generations'),
    ('fsck-skip-per-client-b-trees', 'do not check the B-trees of clients'),
    ('fsck-skip-shared-b-trees', 'do not check the shared B-trees'),
    ('fsck-skip-checksums', 'do not read chunk data to check checksums'),
)


class FsckPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        for name, help_text in BOOLEANS:
            s.boolean([name], help_text, group=GROUP)
        s.string_list(['fsck-ignore-client'], 'do not check the client '
                      'NAME', metavar='NAME', group=GROUP)
        self.app.accept_unimplemented('fsck-ignore-client',
                                      *[name for name, _ in BOOLEANS])
        self.app.add_subcommand('fsck', self.fsck)

    def fsck(self, args):
        """Verify internal consistency of backup repository"""
        self.not_implemented('fsck')
