"""Turning measurements into tables, ratios and a JSON document.

`results` is {mode: {tool: {step: Measurement}}}.  Ratios are computed
once here, printed as tables and written to JSON from the same numbers.
"""

import json
import statistics

from lib_steps import COMMANDS_NOTE, LABELS

QUANTITIES = ('wall', 'cpu', 'rss_kib', 'repo_bytes')
QUANTITY_HEADERS = ('wall', 'cpu', 'RSS', 'repo')
SKIPPED = 'skipped: '
FAILURE_LINES = 8     # of each failure's output in the printed report


def resolve(by_step, step):
    """The usable Measurement for step (following "same as"), or None."""
    m = by_step.get(step)
    if m is not None and m.same_as:
        m = by_step.get(m.same_as)
    if m is None or m.error:
        return None
    return m


def ratio(a, b):
    if a is None or not b:
        return None
    return a / b


def tool_ratios(results, steps):
    """{mode: {'obnam/OTHER': {step: {quantity: ratio}}}}."""
    found = {}
    for mode, by_tool in results.items():
        if 'obnam' not in by_tool:
            continue
        for other in by_tool:
            if other == 'obnam':
                continue
            table = found.setdefault(mode, {})['obnam/%s' % other] = {}
            for step in steps:
                a = resolve(by_tool['obnam'], step)
                b = resolve(by_tool[other], step)
                if a and b:
                    table[step] = {q: ratio(getattr(a, q), getattr(b, q))
                                   for q in QUANTITIES}
    return found


def mode_costs(results, steps):
    """{mode: {tool: {step: {'wall': r, 'cpu': r}}}}: each tool's time in
    a mode against its own time in plain mode, same run."""
    if 'plain' not in results:
        return {}
    found = {}
    for mode, by_tool in results.items():
        if mode == 'plain':
            continue
        for tool, by_step in by_tool.items():
            plain_steps = results['plain'].get(tool)
            if plain_steps is None:
                continue
            table = found.setdefault(mode, {})[tool] = {}
            for step in steps:
                a, b = resolve(by_step, step), resolve(plain_steps, step)
                if a and b:
                    table[step] = {'wall': ratio(a.wall, b.wall),
                                   'cpu': ratio(a.cpu, b.cpu)}
    return found


def paired_mode_costs(rounds, steps):
    """mode_costs over several rounds: for each step, the median of the
    per-round ratios, with every round's ratio in 'wall_rounds'.

    A round's two modes ran seconds apart, rounds minutes apart, so the
    ratio within a round cancels the machine's slow drift; the ratio of
    the medians would not.  A step that gave no ratio in some round
    gives none here."""
    per_round = [mode_costs(r, steps) for r in rounds]
    found = {}
    for mode, by_tool in per_round[0].items():
        for tool, by_step in by_tool.items():
            table = found.setdefault(mode, {})[tool] = {}
            for step in by_step:
                rows = [c.get(mode, {}).get(tool, {}).get(step)
                        for c in per_round]
                if None in rows:
                    continue
                walls = [row['wall'] for row in rows]
                table[step] = {
                    'wall': statistics.median(walls),
                    'cpu': statistics.median(row['cpu'] for row in rows),
                    'wall_rounds': walls}
    return found


def noise_of(walls):
    """How far a ratio that should be 1.00 typically strays: the median
    distance from 1 of restic's per-round encrypted/plain ratios (restic
    runs the same commands in both modes)."""
    return statistics.median(abs(w - 1) for w in walls)


def fmt(value, spec='%.2f'):
    return '-' if value is None else spec % value


def fmt_range(low, high):
    return '%.2f-%.2f' % (low, high)


def print_mode(mode, descriptions, by_tool, steps, corpus_bytes):
    # A server's CPU time (sftp's sshd, gluster's daemons), where known.
    remote = any(m.server_cpu is not None
                 for by_step in by_tool.values() for m in by_step.values())
    print('== mode %s' % mode)
    for line in descriptions:
        print('   %s' % line)
    if 'check' in steps or 'verify' in steps:
        print('   %s' % COMMANDS_NOTE)
    print()
    header = '%-20s %-7s %9s %9s %9s %10s' % (
        'step', 'tool', 'wall s', 'cpu s', 'RSS MiB', 'repo MiB')
    if remote:
        header += ' %10s' % 'srv cpu s'
    ranged = any(by_step[step].wall_min is not None
                 for by_step in by_tool.values() for step in steps)
    if ranged:
        header += ' %13s' % 'wall range'
    print(header)
    for step in steps:
        for tool, by_step in by_tool.items():
            print(measurement_row(LABELS[step], tool, by_step[step], remote,
                                  ranged))
    print_incomplete_restores(by_tool, corpus_bytes)
    print()


def print_incomplete_restores(by_tool, corpus_bytes):
    """A restore that wrote less (or more) than the corpus holds is no
    fair comparison: say so under the table."""
    for tool, by_step in by_tool.items():
        m = by_step.get('restore')
        if m is None or m.restored_bytes in (None, corpus_bytes):
            continue
        print('WARNING: %s restored %d bytes, the corpus holds %d' % (
            tool, m.restored_bytes, corpus_bytes))


def measurement_row(label, tool, m, remote, ranged=False):
    start = '%-20s %-7s' % (label, tool)
    if m.same_as:
        return '%s %9s' % (start, '= ' + LABELS[m.same_as])
    if m.error:
        if m.error.startswith(SKIPPED):
            reason = m.error[len(SKIPPED):].splitlines()[0]
            return '%s %9s  %s' % (start, 'skipped', reason)
        return '%s %9s  %s' % (start, 'FAILED', m.error.splitlines()[0][:80])
    row = '%s %9.2f %9.2f %9.1f %10.1f' % (
        start, m.wall, m.cpu, m.rss_kib / 1024, m.repo_bytes / 2 ** 20)
    if remote:
        row += ' %10s' % fmt(m.server_cpu)
    if ranged and m.wall_min is not None:
        row += ' %13s' % fmt_range(m.wall_min, m.wall_max)
    return row


def print_tool_ratios(mode, ratios, steps):
    for pair, table in ratios.get(mode, {}).items():
        if not table:
            print('%s %s ratios: nothing to compare' % (mode, pair))
            print()
            continue
        print('%s %s ratios (<= 1.0: obnam as good or better)' % (mode, pair))
        print('%-20s %9s %9s %9s %10s' % (('step',) + QUANTITY_HEADERS))
        for step in steps:
            row = table.get(step)
            if row is None:
                print('%-20s %9s' % (LABELS[step], '-'))
                continue
            print('%-20s %9s %9s %9s %10s' % (
                (LABELS[step],) + tuple(fmt(row[q]) for q in QUANTITIES)))
        print()


def print_mode_costs(costs, steps):
    for mode, by_tool in costs.items():
        tools = list(by_tool)
        print('%s/plain: each tool against its own plain run '
              '(wall; cpu in brackets)' % mode)
        print('%-20s' % 'step' + ''.join(' %15s' % t for t in tools))
        for step in steps:
            cells = []
            for tool in tools:
                row = by_tool[tool].get(step)
                cells.append(' %15s' % (
                    '-' if row is None else '%s (%s)' % (
                        fmt(row['wall']), fmt(row['cpu']))))
            print('%-20s' % LABELS[step] + ''.join(cells))
        if mode == 'encrypted':
            print_encryption_goal(by_tool, steps)
        print()


def print_encryption_goal(by_tool, steps):
    """Issue 5: encryption may cost obnam no more than it costs borg.

    Where obnam's ratio is above borg's by less than the run's noise
    (restic's ratio, which measures nothing else), the verdict says so
    instead of claiming a difference the run cannot show."""
    if 'obnam' not in by_tool or 'borg' not in by_tool:
        return
    print('goal: obnam encrypted/plain wall <= borg encrypted/plain wall'
          ' (medians of the rounds\' own ratios; noise: restic\'s median'
          ' distance from 1.00)')
    for step in steps:
        a = by_tool['obnam'].get(step)
        b = by_tool['borg'].get(step)
        if a is None or b is None:
            continue
        r = by_tool.get('restic', {}).get(step)
        noise = None if r is None else noise_of(r['wall_rounds'])
        print('  %-20s obnam %s, borg %s, noise %s: %s' % (
            LABELS[step], spread(a), spread(b), fmt(noise),
            goal_verdict(a['wall'], b['wall'], noise)))


def spread(row):
    """A median ratio, with the range of the rounds when there are more."""
    walls = row['wall_rounds']
    if len(walls) == 1:
        return fmt(row['wall'])
    return '%s (%s)' % (fmt(row['wall']), fmt_range(min(walls), max(walls)))


def goal_verdict(obnam, borg, noise):
    if obnam <= borg:
        return 'met'
    if noise is not None and obnam - borg <= noise:
        return 'within noise'
    return 'NOT met'


def print_failures(results):
    failures = [(mode, tool, step, m)
                for mode, by_tool in results.items()
                for tool, by_step in by_tool.items()
                for step, m in by_step.items()
                if m.error and not m.error.startswith(SKIPPED)]
    if not failures:
        return
    print('failures')
    for mode, tool, step, m in failures:
        print('-- %s %s %s' % (mode, tool, LABELS[step]))
        lines = m.error.splitlines()
        shown = lines[:2] + lines[2:][-FAILURE_LINES:]
        for line in shown:
            print('   %s' % line)
    print()


def json_document(meta, results, steps, ratios, costs):
    return {
        **meta,
        'steps': {step: LABELS[step] for step in steps},
        'results': results_document(results),
        'tool_ratios': ratios,
        'mode_costs': costs,
    }


def results_document(results):
    return {mode: {tool: {step: m.as_dict() for step, m in by_step.items()}
                   for tool, by_step in by_tool.items()}
            for mode, by_tool in results.items()}


def write_json(path, document):
    with open(path, 'w') as f:
        json.dump(document, f, indent=1, sort_keys=True)
        f.write('\n')
