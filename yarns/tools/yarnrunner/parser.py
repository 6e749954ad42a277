"""Turn the code blocks of yarn files into scenarios and implementations.

The rules are those of cmdtest's yarn: every non-blank line of a code
block starts with a keyword; a step's text is its words joined by single
spaces; AND repeats the previous step's keyword; `...` continues the
previous step's text; IMPLEMENTS takes the lines after it, up to the
next line starting with IMPLEMENTS or the end of the code block, as its
shell code (and when IMPLEMENTS is the block's last line, the whole
next block); EXAMPLE drops the rest of its block (or the next block).
Blocks of all files form one sequence: a file may continue the last
scenario of the previous one.
"""

from .markdown_blocks import code_blocks
from .model import STEP_KEYWORDS, Implementation, Scenario, Step, YarnError


def parse_files(filenames):
    """Return (scenarios, implementations) defined by the files."""
    blocks = []
    for filename in filenames:
        blocks.extend(code_blocks(read_text(filename, 'scenario file')))
    return parse_blocks(blocks)


def read_text(filename, what):
    """The text of a UTF-8 file the runner needs (`what` names its role):
    one line of error for a file that is missing or not UTF-8."""
    try:
        with open(filename, 'rb') as f:
            data = f.read()
    except OSError as e:
        raise YarnError(f'cannot read {what} {filename}: {e.strerror}') from e
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as e:
        line = data.count(b'\n', 0, e.start) + 1
        raise YarnError(f'{what} {filename} is not UTF-8 (line {line})') \
            from e


def parse_blocks(blocks):
    """Parse code block texts; return (scenarios, implementations)."""
    parser = _BlockParser(list(blocks))
    parser.parse()
    return parser.scenarios, parser.implementations


class _BlockParser:
    """Consumes the blocks line by line (IMPLEMENTS consumes more)."""

    def __init__(self, blocks):
        self.blocks = blocks
        self.scenarios = []
        self.implementations = []

    def parse(self):
        while self.blocks:
            words = self._next_line().split()
            if words:
                self._keyword_line(words[0], ' '.join(words[1:]))

    def _next_line(self):
        line, _, rest = self.blocks[0].partition('\n')
        if rest:
            self.blocks[0] = rest
        else:
            del self.blocks[0]
        return line

    def _keyword_line(self, keyword, text):
        if keyword == 'SCENARIO':
            self.scenarios.append(Scenario(text))
        elif keyword in STEP_KEYWORDS:
            self._add_step(keyword, text)
        elif keyword == 'AND':
            self._add_step(self._previous_step('AND').keyword, text)
        elif keyword == '...':
            previous = self._previous_step('...')
            self._current_scenario('...').steps.pop()
            self._add_step(previous.keyword, f'{previous.text} {text}')
        elif keyword == 'IMPLEMENTS':
            self._add_implementation(text)
        elif keyword == 'EXAMPLE':
            if self.blocks:
                del self.blocks[0]
        else:
            raise YarnError(f'unknown keyword {keyword!r} in line: '
                            f'{keyword} {text}')

    def _current_scenario(self, keyword):
        if not self.scenarios:
            raise YarnError(f'{keyword} before any SCENARIO')
        return self.scenarios[-1]

    def _previous_step(self, keyword):
        steps = self._current_scenario(keyword).steps
        if not steps:
            raise YarnError(f'{keyword} with no step before it to continue, '
                            f'in scenario {self.scenarios[-1].name!r}')
        return steps[-1]

    def _add_step(self, keyword, text):
        self._current_scenario(keyword).steps.append(Step(keyword, text))

    def _add_implementation(self, text):
        words = text.split()
        if len(words) < 2:
            raise YarnError(f'IMPLEMENTS needs a keyword and a regexp: '
                            f'IMPLEMENTS {text}')
        self.implementations.append(
            Implementation(words[0], ' '.join(words[1:]), self._shell_code()))

    def _shell_code(self):
        """Take lines up to the next IMPLEMENTS line of the first block."""
        if not self.blocks:
            return ''
        lines = self.blocks[0].splitlines()
        end = next((i for i, line in enumerate(lines)
                    if line.startswith('IMPLEMENTS')), len(lines))
        if end < len(lines):
            self.blocks[0] = '\n'.join(lines[end:])
        else:
            del self.blocks[0]
        return '\n'.join(lines[:end])
