"""How cost grows with the data: bench/compare's JSON documents at several
--scale values turned into one table of wall seconds per GiB of corpus.

A tool whose seconds per GiB rise with the scale does worse than linear;
the "growth" lines divide each tool's seconds per GiB at the largest scale
by those at the smallest, so the tools can be compared at a glance.
"""

import json
import os

from lib_steps import LABELS

STEPS = 'first,restore,verify'
TOOL_ORDER = ('obnam', 'borg', 'restic')
GIB = 2 ** 30


def compare_argv(compare, scale, steps, out, passthrough):
    """The bench/compare command line for one scale: its JSON and work
    directory in out."""
    return [compare, '--scale', scale, '--steps', steps,
            '--workdir', os.path.join(out, 'work-%s' % scale),
            '--json', json_path(out, scale)] + list(passthrough)


def json_path(out, scale):
    return os.path.join(out, 'scale-%s.json' % scale)


def load(paths):
    """compare's documents from JSON files, smallest scale first."""
    docs = []
    for path in paths:
        with open(path) as f:
            docs.append(json.load(f))
    return load_documents(docs)


def load_documents(docs):
    return sorted(docs, key=lambda d: float(d['corpus']['scale']))


def wall(by_step, step):
    """A step's wall time, following "same as"; None if it failed."""
    m = by_step.get(step)
    if m and 'same_as' in m:
        m = by_step.get(m['same_as'])
    if not m or 'error' in m:
        return None
    return m.get('wall')


def per_gib(doc, mode, tool, step):
    by_step = doc['results'].get(mode, {}).get(tool)
    seconds = wall(by_step, step) if by_step else None
    if seconds is None:
        return None
    return seconds / (doc['corpus']['apparent_bytes'] / GIB)


def tools_of(docs, mode):
    found = {tool for doc in docs for tool in doc['results'].get(mode, {})}
    return [tool for tool in TOOL_ORDER if tool in found]


def steps_of(docs):
    found = []
    for doc in docs:
        for step in doc.get('steps', {}):
            if step not in found:
                found.append(step)
    return found


def modes_of(docs):
    found = []
    for doc in docs:
        for mode in doc['results']:
            if mode not in found:
                found.append(mode)
    return found


def table(docs):
    """The whole table as text, one block per mode."""
    lines = []
    for mode in modes_of(docs):
        lines += mode_table(docs, mode) + ['']
    return '\n'.join(lines)


def mode_table(docs, mode):
    tools = tools_of(docs, mode)
    others = [t for t in tools if t != 'obnam'] if 'obnam' in tools else []
    cache = sorted({doc.get('page_cache', 'warm') for doc in docs})
    lines = ['wall seconds per GiB of corpus, mode %s, page cache %s' % (
        mode, '/'.join(cache))]
    header = '%-20s %5s %6s' % ('step', 'scale', 'GiB')
    header += ''.join(' %7s' % t for t in tools)
    header += ''.join(' %12s' % ('obnam/' + o) for o in others)
    lines.append(header + '  %s' % 'load')
    steps = steps_of(docs)
    for step in steps:
        for doc in docs:
            lines.append(row(doc, mode, step, tools, others))
    lines.append('growth, s/GiB at scale %s over s/GiB at scale %s:' % (
        docs[-1]['corpus']['scale'], docs[0]['corpus']['scale']))
    for step in steps:
        cells = []
        for tool in tools:
            first = per_gib(docs[0], mode, tool, step)
            last = per_gib(docs[-1], mode, tool, step)
            cells.append('%s %s' % (tool, fmt(ratio(last, first))))
        lines.append('  %-20s %s' % (LABELS[step], ', '.join(cells)))
    return lines


def row(doc, mode, step, tools, others):
    values = {tool: per_gib(doc, mode, tool, step) for tool in tools}
    text = '%-20s %5s %6.2f' % (LABELS[step], doc['corpus']['scale'],
                                doc['corpus']['apparent_bytes'] / GIB)
    text += ''.join(' %7s' % fmt(values[t]) for t in tools)
    text += ''.join(' %12s' % fmt(ratio(values['obnam'], values[o]))
                    for o in others)
    return text + '  %.1f-%.1f' % (doc['loadavg_start'][0],
                                   doc['loadavg_end'][0])


def ratio(a, b):
    if a is None or not b:
        return None
    return a / b


def fmt(value):
    return '-' if value is None else '%.2f' % value
