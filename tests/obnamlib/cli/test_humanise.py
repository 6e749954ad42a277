"""Summary numbers exactly as cli.md §6.9 shows them."""

import pytest

from obnamlib.cli import humanise


@pytest.mark.parametrize('amount, text', [
    (0, '0.0 B'),
    (512, '512.0 B'),
    (1023, '1023.0 B'),
    (1024, '1.0 KiB'),
    (99327, '96.0 KiB'),        # 96.99... KiB: the integer part
    (100351, '97.0 KiB'),       # 97.999... KiB
    (1024 * 1024 - 1, '1023.0 KiB'),
    (1024 ** 2, '1.0 MiB'),
    (int(1.9 * 1024 ** 2), '1.0 MiB'),
    (5 * 1024 ** 3 + 7, '5.0 GiB'),
    (3 * 1024 ** 4, '3.0 TiB'),
    (3000 * 1024 ** 4, '3000.0 TiB'),
])
def test_size(amount, text):
    assert humanise.size(amount) == text


@pytest.mark.parametrize('amount, text', [
    (0, '0.0 B'),
    (1023, '1023.0 B'),
    (3500000, '3.3 MiB'),        # not truncated, unlike size()
    (500001, '488.3 KiB'),
    (int(1.96 * 1024 ** 3), '2.0 GiB'),
])
def test_size_decimal(amount, text):
    assert humanise.size_decimal(amount) == text


@pytest.mark.parametrize('amount, seconds, text', [
    (0, 10, '0.0 B/s'),
    (100, 0, '0.0 B/s'),
    (500, 2, '250.0 B/s'),
    (3 * 1024, 2, '1.5 KiB/s'),
    (10 * 1024 ** 2, 4, '2.5 MiB/s'),
    (3 * 1024 ** 3, 2, '1.5 GiB/s'),
    (1024 ** 2 - 1, 1, '1024.0 KiB/s'),
])
def test_speed(amount, seconds, text):
    assert humanise.speed(amount, seconds) == text


@pytest.mark.parametrize('seconds, text', [
    (3723, '1h2m3s'),
    (300, '5m'),
    (3601, '1h1s'),
    (0.3, '0s'),
    (59.6, '60s'),
    (0, ''),
    (60, '1m'),
    (3600, '1h'),
    (7260, '2h1m'),
    (86400 + 61, '24h1m1s'),
])
def test_duration(seconds, text):
    assert humanise.duration(seconds) == text
