"""Single files out of the generations: `cat` writes a backed-up file's
content, `find` says which generations hold which names.

Read-only: no locks, like ls and restore.  The work is done by
obnamlib.engine.file_reader and obnamlib.engine.finder; here we pick the
generations and write the bytes.  Both write bytes as they are (content,
names that are not UTF-8) to --output or stdout.
"""

import os

from obnamlib import errors
from obnamlib.cli import plugin
from obnamlib.engine import file_reader, finder, listing


class NoFileToCat(errors.ObnamError):
    code = 'REAB9EX'
    msg = 'The cat command wants the name of a file (obnam cat FILE...)'


class WrongNumberOfGenerationsForCat(errors.ObnamError):
    code = 'R70078X'
    msg = 'The cat command wants exactly one generation option'


class NoPatternToFind(errors.ObnamError):
    code = 'R59E73X'
    msg = 'The find command wants at least one pattern (obnam find PATTERN...)'


class CatFindPlugin(plugin.ObnamPlugin):

    def enable(self):
        add = self.app.add_subcommand
        add('cat', self.cat, arg_synopsis='FILE...')
        add('find', self.find, arg_synopsis='PATTERN...')

    def _binary_output(self):
        """The output's byte stream, after any text written before."""
        self.app.ui.output.flush()
        return self.app.ui.output.buffer

    def cat(self, args):
        """Write the content of backed-up files to the output

        Each FILE (an absolute path as backed up) must be a regular file
        of the generation (--generation, default latest).  The contents
        go to stdout (or --output) one after another, byte for byte, as
        they stream from the repository; each file's checksum is checked
        as restore checks it.  A FILE that is missing, a directory or not
        a regular file is an error before anything is written; a damaged
        file is an error after its bytes.
        """
        if not args:
            raise NoFileToCat()
        spec = self.one_generation_spec(WrongNumberOfGenerationsForCat)
        paths = [listing.normalise_path(os.fsencode(arg)) for arg in args]
        with self.app.open_repository() as repo:
            self.require_client(repo)
            gen = repo.interpret_generation_spec(self.client_name, spec)
            reader = file_reader.FileReader(repo, gen, self.client_name)
            files = [(path, reader.regular_file(path)) for path in paths]
            out = self._binary_output()
            for path, md in files:
                for data in reader.content(path, md):
                    out.write(data)
            out.flush()

    def find(self, args):
        """Find backed-up files by name in every generation

        Each PATTERN is a shell glob (*, ?, [...]; case-sensitive).  A
        pattern without / matches the basename of a file, directory or
        other object anywhere in the tree (like find -name: 'report*.txt');
        a pattern with / matches its whole absolute path, where * also
        matches / (like find -path: '/home/*/notes.txt', '*/src/*.py'); one
        that does not start with / or a wildcard matches at any depth
        ('src/*.py' is '*/src/*.py'), and a trailing / is ignored.  Quote
        patterns, or the shell expands them.

        Every generation is searched, oldest first, unless --generation
        options name some.  For each match one line is written to stdout
        (or --output): the generation id, a TAB, and the path as stored
        (bytes as they are), generations in order and paths in ls order (a
        name holding a newline spans two lines, as with find -print).
        Only names and metadata are read, never file content.  The exit
        code is 0 if anything matched, 1 if nothing did.
        """
        if not args:
            raise NoPatternToFind()
        patterns = [finder.Pattern(os.fsencode(arg)) for arg in args]
        found = False
        with self.app.open_repository() as repo:
            self.require_client(repo)
            out = self._binary_output()
            for gen_id, path in finder.find(repo, self._searched(repo),
                                            patterns):
                spec = repo.make_generation_spec(gen_id)
                out.write(os.fsencode(spec) + b'\t' + path + b'\n')
                found = True
            out.flush()
        if not found:
            self.app.exit_code = 1

    def _searched(self, repo):
        """The generations find searches: those --generation names on the
        command line, else all."""
        if not self.app.settings.from_command_line('generation'):
            return repo.get_generation_ids(self.client_name)
        return [repo.interpret_generation_spec(self.client_name, spec)
                for spec in self.app.settings['generation']]
