"""Damage in a B-tree, as the repository reports it."""

import functools
import struct

from obnamlib import errors
from obnamlib import larch


def reporting_damage(method):
    """Decorate each public method of the format with this: larch's
    exceptions (missing or garbled node, bad forest metadata) become
    RepositoryCorrupt, which commands report per file; so does a
    struct.error, which only a stored key or value of the wrong size
    (damage the decoding did not foresee) can cause."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except larch.Error as e:
            raise errors.RepositoryCorrupt(what='B-tree', reason=str(e)) from e
        except struct.error as e:
            raise errors.RepositoryCorrupt(
                what='B-tree', reason='a key or value of the wrong size: %s'
                % e) from e
    return wrapper
