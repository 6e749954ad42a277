"""Exclusion by regular expression (§3.4, §7); see pathname_excluder.py."""

from obnamlib.cli import plugin

GROUP = 'Backing up'


class ExcludePathnamesPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string_list(['exclude'], 'regular expression for pathnames to '
                      'exclude from backup (can be used multiple times)',
                      metavar='REGEXP', group=GROUP)
        s.string_list(['exclude-from'], 'read exclude patterns from FILE',
                      metavar='FILE', group=GROUP)
        s.string_list(['include'], 'regular expression for pathnames to '
                      'include even when they match an exclude pattern',
                      metavar='REGEXP', group=GROUP)
