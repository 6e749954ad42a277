"""Where a command's words go (cli.md §1.3): results, notices, errors and
the live progress display.

One `UserInterface` per run, `app.ui`.  Results go to `output` (stdout or
the `--output` file); what Obnam 1.x always printed on stdout goes to
`stdout`; `notify` messages go to stdout unless `--quiet` (whether or not
there is a terminal, so cron mail shows them); `error` messages go to
stderr always.  The progress display is drawn only on /dev/tty, never on
stdout or stderr, and only without `--quiet`: by ttystatus where it is
installed (Debian's python3-ttystatus), else by obnam's own `StatusLine`
(a pip install).  Engines never print: they get a progress object (in
tests, the RecordingProgress of tests/recording_progress.py).
"""

import os
import sys
import time
import unicodedata


class NullProgress:
    """A progress display that shows nothing (no terminal, or --quiet)."""

    def status(self, text):
        """Show `text` as the current one-line state of the run."""

    def clear(self):
        """Remove the display so that other output is readable."""

    def finish(self):
        """The run is over: remove the display for good."""

    def remove(self):
        """Take the display off the terminal for good, its last state too:
        a command's summary follows, and is the last thing there."""
        self.clear()
        self.finish()


class TerminalProgress(NullProgress):
    """A status line on /dev/tty via ttystatus, redrawn at most every 0.1 s.

    clear() hides the line until the next status(); finish() leaves the
    last state on the screen only if nothing was written since it was
    drawn (the summary a command prints is the last thing on the
    terminal), and after it nothing is drawn again.
    """

    FORMAT = '%String(status)'

    def __init__(self, ttystatus_module):
        self._ts = ttystatus_module.TerminalStatus(period=0.1)
        self._ts.format(self.FORMAT)
        self._shown = False     # a text set since the last clear()
        self._finished = False

    def status(self, text):
        if self._finished:
            return
        hidden = not self._shown
        self._shown = bool(text)
        self._ts['status'] = text
        if hidden and text:     # the first text after a clear: at once
            self._ts.flush()

    def clear(self):
        if self._finished:
            return
        self._ts.hide()
        self._shown = False

    def finish(self):
        if self._finished:
            return
        self._finished = True
        if self._shown:
            self._ts.flush()
            self._ts.finish()


class StatusLine(NullProgress):
    """obnam's own one-line status on the terminal, for where ttystatus is
    not installed (a pip install): `\\r`, the text, erase to the end of
    the line; redrawn at most every PERIOD seconds, cut to the terminal's
    width less one column (so the cursor never wraps), control characters
    dropped.  clear() erases the line; finish() draws the last text once
    more and ends the line, as ttystatus does, so the run's last state
    stays on the screen, unless a message was written since (clear()
    forgets the text: a command's summary stays the last thing on the
    terminal).

    `fd` is open for writing on the terminal; finish() closes it.  `clock`
    and `columns` are for tests.
    """

    PERIOD = 0.1
    ERASE_TO_END = b'\x1b[K'

    def __init__(self, fd, clock=time.monotonic, columns=None):
        self._fd = fd
        self._clock = clock
        self._columns = columns or self._terminal_columns
        self._drawn_at = None   # when the line was last drawn
        self._on_screen = False
        self._text = ''         # the newest text, drawn or not

    def status(self, text):
        self._text = text
        now = self._clock()
        if self._drawn_at is None or now - self._drawn_at >= self.PERIOD:
            self._drawn_at = now
            self._draw(text)

    def _draw(self, text, end=b''):
        line = _fit(_printable(text), self._columns() - 1)
        self._write(b'\r' + _terminal_bytes(line) + self.ERASE_TO_END + end)
        self._on_screen = not end

    def clear(self):
        self._text = ''
        if self._on_screen:
            self._write(b'\r' + self.ERASE_TO_END)
            self._on_screen = False

    def finish(self):
        if self._text:
            self._draw(self._text, end=b'\n')
            self._text = ''
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self, data):
        if self._fd is None:
            return
        try:
            os.write(self._fd, data)
        except OSError:         # the terminal went away: draw no more
            os.close(self._fd)
            self._fd = None

    def _terminal_columns(self):
        try:
            return os.get_terminal_size(self._fd).columns or 80
        except (OSError, TypeError):
            return 80


def _printable(text):
    """`text` with control characters (C0, DEL, C1) dropped and tabs
    expanded: a file name must not move the cursor."""
    return ''.join(c for c in text
                   if c == '\t' or not (ord(c) < 32 or 127 <= ord(c) < 160)
                   ).expandtabs()


def _fit(text, columns):
    """The longest start of `text` that takes at most `columns` columns
    on the terminal: East Asian wide characters take two, combining
    marks none.  A line that wrapped would leave a copy per redraw."""
    used = 0
    for end, c in enumerate(text):
        used += _columns_of(c)
        if used > columns:
            return text[:end]
    return text


def _columns_of(c):
    if unicodedata.combining(c):
        return 0
    return 2 if unicodedata.east_asian_width(c) in ('W', 'F') else 1


def _terminal_bytes(line):
    """A status line as bytes: names decoded with surrogateescape come back
    as the bytes they were."""
    try:
        return os.fsencode(line)
    except UnicodeError:
        return line.encode('utf-8', 'replace')


def ttystatus_module():
    """The ttystatus module if it can be imported, else None.

    Debian and Ubuntu package it (python3-ttystatus); PyPI does not, so a
    pip install draws with StatusLine instead.  The one place that decides.
    """
    try:
        import ttystatus
    except ImportError:
        return None
    return ttystatus


def _open_terminal(tty_path):
    """A descriptor open for writing on the controlling terminal, or None."""
    try:
        return os.open(tty_path, os.O_WRONLY | os.O_NOCTTY)
    except OSError:
        return None


def _can_redraw(term):
    """Whether the terminal type understands `\\r` and erase-to-end (as
    ttystatus, nothing is drawn for an unknown or dumb terminal)."""
    return term not in (None, '', 'dumb')


def make_progress(quiet, tty_path='/dev/tty',
                  find_ttystatus=ttystatus_module):
    """The progress display for this run: on the terminal, or nothing.

    With ttystatus installed it draws; without, obnam's own StatusLine.
    `find_ttystatus` returns the ttystatus module or None (for tests).
    """
    if quiet:
        return NullProgress()
    fd = _open_terminal(tty_path)
    if fd is None:
        return NullProgress()
    module = find_ttystatus()
    if module is not None:
        os.close(fd)
        try:
            return TerminalProgress(module)
        except Exception:   # no usable terminal description: no display
            return NullProgress()
    if not _can_redraw(os.environ.get('TERM')):
        os.close(fd)
        return NullProgress()
    return StatusLine(fd)


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
