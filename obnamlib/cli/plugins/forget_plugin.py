"""forget: remove generations by id or by policy (§5.10, §11).

Generation arguments take precedence over --keep; a named generation
that existed and is gone already (the rerun of an interrupted forget) is
mentioned on stderr and skipped, while an id the client never reached is
still an error (R0B15DX); with neither, nothing
happens and the repository is not even opened.  The policy is parsed (and
refused if bad) before the repository is touched.  A policy that keeps
nothing (`0d`, `0h,0d`) would remove every generation: it is refused,
from the command line or a configuration file (name the generations to
remove them all).  An empty --keep on the command line is an error, an
empty one from a configuration file means no policy.

--pretend prints the decision table (oldest first: id, end time, `keep`
with the rules that keep it, or `forget` and the bytes of chunk files
its removal would free), then the total, and changes nothing; it takes
no locks, so the repository stays byte-identical.  Otherwise everything is
locked for the whole run and the table is printed with --verbose or when
stdout is a terminal.  With --pretend-time the policy is applied as of
that moment (later generations are kept and not counted).  With
--output-format=json both write one document (obnamlib.cli.space_output),
the real forget with the bytes it freed.
"""

from obnamlib.cli import clock, json_output, plugin, space_output
from obnamlib.engine import chunk_usage, forget_policy, forgetter


class ForgetPlugin(plugin.ObnamPlugin):

    def enable(self):
        self.app.settings.string(['keep'], 'policy for what generations to '
                                 'keep when forgetting: comma-separated '
                                 'rules COUNT followed by h (hourly), d '
                                 '(daily), w (weekly), m (monthly) or y '
                                 '(yearly), each keeping the newest '
                                 'generation of each of the last COUNT such '
                                 'periods that have one; for example '
                                 '"24h,14d,8w,12m,10y"', metavar='POLICY')
        self.app.add_subcommand('forget', self.forget,
                                arg_synopsis='[GENERATION]...')

    def policy(self):
        """The parsed --keep policy, or None when there is none (an empty
        --keep on the command line is an error); a policy that keeps
        nothing is refused."""
        text = self.app.settings['keep']
        if not text and not self.app.settings.from_command_line('keep'):
            return None
        policy = forget_policy.parse(text)
        forget_policy.refuse_keeping_nothing(policy)
        return policy

    def forget(self, args):
        """Forget (remove) specified backup generations"""
        settings = self.app.settings
        policy = None if args else self.policy()
        client = settings['client-name']
        pretend = settings['pretend']
        if not args and policy is None:
            if self.json_wanted():
                self.write_document(client, [], None, pretend)
            return
        as_of = clock.now(settings) if settings['pretend-time'] else None
        with self.app.open_repository(
                lock='none' if pretend else 'everything') as repo:
            if args:
                decisions, doomed, gone = forgetter.decide_by_specs(
                    repo, client, args)
                self.say_gone(client, gone)
            else:
                decisions = forgetter.decide_by_policy(
                    repo, client, policy, as_of=as_of)
                doomed = [d.gen_id for d in decisions if not d.keep]
            if pretend:
                freed = chunk_usage.predict_freed(repo, client, doomed)
                self.show_pretend(client, decisions, freed)
                return
            freed = chunk_usage.Freed(repo) if self.json_wanted() else None
            forgetter.remove_generations(repo, client, doomed,
                                         progress=self.progress(),
                                         freed=freed)
        if self.json_wanted():
            self.write_document(client, decisions, freed, False)
        elif settings['verbose'] or self.on_terminal():
            self.show(decisions)

    def write_document(self, client, decisions, freed, pretend):
        json_output.write(self.app.ui.output, space_output.forget_document(
            client, decisions, freed, pretend))

    def show_pretend(self, client, decisions, freed):
        if self.json_wanted():
            self.write_document(client, decisions, freed, True)
            return
        for line in space_output.pretend_lines(decisions, freed):
            self.app.ui.output.write(line + '\n')

    def say_gone(self, client, specs):
        for spec in specs:
            self.app.ui.error(
                'Generation %s of client %s is not in the repository '
                '(forgotten already?): nothing to do for it\n'
                % (spec, client))

    def show(self, decisions):
        for decision in decisions:
            self.app.ui.output.write(decision.line() + '\n')

    def on_terminal(self):
        if self.app.settings['quiet']:
            return False
        try:
            return self.app.ui.output.isatty()
        except (AttributeError, ValueError):
            return False

    def progress(self):
        display = self.app.ui.progress()

        def report(done, total):
            display.status('forgetting generations: %d/%d done'
                           % (done, total))
        return report
