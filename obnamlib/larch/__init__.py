"""larch: copy-on-write B-tree forests, on-disk compatible with larch 1.x.

Entry point: `open_forest(dirname=..., key_size=..., node_size=...,
allow_writes=..., vfs=...)`. All file access goes through `vfs` (see
larch.vfs for the StorageFS protocol).
"""

from obnamlib.larch.errors import *  # noqa: F401,F403
from obnamlib.larch.errors import Error  # noqa: F401
from obnamlib.larch.forest import Forest, open_forest  # noqa: F401
from obnamlib.larch.tree import Tree  # noqa: F401
from obnamlib.larch.vfs import LocalFS, MemoryFS  # noqa: F401
