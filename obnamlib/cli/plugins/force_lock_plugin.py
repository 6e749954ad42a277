"""force-lock: remove every lock file in the repository (cli.md §5.12).

A lock whose holder on this host is gone heals by itself (lockmgr); the
ones nobody can judge from here stay: held on another host, or written
empty by Obnam 1.x.  This breaks all of them (client list, every client,
chunk indexes), whoever holds them, whatever --client-name says.
"""

from obnamlib import errors
from obnamlib.cli import plugin
from obnamlib.repo import factory as repo_factory


class RepositoryAccessError(errors.ObnamError):
    code = 'RBF6DDX'
    msg = 'Repository does not exist or cannot be accessed: {error}'


class ForceLockPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.add_subcommand('force-lock', self.force_lock)

    def force_lock(self, args):
        """Force a locked repository to be open"""
        repo = _open(self.app.settings)
        try:
            repo.force_locks()
        finally:
            repo.close()


def _open(settings):
    """The repository, or RBF6DDX if its directory cannot be reached."""
    try:
        return repo_factory.open_repository(settings)
    except (errors.ObnamSystemError, errors.ObnamIOError) as e:
        raise RepositoryAccessError(error='%s: %s' % (
            e.kwargs.get('filename'), e.kwargs.get('strerror')))
    except OSError as e:
        raise RepositoryAccessError(error=str(e))
