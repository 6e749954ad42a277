"""larch: copy-on-write B-tree forests, on-disk compatible with larch 1.x.

Entry point: `open_forest(dirname=..., key_size=..., node_size=...,
allow_writes=..., vfs=...)`. All file access goes through `vfs`, a
StorageFS (see larch.vfs for the protocol).
"""

from .errors import *  # noqa: F401,F403
from .errors import Error  # noqa: F401
from .forest import Forest, open_forest  # noqa: F401
from .tree import Tree  # noqa: F401
from .vfs import LocalFS, MemoryFS, StorageFS  # noqa: F401
