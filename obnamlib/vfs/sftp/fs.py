"""The SFTP virtual filesystem: repositories and live data on another host.

Obnam 1.x over SFTP was slow because every operation waited for its reply.
Here one SSH connection serves the whole run, and requests are pipelined at
the SFTP level: a whole file is read with one OPEN, then FSTAT and 1 MiB
of READs in flight together; a file is written with one OPEN and every
WRITE plus the CLOSE in flight; a directory listing with attributes is one
READDIR round trip per ~100 entries; stats right after a listdir come from
it.  Reads and writes use the largest request OpenSSH's sftp-server
accepts.  Missing directories are made with every MKDIR of the chain in
flight.

Callers that know what comes next batch it: `read_files` and
`create_files` (many repository files in two or three round trips),
`prefetch` and `prefetch_listings` (a pull backup's small files and
directories), `set_attributes` (a restored file's owner, mode and times).

Consistency when the connection dies at any point (format-6.md OPEN-7):
`write_file` writes a temporary file (`tmp...`, a name larch ignores) and
renames it over the target with OpenSSH's `posix-rename@openssh.com`, so
readers see the old or the new file (three round trips: a node file must
never be seen half-written); `create_file` (chunks) and locks are
exclusive creates (SSH_FXF_EXCL) in two round trips, as on a local disk: a
chunk is referenced only after its create returned, so a cut connection
leaves at worst an unused chunk file, a temporary file and the locks
(removed by force-lock); every later call raises SftpConnectionLost.
Errors about repository files name them by sftp:// URL; SFTP's bare
"Failure" is checked against statvfs@openssh.com to report a full disk.

The packets are our own SFTP v3 codec (codec.py) and go through one
`Wire` per connection (wire.py) over a channel opened with public APIs
(ssh_auth.py): requests are queued and written together when a reply is
awaited (one pipe write and one SSH packet per batch), replies are read
in large pieces and each payload is copied once.  Restore of mkcorpus 0.1
from sftp://, against paramiko's SFTPClient: client CPU 1.8 -> 1.4 s, ssh
child 0.75 -> 0.5 s, pipe reads ~45,000 -> ~2,000.

Every request and round trip is counted (`requests`, `round_trips`) and
logged when the object is closed or the program exits.

Paths: StorageFS methods take `str` paths relative to the URL's path; the
live-data methods take `bytes` paths, absolute on the server (relative ones
are taken relative to the URL's path).
"""

from obnamlib.vfs.base import (CREATES_IN_BATCHES, PREFETCHES_LISTINGS,
                               READS_IN_BATCHES)
from obnamlib.vfs.sftp.dirs import DirsMixin
from obnamlib.vfs.sftp.files import FilesMixin
from obnamlib.vfs.sftp.limits import PREFETCH_SIZE
from obnamlib.vfs.sftp.listing import ListingMixin
from obnamlib.vfs.sftp.live import LiveDataMixin
from obnamlib.vfs.sftp.session import SftpSession


class SftpFS(LiveDataMixin, FilesMixin, DirsMixin, ListingMixin,
             SftpSession):
    """A VFS on an SFTP server, through one SSH connection: the request
    plumbing (SftpSession) and one part per concern."""

    def __init__(self, url, settings=None, connection=None):
        self._init_listing()
        self._init_files()
        self._init_dirs()
        self._init_live()
        super().__init__(url, settings, connection)

    # What it does well: many requests in flight together.
    capabilities = frozenset({READS_IN_BATCHES, CREATES_IN_BATCHES,
                              PREFETCHES_LISTINGS})

    # Files up to this size are worth a prefetch() (backup_engine batches
    # them); a VFS without prefetch has none.
    prefetch_size = PREFETCH_SIZE
