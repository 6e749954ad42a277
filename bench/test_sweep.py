"""Tests of bench/scale-sweep's table (bench/lib_sweep.py)."""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lib_sweep  # noqa: E402

GIB = 2 ** 30


def document(scale, gib, walls, load=(0.5, 1.5)):
    """A compare JSON document: walls is {tool: {step: seconds}}."""
    results = {}
    for tool, by_step in walls.items():
        results[tool] = {}
        for step, wall in by_step.items():
            if wall is None:
                results[tool][step] = {'error': 'exit 1: no'}
            elif isinstance(wall, str):
                results[tool][step] = {'same_as': wall}
            else:
                results[tool][step] = {'wall': wall, 'cpu': wall}
    return {'corpus': {'scale': scale, 'apparent_bytes': int(gib * GIB)},
            'steps': {'first': 'first backup', 'verify': 'x'},
            'results': {'plain': results}, 'page_cache': 'warm',
            'loadavg_start': [load[0], 0, 0], 'loadavg_end': [load[1], 0, 0]}


def test_each_scale_runs_compare_with_its_own_work_directory_and_json():
    assert lib_sweep.compare_argv('bench/compare', '0.3', 'first,restore',
                                  '/var/tmp/s', ['--cold']) == [
        'bench/compare', '--scale', '0.3', '--steps', 'first,restore',
        '--workdir', '/var/tmp/s/work-0.3', '--json',
        '/var/tmp/s/scale-0.3.json', '--cold']


def test_the_table_gives_seconds_per_gib_ratios_and_growth():
    docs = [
        document('3', 4.0, {'obnam': {'first': 40.0, 'verify': 'check',
                                      'check': 8.0},
                            'borg': {'first': 20.0, 'verify': 8.0},
                            'restic': {'first': None, 'verify': 4.0}}),
        document('0.1', 0.5, {'obnam': {'first': 2.0, 'verify': 'check',
                                        'check': 1.0},
                              'borg': {'first': 2.0, 'verify': 1.0},
                              'restic': {'first': 1.0, 'verify': 0.5}},
                 load=(2.0, 3.0)),
    ]
    text = lib_sweep.table(lib_sweep.load_documents(docs))
    assert [line.split() for line in text.splitlines()] == [
        'wall seconds per GiB of corpus, mode plain, page cache warm'.split(),
        'step scale GiB obnam borg restic obnam/borg obnam/restic '
        'load'.split(),
        'first backup 0.1 0.50 4.00 4.00 2.00 1.00 2.00 2.0-3.0'.split(),
        'first backup 3 4.00 10.00 5.00 - 2.00 - 0.5-1.5'.split(),
        'check, verify data 0.1 0.50 2.00 2.00 1.00 1.00 2.00 '
        '2.0-3.0'.split(),
        'check, verify data 3 4.00 2.00 2.00 1.00 1.00 2.00 0.5-1.5'.split(),
        'growth, s/GiB at scale 3 over s/GiB at scale 0.1:'.split(),
        'first backup obnam 2.50, borg 1.25, restic -'.split(),
        'check, verify data obnam 1.00, borg 1.00, restic 1.00'.split(),
    ]


def test_the_table_is_printed_again_from_json_files(tmp_path):
    paths = []
    for scale, gib in (('0.3', 0.3), ('0.1', 0.1)):
        path = tmp_path / ('scale-%s.json' % scale)
        path.write_text(json.dumps(document(scale, gib, {
            'obnam': {'first': gib * 10}})))
        paths.append(str(path))
    p = subprocess.run(['/usr/bin/python3', os.path.join(HERE, 'scale-sweep'),
                        '--table'] + paths, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines()
            if line.startswith('first backup')]
    assert [row[2:5] for row in rows] == [['0.1', '0.10', '10.00'],
                                          ['0.3', '0.30', '10.00']]


def test_ctrl_c_waits_for_compare_to_tidy_up(monkeypatch):
    """compare gets the Ctrl-C too and unmounts gluster: not to be killed
    half-way, as subprocess.run would."""
    import importlib.machinery
    import importlib.util
    path = os.path.join(HERE, 'scale-sweep')
    loader = importlib.machinery.SourceFileLoader('scale_sweep', path)
    script = importlib.util.module_from_spec(
        importlib.util.spec_from_loader('scale_sweep', loader))
    loader.exec_module(script)
    calls = []

    class Child:
        def __init__(self, argv, stdout):
            calls.append('start')

        def wait(self):
            calls.append('wait')
            if calls.count('wait') == 1:
                raise KeyboardInterrupt
            return 0

        def kill(self):
            calls.append('kill')
    monkeypatch.setattr(script.subprocess, 'Popen', Child)
    with pytest.raises(KeyboardInterrupt):
        script.run_compare(['compare'], None)
    assert calls == ['start', 'wait', 'wait']
