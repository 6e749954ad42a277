"""Output channels of a run (cli.md §1.3): what goes where, and when the
progress display exists."""

import io

from obnamlib import ui


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
    rec = ui.RecordingProgress()
    u, _, _ = make(progress=rec)
    u.progress().status('1/3 done')
    u.progress().status('2/3 done')
    u.close()
    assert rec.lines == ['1/3 done', '2/3 done'] and rec.finished


PROGRESS_SCRIPT = '''
import sys
sys.path.insert(0, %r)
from obnamlib import ui
u = ui.UserInterface(quiet=%r)
p = u.progress()
p.status('scanning /some/where')
u.notify('a notice')
u.output.write('a result\\n')
u.close()
print(type(p).__name__)
'''


def run_under_terminal(tmp_path, quiet):
    """Run a script with a pseudo-terminal as its controlling terminal and
    stdout redirected to a file: return (terminal bytes, stdout bytes)."""
    import os
    from tests.terminal import run_on_terminal
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    script = PROGRESS_SCRIPT % (checkout, quiet)
    terminal, written, _ = run_on_terminal(['-c', script], tmp_path,
                                           redirect=(1,))
    return terminal, written[1]


def test_progress_goes_to_the_terminal_only(tmp_path):
    terminal, stdout = run_under_terminal(tmp_path, quiet=False)
    assert b'scanning /some/where' in terminal
    assert stdout == b'a notice\na result\nTerminalProgress\n'


def test_quiet_run_draws_nothing_on_the_terminal(tmp_path):
    terminal, stdout = run_under_terminal(tmp_path, quiet=True)
    assert terminal == b''
    assert stdout == b'a result\nNullProgress\n'
