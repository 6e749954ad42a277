"""How code blocks become scenarios, steps and implementations."""

import pytest

from yarnrunner.model import YarnError
from yarnrunner.parser import parse_blocks, parse_files


def steps(scenario):
    return [(s.keyword, s.text) for s in scenario.steps]


def test_and_repeats_the_previous_keyword():
    scenarios, _ = parse_blocks([
        'SCENARIO s\nGIVEN a\nAND b\nWHEN c\nAND d\nTHEN e\n'
        'FINALLY f\nAND g\n'])
    assert steps(scenarios[0]) == [
        ('GIVEN', 'a'), ('GIVEN', 'b'), ('WHEN', 'c'), ('WHEN', 'd'),
        ('THEN', 'e'), ('FINALLY', 'f'), ('FINALLY', 'g')]


def test_step_text_has_its_spaces_collapsed():
    scenarios, _ = parse_blocks(['SCENARIO  two   spaces\nGIVEN a  b\t c\n'])
    assert scenarios[0].name == 'two spaces'
    assert steps(scenarios[0]) == [('GIVEN', 'a b c')]


def test_dots_continue_the_previous_step():
    scenarios, _ = parse_blocks(['SCENARIO s\nTHEN a\n... b\nAND c\n'])
    assert steps(scenarios[0]) == [('THEN', 'a b'), ('THEN', 'c')]


def test_implements_takes_lines_up_to_the_next_implements():
    _, impls = parse_blocks([
        'IMPLEMENTS GIVEN  a (\\S+)\necho 1\n\n  echo 2\n'
        'IMPLEMENTS THEN b\necho 3\n'])
    assert [(i.keyword, i.regexp, i.shell) for i in impls] == [
        ('GIVEN', 'a (\\S+)', 'echo 1\n\n  echo 2'), ('THEN', 'b', 'echo 3')]


def test_implements_ending_its_block_takes_the_next_block():
    # cmdtest's yarn does this too; obnam's files never rely on it.
    _, impls = parse_blocks(['IMPLEMENTS GIVEN a\n', 'echo next\n'])
    assert impls[0].shell == 'echo next'


def test_implements_at_the_very_end_has_empty_code():
    _, impls = parse_blocks(['IMPLEMENTS GIVEN a\n'])
    assert impls[0].shell == ''


def test_example_drops_the_rest_of_its_block():
    scenarios, _ = parse_blocks(['EXAMPLE e\nSCENARIO hidden\n',
                                 'SCENARIO seen\nTHEN x\n'])
    assert [s.name for s in scenarios] == ['seen']


def test_unknown_keyword_is_an_error():
    with pytest.raises(YarnError, match="unknown keyword 'given'"):
        parse_blocks(['SCENARIO s\ngiven x\n'])


def test_step_before_any_scenario_is_an_error():
    with pytest.raises(YarnError, match='GIVEN before any SCENARIO'):
        parse_blocks(['GIVEN x\n'])


def test_and_with_nothing_to_continue_is_an_error():
    with pytest.raises(YarnError, match='AND with no step before it'):
        parse_blocks(['SCENARIO s\nAND x\n'])


def test_implements_without_regexp_is_an_error():
    with pytest.raises(YarnError, match='needs a keyword and a regexp'):
        parse_blocks(['IMPLEMENTS GIVEN\n'])


def test_a_file_may_continue_the_previous_files_scenario(tmp_path):
    first = tmp_path / 'a.yarn'
    first.write_text('Prose.\n\n    SCENARIO s\n    GIVEN a\n')
    second = tmp_path / 'b.yarn'
    second.write_text('More.\n\n    THEN b\n')
    scenarios, _ = parse_files([str(first), str(second)])
    assert steps(scenarios[0]) == [('GIVEN', 'a'), ('THEN', 'b')]


def test_missing_file_is_a_one_line_error(tmp_path):
    with pytest.raises(YarnError, match='cannot read .*nope.yarn'):
        parse_files([str(tmp_path / 'nope.yarn')])


def test_file_not_in_utf8_is_a_one_line_error_naming_the_line(tmp_path):
    latin1 = tmp_path / 'latin1.yarn'
    latin1.write_bytes(b'Prose.\n\n    SCENARIO caf\xe9\n')
    with pytest.raises(YarnError,
                       match=r'scenario file .*latin1.yarn is not UTF-8 '
                             r'\(line 3\)$'):
        parse_files([str(latin1)])
