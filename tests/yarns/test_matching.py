"""Which implementation a step gets, and the checks before running."""

import pytest

from yarnrunner.matching import check_scenarios, connect, match_variables
from yarnrunner.model import Implementation, Scenario, Step, YarnError


def scenario(*steps, name='s'):
    return Scenario(name, [Step(k, t) for k, t in steps])


def impl(keyword, regexp):
    return Implementation(keyword, regexp, f'# {regexp}')


def connected(step_text, *implementations, keyword='THEN'):
    s = scenario((keyword, step_text))
    connect([s], list(implementations))
    return s.steps[0].implementation


def test_matching_ignores_case():
    assert connected('The Thing', impl('THEN', 'the thing')).regexp == \
        'the thing'


def test_regexp_must_match_from_the_start():
    with pytest.raises(YarnError, match='no matching implementation'):
        connected('a thing', impl('THEN', 'thing'))


def test_regexp_must_match_to_the_end():
    with pytest.raises(YarnError, match='no matching implementation'):
        connected('thing and more', impl('THEN', 'thing'))


def test_first_match_must_reach_the_end_not_any_match():
    # re.match, then "ends at the end": 'a|ab' takes 'a' and does not fit
    # 'ab' (re.fullmatch would); the same as cmdtest's yarn.
    with pytest.raises(YarnError, match='no matching implementation'):
        connected('ab', impl('THEN', 'a|ab'))


def test_keyword_must_be_the_same():
    with pytest.raises(YarnError, match='step "WHEN x" has no matching'):
        connected('x', impl('THEN', 'x'), keyword='WHEN')


def test_two_fitting_implementations_are_an_error_naming_both():
    with pytest.raises(YarnError) as e:
        connected('x y', impl('THEN', 'x (.*)'), impl('THEN', '(.*) y'))
    assert 'matches 2 implementations' in str(e.value)
    assert 'IMPLEMENTS THEN x (.*)' in str(e.value)
    assert 'IMPLEMENTS THEN (.*) y' in str(e.value)


def test_missing_steps_may_be_allowed_and_drop_the_scenario():
    warnings = []
    good = scenario(('THEN', 'x'), name='good')
    bad = scenario(('THEN', 'nothing fits'), name='bad')
    runnable = connect([good, bad], [impl('THEN', 'x')], allow_missing=True,
                       warn=warnings.append)
    assert runnable == [good]
    assert "'bad'" in warnings[0]


def test_match_variables_are_the_groups_and_empty_for_unused_ones():
    s = scenario(('THEN', 'file f has 3 lines'))
    connect([s], [impl('THEN', r'file (\S+) has (\d+) lines?( or more)?')])
    assert match_variables(s.steps[0]) == {
        'MATCH_1': 'f', 'MATCH_2': '3', 'MATCH_3': ''}


def test_bad_regexp_is_a_one_line_error():
    with pytest.raises(YarnError, match='bad regexp'):
        connected('x', impl('THEN', '(x'))


def test_no_scenarios_is_an_error():
    with pytest.raises(YarnError, match='no scenarios'):
        check_scenarios([])


def test_duplicate_names_are_an_error():
    with pytest.raises(YarnError, match="duplicate scenario names: 'a'"):
        check_scenarios([scenario(('THEN', 'x'), name='a'),
                         scenario(('THEN', 'x'), name='a')])


def test_scenario_without_then_is_an_error():
    with pytest.raises(YarnError, match="without a THEN step: 'a'"):
        check_scenarios([scenario(('GIVEN', 'x'), name='a')])
