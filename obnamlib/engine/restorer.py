"""Restoring a generation from a repository into a target directory.

cli.md §8: every path lands below the target with its full absolute path;
directories are finished (metadata set) after their contents; regular files
are written chunk by chunk with all-zero chunks left as holes and their MD5
checked; hard links are re-linked by recorded (st_dev, st_ino).  A failure
of one object is reported and the restore goes on; the run fails at the end.

On a damaged repository every object that can be read is restored.  A
regular file whose content cannot be fetched (missing or undecodable chunk,
unreadable chunk list) or does not match its recorded checksum is removed
again: whatever a restore leaves under a real name is exactly what was
backed up, and each file it could not restore is named in an error line.

The walk holds one directory listing per level of the current path, so a
restore of a million files streams.  Output goes through a reporter object.

Names read from the repository are untrusted (stored_names): one that is
empty, `.`, `..` or holds `/` or NUL is refused (R452C9X) and the rest is
restored.  With only ordinary names, every directory below the target is
one this restore made with mkdir, so nothing is ever created through a
symlink; the ancestors of a path asked for by name are checked with lstat
(a few calls per path asked for, none per file).

Before fetching a chunk it has not announced, the restorer tells the
repository which chunks come next (`prefetch_chunks`): the rest of the
current file and the regular files the walk reaches next, within the
limits of obnamlib.engine.read_ahead.  Over SFTP that turns
two round trips per small file into a few per window.  Where hints do
nothing (a plain repository in memory) none are given and nothing is
looked at ahead.

While it restores, the target asks the filesystem to place the directories
made below it where there is room (`spread_directories_below`: ext4's top
directory flag, cleared again at the end): new directories otherwise go
next to the target, into block groups the rest of the disk has filled,
where each file's inode is searched for.

Files are created, written (obnamlib.engine.restore_writer) and given
their metadata (through the open file before it is closed, where the
target can: SETS_ATTRIBUTES_OF_OPEN_FILES) in the walk's own thread, each
reported as it is done: a writer thread behind the walk measured slower
on a quiet 2-core machine, the two threads taking turns at the GIL for
every small file.  A second process is another matter: once the restore
is big enough, obnamlib.engine.restore_side has one write whole files
while the walk goes on (what is said about them keeps the walk's order,
and a directory is finished after them).
"""

import collections
import errno
import os
import stat
import time

import obnamlib.errors
import obnamlib.engine.live_metadata
import obnamlib.repo.metadata
import obnamlib.vfs.base
from obnamlib.engine import (background_md5, restore_side, restore_writer,
                             stored_names)
from obnamlib.engine.restore_reporting import RestoreReporter, WalkOrder
from obnamlib.engine.read_ahead import (READ_AHEAD_NAMES, HintedContent,
                                        chunk_size_guess)


class RestoreTargetNotEmpty(obnamlib.errors.ObnamError):
    code = 'R3E1C1X'
    msg = 'The restore --to directory ({to}) is not empty.'


class RestoreErrors(obnamlib.errors.ObnamError):
    code = 'RD6259X'
    msg = ('There were errors when restoring\n\n'
           'See previous error messages for details.')


class RestoredDataDamaged(obnamlib.errors.ObnamError):
    """The fetched content of a file is not what was backed up."""
    code = 'R2F75CX'
    msg = ('Backed-up data does not match its checksum ({actual} vs '
           '{recorded}); the file was not restored')


class RestoreStats:
    """Counters for the summary and the log statistics."""

    def __init__(self):
        self.files = 0
        self.bytes = 0
        self.started = time.time()
        self.ended = None

    @property
    def duration(self):
        return (self.ended or time.time()) - self.started


_DEVICE_OR_SPECIAL = (stat.S_IFIFO, stat.S_IFSOCK, stat.S_IFCHR, stat.S_IFBLK)

class Restorer:
    """Restores paths of one generation into `target` (bytes) on `fs`."""

    def __init__(self, repo, gen_id, fs, target, reporter=None,
                 always_restore_setuid=False, pretend=False, euid=None,
                 client_name=None, target_display=None):
        self.repo = repo
        self.gen = gen_id
        self.fs = fs
        self.target = target.rstrip(b'/') or b'/'
        self.target_display = target_display or os.fsdecode(target)
        self.reporter = WalkOrder(reporter or RestoreReporter())
        self.pretend = pretend
        self.client_name = client_name
        self.side_setup = {'target': self.target, 'euid': euid,
                           'always_restore_setuid': always_restore_setuid}
        self.applier = obnamlib.engine.live_metadata.MetadataApplier(
            fs, always_restore_setuid=always_restore_setuid, euid=euid,
            log=self._log)
        self.through_open_files = (
            obnamlib.vfs.base.SETS_ATTRIBUTES_OF_OPEN_FILES in fs.capabilities)
        self.stats = RestoreStats()
        self.failed = False
        self.hard_links = {}
        self.fetcher = _ContentFetcher(repo, gen_id, self._will_link)
        self.hasher = None      # big files' MD5s (background_md5)
        self.side_files = None  # restore_side.SideFiles, while restoring
        self.deferred = collections.deque()   # directories to finish

    def _log(self, text):
        self.reporter.log(text)

    # --- the whole run -------------------------------------------------------

    def restore(self, paths=None):
        """Restore paths (absolute bytes; default everything); raises
        RestoreErrors at the end if any object failed."""
        paths = [_normalise(p) for p in (paths or [b'/'])]
        for path in paths:
            self._check_in_generation(path)
        spread_before = None
        if not self.pretend:
            self.side_files = restore_side.SideFiles(self.repo, self.fs,
                                                     self.side_setup)
            self.repo.expect_chunk_reads(in_line=self.side_files.may_share())
            self._prepare_target()
            spread_before = self.fs.spread_directories_below(self.target,
                                                             True)
            self.hasher = background_md5.new_hasher()
            self.fetcher.claim = self._claim
        try:
            for path in paths:
                self._restore_path(path)
            self._side_answers(wait=True)
        finally:
            if self.side_files is not None:
                self.side_files.close(self._remove_unanswered)
                self.side_files = None
                self.fetcher.claim = None
            self.reporter.flush()
            if self.hasher is not None:
                self.hasher.shutdown()
                self.hasher = None
            if spread_before is False:
                self.fs.spread_directories_below(self.target, False)
        self.stats.ended = time.time()
        if self.failed:
            raise RestoreErrors()
        return self.stats

    def _check_in_generation(self, path):
        if not self.repo.file_exists(self.gen, path):
            raise obnamlib.errors.RepositoryFileDoesNotExistInGeneration(
                client_name=self.client_name or getattr(
                    self.gen, 'client_name', ''),
                genspec=self.repo.make_generation_spec(self.gen),
                filename=path)
        if path != b'/':
            for name in path.split(b'/')[1:]:
                if not stored_names.is_safe(name):  # stored: a tampered name
                    raise self._unsafe(os.path.dirname(path), name)

    def _unsafe(self, dirname, name):
        return stored_names.unsafe_name_error(
            self.repo, self.gen, dirname, name, self.client_name)

    def _prepare_target(self):
        """The target must be absent or empty; created with one mkdir."""
        if self.fs.exists(self.target):
            if self.fs.scandir(self.target):
                raise RestoreTargetNotEmpty(to=self.target_display)
        else:
            self.fs.mkdir(self.target)
        self.fs.chmod(self.target, 0o700)

    def _restore_path(self, path):
        if path != b'/' and not self.pretend:
            try:
                self._make_parents(path)
            except obnamlib.errors.ObnamError as e:
                self._failed(path, e)
                return
        md = self._metadata(path)
        if md is None:
            return
        if _is_directory(md):
            self._restore_tree(path, md)
        else:
            self._restore_leaf(path, md)

    def _make_parents(self, path):
        """The directories above path below the target, made as needed;
        one that exists must be a real directory (an earlier path asked
        for may have been restored as a symlink): never followed."""
        dest = self.target
        for name in path.split(b'/')[1:-1]:
            dest = dest + b'/' + name
            if not self.fs.exists(dest):
                self.fs.mkdir(dest, 0o700)
            elif not stat.S_ISDIR(self.fs.lstat(dest).st_mode):
                raise obnamlib.errors.ObnamSystemError(
                    filename=dest, errno=errno.ENOTDIR,
                    strerror='Not a directory (symlinks are not followed)')

    def dest(self, path):
        """Where path of the generation goes below the target."""
        return self.target if path == b'/' else self.target + path

    # --- the walk ------------------------------------------------------------

    def _restore_tree(self, top, top_md):
        """Post-order walk keeping one listing iterator per level."""
        if not self._make_directory(top):
            return
        stack = [[top, top_md, self._children(top), 0]]
        self.fetcher.start(stack)
        while stack:
            level = stack[-1]
            path, md, names, index = level
            if index == len(names):
                stack.pop()
                self._finish(path, md)
                continue
            level[3] = index + 1
            if not stored_names.is_safe(names[index]):
                self._refuse(path, names[index])
                continue
            child = stored_names.child_path(path, names[index])
            child_md = self._metadata(child)
            if child_md is None:
                continue
            if _is_directory(child_md):
                if self._make_directory(child):
                    stack.append([child, child_md, self._children(child), 0])
            else:
                self._restore_leaf(child, child_md)
        self.fetcher.stop()

    def _refuse(self, dirname, name):
        self._failed(os.fsencode(stored_names.shown_path(dirname, name)),
                     self._unsafe(dirname, name))

    def _children(self, path):
        peeked = self.fetcher.peeked_children(path)
        if peeked is not None:
            return peeked
        try:
            return list(self.repo.get_file_children(self.gen, path))
        except obnamlib.errors.ObnamError as e:
            self._failed(path, e)
            return []

    def _metadata(self, path):
        """The path's metadata; if it is unreadable, the failure is reported
        and a name with children still stands for a directory."""
        peeked = self.fetcher.take(path)
        if peeked is not None:
            return peeked
        try:
            return self.repo.get_metadata(self.gen, path)
        except obnamlib.errors.ObnamError as e:
            self._failed(path, e)
            return self._stand_in_for_directory(path)

    def _stand_in_for_directory(self, path):
        """Metadata-less stand-in for a damaged directory entry, so that
        its undamaged contents are still restored; None for a leaf."""
        try:
            children = self.repo.get_file_children(self.gen, path)
        except obnamlib.errors.ObnamError as e:
            obnamlib.errors.reraise_fatal(e)
            return None
        return obnamlib.repo.metadata.Metadata() if children else None

    def _make_directory(self, path):
        if path == b'/' or self.pretend:
            return True
        try:
            self.fs.mkdir(self.dest(path), 0o700)
            return True
        except obnamlib.errors.ObnamError as e:
            self._failed(path, e)
            return False

    def _finish(self, path, md):
        """Directory done: its metadata (the target's only for '/'), once
        the files the second process was given are written."""
        side = self.side_files
        if side is not None and side.outstanding():
            self.deferred.append((side.given, path, md,
                                  self.reporter.reserve()))
            return
        self._finish_now(path, md)

    def _finish_now(self, path, md):
        if not self.pretend:
            self._set_metadata(path, md)
        self._count(path, md)

    def _restore_leaf(self, path, md):
        if self.pretend:
            self._count(path, md)
        elif stat.S_ISREG(md.st_mode):
            if not self._link_to_earlier(path, md):
                self._write_file(path, md)
        else:
            self._create_leaf(path, md)

    def _leaf_failed(self, path, md, error):
        self._forget_link_source(path, md)
        self._failed(path, error)

    def _forget_link_source(self, path, md):
        """A failed first name cannot be linked to: the next name of the
        same inode tries to restore the data itself."""
        key = _link_key(md)
        if key is not None and self.hard_links.get(key) == self.dest(path):
            del self.hard_links[key]

    def _create_leaf(self, path, md):
        """A symlink, device or special file."""
        try:
            made = self._make_node(path, md)
        except (obnamlib.errors.ObnamError, OSError) as e:
            self._leaf_failed(path, md, e)
            return
        if made:
            self._set_metadata(path, md)
        self._count(path, md)

    def _make_node(self, path, md):
        """False for an unknown type (notified and skipped)."""
        kind = stat.S_IFMT(md.st_mode)
        dest = self.dest(path)
        if kind == stat.S_IFLNK:
            self.fs.symlink(md.target or b'', dest)
        elif kind in _DEVICE_OR_SPECIAL:
            self.fs.mknod(dest, md.st_mode, 0)
            if kind in (stat.S_IFCHR, stat.S_IFBLK):
                self.reporter.notify(
                    '%s: restored as device 0:0: repository format 6 keeps '
                    'no device number (make it again with mknod)'
                    % os.fsdecode(path))
        else:
            self.reporter.notify('Unknown file type: %s (%o)'
                                 % (os.fsdecode(path), md.st_mode))
            return False
        return True

    def _count(self, path, md):
        self.stats.files += 1
        self.reporter.restored(path, md)

    def _failed(self, path, error):
        obnamlib.errors.reraise_fatal(error)
        self.failed = True
        self.reporter.error('Failed to restore %s: %s' %
                            (os.fsdecode(path), _first_line(error)))

    def _set_metadata(self, path, md):
        if md.st_mode is not None:
            self._report_metadata(path, self._apply_metadata(path, md))

    def _apply_metadata(self, path, md, open_file=None):
        """The applier's list of errors, or the ObnamError it raised (e.g.
        a garbled xattr blob)."""
        try:
            return self.applier.apply(self.dest(path), md, open_file)
        except obnamlib.errors.ObnamError as e:
            return e

    def _report_metadata(self, path, outcome):
        if isinstance(outcome, obnamlib.errors.ObnamError):
            self._failed(path, outcome)
            return
        for error in outcome:
            self._metadata_failed(error)

    def _metadata_failed(self, error):
        self.failed = True
        self.reporter.error(_first_line(error))

    # --- regular files -------------------------------------------------------

    def _link_to_earlier(self, path, md):
        """Hard link to the first restored name of the same inode (a
        first name that failed was forgotten)."""
        key = _link_key(md)
        if key is None:
            return False
        first = self.hard_links.get(key)
        if first is None:
            self.hard_links[key] = self.dest(path)
            return False
        try:
            self.fs.link(first, self.dest(path))
        except (obnamlib.errors.ObnamError, OSError) as e:
            self._leaf_failed(path, md, e)
            return True
        self._count(path, md)
        return True

    def _write_file(self, path, md):
        side = self.side_files
        if side is not None:
            self._side_answers(wait=False)
            looked, batch = self.fetcher.claimed(path)
            if not looked:
                batch = self._claim(md)
            if batch is not None:
                chunk_ids = self._chunk_ids(path)
                if chunk_ids is not None:
                    side.offer(path, md, chunk_ids, self.reporter.reserve(),
                               batch)
                    return
            side.written_here(md)
        self.write_given(path, md, None)

    def _claim(self, md):
        """The second process's batch for a regular file, or None: it
        writes no file that later names link to."""
        if _link_key(md) is not None:
            return None
        return self.side_files.claim(md)

    def _chunk_ids(self, path):
        """The chunk ids of a file's content, or None (its content is in
        the tree, or they cannot be read: that is reported when the file
        is written here)."""
        try:
            return self.fetcher.chunk_ids(path)
        except obnamlib.errors.ObnamError as e:
            obnamlib.errors.reraise_fatal(e)
            return None

    def _side_answers(self, wait):
        """Take what the second process did (wait: all of it), write what
        it gave back, and finish the directories that waited for it."""
        side = self.side_files
        if side is None or not (side.outstanding() or self.deferred):
            return      # (every file: the usual case costs nothing more)
        for results, batch in side.answered(wait):
            if results is None:     # all removed first: Ctrl-C may come
                for path, _, _, _ in batch:
                    self._remove_unanswered(path)
                for path, md, chunk_ids, place in batch:
                    with self.reporter.filling(place):
                        self.write_given(path, md, chunk_ids)
                continue
            for (calls, files, size, failed), item in zip(results, batch):
                self.stats.files += files
                self.stats.bytes += size
                self.failed = self.failed or failed
                self.reporter.fill(item[3], calls)
        while self.deferred and self.deferred[0][0] <= side.answered_upto:
            _, path, md, place = self.deferred.popleft()
            with self.reporter.filling(place):
                self._finish_now(path, md)

    def _remove_unanswered(self, path):
        """Remove what the second process may have made of a file it did
        not answer for."""
        try:
            self.fs.remove(self.dest(path))
        except (obnamlib.errors.ObnamError, OSError):
            pass

    def will_write(self, upcoming):
        """Outside a walk (restore's second process): the deque of
        (metadata, chunk ids) of the files write_given gets next, for its
        prefetch hints; the caller takes each off as it is written."""
        self.fetcher.given = upcoming

    def write_given(self, path, md, chunk_ids):
        """Fetch the content (chunk_ids: in these chunks, if known) and
        write it in parts; a file whose fetch or write fails is removed
        again, so a damaged file never looks restored.  (A failure of the
        writing is not taken for one of the fetch: a fatal one ends the
        run.)"""
        content = restore_writer.FileContent(self.fs, self.dest(path),
                                             self.hasher)
        chunks = self.fetcher.content(path, md, chunk_ids)
        pieces, size = [], 0
        while True:
            try:
                data = next(chunks, None)
            except (obnamlib.errors.ObnamError, OSError) as e:
                self._abandon(path, md, content, e)
                return
            except BaseException:       # ending the run: nothing to report
                if not content.failed:
                    content.discard()
                raise
            if data is None:
                break
            self.stats.bytes += len(data)
            self.reporter.downloaded(len(data))
            pieces.append(data)
            size += len(data)
            if size >= restore_writer.PART_BYTES:
                if not content.failed:
                    self._write_part(path, md, content, pieces, False)
                pieces, size = [], 0
        if not content.failed:
            self._write_part(path, md, content, pieces, True)

    def _write_part(self, path, md, content, pieces, last):
        """Write pieces; at the last part check the MD5 and set the
        metadata (through the open file where the target can: what
        happened is reported after the check, as if set after it)."""
        applied = []
        try:
            content.write(pieces)
            digest = content.finish(
                self._metadata_before_close(path, md, applied)) \
                if last else None
        except (obnamlib.errors.ObnamError, OSError) as e:
            self._abandon(path, md, content, e)
            return
        except BaseException:
            self._abandon(path, md, content, None)
            raise
        if not last:
            return
        if md.md5 is not None and digest.digest() != md.md5:
            self.reporter.notify('File checksum restore error: %s (%s vs %s)'
                                 % (os.fsdecode(path), digest.hexdigest(),
                                    md.md5.hex()))
            self._abandon(path, md, content, RestoredDataDamaged(
                actual=digest.hexdigest(), recorded=md.md5.hex()))
            return
        if applied:
            self._report_metadata(path, applied[0])
        else:
            self._set_metadata(path, md)
        self._count(path, md)

    def _metadata_before_close(self, path, md, applied):
        """FileContent.finish's before_close where the target sets
        metadata through open files (fchown, fchmod, futimens: no path
        walk each), putting what happened in applied; None where the
        metadata is set by path after the close."""
        if not self.through_open_files or md.st_mode is None:
            return None
        return lambda f: applied.append(self._apply_metadata(path, md, f))

    def _abandon(self, path, md, content, error):
        """Remove what was written of a file that failed and report error
        (None: the run is ending, nothing to report)."""
        if content.failed:
            return
        content.failed = True
        trouble = content.discard()
        if trouble is not None:
            self.reporter.log('Could not remove damaged %s: %s'
                              % (os.fsdecode(content.dest),
                                 _first_line(trouble)))
        if error is not None:
            self._leaf_failed(path, md, error)

    def _will_link(self, md):
        key = _link_key(md)
        return key is not None and key in self.hard_links


class _ContentFetcher:
    """Regular files' content in the restore's order, with prefetch hints:
    before fetching a chunk no hint named, the rest of the file and the
    regular files the walk reaches next are announced.

    Looking ahead goes on from where the last hint stopped (the cursor):
    each name is looked at once, and what was found (metadata, chunk ids,
    a directory's names) is kept for the walk, which takes it when it
    gets there (take), so it does not ask the repository again.  Where
    the walk goes elsewhere (a directory it could not make, a name that
    could not be looked at), what it passed is dropped; where it finds
    nothing kept, looking ahead starts again from the walk's place."""

    def __init__(self, repo, gen_id, will_link):
        """will_link(metadata): whether the restore links that file to an
        earlier name instead of fetching its content."""
        self.repo = repo
        self.gen = gen_id
        self.will_link = will_link
        self.claim = None         # restore_side's claim, while it runs
        self.walk = None          # the restore walk's levels, while walking
        self.given = ()           # [(metadata, chunk ids)] to write next,
                                  # outside a walk (restore_side)
        self.hinted = HintedContent(repo, gen_id, self._add_upcoming)
        self._forget_ahead()

    def _forget_ahead(self):
        self.ahead = {}           # path -> (metadata, chunk ids, names,
                                  # second process's batch or None)
        self.order = collections.deque()    # the paths in ahead, in order
        self.cursor = None        # [[directory, names, index]], or at the walk
        self.taken = (None, None)   # the path the walk took last, its entry

    def start(self, walk):
        """The walk's levels ([path, metadata, names, index], its place)."""
        self.walk = walk
        self._forget_ahead()

    def stop(self):
        self.walk = None
        self._forget_ahead()

    def take(self, path):
        """The metadata of path, which the walk has reached, if it was
        looked at ahead, else None."""
        entry = self.ahead.pop(path, None)
        if entry is None:
            if self.order or self.cursor is not None:
                self._forget_ahead()
            self.taken = (None, None)
            return None
        order, ahead = self.order, self.ahead
        passed = order.popleft()
        while passed != path:
            del ahead[passed]
            passed = order.popleft()
        self.taken = (path, entry)
        return entry[0]

    def peeked_children(self, path):
        """The names in directory path if it was just taken, else None."""
        taken, entry = self.taken
        return entry[2] if taken == path else None

    def content(self, path, md, chunk_ids=None):
        """The file's content, piece by piece, announcing chunks ahead
        (chunk_ids: its chunks, if the caller knows them)."""
        if chunk_ids is None:
            taken, entry = self.taken
            chunk_ids = entry[1] if taken == path else None
        return self.hinted.content(path, md, chunk_ids)

    def claimed(self, path):
        """(whether path was looked at ahead, the second process's batch
        it was claimed for then or None)."""
        taken, entry = self.taken
        return (True, entry[3]) if taken == path else (False, None)

    def chunk_ids(self, path):
        """The ids of the chunks of path (the walk is there), or None if
        its content is in the tree."""
        taken, entry = self.taken
        if taken == path and entry[1] is not None:
            return entry[1]
        in_tree, chunk_ids = self.repo.get_file_content(self.gen, path)
        return None if in_tree is not None else chunk_ids

    def _add_upcoming(self, window):
        """Add the next regular files of the walk to a hint's window: those
        looked at already, then on from the cursor."""
        ahead = self.ahead
        for path in self.order:
            md, ids, _, batch = ahead[path]
            if ids and batch is None:
                if window.full():
                    return
                window.add(ids, chunk_size_guess(md, ids))
        if self.cursor is None:
            if self.walk is None:
                self._add_given(window)
                return
            self.cursor = [[path, names, index]
                           for path, _, names, index in self.walk]
        self._look_further(window)

    def _add_given(self, window):
        for md, chunk_ids in self.given:
            if window.full():
                return
            window.add(chunk_ids, chunk_size_guess(md, chunk_ids))

    def _look_further(self, window):
        """Look at the names after the cursor, in the walk's order (into
        directories, then back up), until the window is full; at most
        READ_AHEAD_NAMES names."""
        cursor, ahead, order = self.cursor, self.ahead, self.order
        looked_at = 0
        while cursor and looked_at < READ_AHEAD_NAMES and not window.full():
            level = cursor[-1]
            directory, names, index = level
            if index == len(names):
                cursor.pop()
                continue
            level[2] = index + 1
            if not stored_names.is_safe(names[index]):
                continue        # refused when the restore gets there
            path = stored_names.child_path(directory, names[index])
            looked_at += 1
            if path in ahead:
                continue        # a name listed twice (a damaged listing)
            entry = self._look_at(path)
            if entry is None:
                continue        # reported when the restore gets there
            md, ids, children = entry
            batch = None
            if ids is not None and self.claim is not None:
                batch = self.claim(md)
            ahead[path] = md, ids, children, batch
            order.append(path)
            if children is not None:
                cursor.append([path, children, 0])
            elif ids and batch is None:
                window.add(ids, chunk_size_guess(md, ids))

    def _look_at(self, path):
        """(metadata, chunk ids of content to fetch or None, a directory's
        names or None) of path, or None if something cannot be read."""
        try:
            md = self.repo.get_metadata(self.gen, path)
            if _is_directory(md):
                return md, None, list(
                    self.repo.get_file_children(self.gen, path))
            if not _fetches_content(md) or self.will_link(md):
                return md, None, None
            _, chunk_ids = self.repo.get_file_content(self.gen, path)
            return md, chunk_ids, None
        except obnamlib.errors.ObnamError as e:
            obnamlib.errors.reraise_fatal(e)
            return None


def _link_key(md):
    """(device, inode) of an object with more than one name, else None."""
    if not md.st_nlink or md.st_nlink < 2 or md.st_ino is None:
        return None
    return md.st_dev, md.st_ino


def _fetches_content(md):
    return md.st_mode is not None and stat.S_ISREG(md.st_mode)


def _is_directory(md):
    """Directories, and names a checkpoint stored without metadata."""
    return md.st_mode is None or stat.S_ISDIR(md.st_mode)


def _normalise(path):
    if isinstance(path, str):
        path = os.fsencode(path)
    stripped = path.rstrip(b'/')
    return stripped or b'/'


def _first_line(error):
    if isinstance(error, obnamlib.errors.ObnamError):
        return error.first_line()
    return str(error).splitlines()[0] if str(error) else repr(error)
