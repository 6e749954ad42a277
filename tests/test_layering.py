"""The import rules of doc/architecture.md, checked on the source text.

Layers import downward only: larch knows nothing of obnamlib; larch and
the format code never talk to people (no ttystatus, plugins, printing);
plugins reach the repository only through repo_factory and the Repository
API; nothing below the command layer imports the application or the
plugins; nothing in obnamlib imports cliapp (obnam has its own command
line layer).
"""

import ast
import os

import pytest

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_files(*parts):
    top = os.path.join(CHECKOUT, *parts)
    if os.path.isfile(top + '.py'):
        return [top + '.py']
    found = []
    for dirpath, _, names in os.walk(top):
        found.extend(os.path.join(dirpath, n) for n in names
                     if n.endswith('.py'))
    return sorted(found)


def parse(path):
    with open(path, 'rb') as f:
        return ast.parse(f.read(), filename=path)


def module_name(path):
    rel = os.path.relpath(path, CHECKOUT)[:-len('.py')]
    parts = rel.split(os.sep)
    if parts[-1] == '__init__':
        parts = parts[:-1]
    return '.'.join(parts)


def imported_modules(path, package=None):
    """Absolute names of every module `path` imports (relative resolved
    against `package`, by default the file's own package)."""
    tree = parse(path)
    if package is None:
        package = module_name(path)
        if not path.endswith('__init__.py'):
            package = package.rpartition('.')[0]
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parent = package.split('.')
                parent = parent[:len(parent) - (node.level - 1)]
                base = '.'.join(parent + ([base] if base else []))
            names.add(base)
            names.update('%s.%s' % (base, alias.name) for alias in node.names)
    return names


def violations(paths, forbidden):
    """(file, module) pairs where a file imports a forbidden module."""
    bad = []
    for path in paths:
        for name in imported_modules(path):
            if any(name == f or name.startswith(f + '.') for f in forbidden):
                bad.append((os.path.relpath(path, CHECKOUT), name))
    return sorted(bad)


def prints(paths):
    """Calls of print() and writes to sys.stdout/sys.stderr."""
    bad = []
    for path in paths:
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Call) and \
                    isinstance(node.func, ast.Name) and node.func.id == 'print':
                bad.append((os.path.relpath(path, CHECKOUT), node.lineno))
            if isinstance(node, ast.Attribute) and \
                    node.attr in ('stdout', 'stderr') and \
                    isinstance(node.value, ast.Name) and node.value.id == 'sys':
                bad.append((os.path.relpath(path, CHECKOUT), node.lineno))
    return sorted(bad)


LARCH = python_files('obnamlib', 'larch')
FMT_6 = python_files('obnamlib', 'repo', 'fmt_6')
PLUGINS = python_files('obnamlib', 'cli', 'plugins')
COMMAND_LAYER = set(python_files('obnamlib', 'cli'))
BELOW_COMMANDS = [p for p in python_files('obnamlib')
                  if p not in COMMAND_LAYER and p not in PLUGINS]


def test_the_checked_trees_exist():
    assert LARCH and FMT_6 and PLUGINS and BELOW_COMMANDS


def test_larch_imports_nothing_from_obnamlib():
    outside = [name for _, name in violations(LARCH, ['obnamlib'])
               if not (name == 'obnamlib.larch' or
                       name.startswith('obnamlib.larch.'))]
    assert outside == []


@pytest.mark.parametrize('tree', ['larch', 'fmt_6'])
def test_storage_layers_never_talk_to_people(tree):
    paths = LARCH if tree == 'larch' else FMT_6
    assert violations(paths, ['ttystatus', 'obnamlib.cli.plugins',
                              'obnamlib.cli.app', 'obnamlib.cli.ui']) == []
    assert prints(paths) == []


def test_plugins_use_the_repository_api_only():
    assert violations(PLUGINS, ['obnamlib.larch', 'obnamlib.repo.fmt_6']) == []


def test_nothing_below_the_commands_imports_them():
    assert violations(BELOW_COMMANDS, ['obnamlib.cli.app', 'obnamlib.cli.plugins',
                                       'obnamlib.cli.plugin']) == []


def test_nothing_in_obnamlib_imports_cliapp():
    assert violations(python_files('obnamlib'), ['cliapp']) == []


def test_checker_resolves_relative_and_from_imports(tmp_path):
    source = tmp_path / 'sample.py'
    source.write_text('import os.path\nfrom . import nodes\n'
                      'from ..obnamlib.errors import ObnamError\n'
                      'from .codec import encode\n')
    names = imported_modules(str(source), package='pkg.larch')
    assert {'os.path', 'pkg.larch', 'pkg.larch.nodes',
            'pkg.obnamlib.errors.ObnamError',
            'pkg.larch.codec.encode'} <= names
    bad = tmp_path / 'bad.py'
    bad.write_text('import obnamlib.errors\nfrom cliapp import Settings\n')
    found = [name for _, name in violations([str(bad)], ['obnamlib',
                                                         'cliapp'])]
    assert found == ['cliapp', 'cliapp.Settings', 'obnamlib.errors']
