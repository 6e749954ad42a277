"""The command line of yarn-runner, compatible with cmdtest's yarn.

Exit codes: 0 all scenarios passed (or were skipped), 1 a scenario
failed or the scenario files are wrong, 2 bad command line, 255 the
run was interrupted (as cmdtest's yarn).
"""

import argparse
import os
import signal
import sys

from . import environment, matching, parser, step_process, suite
from .model import YarnError
from .report import Report
from .scenario_run import Settings


def main(argv=None, out=sys.stdout, err=sys.stderr):
    """Run the scenarios the arguments name; return the exit code."""
    args = _argument_parser().parse_args(argv)
    report = Report(out, err, quiet=args.quiet)
    _stop_on_interrupt()
    try:
        return _run(args, report)
    except YarnError as e:
        report.error(f'ERROR: {e}')
        return 1
    except KeyboardInterrupt:
        step_process.kill_all_running()
        report.error('ERROR: interrupted')
        return 255


def _stop_on_interrupt():
    """SIGTERM, and SIGINT even where it was ignored, stop the run.

    A shell script's `yarn-runner &` (as ./check runs it, beside pytest)
    starts it with SIGINT ignored, and Python then leaves it so: Ctrl-C
    stopped the script's other commands while the scenarios ran on.
    """
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _interrupt)


def _interrupt(signum, frame):
    raise KeyboardInterrupt()


def _run(args, report):
    scenarios = _load(args, report)
    settings = _settings(args, report)
    report.info(0, f'Found {len(scenarios)} scenarios')
    scenarios = _select(scenarios, args.run)
    result = suite.run_suite(scenarios, settings, report, jobs=args.jobs,
                             stop_on_first_fail=args.stop_on_first_fail)
    if args.timings:
        for line in suite.timing_lines(result):
            report.result(line)
    out_lines, err_lines = suite.summary_lines(result)
    for line in err_lines:
        report.error(line)
    for line in out_lines:
        report.result(line)
    return 1 if err_lines else 0


def _load(args, report):
    for filename in args.files:
        report.info(0, f'Parsing scenario file {filename}')
    scenarios, implementations = parser.parse_files(args.files)
    matching.check_scenarios(scenarios)
    scenarios = matching.connect(
        scenarios, implementations, args.allow_missing_steps,
        warn=lambda message: report.error(f'WARNING: {message}'))
    return scenarios


def _select(scenarios, names):
    """Only the scenarios named by --run (case and spacing ignored)."""
    if not names:
        return scenarios
    by_name = {_normal_name(s.name): s for s in scenarios}
    selected = []
    for name in names:
        scenario = by_name.get(_normal_name(name))
        if scenario is None:
            raise YarnError(f'no scenario named {name!r}')
        if scenario not in selected:
            selected.append(scenario)
    return selected


def _normal_name(name):
    return ' '.join(name.lower().split())


def _settings(args, report):
    return Settings(
        shell_prelude=_shell_prelude(args.shell_library, report),
        extra_env=environment.parse_env_settings(args.env),
        shell=args.shell,
        shell_args=tuple(a for a in (args.shell_arg or ['-xeu']) if a),
        srcdir=os.getcwd(),
        cd_datadir=args.cd_datadir,
        tempdir=args.tempdir,
        timeout=args.timeout,
        no_act=args.no_act,
        require_assumptions=args.require_assumptions)


def _shell_prelude(filenames, report):
    """The shell libraries, concatenated, to put before each step's code."""
    pieces = []
    for filename in filenames:
        report.info(0, f'Loading shell library {filename}')
        text = parser.read_text(filename, 'shell library')
        pieces.append(f'# shell library {filename}\n\n{text}\n\n')
    return ''.join(pieces)


def _positive(text):
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f'must be more than 0: {text}')
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f'must be a whole number > 0: {text}')
    return value


def _argument_parser():
    p = argparse.ArgumentParser(
        prog='yarn-runner',
        description='Run yarn scenario files (cmdtest yarn compatible).')
    p.add_argument('files', nargs='*', metavar='FILE.yarn')
    p.add_argument('-s', '--shell-library', action='append', default=[],
                   metavar='FILE', help='shell code to put before each step')
    p.add_argument('--env', action='append', default=[],
                   metavar='NAME=VALUE', help='set NAME for every step')
    p.add_argument('--stop-on-first-fail', action='store_true',
                   help='run no more scenarios after one fails')
    p.add_argument('-r', '--run', action='append', default=[],
                   metavar='SCENARIO', help='run only SCENARIO (repeatable)')
    p.add_argument('--tempdir', metavar='DIR',
                   help='make temporary directories below DIR')
    p.add_argument('--shell', default='/bin/sh',
                   help='run steps with SHELL (default /bin/sh)')
    p.add_argument('--shell-arg', action='append', metavar='ARG',
                   help='give ARG to the shell (repeatable; default -xeu)')
    p.add_argument('--cd-datadir', action='store_true',
                   help='run steps in DATADIR, not the current directory')
    p.add_argument('--allow-missing-steps', action='store_true',
                   help='leave out, with a warning, scenarios that have '
                        'a step without implementation')
    p.add_argument('--require-assumptions', action='store_true',
                   help='a failing ASSUMING fails the scenario')
    p.add_argument('-n', '--no-act', '--dry-run', '--pretend',
                   action='store_true', help='check, but run no steps')
    p.add_argument('-q', '--quiet', action='store_true',
                   help='print only failures and the summary')
    p.add_argument('-v', '--verbose', action='store_true',
                   help='accepted for compatibility; output is always '
                        'line by line')
    p.add_argument('--timeout', type=_positive, default=300.0,
                   metavar='SECONDS',
                   help='time limit of each scenario (default 300)')
    p.add_argument('--timings', action='store_true',
                   help="show each scenario's wall time at the end")
    p.add_argument('-j', '--jobs', type=_positive_int, default=1,
                   metavar='N',
                   help='run N scenarios at once (default 1)')
    return p
