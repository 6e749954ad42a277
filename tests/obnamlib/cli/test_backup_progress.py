"""What a backup run counts for its summary (cli.md §6.9; issue 28)."""

from obnamlib.cli import backup_progress


class Storage:
    """The repository storage's write counter."""

    def __init__(self):
        self.bytes_written = 0


def test_a_chunk_counts_as_what_the_storage_wrote_for_it():
    storage = Storage()
    progress = backup_progress.BackupProgress(clock=lambda: 0.0)
    storage.bytes_written = 900             # opening, locking
    progress.count_uploads_in(storage)
    progress.found(b'/f', 4096)
    storage.bytes_written += 1000           # the chunk file, compressed
    progress.uploaded(4096)
    storage.bytes_written += 300            # the file's metadata
    progress.found(b'/g', 0)
    progress.what('committing changes to repository')
    storage.bytes_written += 700            # the commit
    progress.set_io(written=storage.bytes_written, read=100)
    assert (progress.uploaded_bytes, progress.new_data_bytes) == (1000, 4096)
    assert progress.overhead == 100 + 2900 - 1000
    assert progress.overhead_percent == 100.0 * 2000 / 3000


def test_each_chunk_of_a_file_counts_once():
    storage = Storage()
    progress = backup_progress.BackupProgress(clock=lambda: 0.0)
    progress.count_uploads_in(storage)
    progress.found(b'/f', 8192)
    storage.bytes_written += 1000
    progress.uploaded(4096)
    storage.bytes_written += 600
    progress.uploaded(4096)
    assert progress.uploaded_bytes == 1600


def test_without_a_storage_a_chunk_counts_as_its_data():
    progress = backup_progress.BackupProgress(clock=lambda: 0.0)
    progress.uploaded(4096)
    assert progress.uploaded_bytes == 4096


def test_no_change_overhead_is_all_that_moved_and_at_most_100_percent():
    progress = backup_progress.BackupProgress(clock=lambda: 0.0)
    progress.set_io(written=62 * 1024, read=3 * 1024 * 1024)
    progress.finish()
    assert progress.summary_lines()[3] == (
        'Total upload amount 62.0 KiB. Overhead was 3.0 MiB (100.0 %).')


def test_pretend_claims_no_backup_and_no_upload():
    progress = backup_progress.BackupProgress(clock=lambda: 0.0,
                                              pretend=True)
    progress.found(b'/f', 5000)
    progress.uploaded(5000)
    progress.backed_up(b'/f')
    progress.finish()
    assert progress.summary_lines()[:2] == [
        'Backed up 0 files (of 1 found), containing 4.0 KiB.',
        'Uploaded 0.0 B file data in  at 0.0 B/s average speed.']
    assert progress.pretend_line() == (
        'Pretending: would back up 1 files, 4.0 KiB of file data (before '
        'compression and de-duplication); nothing was written.')
