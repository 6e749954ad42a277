"""An Obnam-like workload: many generations, each a clone with changes."""

import random
import struct

from obnamlib import larch
import obnamlib.larch.fsck
from tests.obnamlib.larch import specdecoder

KEY_SIZE = 18
NODE_SIZE = 2048


def key(n, sub):
    return struct.pack('!B8sB8s', 0, struct.pack('!Q', n), 3,
                       struct.pack('!Q', sub))


def test_generations_with_small_cache_stay_consistent():
    vfs = larch.MemoryFS()
    rnd = random.Random(7)
    models = []
    forest = larch.open_forest(dirname='c', key_size=KEY_SIZE,
                               node_size=NODE_SIZE, allow_writes=True,
                               vfs=vfs, cache_size=16)
    for generation in range(40):
        old = forest.trees[-1] if forest.trees else None
        tree = forest.new_tree(old)
        model = dict(models[-1]) if models else {}
        for _ in range(300):
            n = rnd.randrange(2000)
            if rnd.random() < 0.75:
                k = key(n, rnd.randrange(3))
                v = bytes([generation]) * rnd.randrange(200)
                tree.insert(k, v)
                model[k] = v
            else:
                lo, hi = key(n, 0), key(n + 5, 9)
                tree.remove_range(lo, hi)
                for k in [k for k in model if lo <= k <= hi]:
                    del model[k]
        models.append(model)
        if len(forest.trees) > 6:
            victim = rnd.randrange(len(forest.trees) - 1)
            forest.remove_tree(forest.trees[victim])
            del models[victim]
        forest.commit()
        if generation % 10 == 9:
            forest = larch.open_forest(dirname='c', key_size=KEY_SIZE,
                                       vfs=vfs, allow_writes=True,
                                       cache_size=16)
    spec = specdecoder.from_vfs(vfs, 'c')
    assert spec.consistency_problems(NODE_SIZE) == []
    assert [dict(spec.tree_items(r)) for r in spec.root_ids] == models
    assert larch.fsck.check_forest('c', vfs, KEY_SIZE) == []
