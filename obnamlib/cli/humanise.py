"""Numbers for people: sizes, speeds and durations as Obnam 1.x printed
them in the end-of-backup summary (cli.md §6.9)."""

_SIZE_UNITS = (
    (1024 ** 4, 'TiB'),
    (1024 ** 3, 'GiB'),
    (1024 ** 2, 'MiB'),
    (1024, 'KiB'),
)

_SPEED_UNITS = (
    (1024 ** 3, 'GiB/s'),
    (1024 ** 2, 'MiB/s'),
    (1024, 'KiB/s'),
)


def size(amount):
    """`97.0 KiB`: the whole number of the largest unit that fits, with a
    `.0` (1.x truncated before formatting); bytes are exact."""
    for unit, name in _SIZE_UNITS:
        if amount >= unit:
            return '%.1f %s' % (amount // unit, name)
    return '%.1f B' % amount


def size_decimal(amount):
    """`3.3 MiB`: one real decimal, for the outputs 1.x did not have."""
    return _scaled(amount, _SIZE_UNITS, 'B')


def speed(amount, seconds):
    """Average speed with one real decimal: `1.5 MiB/s`."""
    if seconds <= 0:
        return '0.0 B/s'
    return _scaled(amount / seconds, _SPEED_UNITS, 'B/s')


def _scaled(amount, units, smallest):
    for unit, name in units:
        if amount >= unit:
            return '%.1f %s' % (amount / unit, name)
    return '%.1f %s' % (amount, smallest)


def duration(seconds):
    """`1h2m3s`, `5m`, `1h1s`, `0s` for 0.3 s, `60s` for 59.6 s, and the
    empty string for exactly zero, as 1.x did."""
    parts = []
    if seconds >= 3600:
        hours = int(seconds // 3600)
        parts.append('%dh' % hours)
        seconds -= hours * 3600
    if seconds >= 60:
        minutes = int(seconds // 60)
        parts.append('%dm' % minutes)
        seconds -= minutes * 60
    if seconds > 0:
        parts.append('%.0fs' % seconds)
    return ''.join(parts)
