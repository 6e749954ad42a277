"""_lock: take repository locks and keep them (a test aid, cli.md §5.18).

Takes the client-list lock, this client's lock if it is in the client
list, and the chunk-index locks, then exits without releasing them: the
state a crashed backup leaves behind (locks naming a process that is
gone, which the next run on this host breaks), for testing lock handling
and force-lock.
"""

from obnamlib.cli import plugin
from obnamlib.repo import factory as repo_factory


class LockPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.add_subcommand('_lock', self.lock, hidden=True)

    def lock(self, args):
        """Add locks to the repository (for testing only)"""
        repo = repo_factory.open_repository(self.app.settings)
        client_name = self.app.settings['client-name']
        repo.lock_client_list()
        if client_name in repo.get_client_names():
            repo.lock_client(client_name)
        repo.lock_chunk_indexes()
        # Deliberately not closed: the locks must stay.
