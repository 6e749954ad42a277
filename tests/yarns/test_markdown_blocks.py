"""Which lines of a Markdown text are yarn content (top-level code)."""

from yarnrunner.markdown_blocks import code_blocks


def test_indented_block_after_blank_line_is_code():
    text = 'Some prose.\n\n    GIVEN x\n    THEN y\n\nMore prose.\n'
    assert code_blocks(text) == ['GIVEN x\nTHEN y\n']


def test_indented_line_right_after_prose_continues_the_paragraph():
    assert code_blocks('Some prose.\n    GIVEN x\n') == []


def test_code_may_follow_a_hash_heading_line_directly():
    assert code_blocks('# Title\n    GIVEN x\n') == ['GIVEN x\n']


def test_code_may_follow_an_underlined_heading_directly():
    assert code_blocks('Title\n=====\n    GIVEN x\n') == ['GIVEN x\n']


def test_indented_block_after_a_list_belongs_to_the_list():
    assert code_blocks('- item\n\n    GIVEN x\n') == []


def test_indented_block_after_a_list_and_prose_is_code():
    assert code_blocks('- item\n\nprose\n\n    GIVEN x\n') == ['GIVEN x\n']


def test_blank_lines_do_not_split_a_code_block():
    text = '    IMPLEMENTS GIVEN x\n    true\n\n\n    IMPLEMENTS GIVEN y\n'
    assert code_blocks(text) == [
        'IMPLEMENTS GIVEN x\ntrue\n\n\nIMPLEMENTS GIVEN y\n']


def test_prose_between_code_splits_it_in_two():
    assert code_blocks('    GIVEN x\n\nprose\n\n    THEN y\n') == [
        'GIVEN x\n', 'THEN y\n']


def test_unindented_line_ends_a_code_block():
    assert code_blocks('    GIVEN x\nprose\n    THEN y\n') == ['GIVEN x\n']


def test_tabs_count_as_four_columns():
    assert code_blocks('\tGIVEN x\n\t\tdeeper\n') == ['GIVEN x\n    deeper\n']


def test_deeper_indentation_is_kept():
    assert code_blocks('    if true\n    then\n        :\n    fi\n') == [
        'if true\nthen\n    :\nfi\n']


def test_block_quote_swallows_the_rest_of_its_block():
    assert code_blocks('> quoted\n    GIVEN x\n') == []


def test_link_definition_vanishes_and_code_after_it_counts():
    assert code_blocks('[x]: http://example.com\n    GIVEN x\n') == [
        'GIVEN x\n']


def test_windows_line_ends_are_normalised():
    assert code_blocks('prose\r\n\r\n    GIVEN x\r\n') == ['GIVEN x\n']
