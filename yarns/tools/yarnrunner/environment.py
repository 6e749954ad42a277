"""The environment a step's shell runs in.

Like cmdtest's yarn, steps do not inherit the runner's environment:
only PATH is kept, a few variables get fixed values (so scenarios do
not depend on who runs them), then come the --env settings, and last
the variables yarn defines: DATADIR, SRCDIR, HOME and MATCH_1..N.
"""

import os

from .model import YarnError

FIXED = {
    'TERM': 'dumb',
    'SHELL': '/bin/sh',
    'LC_ALL': 'C',
    'USER': 'tomjon',
    'USERNAME': 'tomjon',
    'LOGNAME': 'tomjon',
}
KEPT = ('PATH',)


def parse_env_settings(settings):
    """Turn --env NAME=VALUE arguments into a dict (last one wins)."""
    result = {}
    for setting in settings:
        name, sep, value = setting.partition('=')
        if not sep or not name:
            raise YarnError(f'--env needs NAME=VALUE, not {setting!r}')
        result[name] = value
    return result


def step_environment(outer, extra, datadir, srcdir, matches, shell):
    """Return the environment for one step."""
    env = {name: outer[name] for name in KEPT if name in outer}
    env.update(FIXED)
    env.update(extra)
    env['DATADIR'] = datadir
    env['SRCDIR'] = srcdir
    env['HOME'] = home_dir(datadir)
    env.update(matches)
    if 'python' in shell:
        # cmdtest's yarn lets Python steps import from the source tree.
        old = env.get('PYTHONPATH')
        env['PYTHONPATH'] = f'{old}:{srcdir}' if old else srcdir
    return env


def home_dir(datadir):
    return os.path.join(datadir, 'HOME')
