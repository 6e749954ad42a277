"""The new/ + delete/ journal that makes a commit atomic (format-6.md 5.5).

Writes of file X go to new/X; deleting a committed X leaves a marker
delete/X. new/metadata is the commit flag, written last. Finishing a commit
applies the markers, moves new/X over X and finally renames new/metadata.
A read-only user of an interrupted commit overlays new/ and delete/.
"""

METADATA = 'metadata'
NEW = 'new'
DELETE = 'delete'


class Journal:

    def __init__(self, vfs, dirname, allow_writes):
        self.vfs = vfs
        self.dirname = dirname
        self.allow_writes = allow_writes
        self.new_files = set()   # X for which new/X exists
        self.deleted = set()     # X for which delete/X exists
        self._made_dirs = set()

    def _p(self, rel):
        return self.dirname + '/' + rel

    # --- opening -------------------------------------------------------

    def recover(self):
        """Finish or roll back an interrupted commit, or overlay it.

        Returns True if a read-only overlay is active.
        """
        pending = self.vfs.exists(self._p(NEW + '/' + METADATA))
        if self.allow_writes:
            self.new_files = set(self._walk(NEW))
            self.deleted = set(self._walk(DELETE))
            if pending:
                self.new_files.discard(METADATA)
                self._apply()
            else:
                self._rollback()
            return False
        if pending:
            self.new_files = set(self._walk(NEW))
            self.deleted = set(self._walk(DELETE))
            return True
        return False

    def leftovers(self):
        """Files below new/ and delete/ (journal debris), as relative paths."""
        return ([NEW + '/' + x for x in self._walk(NEW)]
                + [DELETE + '/' + x for x in self._walk(DELETE)])

    def _walk(self, top):
        """Relative paths of all files below dirname/top (tmp* included)."""
        found = []
        stack = ['']
        while stack:
            rel = stack.pop()
            full = self._p(top + ('/' + rel if rel else ''))
            try:
                names = self.vfs.listdir(full)
            except (FileNotFoundError, NotADirectoryError):
                continue
            for name in names:
                child = rel + '/' + name if rel else name
                if self.vfs.isdir(full + '/' + name):
                    stack.append(child)
                else:
                    found.append(child)
        return found

    def _rollback(self):
        for rel in self.new_files:
            self._remove_quietly(self._p(NEW + '/' + rel))
        for rel in self.deleted:
            self._remove_quietly(self._p(DELETE + '/' + rel))
        self.new_files = set()
        self.deleted = set()

    def _remove_quietly(self, path):
        try:
            self.vfs.remove(path)
        except FileNotFoundError:
            pass

    # --- reading -------------------------------------------------------

    def read(self, rel):
        if rel in self.new_files:
            return self.vfs.read_file(self._p(NEW + '/' + rel))
        if rel in self.deleted:
            raise FileNotFoundError(rel)
        return self.vfs.read_file(self._p(rel))

    def read_together(self, rels):
        """rel -> contents for those of rels the storage read in one
        batch (storage that reads in batches); may be none of them.
        Other storage is told of them instead (read_ahead), for the
        read() calls that follow in the same order."""
        direct = [rel for rel in rels
                  if rel not in self.new_files and rel not in self.deleted]
        if len(direct) < 2:
            return {}
        paths = [self._p(rel) for rel in direct]
        if self.vfs.reads_in_batches:
            return dict(zip(direct, self.vfs.read_files(paths)))
        self.vfs.read_ahead(paths)
        return {}

    def exists(self, rel):
        if rel in self.new_files:
            return True
        if rel in self.deleted:
            return False
        return self.vfs.exists(self._p(rel))

    def listdir(self, rel):
        """Names in directory rel, as the journal makes them appear."""
        try:
            names = set(self.vfs.listdir(self._p(rel)))
        except (FileNotFoundError, NotADirectoryError):
            names = set()
        prefix = rel + '/'
        for path in self.new_files:
            if path.startswith(prefix):
                names.add(path[len(prefix):].split('/', 1)[0])
        return sorted(n for n in names
                      if not n.startswith('tmp')
                      and (prefix + n) not in self.deleted)

    # --- writing -------------------------------------------------------

    def write(self, rel, data):
        self.vfs.write_file(self._p(NEW + '/' + rel), data)
        self.new_files.add(rel)

    def remove(self, rel, committed):
        """Forget file rel; `committed` says whether rel itself exists."""
        if rel in self.new_files:
            self.new_files.discard(rel)
            self._remove_quietly(self._p(NEW + '/' + rel))
        if committed and rel not in self.deleted:
            self.vfs.write_file(self._p(DELETE + '/' + rel), b'')
            self.deleted.add(rel)

    def commit(self, metadata):
        """Write the commit flag, then make the new state the current one."""
        self.vfs.write_file(self._p(NEW + '/' + METADATA), metadata)
        self._apply()

    def _apply(self):
        """Steps 1-3 of the commit; safe to repeat after a failure."""
        for rel in sorted(self.deleted):
            if not rel.rsplit('/', 1)[-1].startswith('tmp'):
                self._remove_quietly(self._p(rel))
            self._remove_quietly(self._p(DELETE + '/' + rel))
            self.deleted.discard(rel)
        for rel in sorted(self.new_files):
            src = self._p(NEW + '/' + rel)
            if rel.rsplit('/', 1)[-1].startswith('tmp'):
                self._remove_quietly(src)
            else:
                self._make_parent(rel)
                self.vfs.rename(src, self._p(rel))
            self.new_files.discard(rel)
        self.vfs.rename(self._p(NEW + '/' + METADATA), self._p(METADATA))

    def _make_parent(self, rel):
        parent = rel.rsplit('/', 1)[0] if '/' in rel else ''
        if parent and parent not in self._made_dirs:
            self.vfs.makedirs(self._p(parent))
            self._made_dirs.add(parent)
