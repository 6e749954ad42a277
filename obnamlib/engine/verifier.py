"""Comparing a backed-up generation with the live file system (cli.md §9).

Every object in the generation under the given paths is compared with the
live object of the same name (extra live objects are not our business):
the metadata fields people notice changing, then, for regular files, the
content chunk by chunk, including data appended at the end.  Failures are
reported one by one; the caller decides the exit code.

A damaged repository is not a reason to stop: an object whose backed-up
metadata, listing or content cannot be read, or whose content does not
match its recorded checksum, is one more failure (the reason names the
repository's error), and every other object is still checked.

Like the restorer, it tells the repository which chunks come next
(`prefetch_chunks`): the rest of the file and the regular files the walk
checks next (over SFTP, many chunk files per round trip).
"""

import errno
import hashlib
import os
import random
import stat as stat_module

import obnamlib.errors
import obnamlib.engine.live_metadata
from obnamlib.engine import stored_names
from obnamlib.engine.listing import local_time
from obnamlib.engine.read_ahead import (READ_AHEAD_NAMES, HintedContent,
                                        chunk_size_guess)


class VerifyFailure(obnamlib.errors.ObnamError):
    """One object differs (Obnam's verify_plugin.Fail)."""
    code = 'RDF30DX'
    msg = '{filename}: {reason}'


COMPARED_FIELDS = ('st_mode', 'st_mtime_sec', 'st_mtime_nsec', 'st_nlink',
                   'groupname', 'username', 'target', 'xattr')

_EMPTY_EQUAL = ('target', 'xattr')
_DAMAGED = object()    # stands for a name whose metadata is unreadable
_NAMES = ('groupname', 'username')


class Verifier:
    """Verify generation `gen_id` of `repo` against live `fs`.

    `on_failure(VerifyFailure)` is called per failure; `on_file(path,
    size)` (optional) once per object checked, for progress.
    """

    def __init__(self, repo, fs, gen_id, on_failure, on_file=None):
        self.repo = repo
        self.fs = fs
        self.gen = gen_id
        self.on_failure = on_failure
        self.on_file = on_file or (lambda path, size: None)
        self.reader = obnamlib.engine.live_metadata.MetadataReader(fs)
        self.failures = 0
        self.checked = 0
        self.walk_stack = []      # the walk's pending entries (read-ahead)
        self.hinted = HintedContent(repo, gen_id, self._add_upcoming)

    def verify_paths(self, paths):
        """Check everything under each path (post-order)."""
        self.repo.expect_chunk_reads()
        for path in paths:
            for entry_path, backup in self.walk_generation(path):
                self.verify_one(entry_path, backup)
        return self.failures

    def verify_randomly(self, paths, count, rng=None):
        """Check `count` regular files chosen at random under the paths."""
        rng = rng or random.SystemRandom()
        files = [(p, md) for path in paths
                 for p, md in self.walk_generation(path) if md.isreg()]
        chosen = rng.sample(files, min(count, len(files)))
        for path, backup in chosen:
            self.verify_one(path, backup)
        return self.failures

    def walk_generation(self, top):
        """(path, backed-up metadata) under top, children before parents.

        The top's metadata must be readable (R3E151X if absent, the
        repository's error if damaged).  Below it, an object whose
        metadata or listing cannot be read is reported as a failure and
        the walk goes on; a damaged name that has children is still
        descended into, so its undamaged contents are checked."""
        top_md = self.repo.get_metadata(self.gen, top)
        stack = [(top, top_md, False)]
        self.walk_stack = stack
        while stack:
            path, md, expanded = stack.pop()
            if expanded:
                if md is not _DAMAGED:
                    yield path, md
                continue
            if md is not _DAMAGED and not md.isdir():
                yield path, md
                continue
            names = self._backup_call(path, self.repo.get_file_children,
                                      self.gen, path)
            if names is None:
                continue
            stack.append((path, md, True))
            for name in reversed(names):
                if not stored_names.is_safe(name):
                    self._refuse(path, name)
                    continue
                child = stored_names.child_path(path, name)
                child_md = self._backup_call(child, self.repo.get_metadata,
                                             self.gen, child)
                if child_md is None and self._has_children(child):
                    child_md = _DAMAGED
                if child_md is not None:
                    stack.append((child, child_md, False))

    def _refuse(self, dirname, name):
        """A stored name that would lead out of the tree (untrusted
        repository): a failure, and no live path is looked at."""
        self.checked += 1
        self._fail(os.fsencode(stored_names.shown_path(dirname, name)),
                   stored_names.unsafe_name_error(
                       self.repo, self.gen, dirname, name).first_line())

    def _has_children(self, path):
        try:
            return bool(self.repo.get_file_children(self.gen, path))
        except obnamlib.errors.ObnamError as e:
            obnamlib.errors.reraise_fatal(e)
            return False

    def _backup_call(self, path, method, *args):
        """method(*args), or None after reporting the repository's error
        as the failure of path."""
        try:
            return method(*args)
        except obnamlib.errors.ObnamError as e:
            obnamlib.errors.reraise_fatal(e)
            self.checked += 1
            self._fail(path, e.first_line())
            return None

    def verify_one(self, path, backup):
        """Compare one object with its backed-up metadata; True if it
        matched."""
        self.checked += 1
        self.on_file(path, backup.st_size or 0)
        try:
            st = self.fs.lstat(path)
            live = self.reader.read(path, st)
        except (OSError, obnamlib.errors.ObnamError) as e:
            obnamlib.errors.reraise_fatal(e)
            return self._fail(path, 'missing or inaccessible: %s' % (
                _strerror(e),))
        reason = metadata_difference(backup, live)
        if reason is None and backup.isreg() and \
                stat_module.S_ISREG(st.st_mode):
            reason = self._content_difference(path, backup)
        if reason is not None:
            return self._fail(path, reason)
        return True

    def _fail(self, path, reason):
        self.failures += 1
        self.on_failure(VerifyFailure(filename=path, reason=reason))
        return False

    def _content_difference(self, path, backup):
        """Why the live content differs from the backed-up one, or None.

        A damaged backup (unreadable chunk, whole-file checksum mismatch)
        is reported as such rather than as a change of the live file."""
        try:
            f = self.fs.open_read(path)
        except (OSError, obnamlib.errors.ObnamError) as e:
            obnamlib.errors.reraise_fatal(e)
            return 'missing or inaccessible: %s' % (_strerror(e),)
        digest = hashlib.md5()
        chunks = self.hinted.content(path, backup)
        try:
            reason = _compare_with_live(f, chunks, digest)
            for data in chunks:         # after a difference: is it ours?
                digest.update(data)
        except obnamlib.errors.ObnamError as e:
            obnamlib.errors.reraise_fatal(e)
            return e.first_line()
        except OSError as e:
            return 'missing or inaccessible: %s' % (_strerror(e),)
        finally:
            f.close()
        if backup.md5 is not None and digest.digest() != backup.md5:
            return ('backed-up data damaged: whole-file checksum mismatch '
                    '(%s vs %s)' % (digest.hexdigest(), backup.md5.hex()))
        return reason

    def _add_upcoming(self, window):
        """Add the chunks of the regular files the walk checks next, in its
        order (into directories too), to a hint's window."""
        pending = list(self.walk_stack)
        looked_at = 0
        while pending and not window.full() and \
                looked_at < READ_AHEAD_NAMES:
            entry_path, md, expanded = pending.pop()
            looked_at += 1
            try:
                if md is _DAMAGED or md.isdir():
                    if not expanded:
                        pending.extend(reversed(
                            self._peek_children(entry_path)))
                elif md.isreg() and self.repo.get_file_data(
                        self.gen, entry_path) is None:
                    ids = self.repo.get_file_chunk_ids(self.gen, entry_path)
                    window.add(ids, chunk_size_guess(md, ids))
            except obnamlib.errors.ObnamError as e:
                obnamlib.errors.reraise_fatal(e)
                continue        # reported when the walk gets there

    def _peek_children(self, path):
        """The walk's entries for the children of path, looked at early."""
        entries = []
        for name in self.repo.get_file_children(self.gen, path):
            if not stored_names.is_safe(name):
                continue        # refused when the walk gets there
            child = stored_names.child_path(path, name)
            try:
                entries.append((child, self.repo.get_metadata(self.gen, child),
                                False))
            except obnamlib.errors.ObnamError as e:
                obnamlib.errors.reraise_fatal(e)
        return entries


def _compare_with_live(f, chunks, digest):
    """Read the live file along the backed-up chunks (hashing them) until
    the first difference; its reason, or None."""
    for data in chunks:
        digest.update(data)
        if _read_exactly(f, len(data)) != data:
            return 'data changed'
    if f.read(1):
        return 'more data at end of file'
    return None


def metadata_difference(backup, live):
    """'metadata change: FIELD (BACKUP vs LIVE)' for the first differing
    compared field, or None.  Values as Obnam 1.x showed them, except
    the modification time: a local time as ls and generations show it,
    not seconds since the epoch."""
    for field in COMPARED_FIELDS:
        old = getattr(backup, field)
        new = getattr(live, field)
        if field in _EMPTY_EQUAL:
            old = old or b''
            new = new or b''
        elif field in _NAMES and new is None:
            continue    # the live side cannot tell (SFTP lstat has no names)
        if old != new:
            shown = local_time if field == 'st_mtime_sec' else _py2_repr
            return 'metadata change: %s (%s vs %s)' % (
                field, shown(old), shown(new))
    return None


def _py2_repr(value):
    """Values as Obnam 1.x (Python 2) showed them: 'abc', not b'abc'."""
    if isinstance(value, bytes):
        return repr(value)[1:]
    return repr(value)


def _read_exactly(f, size):
    parts = []
    while size > 0:
        data = f.read(size)
        if not data:
            break
        parts.append(data)
        size -= len(data)
    return b''.join(parts)


def _strerror(error):
    """The OS's words for an OSError or a live-VFS ObnamError."""
    strerror = getattr(error, 'strerror', None)
    if strerror:
        return strerror
    number = getattr(error, 'errno', None)
    if number in errno.errorcode:
        return os.strerror(number)
    return str(error)
