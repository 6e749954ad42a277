"""Text that the show commands print about generations and files
(cli.md §5.3, §5.6, §5.7), byte for byte as Obnam 1.x printed it.

Lines are str; bytes paths and names are decoded with os.fsdecode
(surrogateescape), so writing them back with os.fsencode gives the
original bytes.

Time zones: 1.19+ appended ` +HHMM` to local times but computed it from
the standard-time offset, which is wrong by an hour in summer.  We append
the offset that was really in force at that moment (`%z`), so the time
and its offset always name the right instant; scripts that parse the date
and time fields (as Obnam's own yarns did) see the same text.
"""

import os
import stat
import time

from obnamlib.repo import interface as ri


TIME_FORMAT = '%Y-%m-%d %H:%M:%S'


# A time no calendar date can show (a damaged or hostile repository can
# store any number): the same width as a real one.
UNSHOWABLE_TIME = '????-??-?? ??:??:??'


def calendar_time(timestamp, local=False):
    """time.struct_time of a stored time (None as 0), or None when the
    platform cannot represent it."""
    convert = time.localtime if local else time.gmtime
    try:
        return convert(timestamp or 0)
    except (OverflowError, OSError, ValueError):
        return None


def local_time(timestamp):
    """`2015-10-27 20:21:30 +0200`: local time, offset then in force."""
    when = calendar_time(timestamp, local=True)
    if when is None:
        return UNSHOWABLE_TIME
    return time.strftime(TIME_FORMAT + ' %z', when)


def utc_time(timestamp):
    when = calendar_time(timestamp)
    return UNSHOWABLE_TIME if when is None else time.strftime(TIME_FORMAT,
                                                               when)


# --- generations ---------------------------------------------------------

def generation_times(repo, gen_id):
    started = repo.get_generation_key(gen_id, ri.GEN_STARTED)
    ended = repo.get_generation_key(gen_id, ri.GEN_ENDED)
    return started, ended


def generations_lines(repo, gen_ids):
    """`generations` output for gen_ids (oldest first), without newlines."""
    return [generations_line(repo, gen_id, counts, checkpoint)
            for gen_id, counts, checkpoint
            in generation_counts(repo, gen_ids)]


def generation_counts(repo, gen_ids):
    """(gen_id, (files, bytes), is_checkpoint) for gen_ids (oldest first),
    the numbers `generations` shows.  A checkpoint without counts of its
    own has those of the generation before it, as 1.x did (its tree was a
    clone that carried them)."""
    counts = (0, 0)
    for gen_id in gen_ids:
        files = repo.get_generation_key(gen_id, ri.GEN_FILE_COUNT)
        data = repo.get_generation_key(gen_id, ri.GEN_TOTAL_DATA)
        checkpoint = bool(
            repo.get_generation_key(gen_id, ri.GEN_IS_CHECKPOINT))
        if checkpoint and files is None and data is None:
            files, data = counts
        counts = (files or 0, data or 0)
        yield gen_id, counts, checkpoint


def generations_line(repo, gen_id, counts=None, checkpoint=None):
    """`GENID<TAB>START .. END (N files, M bytes) [(checkpoint)]` without
    the newline; normal lines end in a space.  counts: (files, bytes) to
    show instead of the generation's own."""
    started, ended = generation_times(repo, gen_id)
    if counts is None:
        counts = (repo.get_generation_key(gen_id, ri.GEN_FILE_COUNT) or 0,
                  repo.get_generation_key(gen_id, ri.GEN_TOTAL_DATA) or 0)
    if checkpoint is None:
        checkpoint = repo.get_generation_key(gen_id, ri.GEN_IS_CHECKPOINT)
    return '%s\t%s .. %s (%d files, %d bytes) %s' % (
        repo.make_generation_spec(gen_id), local_time(started),
        local_time(ended), counts[0], counts[1],
        ' (checkpoint)' if checkpoint else '')


def ls_header(repo, gen_id):
    started, ended = generation_times(repo, gen_id)
    return 'Generation %s (%s - %s)' % (
        repo.make_generation_spec(gen_id), local_time(started),
        local_time(ended))


# --- ls ------------------------------------------------------------------

_KINDS = (
    # (test, the type character of `ls`, the name for scripts)
    (stat.S_ISDIR, 'd', 'dir'),
    (stat.S_ISCHR, 'c', 'char-device'),
    (stat.S_ISBLK, 'b', 'block-device'),
    (stat.S_ISREG, '-', 'file'),
    (stat.S_ISFIFO, 'p', 'fifo'),
    (stat.S_ISLNK, 'l', 'symlink'),
    (stat.S_ISSOCK, '-', 'socket'),     # '-': 1.x quirk, kept
)


def _kind(mode):
    """(type character, type name) of a mode; ('?', 'unknown') when the
    mode names no known kind."""
    for test, char, name in _KINDS:
        if test(mode):
            return char, name
    return '?', 'unknown'


def type_name(mode):
    """`file`, `dir`, `symlink`, ...: the kind of object, for scripts
    (`unknown` when the mode is missing or names no known kind)."""
    return _kind(mode or 0)[1]


def mode_string(mode):
    """`drwxr-sr-t`: type char and permission triplets with s/S, t/T."""
    mode = mode or 0
    type_char = _kind(mode)[0]
    return type_char + ''.join(_triplet(mode, who) for who in range(3))


_SPECIAL = ((stat.S_ISUID, 's'), (stat.S_ISGID, 's'), (stat.S_ISVTX, 't'))


def _triplet(mode, who):
    shift = 6 - 3 * who
    bits = (mode >> shift) & 7
    chars = [('r' if bits & 4 else '-'), ('w' if bits & 2 else '-')]
    special_bit, special_char = _SPECIAL[who]
    executable = bits & 1
    if mode & special_bit:
        chars.append(special_char if executable else special_char.upper())
    else:
        chars.append('x' if executable else '-')
    return ''.join(chars)


def ls_line(path, metadata):
    """`MODE NLINK USER GROUP SIZE MTIME(UTC) PATH[ -> TARGET]`."""
    name = os.fsdecode(path)
    if metadata.islink() and metadata.target is not None:
        name += ' -> ' + os.fsdecode(metadata.target)
    return '%s %5d %-8s %-8s %10d %s %s' % (
        mode_string(metadata.st_mode), metadata.st_nlink or 0,
        _name(metadata.username), _name(metadata.groupname),
        metadata.st_size or 0, utc_time(metadata.st_mtime_sec), name)


def _name(value):
    return os.fsdecode(value) if value else ''


# --- traversal -------------------------------------------------------------

def normalise_path(path):
    """Strip trailing slashes from a bytes path, except from `/`."""
    stripped = path.rstrip(b'/')
    return stripped or b'/'


def join(dirname, basename):
    return (dirname if dirname.endswith(b'/') else dirname + b'/') + basename


def walk(repo, gen_id, path):
    """(path, metadata) in `ls` order: the directory, its non-directory
    children sorted, then each subdirectory recursively in sorted order.
    Iterative, so deep trees do not exhaust the stack; each object's
    metadata is looked up once (a subdirectory's when its parent lists
    it)."""
    pending = [(path, repo.get_metadata(gen_id, path))]
    while pending:
        current, metadata = pending.pop()
        yield current, metadata
        if not metadata.isdir():
            continue
        subdirs = []
        for name in repo.get_file_children(gen_id, current):
            child = join(current, name)
            child_md = repo.get_metadata(gen_id, child)
            if child_md.isdir():
                subdirs.append((child, child_md))
            else:
                yield child, child_md
        pending.extend(reversed(subdirs))


# --- kdirstat --------------------------------------------------------------

def kdirstat_header(repo, gen_id):
    """The cache-file header lines (each without its newline)."""
    return [
        '[kdirstat 4.0 cache file]',
        '# Generated by obnam ' + ls_header(repo, gen_id),
        '',
        '# Do not edit!',
        '#',
        '# Type  path            size    mtime           <optional fields>',
        '',
    ]


_KDIRSTAT_TYPES = (
    (stat.S_ISREG, 'F\t'),
    (stat.S_ISDIR, 'D '),
    (stat.S_ISLNK, 'L\t'),
    (stat.S_ISBLK, 'BlockDev\t'),
    (stat.S_ISCHR, 'CharDev\t'),
    (stat.S_ISFIFO, 'FIFO\t'),      # 1.17 forgot the tab; 1.20+ has it
    (stat.S_ISSOCK, 'Socket\t'),
)


def kdirstat_line(path, metadata):
    mode = metadata.st_mode or 0
    prefix = '#UNHANDLED\t'
    for test, text in _KDIRSTAT_TYPES:
        if test(mode):
            prefix = text
            break
    return '%s%s\t%d\t%s' % (prefix, kdirstat_escape(os.fsdecode(path)),
                             metadata.st_size or 0,
                             c_hex(metadata.st_mtime_sec or 0))


def kdirstat_escape(text):
    return text.replace('%', '%25').replace(' ', '%20').replace('\t', '%09')


def c_hex(number):
    """C's `%#x`: no prefix for zero, sign before the prefix."""
    return '0' if number == 0 else '%#x' % number
