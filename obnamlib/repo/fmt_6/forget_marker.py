"""A forget's marker in the client directory (#27): written before the
forget removes anything, removed with its last index commit.  Found by
the next forget of the client, it says an earlier one was killed midway
and may have left index entries of the client that no generation of it
uses; only then are the client's index entries swept (a walk over the
whole chunksums tree and the chunks of every generation of the client).

`<client-id>/forget-in-progress`, filtered like the client's trees, is
never seen by Obnam 1.x or larch (see chunk_journal).
"""

MARKER_NAME = 'forget-in-progress'


def marker_path(client_id):
    return '%d/%s' % (client_id, MARKER_NAME)


def is_placed(fs, client_id):
    """Whether a forget of the client is under way, or was killed."""
    return fs.exists(marker_path(client_id))


def place(fs, client_id):
    """Write the marker; whether an earlier forget's was still there."""
    found = is_placed(fs, client_id)
    if not found:
        fs.write_file(marker_path(client_id), b'forget\n')
    return found


def take_away(fs, client_id):
    try:
        fs.remove(marker_path(client_id))
    except FileNotFoundError:
        pass
