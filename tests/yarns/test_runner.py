"""yarn-runner end to end: synthetic .yarn files run by the executable."""

import os
import signal
import subprocess
import sys
import time

import pytest

RUNNER = os.path.abspath(os.path.join(
    os.path.dirname(__file__), '..', '..', 'yarns', 'tools', 'yarn-runner'))


def yarn(tmp_path, text, *args, env=None, name='s.yarn'):
    """Write a yarn file into tmp_path, run the runner there.

    The runner runs under the Python that runs the tests, so that the
    tests check it on each Python they run on.
    """
    (tmp_path / name).write_text(text)
    return subprocess.run(
        [sys.executable, RUNNER, *args, name], cwd=tmp_path,
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60,
        env=dict(os.environ, **(env or {})))


def code(*lines):
    """Lines as an indented Markdown code block, with prose before it."""
    return 'Prose.\n\n' + ''.join(f'    {line}\n' for line in lines) + '\n'


APPEND_MATCH = 'echo "$MATCH_1" >> "$SRCDIR/marks"'
MARK = ('IMPLEMENTS GIVEN mark (\\S+)', APPEND_MATCH,
        'IMPLEMENTS THEN mark (\\S+)', APPEND_MATCH,
        'IMPLEMENTS FINALLY mark (\\S+)', APPEND_MATCH,
        'IMPLEMENTS ASSUMING mark (\\S+)', APPEND_MATCH,
        'IMPLEMENTS ASSUMING impossible', 'false',
        'IMPLEMENTS THEN failure', 'echo to-stdout; echo to-stderr >&2; false',
        'IMPLEMENTS FINALLY failure', 'false')


def marks(tmp_path):
    path = tmp_path / 'marks'
    return path.read_text().split() if path.exists() else []


def test_passing_scenarios_exit_0_with_a_summary(tmp_path):
    r = yarn(tmp_path, code('SCENARIO one', 'GIVEN mark a', 'THEN mark b',
                            'SCENARIO two', 'THEN mark c', *MARK))
    assert r.returncode == 0, r.stderr
    assert marks(tmp_path) == ['a', 'b', 'c']
    assert 'PASS: 2 scenarios run (0 skipped' in r.stdout
    assert '3 steps' in r.stdout


def test_failing_step_fails_scenario_shows_output_and_runs_finally(tmp_path):
    r = yarn(tmp_path, code('SCENARIO bad one', 'GIVEN mark a',
                            'THEN failure', 'AND mark never',
                            'FINALLY mark cleanup', *MARK))
    assert r.returncode == 1
    assert marks(tmp_path) == ['a', 'cleanup']
    assert 'scenario "bad one": step "THEN failure" failed with exit ' \
        'code 1' in r.stderr
    assert '    to-stdout' in r.stderr
    assert '    to-stderr' in r.stderr
    assert '    + false' in r.stderr   # sh -x trace
    assert 'Failed scenarios:\n    - bad one\n' in r.stderr
    assert 'FAIL: 1 failed; 1 scenarios run' in r.stderr


def test_failing_finally_stops_later_finally_steps(tmp_path):
    r = yarn(tmp_path, code('SCENARIO s', 'THEN mark a', 'FINALLY failure',
                            'AND mark never', *MARK))
    assert r.returncode == 1
    assert marks(tmp_path) == ['a']


def test_failing_assuming_skips_scenario_and_runs_first(tmp_path):
    r = yarn(tmp_path, code('SCENARIO s', 'GIVEN mark given',
                            'ASSUMING mark assumed', 'AND impossible',
                            'THEN mark then', 'FINALLY mark cleanup',
                            'SCENARIO other', 'THEN mark other', *MARK))
    assert r.returncode == 0, r.stderr
    assert marks(tmp_path) == ['assumed', 'other']
    assert '2 scenarios run (1 skipped' in r.stdout
    assert 'Skipping scenario "s": "ASSUMING impossible" failed' in r.stdout


def test_required_assumptions_fail_the_scenario(tmp_path):
    r = yarn(tmp_path, code('SCENARIO s', 'ASSUMING impossible',
                            'THEN mark then', *MARK),
             '--require-assumptions')
    assert r.returncode == 1
    assert marks(tmp_path) == []


def test_stop_on_first_fail_runs_no_more_scenarios(tmp_path):
    text = code('SCENARIO s1', 'THEN failure', 'SCENARIO s2', 'THEN mark b',
                *MARK)
    assert marks(tmp_path) == []
    assert yarn(tmp_path, text, '--stop-on-first-fail').returncode == 1
    assert marks(tmp_path) == []
    assert yarn(tmp_path, text).returncode == 1
    assert marks(tmp_path) == ['b']


def test_missing_implementation_runs_nothing(tmp_path):
    r = yarn(tmp_path, code('SCENARIO fine', 'THEN mark a',
                            'SCENARIO broken', 'THEN nothing implements me',
                            *MARK))
    assert r.returncode == 1
    assert marks(tmp_path) == []
    assert r.stderr == ("ERROR: scenario 'broken': step \"THEN nothing "
                        "implements me\" has no matching implementation\n")


def test_allowed_missing_implementation_leaves_out_the_scenario(tmp_path):
    r = yarn(tmp_path, code('SCENARIO fine', 'THEN mark a',
                            'SCENARIO broken', 'THEN nothing implements me',
                            *MARK), '--allow-missing-steps')
    assert r.returncode == 0, r.stderr
    assert marks(tmp_path) == ['a']
    assert 'WARNING' in r.stderr
    assert r.stderr == ("WARNING: scenario 'broken': step \"THEN nothing "
                        "implements me\" has no implementation; scenario "
                        "left out\n")


def test_ambiguous_implementation_runs_nothing(tmp_path):
    r = yarn(tmp_path, code('SCENARIO s', 'THEN mark a', *MARK,
                            'IMPLEMENTS THEN mark .*', 'true'))
    assert r.returncode == 1
    assert marks(tmp_path) == []
    assert 'matches 2 implementations' in r.stderr


def test_no_scenarios_is_exit_1_and_bad_option_exit_2(tmp_path):
    r = yarn(tmp_path, 'Only prose.\n')
    assert r.returncode == 1
    assert r.stderr == ('ERROR: no scenarios found; there must be at '
                        'least one\n')
    assert yarn(tmp_path, code('SCENARIO s', 'THEN mark a', *MARK),
                '--no-such-option').returncode == 2
    assert yarn(tmp_path, code('SCENARIO s', 'THEN mark a', *MARK),
                '--jobs', '0').returncode == 2
    assert marks(tmp_path) == []


def test_no_act_checks_the_files_but_runs_no_step(tmp_path):
    text = code('SCENARIO s', 'THEN mark a', *MARK)
    assert yarn(tmp_path, text, '--no-act').returncode == 0
    assert marks(tmp_path) == []
    assert yarn(tmp_path, text + code('SCENARIO t', 'THEN unknown'),
                '--no-act').returncode == 1


def test_step_environment_and_working_directory(tmp_path):
    r = yarn(tmp_path, code(
        'SCENARIO s', 'THEN the environment is right for x-y',
        'IMPLEMENTS THEN the environment is right for (.*)',
        'test "$MATCH_1" = x-y',
        'test "$(pwd)" = "$SRCDIR"',
        'test -d "$DATADIR" && test "$(basename "$DATADIR")" = datadir',
        'test "$HOME" = "$DATADIR/HOME" && test -d "$HOME"',
        'test "$FROM_ENV_OPTION" = "a b"',
        'test "$USER" = tomjon && test "$LC_ALL" = C',
        'test -z "${LEAKED:-}"',
        'test -z "$(cat)"',
        'env > "$SRCDIR/env"'),
        '--env', 'FROM_ENV_OPTION=a b', env={'LEAKED': 'yes'})
    assert r.returncode == 0, r.stderr
    names = {line.split('=', 1)[0]
             for line in (tmp_path / 'env').read_text().splitlines()}
    assert {'DATADIR', 'SRCDIR', 'HOME', 'MATCH_1', 'PATH'} <= names
    assert 'LEAKED' not in names and 'TMPDIR' not in names


def test_each_scenario_gets_a_fresh_datadir_removed_afterwards(tmp_path):
    r = yarn(tmp_path, code(
        'SCENARIO first one', 'THEN datadir is new',
        'SCENARIO second', 'THEN datadir is new',
        'IMPLEMENTS THEN datadir is new',
        'test -z "$(ls -A "$DATADIR" | grep -v HOME)"',
        'touch "$DATADIR/left-over"',
        'echo "$DATADIR" >> "$SRCDIR/datadirs"'))
    assert r.returncode == 0, r.stderr
    datadirs = (tmp_path / 'datadirs').read_text().split()
    assert len(set(datadirs)) == 2
    assert datadirs[0].endswith('/first_one/datadir')
    assert not any(os.path.exists(d) for d in datadirs)


def test_shell_library_is_sourced_and_steps_run_sh_xeu(tmp_path):
    (tmp_path / 'lib.sh').write_text('greet() { echo "hello $1"; }\n')
    r = yarn(tmp_path, code(
        'SCENARIO s', 'THEN the library works', 'AND unset variables fail',
        'IMPLEMENTS THEN the library works',
        'test "$(greet you)" = "hello you"',
        'IMPLEMENTS THEN unset variables fail',
        'echo "$NO_SUCH_VARIABLE"'), '-s', 'lib.sh')
    assert r.returncode == 1
    assert 'step "THEN unset variables fail" failed' in r.stderr
    assert 'NO_SUCH_VARIABLE' in r.stderr


def test_unreadable_shell_library_is_a_one_line_error(tmp_path):
    (tmp_path / 'latin1.sh').write_bytes(b'# caf\xe9\n')
    text = code('SCENARIO s', 'THEN mark a', *MARK)
    r = yarn(tmp_path, text, '-s', 'latin1.sh')
    assert (r.returncode, r.stderr) == (
        1, 'ERROR: shell library latin1.sh is not UTF-8 (line 1)\n')
    r = yarn(tmp_path, text, '-s', 'missing.sh')
    assert (r.returncode, r.stderr) == (
        1, 'ERROR: cannot read shell library missing.sh: '
           'No such file or directory\n')
    assert marks(tmp_path) == []


def test_errexit_stops_a_step_at_its_first_failing_command(tmp_path):
    r = yarn(tmp_path, code('SCENARIO s', 'THEN stops early',
                            'IMPLEMENTS THEN stops early', 'false',
                            'touch "$SRCDIR/after"'))
    assert r.returncode == 1
    assert not (tmp_path / 'after').exists()


def test_run_option_selects_scenarios_by_name(tmp_path):
    text = code('SCENARIO The First', 'THEN mark a',
                'SCENARIO second', 'THEN mark b', *MARK)
    assert yarn(tmp_path, text, '-r', 'the  first').returncode == 0
    assert marks(tmp_path) == ['a']
    r = yarn(tmp_path, text, '-r', 'third')
    assert r.returncode == 1
    assert "no scenario named 'third'" in r.stderr


def test_timeout_kills_the_steps_process_group_and_runs_finally(tmp_path):
    # The step waits for a writer to a FIFO that nobody opens; a child in
    # the background does the same and must be killed along with it.
    started = time.monotonic()
    r = yarn(tmp_path, code(
        'SCENARIO hangs forever', 'WHEN it waits', 'THEN mark never',
        'FINALLY mark cleanup', *MARK,
        'IMPLEMENTS WHEN it waits',
        'mkfifo "$DATADIR/fifo"',
        'cat "$DATADIR/fifo" > /dev/null &',
        'echo $! > "$SRCDIR/child"',
        'cat "$DATADIR/fifo"'), '--timeout', '1')
    assert time.monotonic() - started < 20
    assert r.returncode == 1
    assert 'scenario "hangs forever" timed out (limit 1 s) in step ' \
        '"WHEN it waits"' in r.stderr
    assert marks(tmp_path) == ['cleanup']
    assert not process_is_running(int((tmp_path / 'child').read_text()))


def test_timeout_names_a_background_process_holding_the_output(tmp_path):
    # cmdtest's yarn would wait for ever: a step ends when its output
    # closes.  The escapee is in a session of its own, out of reach of the
    # kill; the test ends it.
    r = yarn(tmp_path, code(
        'SCENARIO leaks', 'WHEN it leaves a process behind', 'THEN mark x',
        *MARK, 'IMPLEMENTS WHEN it leaves a process behind',
        'mkfifo "$SRCDIR/fifo"',
        'setsid cat "$SRCDIR/fifo" &',
        'echo $! > "$SRCDIR/escapee"'), '--timeout', '1')
    escapee = int((tmp_path / 'escapee').read_text())
    try:
        assert r.returncode == 1
        assert 'timed out (limit 1 s) in step "WHEN it leaves' in r.stderr
        assert 'kept its stdout or stderr open' in r.stderr
    finally:
        os.kill(escapee, signal.SIGKILL)


def process_is_running(pid):
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def test_parallel_scenarios_run_at_once_and_print_in_order(tmp_path):
    # Each scenario waits for the other through a FIFO: with one job at a
    # time they would hang until the time limit.
    os.mkfifo(tmp_path / 'fifo')
    r = yarn(tmp_path, code(
        'SCENARIO reader', 'THEN it reads from the writer',
        'SCENARIO writer', 'THEN it writes to the reader',
        'IMPLEMENTS THEN it reads from the writer',
        'test "$(cat "$SRCDIR/fifo")" = hello',
        'IMPLEMENTS THEN it writes to the reader',
        'echo hello > "$SRCDIR/fifo"'), '--jobs', '2', '--timeout', '20')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines.index('Running scenario reader') < \
        lines.index('    Running step "THEN it reads from the writer"') < \
        lines.index('Running scenario writer') < \
        lines.index('    Running step "THEN it writes to the reader"')


def test_parallel_failure_is_reported_with_its_own_output(tmp_path):
    r = yarn(tmp_path, code('SCENARIO s1', 'THEN mark a',
                            'SCENARIO s2', 'THEN failure',
                            'SCENARIO s3', 'THEN mark c', *MARK),
             '--jobs', '3')
    assert r.returncode == 1
    assert sorted(marks(tmp_path)) == ['a', 'c']
    assert r.stderr.count('\n    to-stderr\n') == 1
    assert 'Failed scenarios:\n    - s2\n' in r.stderr


def test_sigterm_kills_steps_and_what_they_left_running_exit_255(tmp_path):
    (tmp_path / 's.yarn').write_text(code(
        'SCENARIO s', 'GIVEN a server', 'THEN it waits',
        'IMPLEMENTS GIVEN a server',
        'mkfifo "$DATADIR/fifo"',
        'cat "$DATADIR/fifo" > /dev/null 2>&1 &',
        'echo $! > "$SRCDIR/server"',
        'IMPLEMENTS THEN it waits',
        'echo $$ > "$SRCDIR/pid.tmp" && mv "$SRCDIR/pid.tmp" "$SRCDIR/pid"',
        'cat "$DATADIR/fifo"'))
    runner = subprocess.Popen([sys.executable, RUNNER, 's.yarn'],
                              cwd=tmp_path, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        step_pid = wait_for_pid_file(tmp_path / 'pid')
        server_pid = int((tmp_path / 'server').read_text())
        assert process_is_running(server_pid)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=20) == 255
        assert not process_is_running(step_pid)
        assert wait_until_gone(server_pid)
    finally:
        runner.kill()
        runner.communicate()


def test_sigint_stops_the_run_even_when_started_with_it_ignored(tmp_path):
    # A shell script's background job starts with SIGINT ignored (./check
    # runs the scenarios so, beside pytest); Ctrl-C must still stop it.
    (tmp_path / 's.yarn').write_text(code(
        'SCENARIO s', 'THEN it waits', 'IMPLEMENTS THEN it waits',
        'echo $$ > "$SRCDIR/pid.tmp" && mv "$SRCDIR/pid.tmp" "$SRCDIR/pid"',
        'sleep 60'))
    runner = subprocess.Popen(
        [sys.executable, RUNNER, 's.yarn'], cwd=tmp_path,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        step_pid = wait_for_pid_file(tmp_path / 'pid')
        runner.send_signal(signal.SIGINT)
        assert runner.wait(timeout=20) == 255
        assert runner.stderr.read() == b'ERROR: interrupted\n'
        assert wait_until_gone(step_pid)
    finally:
        runner.kill()
        runner.communicate()


def wait_until_gone(pid):
    """SIGTERM takes effect soon, but not at once."""
    deadline = time.monotonic() + 10
    while process_is_running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not process_is_running(pid)


def wait_for_pid_file(path):
    deadline = time.monotonic() + 20
    while not path.exists():
        if time.monotonic() > deadline:
            pytest.fail(f'{path} never appeared')
        time.sleep(0.05)
    return int(path.read_text())


def test_tempdir_option_keeps_scenarios_apart_below_it(tmp_path):
    r = yarn(tmp_path, code(
        'SCENARIO a', 'THEN datadir is below temp',
        'SCENARIO b', 'THEN datadir is below temp',
        'IMPLEMENTS THEN datadir is below temp',
        'case "$DATADIR" in "$SRCDIR"/temp/*) ;; *) exit 1 ;; esac',
        'echo "$DATADIR" >> "$SRCDIR/datadirs"'), '--tempdir', 'temp',
        '--jobs', '2')
    assert r.returncode == 0, r.stderr
    assert len(set((tmp_path / 'datadirs').read_text().split())) == 2
    assert os.listdir(tmp_path / 'temp') == []


def test_timings_list_each_scenario_with_its_status(tmp_path):
    r = yarn(tmp_path, code('SCENARIO first', 'THEN mark a',
                            'SCENARIO second', 'ASSUMING impossible',
                            'THEN mark b', *MARK), '--timings')
    assert r.returncode == 0, r.stderr
    lines = [line.split(None, 3) for line in r.stdout.splitlines()
             if ' s  ' in line]
    assert [(unit, status, name) for _, unit, status, name in lines] == [
        ('s', 'passed', 'first'), ('s', 'skipped', 'second')]
