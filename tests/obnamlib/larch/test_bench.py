"""bench/larch-speed still runs (tiny size; no timing is asserted)."""

import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'bench',
                      'larch-speed')


def test_benchmark_runs_and_reports_every_phase():
    out = subprocess.run([sys.executable, SCRIPT, '3000'], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    phases = [line.split('  ')[0] for line in out.splitlines()]
    for phase in ('insert', 'commit', 'lookup', 'range scan (pairs)',
                  'clone + change 1%', 'lookup after reopen'):
        assert phase in phases, out
    assert 'ops/s' in out and 'peak RSS' in out
