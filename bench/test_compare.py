"""Tests of bench/compare: the ratio arithmetic, and tiny real runs.

Run with `/usr/bin/python3 -m pytest -q bench`.  The runs use a tiny
corpus and obnam only (borg and restic are exercised by the script's
real use), but real gpg and a real sshd, as the script itself does.
"""

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import lib_report  # noqa: E402
from lib_measure import Measurement  # noqa: E402

COMPARE = os.path.join(HERE, 'compare')


def measured(wall, cpu=1.0, rss=1000, repo=100):
    return Measurement(['x'], wall=wall, cpu=cpu, rss_kib=rss,
                       repo_bytes=repo)


def test_tool_ratios_divide_obnam_by_the_other_tool():
    results = {'plain': {
        'obnam': {'first': measured(1.0, cpu=2.0, rss=500, repo=300)},
        'borg': {'first': measured(4.0, cpu=1.0, rss=1000, repo=100)}}}
    ratios = lib_report.tool_ratios(results, ['first'])
    assert ratios == {'plain': {'obnam/borg': {'first': {
        'wall': 0.25, 'cpu': 2.0, 'rss_kib': 0.5, 'repo_bytes': 3.0}}}}


def test_same_as_reuses_the_named_step_and_failures_give_no_ratio():
    results = {'plain': {
        'obnam': {'check': measured(2.0),
                  'verify': Measurement(None, same_as='check')},
        'borg': {'check': Measurement(['borg'], error='exit 2: no'),
                 'verify': measured(8.0)}}}
    ratios = lib_report.tool_ratios(results, ['check', 'verify'])
    assert ratios['plain']['obnam/borg'] == {'verify': {
        'wall': 0.25, 'cpu': 1.0, 'rss_kib': 1.0, 'repo_bytes': 1.0}}


def test_mode_costs_compare_each_tool_with_its_own_plain_run():
    results = {
        'plain': {'obnam': {'first': measured(2.0, cpu=1.0)},
                  'borg': {'first': measured(1.0, cpu=1.0)}},
        'encrypted': {'obnam': {'first': measured(3.0, cpu=4.0)},
                      'borg': {'first': measured(1.5, cpu=1.0)}}}
    costs = lib_report.mode_costs(results, ['first'])
    assert costs == {'encrypted': {
        'obnam': {'first': {'wall': 1.5, 'cpu': 4.0}},
        'borg': {'first': {'wall': 1.5, 'cpu': 1.0}}}}


def test_mode_costs_need_plain_mode():
    results = {'sftp': {'obnam': {'first': measured(1.0)}}}
    assert lib_report.mode_costs(results, ['first']) == {}


def test_paired_mode_costs_take_the_median_of_each_rounds_ratio():
    # obnam's plain and encrypted times drift together between rounds:
    # each round's ratio is 1.1, the ratio of the medians would be 2.2
    rounds = [{'plain': {'obnam': {'first': measured(plain)}},
               'encrypted': {'obnam': {'first': measured(plain * 1.1)}}}
              for plain in (1.0, 2.0, 10.0)]
    rounds[1]['encrypted']['obnam']['first'] = measured(4.4)
    costs = lib_report.paired_mode_costs(rounds, ['first'])
    row = costs['encrypted']['obnam']['first']
    assert row['wall'] == pytest.approx(1.1)
    assert row['wall_rounds'] == pytest.approx([1.1, 2.2, 1.1])


def test_paired_mode_costs_skip_a_step_that_failed_in_a_round():
    ok = {'plain': {'obnam': {'first': measured(1.0)}},
          'encrypted': {'obnam': {'first': measured(1.0)}}}
    failed = {'plain': {'obnam': {'first': measured(1.0)}},
              'encrypted': {'obnam': {'first': Measurement(
                  ['o'], error='exit 1')}}}
    costs = lib_report.paired_mode_costs([ok, failed], ['first'])
    assert costs == {'encrypted': {'obnam': {}}}


@pytest.mark.parametrize('obnam, borg, noise, verdict', [
    (1.00, 1.05, 0.10, 'met'),
    (1.05, 1.05, None, 'met'),
    (1.10, 1.05, 0.08, 'within noise'),
    (1.10, 1.05, None, 'NOT met'),
    (1.20, 1.05, 0.08, 'NOT met'),
])
def test_goal_verdict(obnam, borg, noise, verdict):
    assert lib_report.goal_verdict(obnam, borg, noise) == verdict


def test_noise_is_restics_median_distance_from_one():
    assert lib_report.noise_of([0.9, 1.02, 1.3]) == pytest.approx(0.1)


def test_goal_is_printed_with_each_tools_spread_and_the_noise(capsys):
    by_tool = {tool: {'first': {'wall': walls[1], 'cpu': 1.0,
                                'wall_rounds': walls}}
               for tool, walls in (('obnam', [1.0, 1.1, 1.3]),
                                   ('borg', [1.0, 1.05, 1.2]),
                                   ('restic', [0.9, 1.0, 1.1]))}
    lib_report.print_encryption_goal(by_tool, ['first'])
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.split() == [
        'first', 'backup', 'obnam', '1.10', '(1.00-1.30),', 'borg', '1.05',
        '(1.00-1.20),', 'noise', '0.10:', 'within', 'noise']


def compare(tmp_path, *args):
    out = tmp_path / 'out.json'
    p = subprocess.run(
        ['/usr/bin/python3', COMPARE, '--scale', '0.002', '--tools', 'obnam',
         '--workdir', str(tmp_path / 'work'), '--json', str(out)]
        + list(args), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        return p.stdout, json.load(f)


@pytest.mark.slow
def test_every_mode_runs_and_is_compared_with_plain(tmp_path):
    stdout, doc = compare(tmp_path, '--mode', 'all', '--steps',
                          'first,check,verify')
    for mode in ('plain', 'encrypted', 'sftp'):
        steps = doc['results'][mode]['obnam']
        assert steps['first']['wall'] > 0
        assert steps['check']['command'][-1] == 'fsck'
        assert steps['verify'] == {'same_as': 'check'}
    assert '--encrypt-with=' in ' '.join(
        doc['results']['encrypted']['obnam']['first']['command'])
    assert doc['results']['sftp']['obnam']['first']['server_cpu'] >= 0
    assert 'server_cpu' not in doc['results']['plain']['obnam']['first']
    assert set(doc['mode_costs']) == {'encrypted', 'sftp'}
    assert doc['mode_costs']['sftp']['obnam']['check']['wall'] > 0
    assert '== mode sftp' in stdout
    assert 'sftp/plain: each tool against its own plain run' in stdout
    assert not os.path.exists(tmp_path / 'work')


def test_a_failing_tool_is_reported_and_its_later_steps_skipped(tmp_path):
    stdout, doc = compare(tmp_path, '--steps', 'first,restore',
                          '--obnam-option=--no-such-option')
    steps = doc['results']['plain']['obnam']
    assert steps['first']['error'].startswith(
        'exit 2: obnam: error: no such option: --no-such-option')
    assert steps['restore'] == {
        'error': 'skipped: its first backup failed'}
    assert 'FAILED  exit 2: obnam: error: no such option' in stdout
    assert 'skipped  its first backup failed' in stdout


def test_an_incomplete_restore_is_flagged(capsys):
    short = measured(1.0)
    short.restored_bytes = 90
    full = measured(1.0)
    full.restored_bytes = 100
    lib_report.print_incomplete_restores(
        {'obnam': {'restore': full}, 'borg': {'restore': short}}, 100)
    assert capsys.readouterr().out == (
        'WARNING: borg restored 90 bytes, the corpus holds 100\n')


def test_rounds_combine_to_medians_and_any_failure_wins():
    import lib_rounds
    rounds = [{'plain': {'obnam': {'first': measured(wall, cpu=wall),
                                   'check': check}}}
              for wall, check in ((3.0, measured(1.0)),
                                  (1.0, Measurement(['o'], error='exit 1')),
                                  (2.0, measured(1.0)))]
    combined = lib_rounds.combine(rounds)['plain']['obnam']
    first = combined['first']
    assert (first.wall, first.cpu, first.wall_min, first.wall_max) == (
        2.0, 2.0, 1.0, 3.0)
    assert combined['check'].error == 'exit 1'


def test_a_hung_command_is_killed_and_reported(monkeypatch):
    import lib_measure
    monkeypatch.setattr(lib_measure, 'timeout', 0.1)
    with pytest.raises(lib_measure.CommandFailed) as failure:
        lib_measure.run_measured(['sh', '-c', 'sleep 1000 & wait'])
    assert str(failure.value).startswith('timed out after 0.1 s (killed)\n')


def test_a_repository_that_cannot_be_made_is_reported(tmp_path):
    """A stand-in borg whose `init` fails, as a full disk would make it."""
    fake = tmp_path / 'bin'
    fake.mkdir()
    (fake / 'borg').write_text(
        '#!/bin/sh\n[ "$1" = init ] && { echo "no room" >&2; exit 2; }\n'
        'exec /usr/bin/borg "$@"\n')
    (fake / 'borg').chmod(0o755)
    out = tmp_path / 'out.json'
    p = subprocess.run(
        ['/usr/bin/python3', COMPARE, '--scale', '0.002', '--tools',
         'obnam,borg', '--steps', 'first', '--json', str(out)],
        capture_output=True, text=True,
        env=dict(os.environ, PATH='%s:%s' % (fake, os.environ['PATH'])))
    assert p.returncode == 0, p.stderr
    with open(out) as f:
        borg = json.load(f)['results']['plain']['borg']
    assert borg['init']['error'].startswith('exit 2: no room\n')
    assert borg['first'] == {
        'error': 'skipped: creating the repository failed: exit 2: no room'}
    assert '-- plain borg create repository\n   exit 2: no room\n' in p.stdout


def test_each_measured_command_starts_with_nothing_left_to_write_back(
        monkeypatch, tmp_path):
    """obnam's syncfs at the end of a backup would otherwise write back
    the mutated corpus or the previous tool's repository, in its time."""
    import lib_steps
    events = []
    monkeypatch.setattr(lib_steps.os, 'sync', lambda: events.append('sync'))
    monkeypatch.setattr(lib_steps, 'read_into_page_cache',
                        lambda *trees: events.append(('read',) + trees))

    def fake_run(argv, env=None, cwd=None):
        events.append('run %s' % argv[0])
        return 1.0, 1.0, 1000
    monkeypatch.setattr(lib_steps, 'run_measured', fake_run)

    class Tool:
        name, mode, program, server, env = 'fake', 'plain', 'true', None, None
        repo_path = str(tmp_path)

        def backup_command(self, corpus):
            return ['backup-' + corpus]
    run = lib_steps.ToolRun(Tool(), str(tmp_path))
    run.run('first', 'c')
    run.run('mutate', 'c')
    warm = ('read', 'c', str(tmp_path))
    assert events == ['sync', warm, 'run backup-c',
                      'sync', warm, 'run backup-c']
    assert run.results['mutate'].wall == 1.0


def test_reading_into_the_page_cache_reads_every_regular_file_once(
        tmp_path):
    """What a run reads is what an earlier tool may have dropped: the
    regular files, not what symbolic links point to, nor devices."""
    from lib_measure import read_into_page_cache
    corpus, repo, outside = (tmp_path / name for name in
                             ('corpus', 'repo', 'outside'))
    (corpus / 'deep' / 'er').mkdir(parents=True)
    repo.mkdir()
    outside.mkdir()
    (corpus / 'a').write_bytes(b'x' * 3000000)
    (corpus / 'deep' / 'er' / 'b').write_bytes(b'y' * 7)
    (corpus / 'empty').write_bytes(b'')
    (repo / 'c').write_bytes(b'z' * 11)
    (outside / 'big').write_bytes(b'w' * 100000)
    (corpus / 'link').symlink_to(outside / 'big')
    os.mkfifo(str(corpus / 'fifo'))
    unreadable = corpus / 'secret'
    unreadable.write_bytes(b's' * 5)
    unreadable.chmod(0)
    expected = 3000000 + 7 + 11
    if os.access(str(unreadable), os.R_OK):     # root reads it anyway
        expected += 5
    assert read_into_page_cache(str(corpus), str(repo),
                                str(tmp_path / 'missing')) == expected


def load_compare():
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader('bench_compare', COMPARE)
    spec = importlib.util.spec_from_loader('bench_compare', loader)
    script = importlib.util.module_from_spec(spec)
    loader.exec_module(script)
    return script


def test_each_tool_runs_in_every_mode_before_the_next_tool():
    script = load_compare()
    runs = {'plain': ['obnam-p', 'borg-p', 'restic-p'],
            'encrypted': ['obnam-e', 'borg-e']}
    assert list(script.tool_major(runs)) == [
        ('plain', 'obnam-p'), ('encrypted', 'obnam-e'),
        ('plain', 'borg-p'), ('encrypted', 'borg-e'),
        ('plain', 'restic-p')]
    assert list(script.tool_major({})) == []


def test_obnam_is_byte_compiled_before_it_is_measured(tmp_path, monkeypatch):
    """Even where PYTHONDONTWRITEBYTECODE is set, as an installed package
    is: else each command compiles what it imports."""
    import lib_tools
    package = tmp_path / 'obnamlib'
    package.mkdir()
    (package / 'mod.py').write_text('X = 1\n')
    script = tmp_path / 'obnam'
    script.write_text('#!%s\n' % sys.executable)
    monkeypatch.setattr(lib_tools, 'OBNAM', str(script))
    monkeypatch.setattr(lib_tools, 'OBNAM_PACKAGES', [str(package)])
    monkeypatch.setenv('PYTHONDONTWRITEBYTECODE', '1')
    assert lib_tools.compile_obnam()
    assert [p.name for p in (package / '__pycache__').iterdir()] == [
        'mod.%s.pyc' % sys.implementation.cache_tag]
    (package / 'bad.py').write_text('def (\n')
    assert not lib_tools.compile_obnam()


def parsed(monkeypatch, *argv):
    script = load_compare()
    monkeypatch.setattr(sys, 'argv', ['compare'] + list(argv))
    return script.parse_args()


def test_all_modes_are_those_that_need_nothing_but_the_tools(monkeypatch):
    """gluster needs root and GlusterFS: it runs only when named."""
    assert parsed(monkeypatch, '--mode', 'all').modes == [
        'plain', 'encrypted', 'sftp']
    assert parsed(monkeypatch, '--mode', 'gluster,plain').modes == [
        'plain', 'gluster']


def test_cold_restores_to_the_work_directory_unless_told_otherwise(
        monkeypatch, tmp_path):
    import lib_measure
    writable = tmp_path / 'drop_caches'
    writable.write_text('')
    monkeypatch.setattr(lib_measure, 'DROP_CACHES', str(writable))
    monkeypatch.setattr(lib_measure.os, 'access', lambda path, mode: True)
    warm = parsed(monkeypatch)
    assert (warm.cold, warm.restore_dir) == (False, '/dev/shm')
    cold = parsed(monkeypatch, '--cold')
    assert (cold.cold, cold.restore_dir) == (True, '')
    told = parsed(monkeypatch, '--cold', '--restore-dir', '/dev/shm')
    assert told.restore_dir == '/dev/shm'


def test_cold_is_refused_where_the_page_cache_cannot_be_dropped(
        monkeypatch, tmp_path, capsys):
    import lib_measure
    monkeypatch.setattr(lib_measure, 'DROP_CACHES',
                        str(tmp_path / 'no' / 'drop_caches'))
    with pytest.raises(SystemExit) as exit:
        parsed(monkeypatch, '--cold')
    assert exit.value.code == 2
    assert ('--cold drops the page cache by writing to %s, which this '
            'process cannot (No such file or directory)' % (
                tmp_path / 'no' / 'drop_caches')) in capsys.readouterr().err


def test_cold_drops_the_page_cache_instead_of_warming_it(
        monkeypatch, tmp_path):
    import lib_steps
    events = []
    monkeypatch.setattr(lib_steps.os, 'sync', lambda: events.append('sync'))
    monkeypatch.setattr(lib_steps, 'drop_page_cache',
                        lambda: events.append('drop'))
    monkeypatch.setattr(lib_steps, 'read_into_page_cache',
                        lambda *trees: events.append('warm'))
    monkeypatch.setattr(lib_steps, 'run_measured',
                        lambda argv, env=None, cwd=None: (
                            events.append('run') or (1.0, 1.0, 1000)))

    class Tool:
        name, mode, program, server, env = 'fake', 'plain', 'true', None, None
        repo_path = str(tmp_path)

        def backup_command(self, corpus):
            return ['backup']
    run = lib_steps.ToolRun(Tool(), str(tmp_path), cold=True)
    run.run('first', 'c')
    run.run('nochange', 'c')
    assert events == ['sync', 'drop', 'run', 'sync', 'drop', 'run']


def test_dropping_the_page_cache_writes_3_after_a_sync(monkeypatch, tmp_path):
    import lib_measure
    target = tmp_path / 'drop_caches'
    target.write_text('')
    synced = []
    monkeypatch.setattr(lib_measure, 'DROP_CACHES', str(target))
    monkeypatch.setattr(lib_measure.os, 'sync',
                        lambda: synced.append(target.read_text()))
    lib_measure.drop_page_cache()
    assert (synced, target.read_text()) == ([''], '3\n')
    monkeypatch.setattr(lib_measure, 'DROP_CACHES', str(tmp_path))
    with pytest.raises(lib_measure.CommandFailed) as failure:
        lib_measure.drop_page_cache()
    assert str(failure.value).startswith('cannot drop the page cache: ')


def test_a_servers_cpu_time_is_measured_around_the_command(
        monkeypatch, tmp_path):
    """gluster's daemons and sshd's sessions work for the tool, outside
    its process tree."""
    import lib_steps
    monkeypatch.setattr(lib_steps, 'read_into_page_cache', lambda *t: 0)
    monkeypatch.setattr(lib_steps, 'run_measured',
                        lambda argv, env=None, cwd=None: (1.0, 1.0, 1000))

    class Server:
        spent = iter([10.0, 12.5])

        def server_cpu_seconds(self):
            return next(self.spent)

    class Tool:
        name, mode, program, server, env = 'fake', 'gluster', 'true', \
            Server(), None
        repo_path = str(tmp_path)

        def check_command(self):
            return ['check']
    run = lib_steps.ToolRun(Tool(), str(tmp_path))
    assert run.run('check', 'c').server_cpu == 2.5


def test_in_gluster_mode_each_repository_is_on_the_volume(tmp_path):
    import lib_tools

    class Volume:
        mountpoint = str(tmp_path / 'mnt')
    for name, tool_class in lib_tools.TOOLS.items():
        volume = Volume()
        tool = tool_class(str(tmp_path), 'gluster', gluster=volume)
        assert tool.repo_path == str(tmp_path / 'mnt' / (name + '-repo'))
        assert tool.server is volume
        assert tool.home.startswith(str(tmp_path / 'gluster'))
        assert 'GlusterFS' in tool.describe()
    borg = lib_tools.Borg(str(tmp_path / 'b'), 'gluster', gluster=Volume())
    assert borg.init_command()[:3] == ['borg', 'init', '--encryption=none']
