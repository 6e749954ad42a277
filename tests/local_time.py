"""The local time zone set for one test (TZ plus time.tzset), restored
afterwards, so tests of local-time output do not depend on the machine.

    from tests.local_time import helsinki, utc  # noqa: F401  (fixtures)
    def test_x(helsinki): ...

or, to switch zones within a test, the `time_zone` fixture (a setter) or
the `in_time_zone(name)` context manager.
"""

import contextlib
import os
import time

import pytest


def _set_tz(value):
    if value is None:
        os.environ.pop('TZ', None)
    else:
        os.environ['TZ'] = value
    time.tzset()


@contextlib.contextmanager
def in_time_zone(name):
    """Local time is `name` (e.g. 'Europe/Helsinki') inside the block."""
    old = os.environ.get('TZ')
    _set_tz(name)
    try:
        yield
    finally:
        _set_tz(old)


@pytest.fixture
def helsinki():
    """EET/EEST: two hours east of UTC in winter, three in summer."""
    with in_time_zone('Europe/Helsinki'):
        yield


@pytest.fixture
def utc():
    with in_time_zone('UTC'):
        yield


@pytest.fixture
def time_zone():
    """A setter: time_zone('America/New_York'); starts as UTC."""
    with in_time_zone('UTC'):
        yield _set_tz
