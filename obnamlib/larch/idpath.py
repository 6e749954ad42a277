"""Where a node file lives: the larch 1.x id-to-path rule (format-6.md 5.2)."""

DEPTH = 3
BITS = 12
SKIP = 13
_MASK = (1 << BITS) - 1


def node_path(node_id):
    """Relative path of node `node_id` inside a forest directory."""
    return 'nodes/%d/%d/%d/%x' % (
        (node_id >> SKIP) & _MASK,
        (node_id >> (SKIP + BITS)) & _MASK,
        (node_id >> (SKIP + 2 * BITS)) & _MASK,
        node_id)


def parse_node_name(name):
    """Node id for a node file's base name, or None if it is not one."""
    if not name or name.startswith('tmp'):
        return None
    try:
        node_id = int(name, 16)
    except ValueError:
        return None
    if '%x' % node_id != name:
        return None
    return node_id
