"""The end-of-run JSON documents of backup, restore and fsck.

With `--output-format=json` each of these commands writes one of these
instead of its text summary: the same counts, as numbers (keys in
doc/json-output.md).  Building them is kept apart from the commands so
that the keys can be tested without a repository.
"""

from obnamlib.cli import json_output
from obnamlib.engine import fsck_engine


def backup(progress, client, generation_id):
    """A backup run's summary from its BackupProgress.  `generation_id`
    is the new generation as `genids` spells it (None when pretending).
    A pretend run backs up nothing; what a real run would do is added."""
    document = _run_header(client, generation_id, progress.pretend,
                           progress.started, progress.ended)
    document.update(
        duration=progress.duration,
        files_found=progress.file_count,
        files_backed_up=progress.stored_count,
        bytes_found=progress.scanned_bytes,
        bytes_uploaded=progress.uploaded_bytes,
        bytes_written_total=progress.written_bytes,
        bytes_read_total=progress.read_bytes,
        overhead_bytes=progress.overhead,
        errors=len(progress.errors))
    if progress.pretend:
        document.update(files_to_back_up=progress.backed_up_count,
                        bytes_to_back_up=progress.new_data_bytes)
    return document


def restore(*, client, generation_id, target, pretend, stats,
            bytes_downloaded, errors):
    """A restore run's summary: `stats` is the restorer's RestoreStats,
    `errors` the number of error lines it reported."""
    document = _run_header(client, generation_id, pretend, stats.started,
                           stats.ended)
    document.update(json_output.name_fields('target', target))
    document.update(
        duration=stats.duration,
        files_restored=stats.files,
        bytes_downloaded=bytes_downloaded,
        errors=errors)
    return document


def fsck(stats, problems):
    """fsck's result: every problem line (repaired or not) and the
    counts of its FsckStats."""
    return {
        'problems': [{'text': text, 'fixed': fsck_engine.is_fixed(text)}
                     for text in problems],
        'clients': stats.clients,
        'generations': stats.generations,
        'files': stats.files,
        'chunks': stats.chunks,
        'problem_count': stats.problems,
        'fixed_count': stats.fixed,
    }


def _run_header(client, generation_id, pretend, started, ended):
    """The keys that say which run this was: whose generation, when."""
    document = json_output.name_fields('client', client)
    document.update(generation_id=generation_id, pretend=pretend)
    document.update(json_output.time_fields('started', started))
    document.update(json_output.time_fields('ended', ended))
    return document
