"""What a restore says, and in which order: the reporter interface the
command layer implements, and the walk-order queue that lets files be
written out of the walk's order (restore's second process:
obnamlib.engine.restore_side) while what is said about them still comes
in it."""

import collections
import contextlib


class RestoreReporter:
    """Where the restorer's messages go; the command layer subclasses it."""

    def error(self, text):
        """A per-object failure (stderr, even when quiet)."""

    def notify(self, text):
        """An informational line (suppressed by --quiet)."""

    def log(self, text):
        """Detail for the log file only."""

    def restored(self, path, metadata):
        """One object is done (progress display)."""

    def downloaded(self, size):
        """size bytes of file content were fetched."""


class CallingReporter(RestoreReporter):
    """A reporter whose every message is call(name, args)."""

    def call(self, name, args):
        raise NotImplementedError

    def error(self, text):
        self.call('error', (text,))

    def notify(self, text):
        self.call('notify', (text,))

    def log(self, text):
        self.call('log', (text,))

    def restored(self, path, metadata):
        self.call('restored', (path, metadata))

    def downloaded(self, size):
        self.call('downloaded', (size,))


class WalkOrder(CallingReporter):
    """Passes messages on to `reporter` at once, unless a place in the
    walk before them is still open (reserve()): then they wait, in order,
    until it is filled (fill(), or whatever is said inside filling())."""

    def __init__(self, reporter):
        self.reporter = reporter
        self.waiting = collections.deque()  # _Place, in the walk's order
        self.into = None        # the _Place being filled, if any

    def call(self, name, args):
        if self.into is not None:
            self.into.calls.append((name, args))
        elif self.waiting:
            last = self.waiting[-1]
            if not last.filled:
                last = self._append(_Place(filled=True))
            last.calls.append((name, args))
        else:
            getattr(self.reporter, name)(*args)

    def reserve(self):
        """A place for what will be said later about the walk's object
        here."""
        return self._append(_Place(filled=False))

    def fill(self, place, calls):
        """Say calls ([(name, args)]) at the place reserved for them."""
        place.calls.extend(calls)
        place.filled = True
        self._pass_on()

    @contextlib.contextmanager
    def filling(self, place):
        """Whatever is said in the block goes to place."""
        self.into = place
        try:
            yield
        finally:
            self.into = None
            self.fill(place, ())

    def flush(self):
        """Pass on everything waiting, dropping places never filled (the
        run is ending: nothing will be said there)."""
        for place in self.waiting:
            place.filled = True
        self._pass_on()

    def _append(self, place):
        self.waiting.append(place)
        return place

    def _pass_on(self):
        waiting, reporter = self.waiting, self.reporter
        while waiting and waiting[0].filled:
            for name, args in waiting.popleft().calls:
                getattr(reporter, name)(*args)


class _Place:
    __slots__ = ('calls', 'filled')

    def __init__(self, filled):
        self.calls = []
        self.filled = filled
