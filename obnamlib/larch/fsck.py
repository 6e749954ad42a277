"""Consistency check (and limited repair) of a larch forest.

`check_forest(dirname, vfs, key_size, fix=False)` returns a list of problem
strings; each names the forest, the node id and the trees (by root id) it
affects. With fix=True refcounts are corrected, unreachable node files
deleted and the journal recovered; every problem then ends in "[fixed]" or
"[not fixed]".

Nodes are walked breadth first; the nodes next in line are read together
where the storage reads in batches (and hinted to it otherwise).
"""

import array
import collections

from . import codec, errors
from .forest import Forest
from .idpath import node_path
from .journal import Journal
from .refcounts import GROUP_SIZE
from .vfs import LocalFS

# Nodes read together when the storage reads in batches (a node is at most
# a node size, 256 KiB by default).
READ_AHEAD_NODES = 64


def check_forest(dirname, vfs=None, key_size=None, fix=False,
                 node_size=None, reader=None):
    """Check the forest in dirname; see the module docstring.

    node_size is the limit node sizes are checked against; by default the
    one stored in the forest's metadata.  reader: the same forest as the
    caller has it open for reading (not with fix): the check then fills
    that forest's node cache as it reads, so that the caller's own
    lookups afterwards need not read the nodes again.
    """
    if vfs is None:
        vfs, prefix = LocalFS(dirname), '.'
    else:
        prefix = dirname.rstrip('/') or '.'
    problems = _journal_problems(vfs, prefix, dirname, fix)
    if reader is not None and not fix:
        return problems + check_open_forest(reader, node_size=node_size,
                                            keep_nodes=True)
    try:
        forest = Forest(vfs, prefix, str(dirname), key_size, node_size,
                        fix, None)
    except errors.Error as e:
        return problems + [_mark(str(e), False, fix)]
    except Exception as e:  # storage filters raise their own errors
        return problems + [_mark('forest %s: cannot be opened: %s'
                                 % (dirname, _one_line(e)), False, fix)]
    return problems + check_open_forest(forest, fix=fix,
                                        node_size=node_size)


def _one_line(error):
    """A problem is one line: the error's own one-line form if it has
    one (a storage filter's error may carry a tool's output)."""
    first_line = getattr(error, 'first_line', None)
    if first_line is not None:
        return first_line()
    return ' '.join(str(error).split('\n'))


def _journal_problems(vfs, prefix, dirname, fix):
    journal = Journal(vfs, prefix, False)
    leftovers = journal.leftovers()
    if not leftovers:
        return []
    if 'new/metadata' in leftovers:
        what = ('forest %s: an interrupted commit is in the journal '
                '(%d files); it is finished when opened for writing'
                % (dirname, len(leftovers)))
    else:
        what = ('forest %s: journal leftovers from an aborted commit '
                '(%d files); they are removed when opened for writing'
                % (dirname, len(leftovers)))
    return [_mark(what, True, fix)]


def _mark(text, fixable, fix):
    if not fix:
        return text
    return text + (' [fixed]' if fixable else ' [not fixed]')


class _Walk:
    """What a walk from all roots found."""

    def __init__(self):
        self.refs = collections.Counter()
        self.parents = collections.defaultdict(set)
        self.reachable = set()
        self.damaged = []   # (node_id, message): missing/corrupt nodes
        self.bad = []       # (node_id, message): decodable but wrong
        self.edges = []     # (parent id, index key, child id)
        self.first_keys = {}


def check_open_forest(forest, fix=False, node_size=None, keep_nodes=False):
    """Check an already opened forest (fix needs it opened for writing).

    Each reachable node is read and decoded once, however many trees share
    it; with keep_nodes the decoded nodes also go into the forest's node
    cache (as far as it holds them) for the forest's later users."""
    limit = node_size or forest.stored_node_size or forest.node_size
    walk = _walk_forest(forest, limit, keep_nodes)
    roots = [t.root_id for t in forest.trees]
    problems = []

    def where(node_id):
        return 'forest %s: node %d (trees %s)' % (
            forest.dirname, node_id, _trees_of(node_id, walk, roots))

    for node_id, message in walk.damaged + walk.bad:
        problems.append(_mark('%s: %s' % (where(node_id), message),
                              False, fix))
    store = forest.node_store
    on_disk = set(store.node_ids_on_disk())
    counted = _stored_nonzero_refcounts(forest, problems, fix)
    fixes = []
    for node_id in sorted(set(walk.refs) | set(counted) | walk.reachable):
        actual = walk.refs.get(node_id, 0)
        stored = store.refcounts.get(node_id)
        if stored != actual and not (
                walk.damaged and node_id not in walk.reachable):
            problems.append(_mark(
                '%s: refcount is %d, should be %d'
                % (where(node_id), stored, actual), True, fix))
            fixes.append((node_id, actual))
    unreachable = sorted(on_disk - walk.reachable)
    deletable = not walk.damaged
    for node_id in unreachable:
        problems.append(_mark(
            'forest %s: node %d is not reachable from any root%s'
            % (forest.dirname, node_id,
               '' if deletable else ' (a damaged node may refer to it)'),
            deletable, fix))
    for node_id in sorted(i for i in on_disk | walk.reachable
                          if i > forest.last_id):
        problems.append(_mark(
            '%s: id is above last_id %d' % (where(node_id), forest.last_id),
            False, fix))
    if fix and (fixes or store.refcounts.dirty or (unreachable and deletable)):
        _repair(forest, fixes, unreachable if deletable else [])
    return problems


def _walk_forest(forest, limit, keep_nodes=False):
    walk = _Walk()
    store = forest.node_store
    key_size = forest.key_size
    queue = collections.deque()
    ahead = {}
    for tree in forest.trees:
        walk.refs[tree.root_id] += 1
        queue.append((tree.root_id, None, None, None, True))
    while queue:
        node_id, parent_id, lo, hi, is_root = queue.popleft()
        if parent_id is not None:
            walk.parents[node_id].add(parent_id)
        if node_id in walk.reachable:
            continue
        walk.reachable.add(node_id)
        if node_id not in ahead:
            ahead = _read_ahead(store, node_id, queue, walk.reachable)
        try:
            data = ahead.pop(node_id)
            if isinstance(data, Exception):
                raise data
            node = codec.decode(data, key_size, forest.dirname, node_id)
        except Exception as e:  # a node that cannot be read is damaged
            walk.damaged.append((node_id, _reason(e)))
            continue
        if keep_nodes:
            store.remember(node_id, node)
        for message in _node_problems(node, len(data), limit, lo, hi,
                                      is_root):
            walk.bad.append((node_id, message))
        if node.keys:
            walk.first_keys[node_id] = node.keys[0]
        if node.is_leaf:
            continue
        keys = node.keys
        for i, child_id in enumerate(node.children):
            walk.refs[child_id] += 1
            walk.edges.append((node_id, keys[i], child_id))
            bound = keys[i + 1] if i + 1 < len(keys) else hi
            queue.append((child_id, node_id, keys[i], bound, False))
    _check_first_keys(walk)
    return walk


def _read_ahead(store, node_id, queue, reachable):
    """node id -> raw node (or the error reading it) for node_id and the
    nodes the walk meets next (up to READ_AHEAD_NODES), read together if
    the storage reads in batches (one round trip for many)."""
    wanted = [node_id]
    for entry in queue:
        if len(wanted) >= READ_AHEAD_NODES:
            break
        if entry[0] not in reachable and entry[0] not in wanted:
            wanted.append(entry[0])
    return _read_nodes(store, wanted)


def _read_nodes(store, node_ids):
    """Raw node files; a batch that fails (a node missing or damaged)
    is read again node by node, so that each error names its node."""
    try:
        batch = store.journal.read_together(
            [node_path(node_id) for node_id in node_ids])
    except Exception:   # storage filters raise their own errors
        batch = {}
    found = {}
    for node_id in node_ids:
        data = batch.get(node_path(node_id))
        if data is not None:
            found[node_id] = data
            continue
        try:
            found[node_id] = store.read_raw(node_id)
        except Exception as e:  # a node that cannot be read is damaged
            found[node_id] = e
    return found


def _reason(error):
    text = str(error)
    return text.split(': ', 2)[-1] if ': node ' in text else text


def _node_problems(node, size, limit, lo, hi, is_root):
    keys = node.keys
    if size > limit:
        yield 'encoded size %d exceeds node size %d' % (size, limit)
    if any(a >= b for a, b in zip(keys, keys[1:])):
        yield 'keys are not strictly increasing'
    if is_root and node.is_leaf:
        yield 'root is a leaf node, not an index node'
    if not is_root and not keys:
        yield 'node has no keys but is not a root'
    if keys and lo is not None and keys[0] < lo:
        yield 'key %s is below its parent key %s' % (keys[0].hex(), lo.hex())
    if keys and hi is not None and keys[-1] >= hi:
        yield 'key %s is not below the next parent key %s' % (
            keys[-1].hex(), hi.hex())


def _check_first_keys(walk):
    """Every index key must equal the smallest key of its subtree."""
    for parent_id, key, child_id in walk.edges:
        first = walk.first_keys.get(child_id)
        if first is not None and first != key:
            walk.bad.append((parent_id, (
                'index key %s for child %d differs from the '
                "child's smallest key %s")
                % (key.hex(), child_id, first.hex())))


def _trees_of(node_id, walk, roots):
    """Root ids of the trees that reach node_id."""
    root_set = set(roots)
    seen = {node_id}
    stack = [node_id]
    found = set()
    while stack:
        current = stack.pop()
        if current in root_set:
            found.add(current)
        for parent in walk.parents.get(current, ()):
            if parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return ','.join(str(r) for r in sorted(found)) or 'none'


def _stored_nonzero_refcounts(forest, problems, fix):
    """Nonzero refcounts of all groups on disk; corrupt groups read as 0."""
    counts = forest.node_store.refcounts
    found = {}
    for start in counts.group_starts_on_disk():
        number = start // GROUP_SIZE
        try:
            group = counts._group(number)
        except Exception as e:  # so is a refcount group
            problems.append(_mark(str(e), True, fix))
            counts.groups[number] = array.array('H', bytes(2 * GROUP_SIZE))
            counts.dirty.add(number)
            continue
        for offset, value in enumerate(group):
            if value:
                found[start + offset] = value
    return found


def _repair(forest, fixes, unreachable):
    store = forest.node_store
    for node_id, actual in fixes:
        store.refcounts.set(node_id, actual)
    for node_id in unreachable:
        store.refcounts.set(node_id, 0)
        store.journal.remove(node_path(node_id), True)
    forest.commit()


__all__ = ['check_forest', 'check_open_forest', 'Forest']
