"""What time it is, as commands see it: the `pretend-time` setting
(`YYYY-MM-DD HH:MM:SS`, local time) when set, for tests and for trying a
retention policy "as of" a date; otherwise the real time."""

import time

from obnamlib import errors


class PretendTimeSyntaxError(errors.ObnamError):
    code = 'R1D239X'
    msg = ('--pretend-time={value} is not a time of the form '
           'YYYY-MM-DD HH:MM:SS')


PRETEND_TIME_FORMAT = '%Y-%m-%d %H:%M:%S'


def parse_pretend_time(value):
    """Local time text -> Unix seconds (int)."""
    try:
        parsed = time.strptime(value.strip(), PRETEND_TIME_FORMAT)
    except ValueError:
        raise PretendTimeSyntaxError(value=value) from None
    return int(time.mktime(parsed))


def now(settings):
    """Unix time honouring settings['pretend-time'] (settings may be any
    mapping; a missing or empty value means the real time)."""
    try:
        value = settings['pretend-time']
    except (KeyError, TypeError):
        value = ''
    if value:
        return parse_pretend_time(value)
    return time.time()
