"""--pretend-time as "now"."""

import time

import pytest

from obnamlib.cli import clock
from tests.local_time import helsinki  # noqa: F401


def test_pretend_time_is_local_time(helsinki):
    # 2015-01-01 02:00 EET is midnight UTC; summer is EEST (+3)
    assert clock.now({'pretend-time': '2015-01-01 02:00:00'}) == 1420070400
    assert clock.now({'pretend-time': '2015-07-01 03:00:00'}) == 1435708800


def test_empty_or_missing_pretend_time_is_real_time():
    before = time.time()
    assert before <= clock.now({'pretend-time': ''}) <= time.time()
    assert before <= clock.now({}) <= time.time()


@pytest.mark.parametrize('value', ['yesterday', '2015-01-01',
                                   '2015-13-01 00:00:00'])
def test_bad_pretend_time_is_an_error(value):
    with pytest.raises(clock.PretendTimeSyntaxError) as info:
        clock.now({'pretend-time': value})
    assert str(info.value) == (
        '%s: --pretend-time=%s is not a time of the form YYYY-MM-DD HH:MM:SS'
        % (clock.PretendTimeSyntaxError.code, value))
