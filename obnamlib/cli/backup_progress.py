"""What a backup run counts, and how the counts are shown.

The engine updates a BackupProgress; the command renders it: the live
progress display (cli.md §6.10), the four-line summary (§6.9) and the log
statistics block (§13.2).  Nothing here prints; callbacks do.
"""

import logging
import time

import obnamlib.cli.humanise


class BackupProgress:
    """Counters of one backup run, plus hooks for the command.

    `on_error(text)` receives each per-file error line (for stderr);
    `on_notice(text)` each informational line (the notify channel);
    `on_change(progress)` is called after counters change (the display
    throttles itself).  All are optional.

    A `pretend` run stores and uploads nothing: its summary says so (0
    files backed up, 0 uploaded), and `pretend_line()` tells what a real
    run would back up.
    """

    def __init__(self, on_error=None, on_change=None, clock=time.time,
                 on_notice=None, pretend=False):
        self.on_error = on_error
        self.on_notice = on_notice
        self.on_change = on_change
        self.clock = clock
        self.pretend = pretend
        self.started = clock()
        self.ended = None
        self.file_count = 0          # objects found (F)
        self.backed_up_count = 0     # objects new or changed (B)
        self.scanned_bytes = 0       # bytes of file data found (S)
        self.new_data_bytes = 0      # new file data, as read
        self.uploaded_bytes = 0      # new file data as uploaded (U)
        self.written_bytes = 0       # everything written to the repo (W)
        self.read_bytes = 0          # everything read from the repo (R)
        self.errors = []             # (path, ObnamError)
        self.current = b''
        self.phase = ''
        self._storage = None         # see count_uploads_in
        self._written_mark = 0

    def count_uploads_in(self, storage):
        """Count each new chunk as the bytes `storage` (the repository's
        storage, with its `bytes_written` counter) wrote for it: the chunk
        file as stored, compressed and encrypted, so U is part of W.

        The engine reports a chunk (uploaded) right after it handed it to
        the storage, and reports a file (found) or a phase (what) before
        it writes metadata or commits; what was written since the last
        report is the chunk.  Without a storage, a chunk counts as its
        data (the engine's own tests)."""
        self._storage = storage
        self._mark_writes()

    # --- what the engine reports --------------------------------------

    def found(self, path, size):
        self._mark_writes()
        self.file_count += 1
        self.scanned_bytes += size
        self.current = path
        self._changed()

    def backed_up(self, path):
        self.backed_up_count += 1
        logging.info('Backing up %s', _show(path))

    def uploaded(self, nbytes):
        self.new_data_bytes += nbytes
        if not self.pretend:
            self.uploaded_bytes += self._written_since_mark(nbytes)
        self._changed()

    def set_io(self, written, read):
        self.written_bytes = written
        self.read_bytes = read

    def what(self, phase):
        self._mark_writes()
        self.phase = phase
        self._changed()

    def error(self, path, error, scanning=False):
        """A per-file error: remembered, logged and shown (stderr)."""
        self.errors.append((path, error))
        if scanning:
            text = 'ERROR: Cannot back up %s: %s' % (
                _show(path), _first_line(error))
        else:
            text = "ERROR: Can't back up %s: %s" % (
                _show(path), _first_line(error))
        logging.error('%s', text)
        if self.on_error:
            self.on_error(text)

    def notice(self, path, text):
        """Something a person should know about a file that is no error
        (it is backed up, but not all of it can be)."""
        line = '%s: %s' % (_show(path), text)
        logging.warning('%s', line)
        if self.on_notice:
            self.on_notice(line)

    def general_error(self, error):
        """An error not tied to one file (a bad exclude pattern)."""
        self.errors.append((None, error))
        text = 'ERROR: %s' % _first_line(error)
        logging.error('%s', text)
        if self.on_error:
            self.on_error(text)

    def finish(self):
        self.ended = self.clock()

    def _changed(self):
        if self.on_change is not None:
            self.on_change(self)

    def _mark_writes(self):
        if self._storage is not None:
            self._written_mark = self._storage.bytes_written

    def _written_since_mark(self, nbytes):
        if self._storage is None:
            return nbytes
        written = self._storage.bytes_written - self._written_mark
        self._written_mark += written
        return written

    # --- derived values ------------------------------------------------

    @property
    def duration(self):
        return (self.ended if self.ended is not None else self.clock()) - \
            self.started

    @property
    def stored_count(self):
        """B: objects stored in the repository (none when pretending)."""
        return 0 if self.pretend else self.backed_up_count

    @property
    def overhead(self):
        """O: bytes moved to and from the repository beyond the new file
        data (lookups read, metadata written): R + W - U."""
        return max(0, self.read_bytes +
                   (self.written_bytes - self.uploaded_bytes))

    @property
    def overhead_percent(self):
        """O as a share of all bytes moved, R + W (so at most 100)."""
        moved = self.read_bytes + self.written_bytes
        return 100.0 * self.overhead / moved if moved else 0.0

    def summary_lines(self):
        """The four-line end-of-backup summary (§6.9): 1.x's words, so
        scripts that read them still work."""
        duration = self.duration
        written = self.written_bytes
        speed = self.uploaded_bytes / duration if duration > 0 else 0
        return [
            'Backed up %d files (of %d found), containing %s.' % (
                self.stored_count, self.file_count,
                format_size(self.scanned_bytes)),
            'Uploaded %s file data in %s at %s average speed.' % (
                format_size(self.uploaded_bytes), format_duration(duration),
                format_speed(speed)),
            'Total download amount %s.' % format_size(self.read_bytes),
            'Total upload amount %s. Overhead was %s (%.1f %%).' % (
                format_size(written), format_size(self.overhead),
                self.overhead_percent),
        ]

    def pretend_line(self):
        """What a real run would have done, said before a pretend run's
        summary (whose counts are of what was done: nothing)."""
        return ('Pretending: would back up %d files, %s of file data '
                '(before compression and de-duplication); nothing was '
                'written.' % (self.backed_up_count,
                              format_size(self.new_data_bytes)))

    def statistics_lines(self):
        """The log statistics block (§13.2), one log line each."""
        duration = self.duration
        speed = self.uploaded_bytes / duration if duration > 0 else 0
        return [
            'Backup performance statistics:',
            '* files found: %d' % self.file_count,
            '* files backed up: %d' % self.stored_count,
            '* uploaded chunk data: %d bytes (%s)' % (
                self.uploaded_bytes, format_size(self.uploaded_bytes)),
            '* total uploaded data (incl. metadata): %d bytes (%s)' % (
                self.written_bytes, format_size(self.written_bytes)),
            '* total downloaded data (incl. metadata): %d bytes (%s)' % (
                self.read_bytes, format_size(self.read_bytes)),
            '* transfer overhead: %d bytes (%s)' % (
                self.overhead, format_size(self.overhead)),
            '* duration: %s s (%s)' % (duration, format_duration(duration)),
            '* average speed: %s' % format_speed(speed),
        ]

    def log_statistics(self):
        for line in self.statistics_lines():
            logging.info('%s', line)

    def progress_lines(self):
        """Two lines for the terminal display (§6.10, plus the speed)."""
        duration = self.duration
        first = '%s Backing up: found %d files, %s; uploaded: %s (%s)' % (
            format_elapsed(duration), self.file_count,
            format_progress_size(self.scanned_bytes),
            format_progress_size(self.uploaded_bytes),
            obnamlib.cli.humanise.speed(self.uploaded_bytes, duration))
        second = self.phase or _show(self.current)
        return [first, second]


# --- formats (§6.9, §6.10) ---------------------------------------------

_UNITS = (('TiB', 1 << 40), ('GiB', 1 << 30), ('MiB', 1 << 20),
          ('KiB', 1 << 10))


def format_size(amount):
    """Integer part in the largest unit <= amount, printed as '%.1f UNIT'."""
    return obnamlib.cli.humanise.size(int(amount))


def format_speed(bytes_per_second):
    return obnamlib.cli.humanise.speed(bytes_per_second, 1)


def format_duration(seconds):
    """3723 -> '1h2m3s', 300 -> '5m', 0.3 -> '0s', 0 -> ''."""
    return obnamlib.cli.humanise.duration(seconds)


def format_elapsed(seconds):
    seconds = int(seconds)
    return '%02dh%02dm%02ds' % (seconds // 3600, seconds // 60 % 60,
                                seconds % 60)


def format_progress_size(amount):
    for unit, size in _UNITS:
        if amount >= size:
            return '%.2f %s' % (amount / size, unit) if size > 1024 else \
                '%.1f %s' % (amount / size, unit)
    return '%d B' % amount


def _first_line(error):
    first_line = getattr(error, 'first_line', None)
    if first_line is not None:
        return first_line()
    return str(error).splitlines()[0] if str(error) else repr(error)


def _show(path):
    if isinstance(path, bytes):
        return path.decode('utf-8', 'backslashreplace')
    return path
