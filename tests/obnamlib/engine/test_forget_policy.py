"""Forget policy: parsing (1.x codes plus the stricter rules) and the
bucket algorithm of cli.md §11, in local time."""

import calendar
import time

import pytest

from obnamlib.engine import forget_policy as fp
from tests.local_time import time_zone  # noqa: F401


@pytest.fixture
def tz(time_zone):
    """Set the local time zone for one test; UTC unless a test says."""
    return time_zone


def local(text):
    """'YYYY-MM-DD HH:MM' in the current local time zone -> Unix time."""
    return int(time.mktime(time.strptime(text, '%Y-%m-%d %H:%M')))


def utc(text):
    return calendar.timegm(time.strptime(text, '%Y-%m-%d %H:%M'))


def show(timestamp):
    return time.strftime('%Y-%m-%d %H:%M', time.localtime(timestamp))


def kept_times(policy, times):
    gens = list(enumerate(times))
    kept = fp.match(fp.parse(policy), gens)
    return [show(times[i]) for i in kept]


def series(start, step_seconds, count):
    return [start + i * step_seconds for i in range(count)]


# --- parsing -----------------------------------------------------------

@pytest.mark.parametrize('text, rules', [
    ('7d', [('d', 7)]),
    ('168h', [('h', 168)]),
    ('12h,7d,3m', [('h', 12), ('d', 7), ('m', 3)]),
    ('1y,2w', [('y', 1), ('w', 2)]),
    ('0d', [('d', 0)]),
    ('007d', [('d', 7)]),
    ('1h,', [('h', 1)]),          # trailing comma: harmless, as in 1.x
])
def test_parses_valid_policies(text, rules):
    assert fp.parse(text).rules == rules


@pytest.mark.parametrize('text, cls, code, message', [
    ('7D', fp.ForgetPolicySyntaxError, 'R9808DX',
     'Forget policy syntax error: 7D'),
    ('d', fp.ForgetPolicySyntaxError, 'R9808DX',
     'Forget policy syntax error: d'),
    ('7', fp.ForgetPolicySyntaxError, 'R9808DX',
     'Forget policy syntax error: 7'),
    (',7d', fp.ForgetPolicySyntaxError, 'R9808DX',
     'Forget policy syntax error: ,7d'),
    ('1h2d', fp.SeparatorError, 'RB927BX',
     'Forget policy must have rules separated by commas, see position 3: '
     '1h2d'),
    ('1h;2d', fp.SeparatorError, 'RB927BX',
     'Forget policy must have rules separated by commas, see position 3: '
     '1h;2d'),
    ('1d,2d', fp.DuplicatePeriodError, 'R45B50X',
     'Forget policy may not duplicate period (daily): 1d,2d'),
    ('1w,3h,2w', fp.DuplicatePeriodError, 'R45B50X',
     'Forget policy may not duplicate period (weekly): 1w,3h,2w'),
])
def test_obnam_errors_keep_their_codes_and_text(text, cls, code, message):
    with pytest.raises(cls) as info:
        fp.parse(text)
    assert info.value.code == code
    assert str(info.value) == '%s: %s' % (code, message)


@pytest.mark.parametrize('text, position', [
    ('30d, 52w', 5),              # 1.x read this as 30d
    ('1h,,2d', 4),                # 1.x: 1h
    ('1h,abc', 4),                # 1.x: 1h
    ('1h, ', 4),
])
def test_text_after_comma_that_is_not_a_rule_is_an_error(text, position):
    with pytest.raises(fp.ForgetPolicyNotARuleError) as info:
        fp.parse(text)
    assert info.value.code == 'RFB6DBX'
    assert ('at position %d: %s (' % (position, text)) in str(info.value)


@pytest.mark.parametrize('text, unit, position', [
    ('1h,5x', 'x', 5),
    ('1h,5D', 'D', 5),
    ('1h,5', '', 5),
])
def test_unknown_unit_after_comma_is_an_error(text, unit, position):
    with pytest.raises(fp.ForgetPolicyUnknownPeriodError) as info:
        fp.parse(text)
    assert str(info.value) == (
        'R727A9X: Forget policy has unknown period %r at position %d: %s '
        '(use h, d, w, m or y)' % (unit, position, text))


@pytest.mark.parametrize('text', ['', ' ', None])
def test_empty_policy_is_an_error(text):
    with pytest.raises(fp.EmptyForgetPolicyError) as info:
        fp.parse(text)
    assert info.value.code == 'RD8F86X'


def test_new_codes_do_not_collide_with_obnam_codes():
    from tests.legacy_codes import legacy_code
    for cls in (fp.ForgetPolicyNotARuleError,
                fp.ForgetPolicyUnknownPeriodError,
                fp.EmptyForgetPolicyError, fp.ForgetPolicyKeepsNothingRefused):
        assert cls.code == legacy_code(cls.__name__, 'obnamlib.forget_policy')
    for cls in (fp.ForgetPolicySyntaxError, fp.SeparatorError,
                fp.DuplicatePeriodError):
        assert cls.code == legacy_code(cls.__name__, 'obnamlib.forget_policy')


@pytest.mark.parametrize('text, nothing', [
    ('0d', True), ('0h,0y', True), ('0h,1y', False), ('1h', False)])
def test_keeps_nothing(text, nothing):
    assert fp.parse(text).keeps_nothing() is nothing


def test_keeps_nothing_error_text():
    err = fp.ForgetPolicyKeepsNothingRefused(policy='0d')
    assert str(err) == (
        'RA5AACX: Forget policy 0d keeps no generations, refusing to remove '
        'them all: give a count above zero, or name the generations to '
        'forget')


@pytest.mark.parametrize('text', ['0d', '0h,0d', '0h,0d,0w,0m,0y', '00y'])
def test_policy_keeping_nothing_is_refused(text):
    with pytest.raises(fp.ForgetPolicyKeepsNothingRefused):
        fp.refuse_keeping_nothing(fp.parse(text))


@pytest.mark.parametrize('text', ['1d', '0h,1d', '0d,1y'])
def test_policy_keeping_something_is_accepted(text):
    fp.refuse_keeping_nothing(fp.parse(text))


# --- algorithm: the worked examples of cli.md §11.3 -----------------------

def test_yarn_example_2h(tz):
    times = series(local('2015-06-01 01:00'), 1800, 8)
    assert kept_times('2h', times) == ['2015-06-01 03:30', '2015-06-01 04:30']


def test_1y_with_two_consecutive_days(tz):
    times = [local('2015-06-01 12:00'), local('2015-06-02 12:00')]
    assert kept_times('1y', times) == ['2015-06-02 12:00']


def test_48h_2d_with_hourly_backups_keeps_48_not_50(tz):
    times = series(local('2015-06-01 00:00'), 3600, 240)
    kept = kept_times('48h,2d', times)
    assert len(kept) == 48
    assert kept[0] == '2015-06-09 00:00'
    assert kept[-1] == '2015-06-10 23:00'


def test_48h_2d_with_twice_daily_backups_keeps_all_20(tz):
    times = [local('2015-06-%02d %s' % (day, hour))
             for day in range(1, 11) for hour in ('08:00', '20:00')]
    assert len(kept_times('48h,2d', times)) == 20


def test_30d_52w_with_hourly_backups_for_30_days(tz):
    times = series(local('2015-06-01 00:00'), 3600, 30 * 24)
    kept = kept_times('30d,52w', times)
    assert len(kept) == 30
    assert all(t.endswith(' 23:00') for t in kept)


def test_30d_52w_over_a_year(tz):
    """Each day's 23:00 for the last 30 days, plus the last generation of
    each %W week (a Sunday's, or 31 December's where the year splits a
    week) for the last 52 weeks."""
    times = series(local('2015-01-01 00:00'), 3600, 365 * 24)
    kept = kept_times('30d,52w', times)
    days = sorted({t[:10] for t in (show(x) for x in times)})
    daily = {d + ' 23:00' for d in days[-30:]}
    week_ends = [d for d in days
                 if time.strptime(d, '%Y-%m-%d').tm_wday == 6 or
                 d.endswith('-12-31')]
    weekly = {d + ' 23:00' for d in week_ends[-52:]}
    assert set(kept) == daily | weekly
    assert len(kept) == len(daily | weekly)


def test_daily_for_400_days_72h_7d_5w_12m_keeps_80(tz):
    # The count depends on where the month ends fall; 2014-01-01 is a start
    # for which the spec's numbers hold.
    times = series(local('2014-01-01 12:00'), 86400, 400)
    assert len(kept_times('72h,7d,5w,12m', times)) == 80


def test_hourly_for_400_days_72h_7d_5w_12m_keeps_89(tz):
    times = series(local('2014-01-01 00:00'), 3600, 400 * 24)
    assert len(kept_times('72h,7d,5w,12m', times)) == 89


def test_2w_across_new_year_uses_percent_w_weeks(tz):
    times = series(local('2014-12-29 12:00'), 86400, 8)
    assert kept_times('2w', times) == ['2015-01-04 12:00', '2015-01-05 12:00']


def test_weeks_split_at_new_year_even_mid_week(tz):
    # 2015-12-31 is a Thursday: week 2015-52 ends there, 2016-00 begins.
    times = series(local('2015-12-28 12:00'), 86400, 7)
    assert kept_times('3w', times) == [
        '2015-12-31 12:00', '2016-01-03 12:00']


def test_every_other_day_30d_keeps_30_backups_60_days(tz):
    times = series(local('2015-01-01 12:00'), 2 * 86400, 60)
    kept = kept_times('30d', times)
    assert kept == [show(t) for t in times[-30:]]


def test_3h_2d_with_backups_at_0010_and_2350(tz):
    times = [local('2015-06-%02d %s' % (day, hm))
             for day in range(1, 6) for hm in ('00:10', '23:50')]
    assert kept_times('3h,2d', times) == [
        '2015-06-04 23:50', '2015-06-05 00:10', '2015-06-05 23:50']


def test_7d_with_hourly_backups_keeps_each_days_last(tz):
    times = series(local('2015-06-01 00:00'), 3600, 20 * 24)
    kept = kept_times('7d', times)
    assert kept == ['2015-06-%02d 23:00' % d for d in range(14, 21)]


def test_7d_with_weekend_only_backups_reaches_back_weeks(tz):
    # 2015-06-06 is a Saturday
    times = [local('2015-06-%02d 12:00' % d) for d in (6, 7, 13, 14, 20, 21,
                                                        27, 28)]
    assert kept_times('7d', times) == [show(t) for t in times[1:]]


def test_168h_keeps_the_last_168_hourly_backups(tz):
    times = series(local('2015-06-01 00:00'), 3600, 20 * 24)
    kept = kept_times('168h', times)
    assert kept == [show(t) for t in times[-168:]]


def test_12h_7d_3m_is_a_union(tz):
    times = series(local('2015-01-01 00:00'), 3600, 200 * 24)
    kept = kept_times('12h,7d,3m', times)
    last12 = [show(t) for t in times[-12:]]
    # 200 days from 1 Jan ends 19 July 23:00
    daily = ['2015-07-%02d 23:00' % d for d in range(13, 20)]
    monthly = ['2015-05-31 23:00', '2015-06-30 23:00', '2015-07-19 23:00']
    assert kept == sorted(set(last12) | set(daily) | set(monthly))


def test_0d_keeps_nothing(tz):
    times = series(local('2015-06-01 00:00'), 3600, 5)
    assert kept_times('0d', times) == []


def test_zero_count_rule_is_ignored_beside_others(tz):
    times = series(local('2015-06-01 00:00'), 3600, 5)
    assert kept_times('0d,2h', times) == [show(t) for t in times[-2:]]


def test_newest_is_kept_by_any_rule(tz):
    times = series(local('2015-06-01 00:00'), 86400 * 3 + 17, 50)
    for policy in ('1h', '1d', '1w', '1m', '1y'):
        assert kept_times(policy, times)[-1] == show(times[-1])


def test_irregular_generations_over_a_year(tz):
    """Bursts and gaps: each rule counts buckets that hold backups."""
    times = []
    t = local('2015-01-01 09:00')
    gaps = [60, 3600, 7 * 3600, 86400, 3 * 86400, 11 * 86400, 600, 25 * 3600]
    while t < local('2016-01-01 00:00'):
        times.append(t)
        t += gaps[len(times) % len(gaps)]
    kept = set(kept_times('5h,4d,3w,2m,1y', times))
    shown = [show(t) for t in times]
    for fmt, n in (('%Y-%m-%d %H', 5), ('%Y-%m-%d', 4), ('%Y-%W', 3),
                   ('%Y-%m', 2), ('%Y', 1)):
        last_per_key = {}
        for stamp in times:
            last_per_key[time.strftime(fmt, time.localtime(stamp))] = stamp
        newest = sorted(last_per_key.values())[-n:]
        assert {show(x) for x in newest} <= kept
    assert len(kept) < len(shown)


# --- local time and daylight saving ---------------------------------------

def test_buckets_follow_local_time_not_utc(tz):
    tz('Europe/Helsinki')          # UTC+2 in winter
    times = [utc('2015-01-01 21:30'), utc('2015-01-01 22:30')]
    # local 23:30 on 1 Jan and 00:30 on 2 Jan: two daily buckets
    assert kept_times('2d', times) == ['2015-01-01 23:30', '2015-01-02 00:30']
    tz('UTC')
    assert kept_times('2d', times) == ['2015-01-01 22:30']


def test_hourly_backups_across_autumn_dst_change(tz):
    tz('Europe/Helsinki')
    # 2015-10-25 04:00 EEST -> 03:00 EET: local hour 03 happens twice
    times = series(utc('2015-10-24 20:00'), 3600, 10)
    kept = fp.match(fp.parse('24h'), list(enumerate(times)))
    twice = [i for i, t in enumerate(times)
             if time.localtime(t).tm_hour == 3 and
             time.localtime(t).tm_mday == 25]
    assert len(twice) == 2
    assert twice[0] not in kept and twice[1] in kept
    assert len(kept) == 9


def test_hourly_backups_across_spring_dst_change(tz):
    tz('Europe/Helsinki')
    # 2015-03-29 03:00 EET -> 04:00 EEST: no local hour 03
    times = series(utc('2015-03-28 22:00'), 3600, 6)
    assert kept_times('6h', times) == [
        '2015-03-29 00:00', '2015-03-29 01:00', '2015-03-29 02:00',
        '2015-03-29 04:00', '2015-03-29 05:00', '2015-03-29 06:00']


def test_daily_backups_at_local_noon_across_dst(tz):
    tz('Europe/Helsinki')
    times = [local('2015-10-%02d 12:00' % d) for d in range(20, 31)]
    assert kept_times('4d', times) == [
        '2015-10-%02d 12:00' % d for d in range(27, 31)]


# --- explanations ------------------------------------------------------

def test_explain_names_each_rule_and_rank(tz):
    times = series(local('2015-06-01 00:00'), 3600, 48)
    gens = list(enumerate(times))
    reasons = fp.explain(fp.parse('3h,2d'), gens)
    assert reasons[47] == ['hourly 1/3', 'daily 1/2']
    assert reasons[46] == ['hourly 2/3']
    assert reasons[45] == ['hourly 3/3']
    assert reasons[23] == ['daily 2/2']
    assert reasons[22] == []
    assert fp.match(fp.parse('3h,2d'), gens) == [23, 45, 46, 47]
