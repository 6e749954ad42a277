#!/usr/bin/python3
"""Manual check: real larch 1.x (Python 2) and our larch continue each
other's forests. Not part of the test suite: it needs Python 2.7 and an
unpacked larch 1.20151025 `larch/` package (plus one-line stand-ins for its
`tracing` and `ttystatus` imports) in REAL_LARCH_DIR; only run, never copy.

    REAL_LARCH_DIR=/tmp/reallarch PYTHON2='python2' \
        /usr/bin/python3 tests/obnamlib/larch/manual/roundtrip_with_real_larch.py

Our larch writes a forest (clones, removals, an empty tree); then three
times: real larch verifies every tree, clones the newest, inserts, removes,
drops the oldest tree and commits; we verify its result (independent spec
decoder: reachability, refcounts, order, sizes; fsck) and change it again.
"""

import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, '..', '..', '..', '..'))

from obnamlib import larch  # noqa: E402
import obnamlib.larch.fsck  # noqa: E402
from tests.obnamlib.larch import specdecoder  # noqa: E402

LOW, HIGH = b'\0' * 4, b'\xff' * 4


def dump(forest):
    return [[[k.hex(), v.hex()] for k, v in t.lookup_range(LOW, HIGH)]
            for t in forest.trees]


def check_ours(dirname, expected=None):
    forest = larch.open_forest(dirname=dirname, key_size=4, node_size=256)
    spec = specdecoder.from_vfs(larch.LocalFS(dirname), '.')
    assert spec.consistency_problems(256) == []
    assert larch.fsck.check_forest(dirname, key_size=4, node_size=256) == []
    if expected is not None:
        assert dump(forest) == expected
    return dump(forest)


def change_with_ours(dirname, rnd):
    forest = larch.open_forest(dirname=dirname, key_size=4, node_size=256,
                               allow_writes=True)
    tree = forest.new_tree(forest.trees[-1])
    for i in range(400):
        k = rnd.randrange(3500)
        if rnd.random() < 0.6:
            tree.insert(k.to_bytes(4, 'big'), b'o%d' % i * rnd.randrange(1, 9))
        else:
            tree.remove_range(k.to_bytes(4, 'big'),
                              (k + 10).to_bytes(4, 'big'))
    forest.remove_tree(forest.trees[0])
    forest.commit()


def initial_forest(dirname, rnd):
    forest = larch.open_forest(dirname=dirname, key_size=4, node_size=256,
                               allow_writes=True)
    first = forest.new_tree()
    for i in range(2000):
        first.insert(i.to_bytes(4, 'big'), b'v%d' % i * rnd.randrange(1, 8))
    second = forest.new_tree(first)
    for i in range(0, 2000, 3):
        second.remove(i.to_bytes(4, 'big'))
    forest.new_tree()
    fourth = forest.new_tree(second)
    fourth.remove_range((500).to_bytes(4, 'big'), (900).to_bytes(4, 'big'))
    forest.commit()


def main():
    real = os.environ['REAL_LARCH_DIR']
    python2 = shlex.split(os.environ.get('PYTHON2', 'python2'))
    work = tempfile.mkdtemp(prefix='larch-roundtrip-')
    try:
        dirname = os.path.join(work, 'forest')
        rnd = random.Random(1)
        initial_forest(dirname, rnd)
        expected = check_ours(dirname)
        for round_number in range(3):
            expect_file = os.path.join(work, 'expect.json')
            out_file = os.path.join(work, 'out.json')
            with open(expect_file, 'w') as f:
                json.dump(expected, f)
            subprocess.run(python2 + [
                os.path.join(HERE, 'real_larch_side.py2'), dirname,
                expect_file, out_file, str(round_number), real], check=True)
            with open(out_file) as f:
                expected = check_ours(dirname, json.load(f))
            print('round %d: our larch verified real larch\'s commit'
                  % round_number)
            change_with_ours(dirname, rnd)
            expected = check_ours(dirname)
        print('OK: trees %s' % [len(t) for t in expected])
    finally:
        shutil.rmtree(work)


if __name__ == '__main__':
    main()
