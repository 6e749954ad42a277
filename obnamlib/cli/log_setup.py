"""Where the log goes (cli.md §3.2, §13.2): the `log`, `log-level`,
`log-max`, `log-keep` and `log-mode` settings.

`--log FILE` appends to FILE (created with mode `log-mode`, 0600 by
default), rotated once it would grow past `log-max` bytes, keeping
`log-keep` old files (`FILE.1` the newest); lines are
`YYYY-MM-DD HH:MM:SS LEVEL message`.  `--log syslog` sends
`obnam: LEVEL message` to /dev/log, `--log stderr` writes
`LEVEL message` to stderr, and `--log none` (or no `--log`) logs nothing.
"""

import logging
import logging.handlers
import os

from obnamlib import errors

LEVELS = {
    'debug': logging.DEBUG,
    'info': logging.INFO,
    'warning': logging.WARNING,
    'error': logging.ERROR,
    'critical': logging.CRITICAL,
    'fatal': logging.FATAL,
}
FILE_FORMAT = '%(asctime)s %(levelname)s %(message)s'
FILE_TIME_FORMAT = '%Y-%m-%d %H:%M:%S'
STDERR_FORMAT = '%(levelname)s %(message)s'
SYSLOG_ADDRESS = '/dev/log'
MAX_MODE = 0o7777


class LogModeNotOctal(errors.ObnamError):
    code = 'R30FA3X'
    msg = 'log-mode {mode} is not an octal file mode (0 to 7777)'


class LogFile(logging.handlers.RotatingFileHandler):
    """A rotating log file whose new files get the permissions `mode`,
    whatever the umask (a log may name files people keep private)."""

    def __init__(self, filename, mode, max_bytes, keep):
        self.permissions = mode
        # Names of files (and of clients in a damaged repository) may be
        # any bytes: they go into the log as they are, as on stdout.
        super().__init__(filename, maxBytes=max_bytes, backupCount=keep,
                         delay=False, errors='surrogateescape')

    def _open(self):
        if not os.path.exists(self.baseFilename):
            os.close(os.open(self.baseFilename, os.O_CREAT | os.O_WRONLY,
                             self.permissions))
        return super()._open()


def log_handler(settings, progname):
    """(handler, level) for the settings; no logging means a handler that
    drops everything and a level that lets almost nothing through."""
    target = settings['log']
    level = LEVELS.get(settings['log-level'], logging.INFO)
    if target == 'syslog':
        return syslog_handler(progname), level
    if target == 'stderr':
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(STDERR_FORMAT))
        return handler, level
    if target and target != 'none':
        return file_handler(settings), level
    return logging.NullHandler(), logging.FATAL


class _SyslogFormatter(logging.Formatter):
    """Syslog takes UTF-8 text: bytes of a name that are not UTF-8 are
    shown as \\xNN escapes instead of failing the record."""

    def format(self, record):
        text = super().format(record)
        return text.encode('utf-8', 'surrogateescape').decode(
            'utf-8', 'backslashreplace')


def syslog_handler(progname):
    handler = logging.handlers.SysLogHandler(address=SYSLOG_ADDRESS)
    prefix = progname.replace('%', '%%')
    handler.setFormatter(_SyslogFormatter(
        prefix + ': %(levelname)s %(message)s'))
    return handler


def file_handler(settings):
    handler = LogFile(settings['log'], file_mode(settings['log-mode']),
                      settings['log-max'], settings['log-keep'])
    handler.setFormatter(logging.Formatter(FILE_FORMAT, FILE_TIME_FORMAT))
    return handler


def file_mode(text):
    """The permissions `log-mode` gives, as a number."""
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= MAX_MODE:
        raise LogModeNotOctal(mode=text)
    return mode


def setup_logging(settings, progname, logger=None):
    """Send the root logger (or `logger`) where the settings say."""
    handler, level = log_handler(settings, progname)
    logger = logging.getLogger() if logger is None else logger
    logger.addHandler(handler)
    logger.setLevel(level)
    return handler
