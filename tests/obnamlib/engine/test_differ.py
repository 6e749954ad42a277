"""diff between generations (cli.md §5.8)."""

import stat

from obnamlib.engine import differ

from tests.obnamlib import show_helpers as h
from tests.obnamlib.show_helpers import repo  # noqa: F401 (fixture)


def changes(repo, old, new):
    return [(c, p) for c, p, _ in differ.diff(repo, old, new)]


def test_identical_generations_have_no_differences(repo):
    g1 = h.add_generation(repo, h.tree(), 1000)
    g2 = h.add_generation(repo, h.tree(), 2000)
    assert changes(repo, g1, g2) == []


def test_added_removed_changed_in_walk_order(repo):
    old = h.tree({
        b'/home/liw/gone': h.reg(b'bye'),
        b'/home/liw/olddir': h.dir_(),
        b'/home/liw/olddir/inside': h.reg(b'x'),
        b'/home/liw/same': h.reg(b'same'),
        b'/home/liw/edit': h.reg(b'v1'),
        b'/home/liw/sub': h.dir_(),
        b'/home/liw/sub/deep': h.reg(b'd1'),
        b'/home/liw/becomes-dir': h.reg(b'f'),
    })
    new = h.tree({
        b'/home/liw/same': h.reg(b'same', mode=0o600, mtime=5),  # meta only
        b'/home/liw/edit': h.reg(b'v2'),
        b'/home/liw/new': h.reg(b'hi'),
        b'/home/liw/newdir': h.dir_(),
        b'/home/liw/newdir/inside': h.reg(b'y'),
        b'/home/liw/sub': h.dir_(mode=0o700),
        b'/home/liw/sub/deep': h.reg(b'd2'),
        b'/home/liw/becomes-dir': h.dir_(),
        b'/top': h.reg(b't'),
    })
    g1 = h.add_generation(repo, old, 1000)
    g2 = h.add_generation(repo, new, 2000)
    assert changes(repo, g1, g2) == [
        ('+', b'/top'),
        ('*', b'/home/liw/becomes-dir'),
        ('*', b'/home/liw/edit'),
        ('+', b'/home/liw/new'),
        ('+', b'/home/liw/newdir'),
        ('-', b'/home/liw/gone'),
        ('-', b'/home/liw/olddir'),
        ('*', b'/home/liw/sub/deep'),
    ]


def test_symlink_target_change_is_not_reported(repo):
    g1 = h.add_generation(repo, h.tree(({b'/home/liw/l': h.link(b'a')})), 1)
    g2 = h.add_generation(repo, h.tree(({b'/home/liw/l': h.link(b'b')})), 2)
    assert changes(repo, g1, g2) == []


def test_removal_carries_old_metadata(repo):
    g1 = h.add_generation(repo, h.tree(({b'/home/liw/x': h.reg(b'12345')})), 1)
    g2 = h.add_generation(repo, h.tree(), 2)
    [(char, path, md)] = list(differ.diff(repo, g1, g2))
    assert (char, path, md.st_size) == ('-', b'/home/liw/x', 5)
    assert stat.S_ISREG(md.st_mode)
