"""Output channels of a run (cli.md §1.3): what goes where, and when the
progress display exists."""

import io

import pytest

from obnamlib.cli import ui
from tests import paths
from tests.recording_progress import RecordingProgress


def make(quiet=False, output_filename='', progress=None):
    out, err = io.StringIO(), io.StringIO()
    return ui.UserInterface(quiet=quiet, output_filename=output_filename,
                            stdout=out, stderr=err, progress=progress), \
        out, err


def test_notify_goes_to_stdout():
    u, out, err = make()
    u.notify('Pretending to remove generation 5')
    assert (out.getvalue(), err.getvalue()) == \
        ('Pretending to remove generation 5\n', '')


def test_quiet_silences_notify_but_not_errors():
    u, out, err = make(quiet=True)
    u.notify('hello')
    u.error('ERROR: it broke')
    assert (out.getvalue(), err.getvalue()) == ('', 'ERROR: it broke\n')


def test_error_keeps_existing_newline():
    u, _, err = make()
    u.error('one line\n')
    assert err.getvalue() == 'one line\n'


def test_results_go_to_output_file(tmp_path):
    path = tmp_path / 'out'
    path.write_text('old\n')
    u, out, err = make(output_filename=str(path))
    u.output.write('6\n')
    u.stdout.write('gen\n')
    u.close()
    assert path.read_text() == '6\n'
    assert out.getvalue() == 'gen\n'


def test_output_file_writes_undecodable_names_byte_exactly(tmp_path):
    import os
    path = tmp_path / 'out'
    u, _, _ = make(output_filename=str(path))
    u.output.write(os.fsdecode(b'/home/\xff\xfe name') + '\n')
    u.close()
    assert path.read_bytes() == b'/home/\xff\xfe name\n'


def test_without_output_file_results_go_to_stdout():
    u, out, _ = make()
    assert u.output is out


def test_quiet_means_no_progress_display():
    assert isinstance(ui.make_progress(quiet=True), ui.NullProgress)
    assert type(ui.make_progress(quiet=True)) is ui.NullProgress


def test_no_terminal_means_no_progress_display(tmp_path):
    progress = ui.make_progress(quiet=False,
                                tty_path=str(tmp_path / 'no-such-tty'))
    assert type(progress) is ui.NullProgress


def test_messages_clear_the_progress_display_first():
    events = []

    class Spy(ui.NullProgress):
        def clear(self):
            events.append('clear')

    u, out, _ = make(progress=Spy())
    u.notify('note')
    assert events == ['clear'] and out.getvalue() == 'note\n'


def test_recording_progress_keeps_lines():
    rec = RecordingProgress()
    u, _, _ = make(progress=rec)
    u.progress().status('1/3 done')
    u.progress().status('2/3 done')
    u.close()
    assert rec.lines == ['1/3 done', '2/3 done'] and rec.finished


# --- obnam's own status line (no ttystatus) -----------------------------

class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def status_line(columns=80):
    """A StatusLine drawing into a pipe: (line, clock, read_drawn)."""
    import os
    r, w = os.pipe()
    os.set_blocking(r, False)
    clock = FakeClock()
    line = ui.StatusLine(w, clock=clock, columns=lambda: columns)

    def drawn():
        try:
            return os.read(r, 65536)
        except BlockingIOError:
            return b''
    return line, clock, drawn


def test_status_line_draws_carriage_return_text_erase():
    line, _, drawn = status_line()
    line.status('scanning /home')
    assert drawn() == b'\rscanning /home\x1b[K'


def test_status_line_redraws_at_most_every_tenth_of_a_second():
    line, clock, drawn = status_line()
    line.status('one')
    clock.now += 0.05
    line.status('two')
    line.status('three')
    assert drawn() == b'\rone\x1b[K'
    clock.now += 0.06
    line.status('four')
    assert drawn() == b'\rfour\x1b[K'
    clock.now += 0.09
    line.status('five')
    assert drawn() == b''


def test_status_line_is_cut_to_the_terminal_width_less_one():
    line, _, drawn = status_line(columns=10)
    line.status('0123456789abcdef')
    assert drawn() == b'\r012345678\x1b[K'


def test_status_line_counts_wide_characters_as_two_columns():
    # Each of these takes two columns: four of them fill eight of nine.
    line, _, drawn = status_line(columns=10)
    line.status('\u65e5\u672c\u8a9e\u306e\u30d5\u30a1\u30a4\u30eb')
    assert drawn() == ('\r\u65e5\u672c\u8a9e\u306e'.encode()
                       + b'\x1b[K')


def test_status_line_counts_combining_marks_as_no_column():
    line, _, drawn = status_line(columns=4)
    line.status('e\u0301e\u0301e\u0301e\u0301')
    assert drawn() == '\re\u0301e\u0301e\u0301\x1b[K'.encode()


def test_status_line_on_a_one_column_terminal_draws_no_text():
    line, _, drawn = status_line(columns=1)
    line.status('text')
    assert drawn() == b'\r\x1b[K'


def test_status_line_stops_drawing_when_the_terminal_goes_away():
    import os
    r, w = os.pipe()
    line = ui.StatusLine(w, clock=FakeClock(), columns=lambda: 80)
    os.close(r)                 # the terminal is gone: EPIPE from now on
    line.status('busy')
    line.clear()
    line.finish()
    with pytest.raises(OSError):
        os.fstat(w)             # StatusLine closed its descriptor


def test_status_line_drops_control_characters():
    line, _, drawn = status_line()
    line.status('a\nb\rc\x1bd\x7fe\x9bf\tg')
    assert drawn() == b'\rabcdef' + b' ' * 2 + b'g\x1b[K'


def test_status_line_writes_undecodable_names_byte_exactly():
    import os
    line, _, drawn = status_line()
    line.status(os.fsdecode(b'/home/\xff\xfe'))
    assert drawn() == b'\r/home/\xff\xfe\x1b[K'


def test_status_line_clear_erases_the_line_once():
    line, clock, drawn = status_line()
    line.clear()
    assert drawn() == b''
    line.status('busy')
    line.clear()
    line.clear()
    assert drawn() == b'\rbusy\x1b[K\r\x1b[K'


def test_status_line_finish_leaves_the_last_state_and_stops_drawing():
    line, clock, drawn = status_line()
    line.status('busy')
    line.status('done')         # within the period: not drawn yet
    line.finish()
    clock.now += 1
    line.status('after the end')
    line.finish()
    assert drawn() == b'\rbusy\x1b[K\rdone\x1b[K\n'


def test_status_line_remove_erases_the_last_state_for_good():
    """restore and fsck: their summary is the only thing left."""
    line, clock, drawn = status_line()
    line.status('busy')
    line.remove()
    clock.now += 1
    line.status('after the end')
    line.finish()
    assert drawn() == b'\rbusy\x1b[K\r\x1b[K'


def test_status_line_finish_without_text_draws_nothing():
    line, clock, drawn = status_line()
    line.finish()
    assert drawn() == b''


def test_ttystatus_module_is_none_when_it_cannot_be_imported(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, 'ttystatus', None)
    assert ui.ttystatus_module() is None


def test_without_ttystatus_a_terminal_gets_obnams_status_line(monkeypatch):
    monkeypatch.setenv('TERM', 'xterm')
    progress = ui.make_progress(quiet=False, tty_path='/dev/null',
                                find_ttystatus=lambda: None)
    try:
        assert type(progress) is ui.StatusLine
    finally:
        progress.finish()


def test_without_ttystatus_a_dumb_terminal_gets_no_display(monkeypatch):
    monkeypatch.setenv('TERM', 'dumb')
    progress = ui.make_progress(quiet=False, tty_path='/dev/null',
                                find_ttystatus=lambda: None)
    assert type(progress) is ui.NullProgress


# --- on a real (pseudo-)terminal, in a child process ---------------------

PROGRESS_SCRIPT = '''
import sys
if %r:
    sys.modules['ttystatus'] = None     # as in a pip install
sys.path.insert(0, %r)
from obnamlib.cli import ui
u = ui.UserInterface(quiet=%r)
p = u.progress()
p.status(%r)
%s
print(type(p).__name__)
'''

# A message, then a result, then the end of the run.
NOTICE_AND_RESULT = '''
u.notify('a notice')
u.output.write('a result\\n')
u.close()
'''

# As restore and fsck end: the display finished, then the summary.
FINISH_THEN_SUMMARY = '''
p.finish()
u.output.write('the summary\\n')
%s
'''


def run_under_terminal(tmp_path, quiet, hide_ttystatus=False,
                       text='scanning /some/where', columns=80,
                       steps=NOTICE_AND_RESULT):
    """Run a script with a pseudo-terminal as its controlling terminal and
    stdout redirected to a file: return (terminal bytes, stdout bytes)."""
    from tests.terminal import run_on_terminal
    checkout = paths.CHECKOUT
    script = PROGRESS_SCRIPT % (hide_ttystatus, checkout, quiet, text, steps)
    terminal, written, _ = run_on_terminal(['-c', script], tmp_path,
                                           columns=columns, redirect=(1,))
    return terminal, written[1]


def need_ttystatus():
    """Skip unless ttystatus can be imported (python3-ttystatus on Debian;
    a pip install has none): the terminal tests' child runs this Python."""
    if ui.ttystatus_module() is None:
        pytest.skip('no ttystatus here (Debian: python3-ttystatus)')


@pytest.mark.timeout(60)
def test_progress_goes_to_the_terminal_only(tmp_path):
    need_ttystatus()
    terminal, stdout = run_under_terminal(tmp_path, quiet=False)
    assert b'scanning /some/where' in terminal
    assert stdout == b'a notice\na result\nTerminalProgress\n'


@pytest.mark.timeout(60)
def test_a_message_hides_the_line_for_good_when_nothing_follows(tmp_path):
    """ttystatus: drawn once; the notice hides it; the end of the run
    does not draw it again under the result."""
    need_ttystatus()
    terminal, _ = run_under_terminal(tmp_path, quiet=False)
    assert terminal.count(b'scanning /some/where') == 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize('hide_ttystatus', [False, True])
def test_nothing_is_drawn_after_a_finished_display(tmp_path, hide_ttystatus):
    """restore and fsck finish the display, then print their summary: the
    end of the run must not draw the line again under it."""
    if not hide_ttystatus:
        need_ttystatus()
    ended = run_under_terminal(
        tmp_path, quiet=False, hide_ttystatus=hide_ttystatus,
        steps=FINISH_THEN_SUMMARY % 'u.close()')
    finished = run_under_terminal(
        tmp_path, quiet=False, hide_ttystatus=hide_ttystatus,
        steps=FINISH_THEN_SUMMARY % '')
    assert b'scanning /some/where' in finished[0]
    assert ended == finished


@pytest.mark.timeout(60)
@pytest.mark.parametrize('hide_ttystatus', [False, True])
def test_quiet_run_draws_nothing_on_the_terminal(tmp_path, hide_ttystatus):
    terminal, stdout = run_under_terminal(tmp_path, quiet=True,
                                          hide_ttystatus=hide_ttystatus)
    assert terminal == b''
    assert stdout == b'a result\nNullProgress\n'


@pytest.mark.timeout(60)
def test_without_ttystatus_progress_goes_to_the_terminal_only(tmp_path):
    terminal, stdout = run_under_terminal(tmp_path, quiet=False,
                                          hide_ttystatus=True)
    # drawn, erased before the notice, and not drawn again under it
    assert terminal == b'\rscanning /some/where\x1b[K\r\x1b[K'
    assert stdout == b'a notice\na result\nStatusLine\n'


@pytest.mark.timeout(60)
def test_without_ttystatus_the_line_fits_the_terminal(tmp_path):
    terminal, _ = run_under_terminal(tmp_path, quiet=False,
                                     hide_ttystatus=True, columns=20,
                                     text='/a/rather/long/path/name/here')
    assert terminal == b'\r/a/rather/long/path\x1b[K\r\x1b[K'


@pytest.mark.timeout(60)
def test_without_ttystatus_or_terminal_nothing_is_drawn(tmp_path):
    """No controlling terminal (a new session, as under cron)."""
    import os
    import subprocess
    import sys
    checkout = paths.CHECKOUT
    script = PROGRESS_SCRIPT % (True, checkout, False, 'scanning',
                                NOTICE_AND_RESULT)
    p = subprocess.run([sys.executable, '-c', script], capture_output=True,
                       start_new_session=True, stdin=subprocess.DEVNULL,
                       timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (
        0, b'a notice\na result\nNullProgress\n', b'')
