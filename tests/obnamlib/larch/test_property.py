"""Random operation sequences against a dict model (hypothesis)."""

import os
import struct

from hypothesis import given, settings, strategies as st, HealthCheck

from obnamlib import larch
import obnamlib.larch.fsck
from tests.obnamlib.larch import specdecoder

KEY_SIZE = 4
NODE_SIZE = 128     # tiny nodes: deep trees, many splits and merges

OP_NAMES = ['insert', 'insert', 'insert_many', 'remove', 'remove_range',
            'clone', 'new_tree', 'remove_tree', 'commit', 'reopen',
            'insert_sorted']
MAX_VALUE = NODE_SIZE // 2 - 16


def key(n):
    return struct.pack('!I', n)


def decode_op(raw):
    """Turn five small integers into one operation (cheap to generate)."""
    kind, tree, a, b, size = raw
    name = OP_NAMES[kind]
    if name == 'insert':
        value = (b'%d:' % a * MAX_VALUE)[:size]
        return (name, tree, key(a), value)
    if name == 'insert_many':
        return (name, tree, a, b % 60 + 1)
    if name == 'insert_sorted':
        return (name, tree, sorted_pairs(a, b, size))
    if name == 'remove':
        return (name, tree, key(a))
    if name == 'remove_range':
        return (name, tree, key(min(a, b)), key(max(a, b)))
    if name in ('clone', 'remove_tree'):
        return (name, tree)
    return (name,)


def sorted_pairs(a, b, size):
    """Keys from a up, every (b % 3 + 1)th, values of up to MAX_VALUE
    bytes; one in seven runs has a key again or out of order at its end."""
    numbers = list(range(a, a + b % 50 + 1, b % 3 + 1))
    if b % 7 == 0:
        numbers.append(numbers[len(numbers) // 2])
    return [(key(n), (b'%d.' % n * MAX_VALUE)[:size]) for n in numbers]


raw_ops = st.tuples(st.integers(0, len(OP_NAMES) - 1), st.integers(0, 7),
                    st.integers(0, 300), st.integers(0, 300),
                    st.integers(0, MAX_VALUE))
ops = raw_ops.map(decode_op)


def open_forest(vfs, cache_size=None):
    return larch.open_forest(dirname='f', key_size=KEY_SIZE,
                             node_size=NODE_SIZE, allow_writes=True, vfs=vfs,
                             cache_size=cache_size)


def check_disk(vfs, committed_models):
    spec = specdecoder.from_vfs(vfs, 'f')
    assert spec.consistency_problems(NODE_SIZE) == []
    assert larch.fsck.check_forest('f', vfs, KEY_SIZE,
                                   node_size=NODE_SIZE) == []
    assert [dict(spec.tree_items(r)) for r in spec.root_ids] == \
        committed_models


def check_trees(forest, models):
    assert len(forest.trees) == len(models)
    low, high = b'\0' * KEY_SIZE, b'\xff' * KEY_SIZE
    for tree, model in zip(forest.trees, models):
        items = sorted(model.items())
        assert tree.lookup_range(low, high) == items
        assert tree.count_range(low, high) == len(model)
        for lo in range(0, 310, 37):
            for width in (0, 3, 40):
                a, b = key(lo), key(lo + width)
                inside = [(k, v) for k, v in items if a <= k <= b]
                assert tree.lookup_range(a, b) == inside
                assert list(tree.iter_range(a, b)) == inside
                assert tree.count_range(a, b) == len(inside)
                assert tree.range_is_empty(a, b) == (not inside)


def apply(op, forest, models):
    name = op[0]
    trees = forest.trees
    if name in ('insert', 'insert_many', 'remove', 'remove_range',
                'clone', 'remove_tree', 'insert_sorted') and not trees:
        return
    if len(op) > 1:
        i = op[1] % len(trees)
        tree, model = trees[i], models[i]
    if name == 'insert':
        tree.insert(op[2], op[3])
        model[op[2]] = op[3]
    elif name == 'insert_many':
        for n in range(op[2], op[2] + op[3]):
            key = struct.pack('!I', n)
            tree.insert(key, b'v%d' % n)
            model[key] = b'v%d' % n
    elif name == 'insert_sorted':
        tree.insert_sorted(op[2])
        model.update(op[2])
    elif name == 'remove':
        if op[2] in model:
            tree.remove(op[2])
            del model[op[2]]
        else:
            try:
                tree.remove(op[2])
            except KeyError:
                pass
            else:
                raise AssertionError('remove of absent key succeeded')
    elif name == 'remove_range':
        lo, hi = op[2], op[3]
        tree.remove_range(lo, hi)
        for key in [k for k in model if lo <= k <= hi]:
            del model[key]
    elif name == 'clone':
        forest.new_tree(tree)
        models.append(dict(model))
    elif name == 'new_tree':
        forest.new_tree()
        models.append({})
    elif name == 'remove_tree':
        forest.remove_tree(tree)
        del models[i]


EXAMPLES = int(os.environ.get('LARCH_PROPERTY_EXAMPLES', '400'))


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ops, min_size=10, max_size=80), st.sampled_from([None, 8]))
def test_random_operations_match_model(operations, cache_size):
    vfs = larch.MemoryFS()
    forest = open_forest(vfs, cache_size)
    models = []
    committed = []
    for op in operations:
        if op[0] == 'commit':
            forest.commit()
            committed = [dict(m) for m in models]
            check_disk(vfs, committed)
        elif op[0] == 'reopen':
            forest = open_forest(vfs, cache_size)
            models = [dict(m) for m in committed]
        else:
            apply(op, forest, models)
        check_trees(forest, models)
    forest.commit()
    check_disk(vfs, models)
    reopened = open_forest(vfs)
    check_trees(reopened, models)
