"""How much one SFTP request carries and how many are in flight.

OpenSSH's sftp-server accepts messages up to 256 KiB; CHUNK leaves room
for the header of a WRITE.  Servers that return less per READ are handled.
"""

CHUNK = 256 * 1024 - 1024
READ_AHEAD = 16           # READ requests in flight while streaming
FIRST_READS = 5           # READs sent with a whole-file read's FSTAT:
                          # a 1 MiB chunk and its filter header
BATCH_FIRST_READS = 1     # the same, per file of a batch (read_files):
                          # most are small, and every READ past the end
                          # costs both sides a request and a reply; the
                          # rest of the big ones follow together
READDIRS_IN_FLIGHT = 8    # OpenSSH sends up to 100 names per READDIR
EXCL_ATTEMPTS = 5         # exclusive creates racing with removals
WRITES_IN_FLIGHT = 32     # WRITE requests in flight before waiting
SMALL_PAYLOAD = 64 * 1024  # smaller WRITE data is sent with its header
SEND_BATCH = 256 * 1024   # queued requests are written at least this often
RECEIVE_SIZE = 256 * 1024  # bytes asked for per read from the connection
PREFETCH_SIZE = CHUNK - 1  # prefetch reads files up to this size whole
FILE_MODE = 0o600
DIR_MODE = 0o700
