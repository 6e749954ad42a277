"""The end-of-run JSON documents of backup, restore and fsck (#28)."""

from obnamlib.cli import backup_progress, summary_documents
from obnamlib.engine import fsck_engine, restorer


class Clock:

    def __init__(self, now):
        self.now = now

    def __call__(self):
        return self.now


def finished_backup(pretend=False):
    """A run of 10 s that found two files (5000 bytes), backed up one
    (4096 bytes, stored as 1000) and failed on a third."""
    clock = Clock(0.0)
    progress = backup_progress.BackupProgress(clock=clock, pretend=pretend)
    progress.found(b'/f', 4096)
    progress.backed_up(b'/f')
    progress.uploaded(4096)
    progress.found(b'/g', 904)
    progress.error(b'/h', OSError('gone'))
    if not pretend:
        progress.uploaded_bytes = 1000      # as the storage wrote it
        progress.set_io(written=3000, read=200)
    clock.now = 10.0
    progress.finish()
    return progress


def test_backup_has_the_counts_the_text_summary_prints():
    progress = finished_backup()
    document = summary_documents.backup(progress, 'host', '7')
    assert document == {
        'client': 'host', 'generation_id': '7', 'pretend': False,
        'started': 0.0, 'started_utc': '1970-01-01T00:00:00Z',
        'ended': 10.0, 'ended_utc': '1970-01-01T00:00:10Z',
        'duration': 10.0, 'files_found': 2, 'files_backed_up': 1,
        'bytes_found': 5000, 'bytes_uploaded': 1000,
        'bytes_written_total': 3000, 'bytes_read_total': 200,
        'overhead_bytes': 200 + 3000 - 1000, 'errors': 1}
    assert progress.summary_lines()[0] == \
        'Backed up 1 files (of 2 found), containing 4.0 KiB.'


def test_pretend_backup_has_no_generation_and_says_what_would_be_done():
    document = summary_documents.backup(finished_backup(pretend=True),
                                        'host', None)
    assert (document['generation_id'], document['pretend']) == (None, True)
    assert (document['files_backed_up'], document['bytes_uploaded']) == \
        (0, 0)
    assert (document['files_to_back_up'], document['bytes_to_back_up']) == \
        (1, 4096)


def test_real_backup_has_no_would_be_keys():
    document = summary_documents.backup(finished_backup(), 'host', '7')
    assert 'files_to_back_up' not in document
    assert 'bytes_to_back_up' not in document


def test_non_utf8_client_name_keeps_its_bytes():
    document = summary_documents.backup(finished_backup(), 'h\udce9', '7')
    assert (document['client'], document['client_b64']) == \
        ('h\ufffd', 'aOk=')


def test_restore_has_its_run_and_counts():
    stats = restorer.RestoreStats()
    stats.started, stats.ended, stats.files = 100.0, 102.5, 3
    document = summary_documents.restore(
        client='host', generation_id='5', target='/tmp/x\udce9',
        pretend=False, stats=stats, bytes_downloaded=4321, errors=2)
    assert document == {
        'client': 'host', 'generation_id': '5', 'pretend': False,
        'started': 100.0, 'started_utc': '1970-01-01T00:01:40Z',
        'ended': 102.5, 'ended_utc': '1970-01-01T00:01:42Z',
        'target': '/tmp/x\ufffd', 'target_b64': 'L3RtcC946Q==',
        'duration': 2.5, 'files_restored': 3, 'bytes_downloaded': 4321,
        'errors': 2}


def test_fsck_lists_each_problem_and_whether_it_was_fixed():
    stats = fsck_engine.FsckStats(clients=1, generations=2, files=30,
                                  chunks=4, problems=2, fixed=1)
    problems = ['chunk abcdef not used by anyone; deleting',
                'c:2: /f: chunk 12 does not exist']
    assert summary_documents.fsck(stats, problems) == {
        'problems': [{'text': problems[0], 'fixed': True},
                     {'text': problems[1], 'fixed': False}],
        'clients': 1, 'generations': 2, 'files': 30, 'chunks': 4,
        'problem_count': 2, 'fixed_count': 1}


def test_clean_fsck_has_an_empty_problem_list():
    document = summary_documents.fsck(fsck_engine.FsckStats(), [])
    assert (document['problems'], document['problem_count']) == ([], 0)
