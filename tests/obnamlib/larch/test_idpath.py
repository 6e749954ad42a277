from obnamlib.larch.idpath import node_path, parse_node_name


def test_small_ids_live_in_0_0_0():
    assert node_path(3) == 'nodes/0/0/0/3'
    assert node_path(8191) == 'nodes/0/0/0/1fff'


def test_lowest_group_is_first_directory():
    assert node_path(8192) == 'nodes/1/0/0/2000'
    assert node_path(1 << 25) == 'nodes/0/1/0/2000000'
    assert node_path(1 << 37) == 'nodes/0/0/1/2000000000'
    assert node_path((1 << 49) + 5) == 'nodes/0/0/0/2000000000005'


def test_chunk_example_from_spec():
    assert node_path(0xf9baf814f09fa488) == \
        'nodes/1277/2680/1984/f9baf814f09fa488'


def test_parse_node_name():
    assert parse_node_name('1c0') == 0x1c0
    assert parse_node_name('tmpab12') is None
    assert parse_node_name('01') is None
    assert parse_node_name('xyz') is None
    assert parse_node_name('') is None
