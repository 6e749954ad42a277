"""The chunk index checks of fsck for a format-6 repository: chunklist
and chunksums against the chunk files and against the chunks the
clients' generations use (format-6.md §8), run after fsck's walk; with
--fsck-fix missing entries are added, with --fsck-rm-unused unused chunks
are removed (index entries first, then the files, §10.2).
"""

import array

from obnamlib import errors
from obnamlib import larch
from obnamlib.repo.fmt_6 import keys
from obnamlib.repo.fmt_6.chunk_indexes import CHUNKLIST, CHUNKSUMS


class ChunkIndexCheck:
    """One run of the index checks.

    on_disk: ids of the chunk files (what is removed is taken out);
    client_ids: client name -> id; expected_checksum(chunk_id): what
    chunklist records for a chunk, or None."""

    def __init__(self, repo, fix, on_disk, client_ids, expected_checksum):
        self.repo = repo
        self.fix = fix
        self.on_disk = on_disk
        self.client_ids = client_ids
        self.expected_checksum = expected_checksum

    def run(self, used_by_client, remove_unused=False, report_unused=True):
        """Indexes against chunk files and against the clients' use.

        used_by_client: client name -> set of chunk ids its checked
        generations use (None for a client that was not checked).  The
        indexes are streamed and looked up, never held in memory whole;
        what the checks of the clients' use need from them is gathered
        while streaming (sorted arrays of ids), not looked up chunk by
        chunk.  Where a stream breaks off (damage: larch's check says
        where), the chunks after it are looked up one by one."""
        on_disk = self.on_disk
        id_to_name = {cid: name for name, cid in self.client_ids.items()}
        problems = []
        listed = _Stream(self.repo.indexes, CHUNKLIST)
        listed_ids = array.array('Q')
        for key, _ in listed:
            chunk_id = keys.unpack_u64(key)
            listed_ids.append(chunk_id)
            if chunk_id not in on_disk:
                problems.append('chunklist: chunk %x has no chunk file'
                                % chunk_id)
        unlisted = self._used_but_unlisted(used_by_client, on_disk,
                                           listed_ids, listed.complete)
        del listed_ids
        used_by_id = {self.client_ids[name]: used
                      for name, used in used_by_client.items()
                      if used is not None and name in self.client_ids}
        recorded = set()    # (chunk id, client id) of unlisted chunks only
        entries = {client_id: array.array('Q') for client_id in used_by_id}
        sums = _Stream(self.repo.indexes, CHUNKSUMS)
        for key, _ in sums:
            checksum, chunk_id, client_id = keys.parse_chunksums_key(key)
            if chunk_id in unlisted:
                recorded.add((chunk_id, client_id))
            listed_sum = self.expected_checksum(chunk_id)
            if listed_sum == checksum and chunk_id in used_by_id.get(
                    client_id, ()):
                entries[client_id].append(chunk_id)
            if chunk_id not in on_disk or client_id not in id_to_name or \
                    listed_sum not in (None, checksum):
                problems.extend(self._chunksums_entry_problems(
                    checksum, chunk_id, client_id, on_disk, id_to_name,
                    listed_sum))
        problems.extend(self._use_problems(used_by_client, on_disk,
                                           unlisted, recorded, entries,
                                           sums.complete))
        if report_unused:
            problems.extend(self._unused(used_by_client, on_disk,
                                         remove_unused))
        return problems

    def _index_entries(self, which):
        """(key, value) of one chunk index in key order, streamed; it
        stops where the index cannot be read (larch's check says why)."""
        return iter(_Stream(self.repo.indexes, which))

    def _used_but_unlisted(self, used_by_client, on_disk, listed_ids,
                           complete):
        """Chunks in use and on disk that chunklist has no entry for.
        listed_ids: chunklist's ids in order, as far as it could be read
        (all of them if complete)."""
        used = set()
        for chunk_ids in used_by_client.values():
            used |= chunk_ids or set()
        unlisted = set()
        last = listed_ids[-1] if listed_ids else -1
        for chunk_id in _not_in(sorted(used & on_disk), listed_ids):
            if chunk_id <= last or complete or \
                    self.expected_checksum(chunk_id) is None:
                unlisted.add(chunk_id)
        return unlisted

    def _chunksums_entry_problems(self, checksum, chunk_id, client_id,
                                  on_disk, id_to_name, listed):
        where = 'chunksums: chunk %x' % chunk_id
        if chunk_id not in on_disk:
            yield '%s has no chunk file' % where
        if client_id not in id_to_name:
            yield '%s is recorded for client id %d, which is not in the ' \
                  'client list' % (where, client_id)
        if listed is not None and listed != checksum:
            yield '%s has checksum %s, but chunklist says %s' % (
                where, checksum.decode('ascii', 'replace'),
                listed.decode('ascii', 'replace'))

    def _use_problems(self, used_by_client, on_disk, unlisted, recorded,
                      entries, complete):
        """entries: client id -> the chunks it uses that chunksums has
        an entry for (with chunklist's checksum), as far as chunksums
        could be read (all of them if complete)."""
        ids = self.client_ids
        problems = []
        missing = []
        for name in sorted(used_by_client):
            used = used_by_client[name]
            if used is None or name not in ids:
                continue
            client_id = ids[name]
            in_order = sorted(used)
            lacking = set(_not_in(in_order, sorted(entries[client_id])))
            for chunk_id in in_order:
                if chunk_id not in on_disk:
                    continue    # reported by the walk, with the file's path
                if chunk_id in unlisted:
                    has_entry = (chunk_id, client_id) in recorded
                else:
                    has_entry = chunk_id not in lacking or (
                        not complete and
                        self._has_chunksums_entry(chunk_id, client_id))
                if not has_entry:
                    problems.append(self._mark(
                        'chunksums: client %s uses chunk %x, but has no '
                        'entry for it' % (name, chunk_id)))
                    missing.append((chunk_id, client_id))
                elif chunk_id in unlisted:
                    problems.append(self._mark(
                        'chunklist: chunk %x used by client %s has no entry'
                        % (chunk_id, name)))
                    missing.append((chunk_id, client_id))
        if self.fix and missing:
            self._add_index_entries(missing)
        return problems

    def _has_chunksums_entry(self, chunk_id, client_id):
        checksum = self.expected_checksum(chunk_id)
        try:
            return client_id in self.repo.indexes.users(checksum, chunk_id)
        except (larch.Error, errors.ObnamError):
            return False

    def _add_index_entries(self, missing):
        indexes = self.repo.indexes
        indexes.start_changes()
        try:
            for chunk_id, client_id in missing:
                data = self.repo.chunks.get(chunk_id)
                indexes.add(chunk_id, keys.content_checksum(data), client_id)
            indexes.commit()
        except BaseException:
            indexes.discard()
            raise

    def _unused(self, used_by_client, on_disk, remove):
        used = set()
        for chunk_ids in used_by_client.values():
            used |= chunk_ids or set()
        unused = sorted(on_disk - used)
        if remove and unused:
            self._remove_chunks(unused)
        suffix = '; deleting' if remove else ''
        return ['chunk %x not used by anyone%s' % (chunk_id, suffix)
                for chunk_id in unused]

    def _remove_chunks(self, chunk_ids):
        """Index entries first, then the files (format-6.md §10.2)."""
        doomed = set(chunk_ids)
        uses = [keys.parse_chunksums_key(key) for key, _ in
                self._index_entries(CHUNKSUMS)
                if keys.parse_chunksums_key(key)[1] in doomed]
        indexes = self.repo.indexes
        indexes.start_changes()
        try:
            for checksum, chunk_id, client_id in uses:
                indexes.remove_use(chunk_id, checksum, client_id)
            for chunk_id in doomed:
                key = keys.chunklist_key(chunk_id)
                try:
                    indexes.list_tree.lookup(key)
                except KeyError:
                    continue
                indexes.changed = True
                indexes.list_tree.remove(key)
            indexes.commit()
        except BaseException:
            indexes.discard()
            raise
        for chunk_id in doomed:
            self.repo.chunks.remove(chunk_id)
        self.on_disk = self.on_disk - doomed

    def _mark(self, text):
        return text + (' [fixed]' if self.fix else '')


class _Stream:
    """The entries of one chunk index in key order, as far as they can be
    read; complete: whether the last one was reached (larch's check says
    why not)."""

    def __init__(self, indexes, which):
        self.indexes = indexes
        self.which = which
        self.complete = True

    def __iter__(self):
        try:
            list_tree, sums_tree = self.indexes._readers()
            tree, key_size = ((list_tree, keys.CHUNKLIST_KEY_SIZE)
                              if self.which == CHUNKLIST else
                              (sums_tree, keys.CHUNKSUMS_KEY_SIZE))
            if tree is None:
                return
            yield from tree.iter_range(b'\0' * key_size, b'\xff' * key_size)
        except (larch.Error, errors.ObnamError):
            self.complete = False


def _not_in(wanted, present):
    """The ids of the sorted wanted that the sorted present lacks (a
    merge: no lookups, nothing built but the answer)."""
    i, end = 0, len(present)
    for chunk_id in wanted:
        while i < end and present[i] < chunk_id:
            i += 1
        if i == end or present[i] != chunk_id:
            yield chunk_id
