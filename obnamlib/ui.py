"""Where a command's words go (cli.md §1.3): results, notices, errors and
the live progress display.

One `UserInterface` per run, `app.ui`.  Results go to `output` (stdout or
the `--output` file); what Obnam 1.x always printed on stdout goes to
`stdout`; `notify` messages go to stdout unless `--quiet` (whether or not
there is a terminal, so cron mail shows them); `error` messages go to
stderr always.  The progress display is drawn only on /dev/tty, never on
stdout or stderr, and only without `--quiet`.  Engines never print: they
get a progress object, and tests give them a `RecordingProgress`.
"""

import os
import sys


class NullProgress:
    """A progress display that shows nothing (no terminal, or --quiet)."""

    def status(self, text):
        """Show `text` as the current one-line state of the run."""

    def clear(self):
        """Remove the display so that other output is readable."""

    def finish(self):
        """The run is over: remove the display for good."""


class RecordingProgress(NullProgress):
    """Keeps every status line, for tests of engines and commands."""

    def __init__(self):
        self.lines = []
        self.finished = False

    def status(self, text):
        self.lines.append(text)

    def finish(self):
        self.finished = True


class TerminalProgress(NullProgress):
    """A status line on /dev/tty via ttystatus, redrawn at most every 0.1 s.

    ttystatus's own clear() also forgets its widgets, so clearing sets the
    display up again, keeping the last text for the next redraw.
    """

    FORMAT = '%String(status)'

    def __init__(self, ttystatus_module):
        self._ts = ttystatus_module.TerminalStatus(period=0.1)
        self._text = ''
        self._ts.format(self.FORMAT)
        self._ts['status'] = ''

    def status(self, text):
        self._text = text
        self._ts['status'] = text

    def clear(self):
        self._ts.clear()
        self._ts.format(self.FORMAT)
        self._ts['status'] = self._text

    def finish(self):
        self._ts.flush()
        self._ts.finish()


def _terminal_usable(tty_path):
    """True if the controlling terminal can be opened for writing."""
    try:
        fd = os.open(tty_path, os.O_WRONLY | os.O_NOCTTY)
    except OSError:
        return False
    os.close(fd)
    return True


def make_progress(quiet, tty_path='/dev/tty'):
    """The progress display for this run: on the terminal, or nothing."""
    if quiet or not _terminal_usable(tty_path):
        return NullProgress()
    try:
        import ttystatus
        progress = TerminalProgress(ttystatus)
    except Exception:       # no usable terminal description: no display
        return NullProgress()
    return progress


def open_output(filename):
    """The `--output` file (truncated), writing names byte-exactly."""
    return open(filename, 'w', encoding=sys.getfilesystemencoding(),
                errors='surrogateescape')


class UserInterface:
    """The output channels of one obnam run."""

    def __init__(self, quiet=False, output_filename='', stdout=None,
                 stderr=None, progress=None):
        self.quiet = quiet
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr
        if output_filename:
            self.output = open_output(output_filename)
            self._own_output = True
        else:
            self.output = self.stdout
            self._own_output = False
        self._progress = progress
        self._progress_made = progress is not None

    def progress(self):
        """The run's progress display (made on first use)."""
        if self._progress is None:
            self._progress = make_progress(self.quiet)
            self._progress_made = True
        return self._progress

    def notify(self, text):
        """A message for the person running obnam; --quiet silences it."""
        if not self.quiet:
            self._write(self.stdout, text)

    def error(self, text):
        """A problem the person must see, whatever the settings."""
        self._write(self.stderr, text)

    def _write(self, stream, text):
        if self._progress is not None:
            self._progress.clear()
        self.output.flush()
        stream.write(text if text.endswith('\n') else text + '\n')
        stream.flush()

    def close(self):
        """Finish the display and flush (and close) the output."""
        if self._progress is not None:
            self._progress.finish()
        self.output.flush()
        if self._own_output:
            self.output.close()
        self.stdout.flush()
