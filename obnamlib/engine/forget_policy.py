"""Which generations a `--keep` retention policy keeps, and why.

A policy is comma-separated rules, each a count and a period letter
(`12h,7d,3m`).  Per rule, generations fall into calendar buckets by their
end time in local time (hour, day, `%W` Monday week that splits at New
Year, month, year); the newest generation of each bucket represents it,
and the rule keeps the representatives of the newest N buckets.  A policy
keeps the union of what its rules keep (cli.md §11; Obnam 1.x semantics
exactly, so existing cron jobs keep the same generations).

Parsing is stricter than Obnam 1.x wherever 1.x silently misread a
policy (text after a comma that is not a rule, `30d, 52w`, was dropped;
an empty policy did nothing): those are errors here, before anything is
removed.  So is a policy whose counts are all zero (`0d`), which 1.x
obeyed by removing every generation.  Rejecting them can only ever keep
more.
"""

import re
import time

from obnamlib import errors


class ForgetPolicySyntaxError(errors.ObnamError):
    code = 'R9808DX'
    msg = 'Forget policy syntax error: {policy}'


class SeparatorError(errors.ObnamError):
    code = 'RB927BX'
    msg = ('Forget policy must have rules separated by commas, '
           'see position {position}: {policy}')


class DuplicatePeriodError(errors.ObnamError):
    code = 'R45B50X'
    msg = 'Forget policy may not duplicate period ({period}): {policy}'


class ForgetPolicyNotARuleError(errors.ObnamError):
    """Obnam 1.x silently ignored everything from here on."""
    code = 'RFB6DBX'
    msg = ('Forget policy has text that is not a rule at position '
           '{position}: {policy} (a rule is a count and one of h, d, w, m, '
           'y; rules are separated by commas without spaces)')


class ForgetPolicyUnknownPeriodError(errors.ObnamError):
    code = 'R727A9X'
    msg = ('Forget policy has unknown period {unit!r} at position '
           '{position}: {policy} (use h, d, w, m or y)')


class EmptyForgetPolicyError(errors.ObnamError):
    code = 'RD8F86X'
    msg = 'Forget policy is empty: give rules such as --keep=7d,4w'


class ForgetPolicyKeepsNothingRefused(errors.ObnamError):
    """Obnam 1.x obeyed such a policy and removed every generation."""
    code = 'RA5AACX'
    msg = ('Forget policy {policy} keeps no generations, refusing to remove '
           'them all: give a count above zero, or name the generations to '
           'forget')


# (letter, name, strftime format of the bucket key)
PERIODS = (
    ('h', 'hourly', '%Y-%m-%d %H'),
    ('d', 'daily', '%Y-%m-%d'),
    ('w', 'weekly', '%Y-%W'),
    ('m', 'monthly', '%Y-%m'),
    ('y', 'yearly', '%Y'),
)
PERIOD_NAMES = {letter: name for letter, name, _ in PERIODS}
BUCKET_FORMATS = {letter: fmt for letter, _, fmt in PERIODS}

_RULE = re.compile(r'(\d+)([A-Za-z]?)')


class ForgetPolicy:
    """A parsed policy: counts per period letter, in the order given."""

    def __init__(self, text, rules):
        self.text = text
        self.rules = rules          # list of (letter, count)

    def keeps_nothing(self):
        return all(count == 0 for _, count in self.rules)

    def __str__(self):
        return ','.join('%d%s' % (count, letter)
                        for letter, count in self.rules)


def parse(text):
    """Parse a policy string; raise one of this module's errors."""
    if text is None or text.strip() == '':
        raise EmptyForgetPolicyError()
    rules = []
    pos = 0
    while True:
        letter, count, pos = _parse_rule(text, pos, first=not rules)
        if any(letter == seen for seen, _ in rules):
            raise DuplicatePeriodError(period=PERIOD_NAMES[letter],
                                       policy=text)
        rules.append((letter, count))
        if pos == len(text):
            break
        if text[pos] != ',':
            raise SeparatorError(position=pos + 1, policy=text)
        pos += 1
        if pos == len(text):
            break       # a trailing comma changes nothing; 1.x accepted it
    return ForgetPolicy(text, rules)


def refuse_keeping_nothing(policy):
    """Raise unless the policy keeps at least the newest generation: a
    typo such as `--keep=0d` must not empty the repository."""
    if policy.keeps_nothing():
        raise ForgetPolicyKeepsNothingRefused(policy=policy.text)


def _parse_rule(text, pos, first):
    """(letter, count, end) of the rule at pos.  A bad first rule gets
    1.x's R9808DX; later ones say where they went wrong."""
    match = _RULE.match(text, pos)
    if match is not None and match.group(2) in PERIOD_NAMES:
        return match.group(2), int(match.group(1)), match.end()
    if first:
        raise ForgetPolicySyntaxError(policy=text)
    if match is None:
        raise ForgetPolicyNotARuleError(position=pos + 1, policy=text)
    raise ForgetPolicyUnknownPeriodError(
        unit=match.group(2), position=match.start(2) + 1, policy=text)


def bucket_key(letter, timestamp):
    """The calendar bucket of a Unix time for a period, in local time."""
    return time.strftime(BUCKET_FORMATS[letter], time.localtime(timestamp))


def explain(policy, generations):
    """For (gen_id, end_time) pairs, oldest first: a dict gen_id ->
    list of reasons ('hourly 3/12': the rule's 3rd newest bucket of 12),
    empty for generations the policy does not keep."""
    reasons = {gen_id: [] for gen_id, _ in generations}
    for letter, count in policy.rules:
        if count <= 0:
            continue
        picks = _bucket_representatives(letter, generations)[-count:]
        for index, gen_id in enumerate(reversed(picks)):
            reasons[gen_id].append(
                '%s %d/%d' % (PERIOD_NAMES[letter], index + 1, count))
    return reasons


def _bucket_representatives(letter, generations):
    """Newest generation of each run of consecutive same-key generations."""
    picks = []
    previous_key = None
    for gen_id, end_time in generations:
        key = bucket_key(letter, end_time)
        if picks and key == previous_key:
            picks[-1] = gen_id
        else:
            picks.append(gen_id)
        previous_key = key
    return picks


def match(policy, generations):
    """The gen_ids (oldest first) the policy keeps."""
    reasons = explain(policy, generations)
    return [gen_id for gen_id, _ in generations if reasons[gen_id]]
