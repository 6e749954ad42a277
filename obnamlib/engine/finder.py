"""Finding backed-up objects by name pattern across generations
(`obnam find`).

A pattern is a shell glob (fnmatch: `*`, `?`, `[...]`, case-sensitive,
on bytes).  One without a `/` matches an object's basename, anywhere in
the tree (like `find -name`); one with a `/` matches the whole absolute
path, and there `*` also matches `/` (like `find -path`).  A path pattern
that starts with neither `/` nor a wildcard matches at any depth, as if
it started with `*/` (`src/*.py`, `liw/`: paths are absolute, so as
written it could never match), and a trailing `/` is ignored
(`/home/liw/` matches the directory).

Only names and metadata are read, never file content.  The cost is a
walk of each generation's tree (one metadata lookup per object, the
larch node cache sharing the nodes that generations have in common),
except that a walk starts at the deepest directory every match must be
under: `/home/*.txt` walks only /home, and when all patterns are whole
paths, a generation without that directory costs one lookup.
"""

import fnmatch

from obnamlib.engine import listing

_WILDCARDS = b'*?['


class Pattern:
    """One glob, matched on the basename or, if it holds `/`, the path."""

    def __init__(self, text):
        self.on_path = b'/' in text
        if self.on_path:
            text = listing.normalise_path(text)
            if text[0] not in b'/' + _WILDCARDS:
                text = b'*/' + text     # at any depth (module docstring)
        self.text = text

    def matches(self, path):
        subject = path if self.on_path else path.rsplit(b'/', 1)[-1]
        return fnmatch.fnmatchcase(subject, self.text)

    def top(self):
        """The deepest directory every match is in or is ('/' for a
        basename pattern)."""
        if not self.text.startswith(b'/'):
            return b'/'
        literal = self.text
        for i, byte in enumerate(self.text):
            if byte in _WILDCARDS:
                literal = self.text[:i]
                break
        else:
            return listing.normalise_path(literal)
        return listing.normalise_path(literal.rsplit(b'/', 1)[0])


def walk_tops(patterns):
    """The directories to walk, none below another, sorted."""
    tops = sorted(set(p.top() for p in patterns))
    kept = []
    for top in tops:
        if not any(_is_under(top, outer) for outer in kept):
            kept.append(top)
    return kept


def _is_under(path, directory):
    return directory == b'/' or path == directory or \
        path.startswith(directory + b'/')


def find(repo, gen_ids, patterns):
    """(gen_id, path) of each object matching any of `patterns` (Pattern),
    generation by generation in the given order, paths in `ls` order."""
    tops = walk_tops(patterns)
    for gen_id in gen_ids:
        for top in tops:
            if not repo.file_exists(gen_id, top):
                continue
            for path, _ in listing.walk(repo, gen_id, top):
                if any(p.matches(path) for p in patterns):
                    yield gen_id, path
