"""backup --pretend: walk the roots as a backup would and report what it
would store, comparing with the newest generation; write nothing."""

import stat as stat_module

import obnamlib.errors
import obnamlib.engine.walker as walker
from obnamlib.engine.backup_compare import unchanged
from obnamlib.engine.backup_content import as_obnam_error, scanned_size

_S_ISREG = stat_module.S_ISREG


class PretendNeedsGeneration(obnamlib.errors.ObnamError):
    """--pretend compares with the newest generation, so one must exist."""
    code = 'R3D10AX'
    msg = ('--pretend needs an existing repository with a generation of '
           'client {client_name}')


class PretendRun:
    """What a backup of `fs` into `repo` would do, told to `progress` as
    if it happened (`metadata_reader` reads live metadata)."""

    def __init__(self, repo, fs, options, progress, metadata_reader):
        self.repo = repo
        self.fs = fs
        self.options = options
        self.progress = progress
        self.metadata_reader = metadata_reader

    def run(self, roots, root_stats):
        """Walk the roots (with their lstat results); returns the progress."""
        client = self.options.client_name
        try:
            gen_ids = self.repo.get_generation_ids(client)
        except obnamlib.errors.RepositoryClientDoesNotExist:
            gen_ids = []
        if not gen_ids:
            raise PretendNeedsGeneration(client_name=client)
        gen = gen_ids[-1]
        for root, root_st in zip(roots, root_stats):
            for kind, path, value, names in walker.walk(
                    self.fs, root, root_st, self.options.exclusions):
                if kind is walker.ERROR:
                    self.progress.error(path, value)
                elif kind is walker.FILE or kind is walker.EXIT:
                    self._pretend_one(gen, path, value)
        self.progress.finish()
        return self.progress

    def _pretend_one(self, gen, path, st):
        is_reg = _S_ISREG(st.st_mode)
        self.progress.found(path, scanned_size(st))
        try:
            md = self.metadata_reader.read(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            self.progress.error(path, as_obnam_error(e, path), scanning=True)
            return
        try:
            old = self.repo.get_metadata(gen, path)
        except obnamlib.errors.RepositoryFileDoesNotExistInGeneration:
            old = None
        if old is not None and unchanged(old, md):
            return
        if is_reg:
            self.progress.uploaded(st.st_size)
        self.progress.backed_up(path)
