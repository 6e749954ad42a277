import pytest

from obnamlib.larch import errors
from obnamlib.larch.metadata import ForestMetadata, format_metadata, parse_metadata


def test_format_is_exactly_larch_style():
    meta = ForestMetadata(6, [1, 4], 18, 262144)
    assert format_metadata(meta) == (
        b'[metadata]\nformat = 1/1\nlast_id = 6\nroot_ids = 1,4\n'
        b'key_size = 18\nnode_size = 262144\n\n')


def test_empty_root_ids_have_trailing_space():
    text = format_metadata(ForestMetadata(0, [], 4, 128))
    assert b'\nroot_ids = \n' in text
    assert parse_metadata(text, 'f').root_ids == []


def test_parse_any_option_order():
    meta = parse_metadata(
        b'[metadata]\nnode_size = 128\nlast_id = 526\n'
        b'root_ids = 63,251,407,511\nkey_size = 4\nformat = 1/1\n\n', 'f')
    assert (meta.last_id, meta.root_ids, meta.key_size, meta.node_size) == \
        (526, [63, 251, 407, 511], 4, 128)


@pytest.mark.parametrize('text,reason', [
    (b'garbage', 'not an INI file'),
    (b'[other]\na = 1\n', 'no [metadata] section'),
    (b'[metadata]\nlast_id = 1\nroot_ids = \nkey_size = 4\n', 'no format'),
    (b'[metadata]\nformat = 2/1\nlast_id = 1\nroot_ids = \nkey_size = 4\n',
     "format '2/1'"),
    (b'[metadata]\nformat = 1/1\nlast_id = x\nroot_ids = \nkey_size = 4\n',
     'bad number'),
    (b'[metadata]\nformat = 1/1\nlast_id = 3\nroot_ids = 5\nkey_size = 4\n',
     'inconsistent'),
    (b'\xff\xfe', 'not an INI file'),
])
def test_bad_metadata_is_reported(text, reason):
    with pytest.raises(errors.BadMetadata) as e:
        parse_metadata(text, 'some/forest')
    assert reason in str(e.value)
    assert 'some/forest' in str(e.value)
