"""The text and JSON of what forget frees and what space measures."""

import json

import pytest

from obnamlib.cli import space_output
from obnamlib.engine import chunk_usage, forgetter, space
from tests.local_time import utc  # noqa: F401

ENDS = 1433116800   # 2015-06-01 00:00 UTC


class Sizes:
    """A repository that knows only chunk sizes: chunk id n is n bytes."""

    def get_chunk_sizes(self, chunk_ids):
        return {chunk_id: chunk_id for chunk_id in chunk_ids}


def decisions():
    return [forgetter.Decision(2, '2', ENDS, []),
            forgetter.Decision(5, '5', ENDS + 3600, ['hourly 1/1']),
            forgetter.Decision(8, '8', ENDS + 7200, [])]


def freed(leftovers=()):
    result = chunk_usage.Freed(Sizes())
    result.note_leftovers(leftovers)
    result.note_generation(2, [1000, 24])
    result.note_generation(8, [])
    return result


def test_pretend_lines_add_a_column_and_a_total(utc):
    lines = space_output.pretend_lines(decisions(), freed())
    assert lines == [
        '2\t2015-06-01 00:00:00 +0000\tforget\tfrees 1024 bytes (1.0 KiB)',
        '5\t2015-06-01 01:00:00 +0000\tkeep hourly 1/1',
        '8\t2015-06-01 02:00:00 +0000\tforget\tfrees 0 bytes (0.0 B)',
        'Would free 1024 bytes (1.0 KiB) in total']
    assert [line.split('\t')[:3] for line in lines[:3]] == \
        [d.line().split('\t') for d in decisions()]


def test_leftovers_have_a_line_and_count_in_the_total(utc):
    lines = space_output.pretend_lines(decisions(), freed([3, 4]))
    assert lines[-2:] == [
        'Would free 7 bytes (7.0 B) left by interrupted runs',
        'Would free 1031 bytes (1.0 KiB) in total']


@pytest.mark.parametrize('pretend, prefix', [(True, 'frees_bytes'),
                                             (False, 'freed_bytes')])
def test_forget_document(pretend, prefix):
    document = space_output.forget_document('host', decisions(),
                                            freed([3]), pretend)
    assert json.loads(json.dumps(document)) == {
        'client': 'host', 'pretend': pretend,
        'generations': [
            {'id': '2', 'ended': ENDS, 'ended_utc': '2015-06-01T00:00:00Z',
             'keep': False, 'reasons': [], prefix: 1024},
            {'id': '5', 'ended': ENDS + 3600,
             'ended_utc': '2015-06-01T01:00:00Z', 'keep': True,
             'reasons': ['hourly 1/1'], prefix: None},
            {'id': '8', 'ended': ENDS + 7200,
             'ended_utc': '2015-06-01T02:00:00Z', 'keep': False,
             'reasons': [], prefix: 0}],
        prefix + '_leftovers': 3, prefix + '_total': 1027}


def test_forget_with_nothing_to_do():
    assert space_output.forget_document('h', [], None, False) == {
        'client': 'h', 'pretend': False, 'generations': [],
        'freed_bytes_leftovers': 0, 'freed_bytes_total': 0}


def report(chunk_bytes=3 * 1024 ** 2):
    gens = [space.GenerationSpace(2, '2', ENDS - 5, ENDS, 5 * 1024 ** 2,
                                  2 * 1024 ** 2, 1024),
            space.GenerationSpace(15, '15', ENDS + 55, ENDS + 60, 10,
                                  1024 ** 2 + 1, 0)]
    return space.SpaceReport('host', gens, chunk_bytes, 7,
                             6 * 1024 ** 2, 3, 2)


def test_space_lines_are_an_aligned_table_then_totals(utc):
    assert space_output.space_lines(report()) == [
        'generation  ended                      file data   stored  only here',
        '2           2015-06-01 00:00:00 +0000    5.0 MiB  2.0 MiB    1.0 KiB',
        '15          2015-06-01 00:01:00 +0000     10.0 B  1.0 MiB      0.0 B',
        '',
        'Chunk files in the repository: 7, 3145728 bytes (3.0 MiB)',
        'File data in its 3 generations (all clients): 6291456 bytes '
        '(6.0 MiB)',
        'File data per stored byte (de-duplication and compression): 2.00']


def test_space_document():
    document = space_output.space_document(report())
    assert document['client'] == 'host'
    assert document['generations'][1] == {
        'id': '15', 'started': ENDS + 55,
        'started_utc': '2015-06-01T00:00:55Z', 'ended': ENDS + 60,
        'ended_utc': '2015-06-01T00:01:00Z', 'bytes': 10,
        'stored_bytes': 1024 ** 2 + 1, 'unique_bytes': 0}
    assert document['repository'] == {
        'chunk_bytes': 3 * 1024 ** 2, 'chunk_count': 7,
        'generations_bytes': 6 * 1024 ** 2, 'generation_count': 3,
        'client_count': 2, 'ratio': 2.0}


def test_an_empty_repository_has_no_ratio(utc):
    assert space_output.space_document(report(0))['repository']['ratio'] \
        is None
    assert space_output.space_lines(report(0))[-1].endswith(': -')
