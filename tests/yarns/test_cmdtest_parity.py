"""Where cmdtest's yarn is installed (Debian 12), parse as it does.

Compares the runner's Markdown and block parsing with cmdtest's own
(yarnlib, on Python-Markdown) for obnam's scenario files and for random
mixes of Markdown constructs.  Skipped where cmdtest is not installed
(Debian 13 has no cmdtest package).
"""

import glob
import os
import random

import pytest

from yarnrunner.markdown_blocks import code_blocks
from yarnrunner.parser import parse_blocks

yarnlib = pytest.importorskip('yarnlib', reason="cmdtest's yarn not here")

YARNS = os.path.join(os.path.dirname(__file__), '..', '..', 'yarns')

# Raw HTML is left out: the runner does not recognise HTML blocks.
PIECES = [
    'para text', '    GIVEN x', '    IMPLEMENTS GIVEN x', '    echo hi', '',
    '', '# Head', 'Head\n====', 'Sub\n---', '***', '- item', '1. item',
    '> quote', '        deep', '\tTAB', '    ', '   three', 'lazy line',
    '## h2 ##', '    THEN y', 'a # not', '#nohspace', '  - item2', '---',
    '* * *', '    <b>&amp;</b>', '    x\r', ' \t ', '[ref]: http://x',
    '[r]: <u> "t"', '  [r]:\n   u\n  (t)', '    ```', '```']


def cmdtest_blocks(text):
    return yarnlib.MarkdownParser().parse_string(text)


def cmdtest_parse(blocks):
    parser = yarnlib.BlockParser()
    parser.parse_blocks(list(blocks))
    return ([(s.name, [(st.what, st.text) for st in s.steps])
             for s in parser.scenarios],
            [(i.what, i.regexp, i.shell) for i in parser.implementations])


def runner_parse(blocks):
    scenarios, implementations = parse_blocks(blocks)
    return ([(s.name, [(st.keyword, st.text) for st in s.steps])
             for s in scenarios],
            [(i.keyword, i.regexp, i.shell) for i in implementations])


@pytest.mark.parametrize('path', sorted(glob.glob(f'{YARNS}/*.yarn')),
                         ids=os.path.basename)
def test_obnam_yarn_files_give_the_same_code_blocks(path):
    with open(path, encoding='utf-8') as f:
        text = f.read()
    assert code_blocks(text) == cmdtest_blocks(text)


def test_obnam_yarn_files_give_the_same_scenarios_and_implementations():
    blocks = []
    for path in sorted(glob.glob(f'{YARNS}/*.yarn')):
        with open(path, encoding='utf-8') as f:
            blocks.extend(code_blocks(f.read()))
    assert runner_parse(blocks) == cmdtest_parse(blocks)


def test_random_markdown_gives_the_same_code_blocks():
    rng = random.Random(1)
    for _ in range(3000):
        text = '\n'.join(rng.choice(PIECES)
                         for _ in range(rng.randint(1, 12)))
        assert code_blocks(text) == cmdtest_blocks(text), repr(text)
