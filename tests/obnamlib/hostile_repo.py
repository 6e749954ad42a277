"""Tampering with a local, unencrypted repository the way a hostile or
damaged server could: names stored in a generation, and B-tree nodes
pointing back at themselves.  Built on obnam's own API, then changed in
the stored trees; usable from yarn steps:

    python3 -m tests.obnamlib.hostile_repo rename REPO CLIENT PATH NAME
"""

import os
import struct
import sys

import obnamlib.repo.storage.filters
import obnamlib.repo.factory
from obnamlib.repo.fmt_6 import keys
from obnamlib.larch import codec
from obnamlib.larch.idpath import node_path


def _latest(repo_path, client):
    repo = obnamlib.repo.factory.open_repository(url=str(repo_path),
                                                 lock_timeout=0)
    repo.lock_client(client)
    gen = repo.get_generation_ids(client)[-1]
    return repo, gen, repo._writable_generation(gen)


def rename(repo_path, client, path, name, parent=None):
    """Store `name` (bytes, anything: '..', 's/x', b'') as the basename of
    path (bytes) in the client's latest generation, listed in directory
    parent (default: where it is); the joined path resolves to the same
    entry, as a tampered tree would have it."""
    repo, gen, tree = _latest(repo_path, client)
    old_parent = os.path.dirname(path)
    parent = parent or old_parent
    file_id = tree.file_id(path)
    parent_id = tree.file_id(parent)
    if parent != old_parent:
        tree.tree.remove(keys.file_key(tree.file_id(old_parent),
                                       keys.DIR_CONTENTS, file_id))
    new_path = parent.rstrip(b'/') + b'/' + name
    tree.tree.insert(keys.file_key(parent_id, keys.DIR_CONTENTS, file_id),
                     name)
    tree.tree.remove(keys.file_key(keys.default_file_id(path),
                                   keys.FILE_NAME, file_id))
    tree.tree.insert(keys.file_key(keys.default_file_id(new_path),
                                   keys.FILE_NAME, file_id), new_path)
    tree.ids.clear()
    repo.commit_client(client)
    repo.close()


def list_again(repo_path, client, directory, listed, name):
    """Directory (bytes) also lists the entry of `listed` (itself or one
    above it) under name: a loop in the generation's file tree."""
    repo, gen, tree = _latest(repo_path, client)
    tree.tree.insert(keys.file_key(tree.file_id(directory),
                                   keys.DIR_CONTENTS, tree.file_id(listed)),
                     name)
    repo.commit_client(client)
    repo.close()


def make_symlink(repo_path, client, path, target):
    """Record path (bytes) as a symlink to target in the latest
    generation, keeping whatever is stored below it."""
    repo, gen, tree = _latest(repo_path, client)
    md = repo.get_metadata(gen, path)
    md.st_mode = 0o120777
    md.target = target
    repo.set_metadata(gen, path, md)
    repo.commit_client(client)
    repo.close()


# --- B-tree nodes ------------------------------------------------------------

def client_dirs(repo_path):
    """The client forests' directories (numeric names, format-6.md §2)."""
    return sorted(os.path.join(str(repo_path), d)
                  for d in os.listdir(str(repo_path)) if d.isdigit())


def node_files(forest_dir):
    """Paths of every committed node file of a forest, sorted."""
    found = []
    for top, _, names in os.walk(os.path.join(forest_dir, 'nodes')):
        found.extend(os.path.join(top, n) for n in names
                     if not n.startswith('tmp'))
    return sorted(found)


def index_nodes(forest_dir):
    """[(path, node)] of the forest's (non-empty) index nodes."""
    found = []
    for path in node_files(forest_dir):
        with open(path, 'rb') as f:
            data = obnamlib.repo.storage.filters.unwrap(f.read())
        if codec.peek_kind(data) != 'index':
            continue
        node_id, count = struct.unpack_from('!QI', data, 4)
        if count:
            key_size = (len(data) - 16) // count - 8
            found.append((path, codec.decode(data, key_size, forest_dir,
                                             node_id)))
    return found


def rewrite(forest_dir, node):
    """Store node (changed in memory) over its own file."""
    with open(os.path.join(forest_dir, node_path(node.id)), 'wb') as f:
        f.write(obnamlib.repo.storage.filters.wrap(codec.encode(node)))


def point_at_itself(forest_dir):
    """Every child of every index node of the forest becomes the node
    itself: any walk from a root loops.  Returns how many were changed."""
    nodes = index_nodes(forest_dir)
    for _, node in nodes:
        node.children = [node.id] * len(node.children)
        rewrite(forest_dir, node)
    return len(nodes)


def point_at_each_other(forest_dir):
    """Index nodes in pairs: each one's children all become the other."""
    nodes = [node for _, node in index_nodes(forest_dir)]
    if len(nodes) == 1:
        return 0
    for a, b in zip(nodes, nodes[1:] + nodes[:1]):
        a.children = [b.id] * len(a.children)
        rewrite(forest_dir, a)
    return len(nodes)


def main(argv):
    command, repo_path, client = argv[:3]
    rest = [os.fsencode(a) for a in argv[3:]]
    if command == 'rename':
        rename(repo_path, client, *rest)
    elif command == 'symlink':
        make_symlink(repo_path, client, *rest)
    else:
        raise SystemExit('unknown command %s' % command)


if __name__ == '__main__':
    main(sys.argv[1:])
