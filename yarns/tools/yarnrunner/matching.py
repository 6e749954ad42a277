"""Check the scenarios and find each step's implementation.

As in cmdtest's yarn: an implementation fits a step when the keywords
are equal and its regexp, matched case-insensitively from the start of
the step's text (re.match, not re.fullmatch), ends exactly at the end of
the text.  Exactly one implementation must fit.  MATCH_1..N are the
regexp's groups, '' for a group that took no part in the match.
"""

import collections
import re

from .model import YarnError


def check_scenarios(scenarios):
    """Raise YarnError for what cmdtest's yarn refuses before running."""
    if not scenarios:
        raise YarnError('no scenarios found; there must be at least one')
    counts = collections.Counter(s.name for s in scenarios)
    duplicates = [name for name, n in counts.items() if n > 1]
    if duplicates:
        raise YarnError('duplicate scenario names: '
                        + ', '.join(repr(d) for d in duplicates))
    without_then = [s.name for s in scenarios
                    if not any(step.keyword == 'THEN' for step in s.steps)]
    if without_then:
        raise YarnError('scenarios without a THEN step: '
                        + ', '.join(repr(n) for n in without_then))


def connect(scenarios, implementations, allow_missing=False, warn=None):
    """Set each step's implementation; return the runnable scenarios.

    With allow_missing, a scenario with a step that has no
    implementation is left out (with a warning) instead of an error.
    """
    compiled = [(i, _compile(i)) for i in implementations]
    runnable = []
    for scenario in scenarios:
        missing = [step for step in scenario.steps
                   if not _connect_step(scenario, step, compiled,
                                        allow_missing)]
        for step in missing:
            if warn:
                warn(f'scenario {scenario.name!r}: step "{step}" has no '
                     f'implementation; scenario left out')
        if not missing:
            runnable.append(scenario)
    return runnable


def _compile(implementation):
    try:
        return re.compile(implementation.regexp, re.IGNORECASE)
    except re.error as e:
        raise YarnError(f'bad regexp in "{implementation}": {e}') from e


def _connect_step(scenario, step, compiled, allow_missing):
    fitting = _fitting(step, compiled)
    if not fitting:
        if allow_missing:
            return False
        raise YarnError(f'scenario {scenario.name!r}: step "{step}" has no '
                        f'matching implementation')
    if len(fitting) > 1:
        raise YarnError(f'scenario {scenario.name!r}: step "{step}" matches '
                        f'{len(fitting)} implementations: '
                        + '; '.join(str(i) for i, _ in fitting))
    step.implementation, match = fitting[0]
    step.match_groups = match.groups('')
    return True


def _fitting(step, compiled):
    """(implementation, match) for each implementation that fits step."""
    fitting = []
    for implementation, regexp in compiled:
        if implementation.keyword == step.keyword:
            match = _fitting_match(regexp, step.text)
            if match:
                fitting.append((implementation, match))
    return fitting


def _fitting_match(regexp, text):
    """The match if the regexp fits the whole text, else None."""
    match = regexp.match(text)
    return match if match is not None and match.end() == len(text) else None


def match_variables(step):
    """Return {'MATCH_1': ..., ...} for a connected step."""
    return {f'MATCH_{n}': group
            for n, group in enumerate(step.match_groups, start=1)}
