"""SIGKILL a committing writer again and again; nothing committed is lost.

A forked child commits deterministic random changes in a loop and reports
each finished commit through a pipe. It is killed with SIGKILL, either by
the parent after a random delay (any instant, even mid-write) or by itself
just before a random file operation (to hit every step of the journal
commit, including an interrupted one). After every kill the forest must
read, read-only and then for writing, as exactly the last reported commit
or the one after it, and be consistent on disk.
"""

import os
import random
import signal
import struct
import time

from obnamlib import larch
import obnamlib.larch.fsck
from tests.obnamlib.larch import specdecoder

KEY_SIZE = 4
NODE_SIZE = 256
COUNTER = b'\xff\xff\xff\xff'
KILLS = 240


def commit_ops(number):
    """The changes of commit `number`, the same in child and parent."""
    rnd = random.Random(number)
    ops = []
    if rnd.random() < 0.3:
        ops.append(('clone',))
    if rnd.random() < 0.2:
        ops.append(('drop_oldest',))
    for _ in range(rnd.randrange(1, 40)):
        k = struct.pack('!I', rnd.randrange(400))
        if rnd.random() < 0.7:
            ops.append(('insert', k, b'%d.%d' % (number, rnd.randrange(99))))
        elif rnd.random() < 0.5:
            ops.append(('remove', k))
        else:
            hi = struct.pack('!I', struct.unpack('!I', k)[0] + 20)
            ops.append(('remove_range', k, hi))
    ops.append(('insert', COUNTER, b'%d' % number))
    return ops


def apply_to_models(models, ops):
    models = [dict(m) for m in models]
    if not models:
        models.append({})
    for op in ops:
        newest = models[-1]
        if op[0] == 'clone':
            models.append(dict(newest))
        elif op[0] == 'drop_oldest' and len(models) > 1:
            del models[0]
        elif op[0] == 'insert':
            newest[op[1]] = op[2]
        elif op[0] == 'remove':
            newest.pop(op[1], None)
        elif op[0] == 'remove_range':
            for k in [k for k in newest if op[1] <= k <= op[2]]:
                del newest[k]
    return models


def apply_to_forest(forest, ops):
    if not forest.trees:
        forest.new_tree()
    for op in ops:
        newest = forest.trees[-1]
        if op[0] == 'clone':
            forest.new_tree(newest)
        elif op[0] == 'drop_oldest' and len(forest.trees) > 1:
            forest.remove_tree(forest.trees[0])
        elif op[0] == 'insert':
            newest.insert(op[1], op[2])
        elif op[0] == 'remove':
            try:
                newest.remove(op[1])
            except KeyError:
                pass
        elif op[0] == 'remove_range':
            newest.remove_range(op[1], op[2])


class SuicidalFS(larch.LocalFS):
    """LocalFS that SIGKILLs its own process before the n-th change."""

    def __init__(self, root, countdown):
        super().__init__(root)
        self.countdown = countdown

    def _tick(self):
        self.countdown -= 1
        if self.countdown == 0:
            os.kill(os.getpid(), signal.SIGKILL)

    def write_file(self, path, data):
        self._tick()
        super().write_file(path, data)

    def rename(self, old, new):
        self._tick()
        super().rename(old, new)

    def remove(self, path):
        self._tick()
        super().remove(path)


def open_forest(vfs, allow_writes):
    return larch.open_forest(dirname='forest', key_size=KEY_SIZE,
                             node_size=NODE_SIZE, allow_writes=allow_writes,
                             vfs=vfs, cache_size=8)


def committed_number(forest):
    if not forest.trees:
        return 0
    return int(forest.trees[-1].lookup(COUNTER))


def child(root, countdown, report_fd):
    try:
        vfs = SuicidalFS(root, countdown) if countdown else larch.LocalFS(root)
        forest = open_forest(vfs, True)
        number = committed_number(forest)
        os.write(report_fd, b'S')
        while True:
            number += 1
            apply_to_forest(forest, commit_ops(number))
            forest.commit()
            os.write(report_fd, struct.pack('!I', number))
    finally:
        os._exit(1)


def run_child(root, rnd):
    """Start a writer, kill it, return the last commit number it reported."""
    read_fd, write_fd = os.pipe()
    countdown = rnd.randrange(1, 45) if rnd.random() < 0.5 else 0
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        child(root, countdown, write_fd)
    os.close(write_fd)
    started = os.read(read_fd, 1)
    if not countdown:
        if started == b'S':
            time.sleep(rnd.uniform(0, 0.03))
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    data = b''
    while True:
        chunk = os.read(read_fd, 4096)
        if not chunk:
            break
        data += chunk
    os.close(read_fd)
    assert os.WIFSIGNALED(status) and \
        os.WTERMSIG(status) == signal.SIGKILL, status
    numbers = [struct.unpack('!I', data[i:i + 4])[0]
               for i in range(0, len(data) - 3, 4)]
    return numbers[-1] if numbers else None


def spec_view(root):
    fs = larch.LocalFS(root)
    return specdecoder.from_vfs(fs, 'forest')


def test_sigkill_during_commits_never_loses_or_mixes_states(tmp_path):
    root = str(tmp_path)
    rnd = random.Random(1234)
    models = {0: []}
    current = 0
    overlays = 0
    for _ in range(KILLS):
        reported = run_child(root, rnd)
        low = current if reported is None else reported
        spec = spec_view(root)
        overlays += spec.overlay
        assert spec.consistency_problems(NODE_SIZE) == []
        for problem in larch.fsck.check_forest(
                'forest', larch.LocalFS(root), KEY_SIZE):
            assert 'journal' in problem, problem
        readonly = open_forest(larch.LocalFS(root), False)
        number = committed_number(readonly)
        assert number in (low, low + 1), (number, low)
        for n in range(current + 1, number + 1):
            models[n] = apply_to_models(models[n - 1], commit_ops(n))
        expected = [sorted(m.items()) for m in models[number]]
        lo, hi = b'\0' * KEY_SIZE, b'\xff' * KEY_SIZE
        assert [t.lookup_range(lo, hi) for t in readonly.trees] == expected
        assert [spec.tree_items(r) for r in spec.root_ids] == expected
        writable = open_forest(larch.LocalFS(root), True)
        assert [t.lookup_range(lo, hi) for t in writable.trees] == expected
        assert not os.path.exists(os.path.join(root, 'forest', 'new',
                                               'metadata'))
        assert larch.fsck.check_forest('forest', larch.LocalFS(root),
                                       KEY_SIZE) == []
        current = number
    assert current > KILLS // 4
    assert overlays > 0
