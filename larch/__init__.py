"""larch: copy-on-write B-tree forests, on-disk compatible with larch 1.x."""

from larch.vfs import LocalFS, MemoryFS  # noqa: F401
