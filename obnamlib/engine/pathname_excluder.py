"""Which live paths a backup skips (cli.md §7).

Exclude and include patterns are Python regular expressions *searched*
(not anchored) in the absolute path, case-sensitively; a path that matches
any include pattern is never excluded by a pattern.  Patterns are compiled
as bytes regexps because paths are bytes.  A pattern that does not compile
is reported (in `errors`, for the backup to show as per-file errors) and
ignored, as Obnam 1.x did; it never aborts a backup.  Pruning excluded
directories, `--one-file-system` and the CACHEDIR.TAG check are the
walker's business; this module offers the tag test it needs.
"""

import errno
import os
import re

from obnamlib import errors


class ExcludePatternError(errors.ObnamError):
    code = 'R331AEX'
    msg = 'Bad {kind} pattern {pattern!r}: {reason}'


CACHEDIR_TAG = b'CACHEDIR.TAG'
CACHEDIR_SIGNATURE = b'Signature: 8a477f597d28d172789f06886806bc55'

# Values of --log that are not files.
NON_FILE_LOGS = ('', 'none', 'syslog', 'stderr')


class PathnameExcluder:
    """Compiled exclude/include patterns and the errors met compiling."""

    def __init__(self):
        self.excludes = []
        self.includes = []
        self.errors = []

    def exclude(self, pattern):
        self._add(self.excludes, 'exclude', pattern)

    def include(self, pattern):
        self._add(self.includes, 'include', pattern)

    def _add(self, compiled, kind, pattern):
        if not pattern:
            return      # empty patterns would match everything; 1.5+ skipped
        raw = os.fsencode(pattern)
        try:
            compiled.append(re.compile(raw))
        except re.error as e:
            self.errors.append(
                ExcludePatternError(kind=kind, pattern=pattern, reason=str(e)))

    def is_excluded(self, path):
        """True if the absolute bytes path matches an exclude pattern and
        no include pattern."""
        return self.excluding_pattern(path) is not None

    def excluding_pattern(self, path):
        """The exclude pattern (str) that excludes path, or None; for logs."""
        if any(regexp.search(path) for regexp in self.includes):
            return None
        for regexp in self.excludes:
            if regexp.search(path):
                return os.fsdecode(regexp.pattern)
        return None


def read_exclude_file(filename):
    """Patterns of an --exclude-from file: one per line, stripped; blank
    and `#` lines skipped.  A missing or unreadable file is RCE08AX."""
    try:
        with open(filename, 'rb') as f:
            data = f.read()
    except OSError as e:
        raise errors.ObnamIOError(
            filename=filename, errno=e.errno,
            strerror=e.strerror or os.strerror(e.errno or errno.EIO)) from e
    patterns = []
    for line in data.splitlines():
        text = os.fsdecode(line.strip())
        if text and not text.startswith('#'):
            patterns.append(text)
    return patterns


def from_settings(settings):
    """Build the excluder a backup uses: --exclude-from files' patterns,
    then --exclude, then the log file's path as an unescaped pattern (so
    rotated logs match too), and the --include patterns."""
    excluder = PathnameExcluder()
    for filename in _get(settings, 'exclude-from', []):
        for pattern in read_exclude_file(filename):
            excluder.exclude(pattern)
    for pattern in _get(settings, 'exclude', []):
        excluder.exclude(pattern)
    log = _get(settings, 'log', '')
    if log not in NON_FILE_LOGS:
        excluder.exclude(log)
    for pattern in _get(settings, 'include', []):
        excluder.include(pattern)
    return excluder


def _get(settings, name, default):
    try:
        value = settings[name]
    except KeyError:
        return default
    return default if value is None else value


def has_cachedir_signature(first_bytes):
    """True if a CACHEDIR.TAG file starts with the standard signature."""
    return first_bytes[:len(CACHEDIR_SIGNATURE)] == CACHEDIR_SIGNATURE


def is_cache_directory(fs, dirpath):
    """True if directory dirpath (bytes) on VFS fs holds a valid
    CACHEDIR.TAG; an unreadable or missing tag means no."""
    tag_path = os.path.join(dirpath, CACHEDIR_TAG)
    try:
        f = fs.open_read(tag_path)
    except (OSError, errors.ObnamError):
        return False
    try:
        return has_cachedir_signature(f.read(len(CACHEDIR_SIGNATURE)))
    except (OSError, errors.ObnamError):
        return False
    finally:
        f.close()
