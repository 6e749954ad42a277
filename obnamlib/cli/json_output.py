"""`--output-format=json`: one JSON document per command, for scripts.

The keys of each command are documented in doc/json-output.md, and a
yarn scenario checks every command's output against that page.  The
conventions shared by all commands live here, so they are the same
everywhere:

* Names (paths, client names) are bytes on disk.  A name is written as
  a string, UTF-8 decoded, with undecodable bytes replaced by U+FFFD;
  when that lost something, `<key>_b64` holds the exact bytes in base64.
* Times are a pair: `<key>` in seconds since the epoch (a number) and
  `<key>_utc` as ISO 8601 in UTC (`2026-12-07T02:55:45Z`); both null
  when the time is unknown.
* The document is ASCII (non-ASCII characters as \\u escapes), so it
  survives any locale, and ends in a newline.
"""

import base64
import json
import time

from obnamlib.engine import listing


def wanted(settings):
    """Whether the user asked for JSON instead of text."""
    return settings['output-format'] == 'json'


def name_fields(key, name):
    """{key: text} for a bytes (or str) name, plus {key_b64: exact bytes}
    when the name is not valid UTF-8."""
    if isinstance(name, str):
        name = name.encode('utf-8', 'surrogateescape')
    fields = {key: name.decode('utf-8', 'replace')}
    try:
        name.decode('utf-8')
    except UnicodeDecodeError:
        fields[key + '_b64'] = base64.b64encode(name).decode('ascii')
    return fields


def time_fields(key, timestamp):
    """{key: seconds since the epoch, key_utc: ISO 8601 in UTC}."""
    when = None if timestamp is None else listing.calendar_time(timestamp)
    if when is None:
        return {key: timestamp, key + '_utc': None}
    return {key: timestamp,
            key + '_utc': time.strftime('%Y-%m-%dT%H:%M:%SZ', when)}


def notices(ui, settings):
    """Where a command's notices go: ui.notify (stdout) for text; with
    JSON, stdout holds the document alone, so stderr.  --quiet silences
    them either way."""
    if not wanted(settings):
        return ui.notify

    def to_stderr(text):
        if not ui.quiet:
            ui.error(text)
    return to_stderr


def write(stream, document):
    """The whole document, pretty-printed, then a newline."""
    stream.write(json.dumps(document, indent=2, ensure_ascii=True) + '\n')
    stream.flush()
