"""Directory listings and stats: every READDIR of a listing in flight,
and attributes that came with a listing answer the stats after it."""

import os
import stat

from obnamlib.errors import ObnamSystemError
from obnamlib.vfs.sftp import codec
from obnamlib.vfs.sftp.errors import live_errors
from obnamlib.vfs.sftp.limits import READDIRS_IN_FLIGHT
from obnamlib.vfs.sftp.remote_stat import (RemoteStat, same_attrs,
                                           scan_entries)


class ListingMixin:
    """SftpFS's listdir, scandir, lstat, stat, exists and isdir."""

    def _init_listing(self):
        self._listed = (None, {})     # lstat's last parent listing
        self._prefetched_dirs = {}    # path -> scandir result or error

    @live_errors(ObnamSystemError)
    def lstat(self, path):
        """Like scandir's entries, with owner names and link count: those
        come only in a directory listing, so the parent is listed (once
        per directory while its entries match)."""
        full = self._abs(path)
        attrs = self._attrs(codec.CMD_LSTAT, full, path)
        return RemoteStat(attrs, full, self._longname(full, attrs))

    def _longname(self, full, attrs):
        parent, name = os.path.split(full)
        if not name:
            parent, name = full, b'.'   # the root's own entry
        for fresh in (False, True):
            if fresh or self._listed[0] != parent:
                try:
                    entries = self._read_dir(parent, parent, dots=True)
                except OSError:
                    return None         # e.g. a parent we may not list
                self._listed = (parent, {n: (a, longname)
                                         for n, a, longname in entries})
            entry = self._listed[1].get(name)
            if entry is not None and same_attrs(entry[0], attrs):
                return entry[1]
        return None

    def stat(self, path):
        full = self._abs(path)
        return RemoteStat(self._attrs(codec.CMD_STAT, full, path), full)

    @live_errors(ObnamSystemError)
    def exists(self, path):
        full = self._abs(path)
        known, attrs = self._listed_attrs(full)
        if known:
            return attrs is not None
        return self._exists_abs(full)

    @live_errors(ObnamSystemError)
    def isdir(self, path):
        known, attrs = self._listed_attrs(self._abs(path))
        if known:
            return attrs is not None and stat.S_ISDIR(attrs.st_mode or 0)
        try:
            return stat.S_ISDIR(self.stat(path).st_mode)
        except FileNotFoundError:
            return False

    def _read_dir(self, full, path, dots=False):
        """[(name, attributes, longname)] of `full`, without . and ..
        unless `dots`."""
        result = self._read_dirs([full], [path], dots)[0]
        if isinstance(result, Exception):
            raise result
        return result

    def _read_dirs(self, fulls, paths, dots=False):
        """Several listings with all requests in flight together: every
        OPENDIR, then READDIRs for every handle (OpenSSH sends up to 100
        names each) until each says EOF.  For each: the entries, or the
        OSError."""
        opens = [self._send(codec.CMD_OPENDIR, full) for full in fulls]
        results = [[] for _ in fulls]
        active = []
        for i, num in enumerate(opens):
            try:
                _, msg = self._wait(num, paths[i])
                active.append((i, msg.get_binary()))
            except OSError as e:
                results[i] = e
        per_handle = READDIRS_IN_FLIGHT if len(fulls) == 1 else 2
        while active:
            sent = [(i, handle, [self._send(codec.CMD_READDIR, handle)
                                 for _ in range(per_handle)])
                    for i, handle in active]
            done = [(i, handle) for i, handle, nums in sent
                    if self._collect_names(nums, results, i, paths[i])]
            for _, handle in done:
                self._close_handle(handle)
            active = [(i, handle) for i, handle, _ in sent
                      if (i, handle) not in done]
            per_handle = READDIRS_IN_FLIGHT
        if dots:
            return results
        return [r if isinstance(r, Exception) else
                [entry for entry in r if entry[0] not in (b'.', b'..')]
                for r in results]

    def _collect_names(self, nums, results, i, path):
        """Add the READDIR replies to results[i]; True once it is done."""
        done = False
        for num in nums:
            try:
                _, msg = self._wait(num, path)
            except EOFError:
                done = True
                continue
            except OSError as e:
                results[i] = e
                done = True
                continue
            if not done and not isinstance(results[i], Exception):
                results[i].extend(codec.names_from(msg))
        return done

    def listdir(self, path):
        """Names; their attributes (which came along) answer the next
        isdir/exists of each, as long as nothing else is sent meanwhile:
        walking a tree with listdir + isdir costs no round trip per stat."""
        full = self._abs(path)
        entries = self._read_dir(full, path)
        self._fresh_listing = (full, {n: a for n, a, _ in entries})
        return [n.decode('utf-8', 'surrogateescape') for n, _, _ in entries]

    def file_sizes(self, dirnames):
        """Every listing in flight together; sizes come with the names."""
        fulls = [self._abs(dirname) for dirname in dirnames]
        return [result if isinstance(result, Exception) else
                {name.decode('utf-8', 'surrogateescape'): attrs.st_size or 0
                 for name, attrs, _ in result
                 if not stat.S_ISDIR(attrs.st_mode or 0)}
                for result in self._read_dirs(fulls, list(dirnames))]

    def _listed_attrs(self, full):
        """(known, attrs) of `full` from the listing just made: attrs None
        if it was not there.  Each entry answers once (a caller polling a
        path must see the server again)."""
        listing = self._fresh_listing
        parent, name = os.path.split(full)
        if listing is None or listing[0] != parent or not name:
            return False, None
        entries = listing[1]
        if name not in entries:     # absent when listed: say so once
            self._fresh_listing = None
            return True, None
        attrs = entries[name]
        if attrs is None or stat.S_ISLNK(attrs.st_mode or 0):
            return False, None      # answered already, or a link: ask
        entries[name] = None        # each entry answers once
        return True, attrs

    @live_errors(ObnamSystemError)
    def scandir(self, path):
        listing = self._prefetched_dirs.pop(path, None)
        if listing is None:
            full = self._abs(path)
            listing = scan_entries(full, self._read_dir(full, path))
        if isinstance(listing, Exception):
            raise listing
        return listing

    def prefetch_listings(self, paths):
        """List these directories now, together (two round trips for
        directories of up to 100 entries), for the scandir calls that
        follow (each once); an error is raised by its scandir."""
        fulls = [self._abs(path) for path in paths]
        self._prefetched_dirs.update(
            (path, result if isinstance(result, Exception) else
             scan_entries(full, result))
            for path, full, result in zip(
                paths, fulls, self._read_dirs(fulls, paths)))
