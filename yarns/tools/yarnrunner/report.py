"""Where a scenario's progress lines and failure reports go.

Progress lines keep cmdtest yarn's prefixes ("Running scenario ",
"    Running step ", "    DATADIR is ", ...) because obnam's ./check
filters on them.  A BufferedReport keeps a scenario's text until the
scenarios before it have been reported, so parallel runs print in order.
"""

import threading


class Report:
    """Writes progress to `out` and errors to `err` at once."""

    def __init__(self, out, err, quiet=False):
        self.out = out
        self.err = err
        self.quiet = quiet
        self._lock = threading.Lock()

    def info(self, level, message):
        if not self.quiet:
            self._write(self.out, '    ' * level + message + '\n')

    def notice(self, message):
        if not self.quiet:
            self._write(self.out, message + '\n')

    def error(self, message):
        self._write(self.err, message + '\n')

    def result(self, message):
        """A closing line, shown even when quiet."""
        self._write(self.out, message + '\n')

    def _write(self, stream, text):
        with self._lock:
            stream.write(text)
            stream.flush()


class BufferedReport(Report):
    """Keeps the text, in order, for a later replay()."""

    def __init__(self, quiet=False):
        super().__init__('out', 'err', quiet)
        self.pieces = []

    def _write(self, stream, text):
        self.pieces.append((stream, text))

    def replay(self, report):
        for stream, text in self.pieces:
            report._write(report.out if stream == 'out' else report.err, text)
