"""Run the selected scenarios, one after the other or several at once.

With jobs > 1 scenarios run in threads (each step is a subprocess, so
threads suffice), each in its own temporary directory; each scenario's
text is printed only when all scenarios before it have been printed.
--stop-on-first-fail starts no new scenario after a failure; with
jobs > 1 those already running finish and are reported.
"""

import concurrent.futures
import dataclasses
import threading
import time

from . import step_process
from .report import BufferedReport
from .scenario_run import FAILED, NOT_RUN, SKIPPED, ScenarioResult, ScenarioRun


@dataclasses.dataclass
class SuiteResult:
    results: list
    seconds: float

    def with_status(self, status):
        return [r for r in self.results if r.status == status]

    @property
    def steps(self):
        return sum(r.steps_run for r in self.results)


def run_suite(scenarios, settings, report, jobs=1, stop_on_first_fail=False):
    """Run scenarios; return a SuiteResult of those that ran."""
    started = time.monotonic()
    if jobs <= 1:
        results = _serial(scenarios, settings, report, stop_on_first_fail)
    else:
        results = _parallel(scenarios, settings, report, jobs,
                            stop_on_first_fail)
    return SuiteResult(results, time.monotonic() - started)


def _serial(scenarios, settings, report, stop_on_first_fail):
    results = []
    for scenario in scenarios:
        results.append(ScenarioRun(scenario, settings, report).run())
        if stop_on_first_fail and results[-1].status == FAILED:
            break
    return results


def _parallel(scenarios, settings, report, jobs, stop_on_first_fail):
    stop = threading.Event()

    def run_one(scenario):
        if stop.is_set():
            return ScenarioResult(scenario, NOT_RUN), None
        buffered = BufferedReport(report.quiet)
        result = ScenarioRun(scenario, settings, buffered).run()
        if stop_on_first_fail and result.status == FAILED:
            stop.set()
        return result, buffered

    results = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(run_one, s) for s in scenarios]
        try:
            for future in futures:
                result, buffered = future.result()
                if result.status != NOT_RUN:
                    buffered.replay(report)
                    results.append(result)
        except BaseException:
            stop.set()
            step_process.kill_all_running()
            raise
    return results


def timing_lines(suite):
    """Each scenario's wall time, as --timings shows it."""
    return [f'{r.seconds:7.1f} s  {r.status:7}  {r.scenario.name}'
            for r in suite.results]


def summary_lines(suite):
    """The closing lines: (stdout lines, stderr lines)."""
    failed = suite.with_status(FAILED)
    skipped = len(suite.with_status(SKIPPED))
    counts = (f'{len(suite.results)} scenarios run ({skipped} skipped '
              f'because an ASSUMING step failed), {suite.steps} steps, '
              f'{suite.seconds:.1f} s')
    if not failed:
        return [f'yarn-runner: PASS: {counts}'], []
    names = [f'    - {r.scenario.name}' for r in failed]
    return [], (['Failed scenarios:'] + names +
                [f'yarn-runner: FAIL: {len(failed)} failed; {counts}'])
