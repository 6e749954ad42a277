"""The client list is read without its lock: a reader whose nodes another
client's commit removed reads the new list instead of failing."""

import os

import pytest

from obnamlib import larch
import obnamlib.larch.vfs
from obnamlib.repo.fmt_6 import clientlist


def add_clients(fs, names, key_id=''):
    writer = clientlist.ClientList(fs, node_size=512)
    writer.start_changes()
    for name in names:
        writer.add(name, key_id)
    writer.commit()


def stale_reader(fs):
    """A reader that has opened the list, before another commit."""
    reader = clientlist.ClientList(fs, node_size=512)
    reader._reader()
    return reader


def test_a_reader_sees_the_list_another_client_just_committed(tmp_path):
    fs = larch.vfs.LocalFS(str(tmp_path))
    first = ['client-%03d' % i for i in range(40)]   # several nodes
    add_clients(fs, first)
    reader = stale_reader(fs)
    add_clients(fs, ['newcomer'])     # removes the nodes the reader knew
    assert sorted(reader.names()) == sorted(first + ['newcomer'])
    reader = stale_reader(fs)
    add_clients(fs, ['third'], key_id='C0FFEE')
    assert reader.find('third') is not None
    reader = stale_reader(fs)
    add_clients(fs, ['fourth'])
    assert reader.key_id('third') == 'C0FFEE'


def test_a_node_missing_every_time_is_damage(tmp_path):
    fs = larch.vfs.LocalFS(str(tmp_path))
    add_clients(fs, ['client-%03d' % i for i in range(40)])
    for dirpath, _, names in os.walk(str(tmp_path / 'clientlist' / 'nodes')):
        for name in names:
            os.remove(os.path.join(dirpath, name))
    with pytest.raises(larch.NodeMissing):
        clientlist.ClientList(fs, node_size=512).names()
