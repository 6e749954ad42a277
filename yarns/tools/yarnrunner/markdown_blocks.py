"""Find the top-level indented code blocks of a Markdown text.

Only those blocks are yarn content.  cmdtest's yarn finds them with
Python-Markdown (3.x); this is a small re-implementation of the block
structure that decides which lines end up in such a code block: blank
lines, lazy paragraph lines, headings, rules, lists (an indented block
after a list belongs to the list), block quotes and link reference
definitions (which vanish).  Raw HTML blocks are not recognised: text
Python-Markdown would take as HTML is a paragraph here (or code, when
indented).  Inline markup does not matter.
"""

import re

TAB = 4
INDENT = ' ' * TAB

_ATX_HEADING = re.compile(r'(?:^|\n)#{1,6}(?:\\.|[^\\])*?#*(?:\n|$)')
_SETEXT_HEADING = re.compile(r'^.*?\n[=-]+[ ]*(\n|$)', re.MULTILINE)
_RULE = re.compile(
    r'^[ ]{0,3}(?:(?:-[ ]{0,2}){3,}|(?:_[ ]{0,2}){3,}|(?:\*[ ]{0,2}){3,})'
    r'[ ]*$', re.MULTILINE)
_LIST_ITEM = re.compile(r'^[ ]{0,3}(?:\d+\.|[*+-])[ ]+')
_QUOTE = re.compile(r'(^|\n)[ ]{0,3}>')
_LINK_DEFINITION = re.compile(
    r'^[ ]{0,3}\[[^\[\]]*\]:[ ]*\n?[ ]*\S+[ ]*'
    r'(?:\n[ ]*)?(?:(["\'])(?:.*)\1[ ]*|\((?:.*)\)[ ]*)?$', re.MULTILINE)


def code_blocks(text):
    """Return the texts of the top-level code blocks, in order."""
    scanner = _Scanner()
    scanner.scan(_chunks(_normalise(text)))
    # Python-Markdown's prettifier trims trailing blank lines of code.
    return [block.rstrip() + '\n' for block in scanner.blocks]


def _normalise(text):
    """Line ends, tabs and blank lines as Python-Markdown sees them."""
    if not text.strip():
        return ''
    text = text.replace('\x02', '').replace('\x03', '')
    text = text.replace('\r\n', '\n').replace('\r', '\n') + '\n\n'
    text = text.expandtabs(TAB)
    return re.sub(r'(?<=\n) +\n', '\n', text)


def _chunks(text):
    """Split at blank lines; runs of blank lines leave '\\n'-led chunks."""
    return text.split('\n\n') if text else []


class _Scanner:
    """Walks the chunks, tracking what the last top-level element was."""

    def __init__(self):
        self.blocks = []
        self.last = None   # 'code', 'list' or 'other'

    def scan(self, chunks):
        while chunks:
            self._one(chunks)

    def _one(self, chunks):
        chunk = chunks.pop(0)
        for handler in (self._blank, self._list_continuation, self._code,
                        self._atx_heading, self._setext_heading, self._rule,
                        self._list, self._quote, self._link_definition,
                        self._paragraph):
            if handler(chunk, chunks):
                return

    def _blank(self, chunk, chunks):
        if chunk and not chunk.startswith('\n'):
            return False
        if chunk[1:]:
            chunks.insert(0, chunk[1:])
        if self.last == 'code':
            self.blocks[-1] += '\n' if chunk else '\n\n'
        return True

    def _list_continuation(self, chunk, chunks):
        return chunk.startswith(INDENT) and self.last == 'list'

    def _code(self, chunk, chunks):
        if not chunk.startswith(INDENT):
            return False
        code, rest = _dedent(chunk)
        code = code.rstrip()
        if self.last == 'code':
            self.blocks[-1] += '\n' + code + '\n'
        else:
            self.blocks.append(code + '\n')
        self.last = 'code'
        if rest:
            chunks.insert(0, rest)
        return True

    def _atx_heading(self, chunk, chunks):
        match = _ATX_HEADING.search(chunk)
        if not match:
            return False
        self._split_around(chunk, match.start(), match.end(), chunks)
        return True

    def _setext_heading(self, chunk, chunks):
        if not _SETEXT_HEADING.match(chunk):
            return False
        self.last = 'other'
        rest = chunk.split('\n')[2:]
        if rest:
            chunks.insert(0, '\n'.join(rest))
        return True

    def _rule(self, chunk, chunks):
        match = _RULE.search(chunk)
        if not match:
            return False
        before = chunk[:match.start()].rstrip('\n')
        after = chunk[match.end():].lstrip('\n')
        if before:
            self.scan([before])
        self.last = 'other'
        if after:
            chunks.insert(0, after)
        return True

    def _split_around(self, chunk, start, end, chunks):
        """Scan what precedes an element, then queue what follows it."""
        if chunk[:start]:
            self.scan([chunk[:start]])
        self.last = 'other'
        if chunk[end:]:
            chunks.insert(0, chunk[end:])

    def _list(self, chunk, chunks):
        if not _LIST_ITEM.match(chunk):
            return False
        self.last = 'list'
        return True

    def _quote(self, chunk, chunks):
        """A block quote takes the rest of its chunk."""
        match = _QUOTE.search(chunk)
        if not match:
            return False
        self._split_around(chunk, match.start(), len(chunk), chunks)
        return True

    def _link_definition(self, chunk, chunks):
        """A link reference definition vanishes; the text around stays."""
        match = _LINK_DEFINITION.search(chunk)
        if not match:
            return False
        before, after = chunk[:match.start()], chunk[match.end():]
        if after.strip():
            chunks.insert(0, after.lstrip('\n'))
        if before.strip():
            chunks.insert(0, before.rstrip('\n'))
        return True

    def _paragraph(self, chunk, chunks):
        if chunk.strip():
            self.last = 'other'
        return True


def _dedent(chunk):
    """Split a chunk into its indented (dedented) lines and the rest."""
    lines = chunk.split('\n')
    code = []
    for line in lines:
        if line.startswith(INDENT):
            code.append(line[TAB:])
        elif not line.strip():
            code.append('')
        else:
            break
    return '\n'.join(code), '\n'.join(lines[len(code):])
