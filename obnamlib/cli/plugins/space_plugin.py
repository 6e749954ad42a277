"""space: how much room the client's generations take (issue #28).

Per generation: its file data, the stored bytes of the chunk files it
uses, and of those only it uses (what `forget` of just that generation
frees); then the repository's chunk files and the file data of every
generation of every client.  Read-only: no locks, like the show
commands.  The numbers are obnamlib.engine.space's; the text and JSON
are obnamlib.cli.space_output's.
"""

from obnamlib.cli import json_output, plugin, space_output
from obnamlib.engine import space


class SpacePlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.add_subcommand('space', self.space)

    def space(self, args):
        """Show how much space each generation takes and frees"""
        with self.app.open_repository() as repo:
            self.require_client(repo)
            report = space.measure(repo, self.client_name)
        if json_output.wanted(self.app.settings):
            json_output.write(self.app.ui.output,
                              space_output.space_document(report))
            return
        for line in space_output.space_lines(report):
            self.app.ui.output.write(line + '\n')
