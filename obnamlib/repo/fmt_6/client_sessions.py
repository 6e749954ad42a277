"""The client forests one format-6 repository object has open, and the
generations in them (format-6.md §7.3)."""

from obnamlib import errors
from obnamlib.repo.fmt_6.client_forest import ClientForest
from obnamlib.repo.fmt_6.gen_id import client_name_of


class ClientSessions:
    """Client name -> its open ClientForest (read-only or locked for
    changes).  A generation id that names no client (a plain number)
    belongs to the client opened last.

    The generation asked for last is kept (`remembered`): a restore asks
    for the same one several times per file.  It is forgotten whenever a
    forest is opened anew, closed or about to change (writable), which
    is the only way the trees of a forest change."""

    def __init__(self, fs, node_size, client_list):
        self.fs = fs
        self.node_size = node_size
        self.client_list = client_list
        self.forests = {}
        self.last_client = None
        self.remembered = None    # (GenId, its client, GenerationTree)

    def client_id(self, client_name):
        client_id = self.client_list.find(client_name)
        if client_id is None:
            raise errors.RepositoryClientDoesNotExist(client_name=client_name)
        return client_id

    def open(self, client_name, writable=False):
        forest = self.forests.get(client_name)
        if forest is None or (writable and not forest.writable):
            client_id = self.client_id(client_name)
            forest = ClientForest(self.fs, client_id, self.node_size,
                                  allow_writes=writable)
            self.forests[client_name] = forest
            self.remembered = None
        self.last_client = client_name
        return forest

    def writable(self, client_name):
        """The locked client's forest, marked as about to change."""
        forest = self.forests.get(client_name)
        if forest is None or not forest.writable:
            raise errors.RepositoryClientNotLocked(client_name=client_name)
        forest.changed = True
        self.remembered = None
        return forest

    def writable_names(self):
        return [name for name, forest in list(self.forests.items())
                if forest.writable]

    def any_writable(self):
        return any(forest.writable for forest in self.forests.values())

    def close(self, client_name):
        """Forget the client's forest; the forest, or None."""
        self.remembered = None
        return self.forests.pop(client_name, None)

    def client_of(self, gen_id):
        client_name = client_name_of(gen_id)
        if client_name is None:
            client_name = self.last_client
        if client_name is None:
            raise errors.RepositoryGenerationDoesNotExist(
                gen_id=gen_id, client_name='?')
        return client_name

    def generation(self, gen_id):
        remembered = self.remembered
        if remembered is not None and remembered[0] is gen_id:
            self.last_client = remembered[1]    # as open() would
            return remembered[2]
        client_name = self.client_of(gen_id)
        gen = self.open(client_name).generation(int(gen_id))
        if gen is None:
            raise errors.RepositoryGenerationDoesNotExist(
                gen_id=int(gen_id), client_name=client_name)
        if client_name_of(gen_id) is not None:    # not a plain number
            self.remembered = (gen_id, client_name, gen)
        return gen

    def writable_generation(self, gen_id):
        self.writable(self.client_of(gen_id))
        return self.generation(gen_id)
