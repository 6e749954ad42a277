"""One regular file of a generation as a stream of bytes (`obnam cat`).

The content comes a piece at a time (a chunk, or the data stored in the
tree), so memory does not grow with the file's size; before a chunk no
hint named, the rest of the file is announced to the repository
(`prefetch_chunks`, within the limits of obnamlib.engine.read_ahead).
Like restore, the content's MD5 is checked against the recorded one: the
check can only end the stream, so a mismatch is raised after the last
piece and whoever wrote the pieces out must say that they are not the
backed-up file.
"""

import hashlib
import stat

import obnamlib.errors
from obnamlib.engine.read_ahead import HintedContent


class IsADirectory(obnamlib.errors.ObnamError):
    code = 'R39C5AX'
    msg = ('{filename} is a directory in generation {genspec}; only a '
           'regular file can be written out (restore or ls a directory)')


class NotARegularFile(obnamlib.errors.ObnamError):
    code = 'RD6A69X'
    msg = ('{filename} is {kind} in generation {genspec}; only a regular '
           'file can be written out')


class ContentDamaged(obnamlib.errors.ObnamError):
    """The fetched content is not what was backed up (restore's R2F75CX,
    but here the bytes have already gone out)."""
    code = 'RDF0F1X'
    msg = ('Backed-up data of {filename} does not match its checksum '
           '({actual} vs {recorded}); what was written is not the '
           'backed-up file')


_KINDS = (
    (stat.S_ISLNK, 'a symbolic link'),
    (stat.S_ISFIFO, 'a FIFO'),
    (stat.S_ISSOCK, 'a socket'),
    (stat.S_ISCHR, 'a character device'),
    (stat.S_ISBLK, 'a block device'),
)


class FileReader:
    """Regular files of generation `gen_id` of `repo`, one at a time."""

    def __init__(self, repo, gen_id, client_name):
        self.repo = repo
        self.gen = gen_id
        self.client_name = client_name
        self.hinted = HintedContent(repo, gen_id)
        self.expecting = False

    def regular_file(self, path):
        """The metadata of path (absolute bytes), which must be a regular
        file of the generation; else the error that says what it is."""
        if not self.repo.file_exists(self.gen, path):
            raise obnamlib.errors.RepositoryFileDoesNotExistInGeneration(
                client_name=self.client_name, genspec=self._genspec(),
                filename=path)
        md = self.repo.get_metadata(self.gen, path)
        if md.st_mode is None or stat.S_ISDIR(md.st_mode):
            raise IsADirectory(filename=path, genspec=self._genspec())
        if not stat.S_ISREG(md.st_mode):
            raise NotARegularFile(filename=path, genspec=self._genspec(),
                                  kind=_kind(md.st_mode))
        return md

    def _genspec(self):
        return self.repo.make_generation_spec(self.gen)

    def content(self, path, md):
        """The bytes of regular file path (metadata md), piece by piece;
        ContentDamaged after the last piece if they do not match the
        recorded checksum."""
        digest = hashlib.md5()
        for data in self._pieces(path, md):
            digest.update(data)
            yield data
        if md.md5 is not None and digest.digest() != md.md5:
            raise ContentDamaged(filename=path, actual=digest.hexdigest(),
                                 recorded=md.md5.hex())

    def _pieces(self, path, md):
        in_tree = self.repo.get_file_data(self.gen, path)
        if in_tree is not None:
            yield in_tree
            return
        chunk_ids = self.repo.get_file_chunk_ids(self.gen, path)
        if chunk_ids and not self.expecting:
            self.repo.expect_chunk_reads()
            self.expecting = True
        yield from self.hinted.content(path, md, chunk_ids)


def _kind(mode):
    for is_kind, name in _KINDS:
        if is_kind(mode):
            return name
    return 'of unknown type (mode %o)' % mode
