"""The storage checker of a repository's format, for fsck.

fsck's walk over generations and files is format-neutral
(obnamlib.engine.fsck_engine); what only the format can see (its marker,
key files, B-tree forests, chunk indexes) is checked by an object from
here.  Like repo.factory, this is where the format-neutral layers meet
the formats.
"""

from obnamlib import errors


def storage_checker_for(repo, fix):
    """The format's own checker (imported only when fsck runs)."""
    if repo.format_name == '6':
        from obnamlib.repo.fmt_6.fsck_checks import Fmt6Checker
        return Fmt6Checker(repo, fix=fix)
    raise errors.UnknownRepositoryFormat(format=repo.format_name,
                                         url=getattr(repo, 'location', ''))
