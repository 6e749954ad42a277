"""Combining repeated runs (--rounds N) into one set of results.

On a shared machine one run's times can be off by a factor of two; the
median of a few rounds is steadier, and the spread of the wall times
shows how far a number can be trusted.  A step that failed in any round
counts as failed: a tool that works only sometimes is not to be timed.
"""

import statistics

from lib_measure import Measurement

MEDIAN_FIELDS = ('wall', 'cpu', 'rss_kib', 'repo_bytes', 'server_cpu',
                 'restored_bytes')


def combine(rounds):
    """{mode: {tool: {step: Measurement}}} from a list of such dicts."""
    if len(rounds) == 1:
        return rounds[0]
    first = rounds[0]
    return {mode: {tool: {step: combine_step([
                              r[mode][tool][step] for r in rounds
                              if step in r[mode][tool]])
                          for step in by_step}
                   for tool, by_step in by_tool.items()}
            for mode, by_tool in first.items()}


def combine_step(measurements):
    """The median Measurement of one step over the rounds."""
    for m in measurements:
        if m.error:
            return m
    if measurements[0].same_as:
        return measurements[0]
    combined = Measurement(measurements[0].command)
    for field in MEDIAN_FIELDS:
        values = [getattr(m, field) for m in measurements]
        if None not in values:
            setattr(combined, field, statistics.median(values))
    walls = [m.wall for m in measurements]
    combined.wall_min = min(walls)
    combined.wall_max = max(walls)
    return combined
