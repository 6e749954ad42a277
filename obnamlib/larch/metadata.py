"""The forest `metadata` INI file (format-6.md 5.1)."""

import configparser

from . import errors

FORMAT = '1/1'
SECTION = 'metadata'


class ForestMetadata:

    def __init__(self, last_id=0, root_ids=(), key_size=None, node_size=None):
        self.last_id = last_id
        self.root_ids = list(root_ids)
        self.key_size = key_size
        self.node_size = node_size


def format_metadata(meta):
    """The metadata file contents, as larch 1.x writes them."""
    lines = [
        '[%s]' % SECTION,
        'format = %s' % FORMAT,
        'last_id = %d' % meta.last_id,
        'root_ids = %s' % ','.join(str(i) for i in meta.root_ids),
        'key_size = %d' % meta.key_size,
        'node_size = %d' % meta.node_size,
        '',
        '',
    ]
    return '\n'.join(lines).encode('ascii')


def parse_metadata(data, dirname):
    try:
        text = data.decode('ascii')
        parser = configparser.RawConfigParser()
        parser.read_string(text)
    except (UnicodeDecodeError, configparser.Error) as e:
        raise errors.BadMetadata(dirname, 'not an INI file (%s)' % e)
    if not parser.has_section(SECTION):
        raise errors.BadMetadata(dirname, 'no [metadata] section')

    def get(name):
        if not parser.has_option(SECTION, name):
            raise errors.BadMetadata(dirname, 'no %s' % name)
        return parser.get(SECTION, name).strip()

    fmt = get('format')
    if fmt != FORMAT:
        raise errors.BadMetadata(
            dirname, 'format %r, only %s is supported' % (fmt, FORMAT))
    try:
        last_id = int(get('last_id'))
        key_size = int(get('key_size'))
        roots = get('root_ids')
        root_ids = [int(x) for x in roots.split(',')] if roots else []
        node_size = None
        if parser.has_option(SECTION, 'node_size'):
            node_size = int(get('node_size'))
    except ValueError as e:
        raise errors.BadMetadata(dirname, 'bad number (%s)' % e)
    if last_id < 0 or key_size <= 0 or any(r <= 0 or r > last_id
                                          for r in root_ids):
        raise errors.BadMetadata(
            dirname, 'inconsistent values: last_id %d, root_ids %s, '
            'key_size %d' % (last_id, roots, key_size))
    return ForestMetadata(last_id, root_ids, key_size, node_size)
