"""The Repository API's generation and file methods, in format 6.

A part of RepositoryFormat6 (which see), kept apart because it is one
concern: what is in a client's generations.  It uses the repository's
`sessions` (ClientSessions), `chunk_indexing` (ChunkIndexing, told of
chunks a file re-uses) and `clock`.
"""

from obnamlib import errors
from obnamlib.repo import interface as repo_interface
from obnamlib.repo.fmt_6 import keys
from obnamlib.repo.fmt_6.damage import reporting_damage
from obnamlib.repo.fmt_6.gen_id import GenId

_GEN_SUBKEYS = {
    repo_interface.GEN_ID: keys.GEN_ID,
    repo_interface.GEN_STARTED: keys.GEN_STARTED,
    repo_interface.GEN_ENDED: keys.GEN_ENDED,
    repo_interface.GEN_IS_CHECKPOINT: keys.GEN_IS_CHECKPOINT,
    repo_interface.GEN_FILE_COUNT: keys.GEN_FILE_COUNT,
    repo_interface.GEN_TOTAL_DATA: keys.GEN_TOTAL_DATA,
}


class GenerationMethods:

    @reporting_damage
    def get_generation_ids(self, client_name):
        forest = self.sessions.open(client_name)
        return [GenId(n, client_name) for n in forest.generation_ids()]

    @reporting_damage
    def interpret_generation_spec(self, client_name, spec):
        if spec == 'latest':
            number = self.sessions.open(client_name).newest_generation_id()
            if number is None:
                raise errors.RepositoryClientHasNoGenerations(
                    client_name=client_name)
            return GenId(number, client_name)
        for gen_id in self.get_generation_ids(client_name):
            if str(int(gen_id)) == str(spec).strip():
                return gen_id
        raise errors.RepositoryGenerationDoesNotExist(
            gen_id=spec, client_name=client_name)

    @reporting_damage
    def generation_spec_was_used(self, client_name, spec):
        spec = str(spec).strip()
        if not spec.isdigit():
            return False
        return int(spec) <= self.sessions.open(client_name).last_id()

    @reporting_damage
    def make_generation_spec(self, gen_id):
        return '%d' % int(gen_id)

    @reporting_damage
    def create_generation(self, client_name, now=None):
        forest = self.sessions.writable(client_name)
        number = forest.create_generation(self._now(now))
        return GenId(number, client_name)

    def _now(self, now):
        return int(self.clock() if now is None else now)

    def _generation(self, gen_id):
        return self.sessions.generation(gen_id)

    def _writable_generation(self, gen_id):
        return self.sessions.writable_generation(gen_id)

    @reporting_damage
    def get_generation_key(self, gen_id, key):
        return self._generation(gen_id).get_gen_value(_gen_subkey(key))

    @reporting_damage
    def set_generation_key(self, gen_id, key, value):
        self._writable_generation(gen_id).set_gen_value(_gen_subkey(key),
                                                         value)

    @reporting_damage
    def remove_generation(self, gen_id):
        client_name = self.sessions.client_of(gen_id)
        forest = self.sessions.writable(client_name)
        if not forest.remove_generation(int(gen_id)):
            raise errors.RepositoryGenerationDoesNotExist(
                gen_id=int(gen_id), client_name=client_name)

    @reporting_damage
    def get_generation_chunk_ids(self, gen_id):
        return self._generation(gen_id).chunk_ids_in_use()

    # --- files in a generation -----------------------------------------

    def _missing(self, gen_id, path):
        return errors.RepositoryFileDoesNotExistInGeneration(
            client_name=self.sessions.client_of(gen_id),
            genspec=self.make_generation_spec(gen_id), filename=path)

    def _found(self, value, gen_id, path):
        """value, unless it is None: the file is not in the generation."""
        if value is None:
            raise self._missing(gen_id, path)
        return value

    @reporting_damage
    def file_exists(self, gen_id, path):
        return self._generation(gen_id).exists(path)

    @reporting_damage
    def get_metadata(self, gen_id, path):
        return self._found(self._generation(gen_id).get_metadata(path),
                           gen_id, path)

    @reporting_damage
    def set_metadata(self, gen_id, path, metadata):
        self._writable_generation(gen_id).set_metadata(path, metadata)

    @reporting_damage
    def remove_file(self, gen_id, path):
        self._writable_generation(gen_id).remove(path)

    @reporting_damage
    def get_file_children(self, gen_id, path):
        return self._found(self._generation(gen_id).children(path),
                           gen_id, path)

    @reporting_damage
    def get_file_chunk_ids(self, gen_id, path):
        return self._found(self._generation(gen_id).chunk_ids(path),
                           gen_id, path)

    @reporting_damage
    def set_file_chunk_ids(self, gen_id, path, chunk_ids):
        self._writable_generation(gen_id).set_chunk_ids(path, chunk_ids)
        self._note_reuse(gen_id, chunk_ids)

    @reporting_damage
    def append_file_chunk_ids(self, gen_id, path, chunk_ids):
        self._writable_generation(gen_id).append_chunk_ids(path, chunk_ids)
        self._note_reuse(gen_id, chunk_ids)

    def _note_reuse(self, gen_id, chunk_ids):
        self.chunk_indexing.note_reuse(self.sessions.client_of(gen_id),
                                       chunk_ids)

    @reporting_damage
    def get_file_data(self, gen_id, path):
        gen = self._generation(gen_id)
        if not gen.exists(path):
            raise self._missing(gen_id, path)
        return gen.file_data(path)

    @reporting_damage
    def get_file_content(self, gen_id, path):
        return self._found(self._generation(gen_id).content(path),
                           gen_id, path)


def _gen_subkey(key):
    try:
        return _GEN_SUBKEYS[key]
    except KeyError:
        raise ValueError('unknown generation key %r' % (key,))
