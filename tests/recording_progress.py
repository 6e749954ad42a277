"""A progress display that keeps what it is shown: the test double for
obnamlib.cli.ui's displays, given to engines and commands in tests."""

from obnamlib.cli import ui


class RecordingProgress(ui.NullProgress):
    """Keeps every status line, and whether the run finished."""

    def __init__(self):
        self.lines = []
        self.finished = False

    def status(self, text):
        self.lines.append(text)

    def finish(self):
        self.finished = True
