"""Commands that show what a repository holds (§5.3-§5.8, §5.14).

Read-only: they take no locks.  Their text comes from obnamlib.engine.listing
and obnamlib.engine.differ; here we only pick generations and channels.
`generations` and `genids` always write to stdout (1.x ignored --output
for them); the others write to --output.  Deliberate difference from
1.x: `diff --verbose` writes whole lines to --output (1.x put the `+ `
prefix on stdout and the rest in the file).  With --output-format=json,
clients, generations, genids, ls and diff write one document
(obnamlib.cli.listing_json) to the same place instead.
"""

import contextlib
import logging
import os
import re

from obnamlib.cli import clock, json_output, listing_json, plugin
from obnamlib.engine import differ, listing
from obnamlib import errors
from obnamlib.repo import interface as ri


class ShowFirstGenerationError(errors.ObnamError):
    code = 'R91CA1X'
    msg = "Can't show first generation. Use 'obnam ls' instead"


class WrongNumberOfGenerationsForDiffError(errors.ObnamError):
    code = 'RA5942X'
    msg = 'Need one or two generations'


class AgeSyntaxError(errors.ObnamError):
    code = 'RF5FB1X'
    msg = ('{name}={value} is not an age: give a number with an optional '
           'unit s, m, h, d or w (default h)')


_AGE = re.compile(r'^(\d+)([smhdw]?)$')
_AGE_UNITS = {'s': 1, 'm': 60, 'h': 3600, 'd': 86400, 'w': 7 * 86400, '': 3600}


def parse_age(name, value):
    """`N[smhdw]` -> seconds; a bare number is hours, `m` is minutes."""
    match = _AGE.match(value.strip())
    if match is None:
        raise AgeSyntaxError(name=name, value=value)
    return int(match.group(1)) * _AGE_UNITS[match.group(2)]


def write_line(stream, line):
    """Write a line whose names may hold undecodable bytes (surrogates)."""
    try:
        stream.write(line + '\n')
    except UnicodeEncodeError:
        stream.flush()
        stream.buffer.write(os.fsencode(line + '\n'))
        stream.buffer.flush()


class ShowPlugin(plugin.ObnamPlugin):

    def enable(self):
        s = self.app.settings
        s.string(['warn-age'], 'for nagios-last-backup-age: warn if the '
                 'newest backup is older than AGE (N[smhdw], default unit '
                 'hours)', default='27h', metavar='AGE')
        s.string(['critical-age'], 'for nagios-last-backup-age: critical '
                 'if the newest backup is older than AGE', default='27h',
                 metavar='AGE')
        add = self.app.add_subcommand
        add('clients', self.clients)
        add('generations', self.generations)
        add('genids', self.genids)
        add('ls', self.ls, arg_synopsis='[FILE]...')
        add('kdirstat', self.kdirstat, arg_synopsis='[FILE]...')
        add('diff', self.diff, arg_synopsis='[GENERATION1] GENERATION2')
        add('nagios-last-backup-age', self.nagios_last_backup_age)

    # --- helpers ---------------------------------------------------------

    def out(self, line):
        write_line(self.app.ui.output, line)

    def stdout(self, line):
        write_line(self.app.ui.stdout, line)

    def chosen_generations(self, repo):
        specs = self.app.settings['generation'] or ['latest']
        return [repo.interpret_generation_spec(self.client_name, spec)
                for spec in specs]

    @staticmethod
    def paths(args):
        return [listing.normalise_path(os.fsencode(arg))
                for arg in (args or ['/'])]

    # --- commands ----------------------------------------------------------

    def clients(self, args):
        """List clients using the repository"""
        with self.app.open_repository() as repo:
            names = repo.get_client_names()
            if self.json_wanted():
                return json_output.write(
                    self.app.ui.output, listing_json.clients_document(names))
            for name in names:
                self.out(name)

    def generations(self, args):
        """List backup generations for client"""
        with self.app.open_repository() as repo:
            self.require_client(repo)
            gen_ids = repo.get_generation_ids(self.client_name)
            if self.json_wanted():
                return json_output.write(
                    self.app.ui.stdout, listing_json.generations_document(
                        repo, self.client_name, gen_ids))
            for line in listing.generations_lines(repo, gen_ids):
                self.stdout(line)

    def genids(self, args):
        """List generation ids for client"""
        with self.app.open_repository() as repo:
            self.require_client(repo)
            gen_ids = repo.get_generation_ids(self.client_name)
            if self.json_wanted():
                return json_output.write(
                    self.app.ui.stdout, listing_json.genids_document(
                        repo, self.client_name, gen_ids))
            for gen_id in gen_ids:
                self.stdout(repo.make_generation_spec(gen_id))

    def ls(self, args):
        """List contents of a generation"""
        with self.app.open_repository() as repo:
            self.require_client(repo)
            if self.json_wanted():
                return json_output.write(
                    self.app.ui.output, listing_json.ls_document(
                        repo, self.client_name, self.chosen_generations(repo),
                        self.paths(args)))
            for gen_id in self.chosen_generations(repo):
                self.out(listing.ls_header(repo, gen_id))
                for path in self.paths(args):
                    for name, md in listing.walk(repo, gen_id, path):
                        self.out(listing.ls_line(name, md))

    def kdirstat(self, args):
        """List contents of a generation in kdirstat cache format"""
        with self.app.open_repository() as repo:
            self.require_client(repo)
            for gen_id in self.chosen_generations(repo):
                for line in listing.kdirstat_header(repo, gen_id):
                    self.out(line)
                for path in self.paths(args):
                    for name, md in listing.walk(repo, gen_id, path):
                        if name != b'/':
                            self.out(listing.kdirstat_line(name, md))

    def diff(self, args):
        """Show difference between two generations"""
        if len(args) not in (1, 2):
            raise WrongNumberOfGenerationsForDiffError()
        with self.app.open_repository() as repo:
            self.require_client(repo)
            old, new = self.diff_pair(repo, args)
            if self.json_wanted():
                return json_output.write(
                    self.app.ui.output, listing_json.diff_document(
                        repo, self.client_name, old, new))
            verbose = self.app.settings['verbose']
            for char, path, md in differ.diff(repo, old, new):
                shown = listing.ls_line(path, md) if verbose \
                    else os.fsdecode(path)
                self.out('%s %s' % (char, shown))

    def diff_pair(self, repo, args):
        gens = [repo.interpret_generation_spec(self.client_name, spec)
                for spec in args]
        if len(gens) == 2:
            return gens
        all_ids = repo.get_generation_ids(self.client_name)
        index = all_ids.index(gens[0])
        if index == 0:
            raise ShowFirstGenerationError()
        return all_ids[index - 1], gens[0]

    def nagios_last_backup_age(self, args):
        """Check if the most recent generation is recent enough"""
        settings = self.app.settings
        critical = parse_age('critical-age', settings['critical-age'])
        warn = parse_age('warn-age', settings['warn-age'])
        now = clock.now(settings)
        try:
            started = self.newest_start()
        except RepositoryUnopenable as e:
            logging.error('%s', e.error)
            return self.nagios('UNKNOWN: %s' % e.error.first_line(), 3)
        except errors.ObnamError as e:
            return self.nagios('CRITICAL: %s' % e.first_line(), 2)
        if started is None:
            return self.nagios('CRITICAL: no backup found.', 2)
        when = listing.local_time(started)
        if now - started > critical:
            self.nagios('CRITICAL: backup is old.  last backup was %s.'
                        % when, 2)
        elif now - started > warn:
            self.nagios('WARNING: backup is old.  last backup was %s.'
                        % when, 1)
        else:
            self.nagios('OK: backup is recent.  last backup was %s.' % when, 0)

    def newest_start(self):
        with contextlib.ExitStack() as stack:
            try:
                repo = stack.enter_context(self.app.open_repository())
            except errors.ObnamError as e:
                raise RepositoryUnopenable(e) from e
            self.require_client(repo)
            gen_ids = repo.get_generation_ids(self.client_name)
            if not gen_ids:
                return None
            started = repo.get_generation_key(gen_ids[-1], ri.GEN_STARTED)
            return started if started is not None else 0

    def nagios(self, line, exit_code):
        self.out(line)
        self.app.exit_code = exit_code


class RepositoryUnopenable(Exception):
    """The repository is missing or cannot be opened: nagios plugin
    convention says UNKNOWN (exit 3), for the age cannot be known.  (An
    unknown client stays CRITICAL, as in Obnam 1.x.)"""

    def __init__(self, error):
        super().__init__(str(error))
        self.error = error
