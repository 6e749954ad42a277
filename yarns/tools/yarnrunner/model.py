"""The things a yarn file defines: scenarios, their steps, implementations."""

import dataclasses

STEP_KEYWORDS = ('ASSUMING', 'GIVEN', 'WHEN', 'THEN', 'FINALLY')


class YarnError(Exception):
    """A problem with the scenario files or the command line."""


@dataclasses.dataclass
class Step:
    """One step of a scenario; `keyword` is never AND (it is resolved)."""
    keyword: str
    text: str
    implementation: 'Implementation' = None
    match_groups: tuple = ()    # the implementation regexp's groups

    def __str__(self):
        return f'{self.keyword} {self.text}'


@dataclasses.dataclass
class Scenario:
    name: str
    steps: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Implementation:
    """IMPLEMENTS KEYWORD REGEXP and the shell code under it."""
    keyword: str
    regexp: str
    shell: str

    def __str__(self):
        return f'IMPLEMENTS {self.keyword} {self.regexp}'
