"""Run one scenario in a fresh DATADIR, the way cmdtest's yarn does.

All ASSUMING steps run first; if one fails the scenario is skipped (not
failed) and nothing else runs.  Then the GIVEN/WHEN/THEN steps in order
until one fails; then all FINALLY steps, even after a failure, until
one of them fails.  Each step is a fresh shell: the shell libraries and
the step's code in one script, run as SHELL SHELL-ARGS SCRIPT (by
default `/bin/sh -xeu SCRIPT`) in the runner's working directory, or in
DATADIR with --cd-datadir.  DATADIR is TEMP/NAME/datadir, with TEMP a
new temporary directory (below --tempdir, if given), removed afterwards.

The time limit covers the ASSUMING and GIVEN/WHEN/THEN steps together;
the FINALLY steps then get the same limit again, so that cleanup still
happens after a timeout.
"""

import dataclasses
import os
import re
import shutil
import tempfile
import time

from . import environment, matching, step_process

PASSED, FAILED, SKIPPED, NOT_RUN = 'passed', 'failed', 'skipped', 'not run'


@dataclasses.dataclass
class Settings:
    """What the command line says about how to run steps."""
    shell_prelude: str = ''
    extra_env: dict = dataclasses.field(default_factory=dict)
    shell: str = '/bin/sh'
    shell_args: tuple = ('-xeu',)
    srcdir: str = dataclasses.field(default_factory=os.getcwd)
    cd_datadir: bool = False
    tempdir: str = None
    timeout: float = 300.0
    no_act: bool = False
    require_assumptions: bool = False


@dataclasses.dataclass
class ScenarioResult:
    scenario: object
    status: str
    steps_run: int = 0
    seconds: float = 0.0


class ScenarioRun:
    """One scenario's run; `report` gets its progress and error text."""

    def __init__(self, scenario, settings, report):
        self.scenario = scenario
        self.settings = settings
        self.report = report
        self.steps_run = 0
        self.groups = []

    def run(self):
        started = time.monotonic()
        result = self._run()
        result.seconds = time.monotonic() - started
        return result

    def _run(self):
        self.report.info(0, f'Running scenario {self.scenario.name}')
        if self.settings.no_act:
            return ScenarioResult(self.scenario, PASSED, 0)
        tempdir = self._make_tempdir()
        try:
            datadir = self._make_datadir(tempdir)
            status = self._run_steps(datadir)
        except BaseException:
            # Interrupted: stop this scenario's background processes too.
            step_process.kill_all_running()
            raise
        finally:
            step_process.forget_groups(self.groups)
            shutil.rmtree(tempdir, ignore_errors=True)
        return ScenarioResult(self.scenario, status, self.steps_run)

    def _make_tempdir(self):
        """A new directory (below --tempdir, if given) for this scenario.

        Unlike cmdtest's yarn, --tempdir does not make all scenarios share
        one directory: that would not work with --jobs.
        """
        if self.settings.tempdir:
            os.makedirs(self.settings.tempdir, exist_ok=True)
            return tempfile.mkdtemp(dir=os.path.abspath(self.settings.tempdir))
        return tempfile.mkdtemp()

    def _make_datadir(self, tempdir):
        datadir = os.path.join(tempdir, safe_name(self.scenario.name),
                               'datadir')
        os.makedirs(datadir)
        self.report.info(1, f'DATADIR is {datadir}')
        home = environment.home_dir(datadir)
        os.mkdir(home)
        self.report.info(1, f'HOME for tests is {home}')
        return datadir

    def _run_steps(self, datadir):
        steps = self.scenario.steps
        assuming = [s for s in steps if s.keyword == 'ASSUMING']
        finally_ = [s for s in steps if s.keyword == 'FINALLY']
        normal = [s for s in steps if s.keyword not in ('ASSUMING', 'FINALLY')]
        deadline = time.monotonic() + self.settings.timeout
        for step in assuming:
            outcome = self._run_step(datadir, step, deadline)
            if outcome.timed_out or (outcome.exit_code != 0 and
                                     self.settings.require_assumptions):
                self._report_failure(step, outcome)
                return FAILED
            if outcome.exit_code != 0:
                self.report.notice(f'Skipping scenario "{self.scenario.name}"'
                                   f': "{step}" failed')
                return SKIPPED
        ok = all(self._step_succeeds(datadir, step, deadline)
                 for step in normal)
        deadline = time.monotonic() + self.settings.timeout
        ok = all(self._step_succeeds(datadir, step, deadline)
                 for step in finally_) and ok
        return PASSED if ok else FAILED

    def _step_succeeds(self, datadir, step, deadline):
        outcome = self._run_step(datadir, step, deadline)
        if outcome.exit_code != 0 or outcome.timed_out:
            self._report_failure(step, outcome)
            return False
        return True

    def _run_step(self, datadir, step, deadline):
        """Run one step's script; return its StepOutcome."""
        self.report.info(1, f'Running step "{step}"')
        self.steps_run += 1
        script = self._write_script(step)
        try:
            outcome = step_process.run_script(
                [self.settings.shell, *self.settings.shell_args, script],
                self._env(datadir, step),
                datadir if self.settings.cd_datadir else '.',
                timeout=max(deadline - time.monotonic(), 0.001))
        finally:
            os.remove(script)
        self.groups.append(outcome.group)
        return outcome

    def _write_script(self, step):
        fd, script = tempfile.mkstemp(prefix='yarn-step-')
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(self.settings.shell_prelude)
            f.write(step.implementation.shell)
        return script

    def _env(self, datadir, step):
        return environment.step_environment(
            os.environ, self.settings.extra_env, datadir,
            self.settings.srcdir, matching.match_variables(step),
            self.settings.shell)

    def _report_failure(self, step, outcome):
        name = self.scenario.name
        if outcome.timed_out:
            self.report.error(
                f'ERROR: scenario "{name}" timed out '
                f'(limit {self.settings.timeout:g} s) in step "{step}"; '
                f'its process group was killed')
            if outcome.held_open:
                self.report.error(
                    'The step\'s shell had exited, but a process it started '
                    'kept its stdout or stderr open (redirect the output '
                    'of background processes)')
        else:
            self.report.error(f'ERROR: scenario "{name}": step "{step}" '
                              f'failed with exit code {outcome.exit_code}')
        self.report.error('stdout of the step:\n' + indent(outcome.stdout))
        self.report.error('stderr of the step:\n' + indent(outcome.stderr))


def safe_name(name):
    """The scenario's name as one file name (as cmdtest's yarn makes it)."""
    return re.sub(r'[^A-Za-z0-9.-]+', '_', name)


def indent(data):
    text = data.decode('utf-8', errors='replace')
    return ''.join(f'    {line}\n' for line in text.splitlines())
