"""The import rules of doc/architecture.md ("Rules"), checked on the
source text of obnamlib: every import, wherever it is (in functions too,
importlib.import_module literals, the -c scripts of helper processes);
see tests/import_graph.py for what counts as one.

Layers import downward only: cli -> engine -> repo (interface, factory,
opening) -> fmt_6 -> larch -> storage -> vfs; crypto sits beside storage
and may use vfs, the bottom layer.  The last tests feed the checker small
trees that break each rule, so a rule that no longer sees its breach
fails here.
"""

import os
import textwrap

import pytest

from tests import import_graph
from tests.import_graph import Rule

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = 'obnamlib'

# The framework half of the command-line layer: it knows nothing of
# ObnamApp or the plugins.
CLI_FRAMEWORK = tuple('obnamlib.cli.' + m for m in (
    'application', 'cmdline', 'manpage', 'config_files', 'settings',
    'log_setup', 'memory_profile'))

RULES = (
    Rule('larch imports nothing else from obnamlib',
         importers=('obnamlib.larch',), only=('obnamlib.larch',),
         forbidden=('ttystatus',)),
    Rule('vfs imports only errors (and itself)',
         importers=('obnamlib.vfs',), only=('obnamlib.vfs',
                                            'obnamlib.errors')),
    Rule('crypto imports only errors, itself and vfs',
         importers=('obnamlib.crypto',),
         only=('obnamlib.crypto', 'obnamlib.errors', 'obnamlib.vfs')),
    Rule('storage imports no format, factory, engine or command',
         importers=('obnamlib.repo.storage',),
         forbidden=('obnamlib.repo.fmt_6', 'obnamlib.repo.factory',
                    'obnamlib.repo.opening', 'obnamlib.engine',
                    'obnamlib.cli')),
    Rule('fmt_6 imports no factory, opening, engine or command',
         importers=('obnamlib.repo.fmt_6',),
         forbidden=('obnamlib.repo.factory', 'obnamlib.repo.opening',
                    'obnamlib.engine', 'obnamlib.cli', 'ttystatus')),
    Rule('the repository layer imports no engine',
         importers=('obnamlib.repo',), forbidden=('obnamlib.engine',)),
    Rule('engines import no larch, format, storage or command',
         importers=('obnamlib.engine',),
         forbidden=('obnamlib.larch', 'obnamlib.repo.fmt_6',
                    'obnamlib.repo.storage', 'obnamlib.cli')),
    Rule('plugins reach storage only through the Repository API, live '
         'data only through vfs.factory and vfs.base, and no other plugin',
         importers=('obnamlib.cli.plugins',),
         forbidden=('obnamlib.larch', 'obnamlib.repo.fmt_6',
                    'obnamlib.repo.storage', 'obnamlib.vfs.local',
                    'obnamlib.vfs.sftp', 'obnamlib.cli.plugins'),
         # The encryption commands edit the key files of the toplevels,
         # which is what toplevel_keys is (the table in the architecture
         # doc); the Repository API does not model them.
         allowed=(('obnamlib.cli.plugins.encryption_plugin',
                   'obnamlib.repo.storage.toplevel_keys'),)),
    Rule('nothing outside cli imports cli',
         importers=('obnamlib',), exempt=('obnamlib.cli',),
         forbidden=('obnamlib.cli',)),
    Rule('the command-line framework knows no app or plugin',
         importers=CLI_FRAMEWORK,
         forbidden=('obnamlib.cli.app', 'obnamlib.cli.plugin',
                    'obnamlib.cli.plugins')),
    Rule('nothing in obnamlib imports cliapp',
         importers=('obnamlib',), forbidden=('cliapp',)),
)

NEVER_PRINT = ('obnamlib.larch', 'obnamlib.repo.fmt_6')


def rule_named(start):
    [rule] = [r for r in RULES if r.name.startswith(start)]
    return rule


@pytest.fixture(scope='module')
def obnamlib_imports():
    return import_graph.all_imports(CHECKOUT, PACKAGE)


def test_the_checked_trees_exist(obnamlib_imports):
    importers = {imp.importer for imp in obnamlib_imports}
    for rule in RULES:
        assert any(rule.applies_to(m) for m in importers), rule.name


@pytest.mark.parametrize('rule', RULES, ids=lambda r: r.name)
def test_rule(rule, obnamlib_imports):
    assert import_graph.violations(obnamlib_imports, rule) == []


def test_the_package_itself_holds_no_code():
    """So `import obnamlib` (for its __file__) imports no layer."""
    with open(os.path.join(CHECKOUT, PACKAGE, '__init__.py')) as f:
        assert f.read().strip() == ''


def test_larch_and_the_format_never_print():
    assert import_graph.prints(CHECKOUT, PACKAGE, NEVER_PRINT) == []


def test_no_import_cycle(obnamlib_imports):
    modules = import_graph.package_modules(CHECKOUT, PACKAGE)
    assert import_graph.cycles(obnamlib_imports, modules) == []


def test_the_checker_sees_string_imports_in_obnamlib(obnamlib_imports):
    """The helper process's -c script and the plugin loader's literal."""
    kinds = {(imp.importer, imp.imported, imp.kind)
             for imp in obnamlib_imports}
    assert ('obnamlib.crypto.cipher_process',
            'obnamlib.crypto.cipher_helper', 'script') in kinds
    assert ('obnamlib.cli.app', 'obnamlib.cli.plugins',
            'import_module') in kinds


# --- the checker, on trees that break one rule each -------------------------

CLEAN_TREE = {
    'errors.py': 'class ObnamError(Exception):\n    pass\n',
    'larch/__init__.py': 'from obnamlib.larch.tree import Tree\n',
    'larch/tree.py': 'import os\nfrom . import nodes\n',
    'larch/nodes.py': '',
    'vfs/__init__.py': '',
    'vfs/base.py': 'import obnamlib.errors\n',
    'vfs/local.py': 'from obnamlib.vfs import base\n',
    'vfs/factory.py': 'from obnamlib.vfs.local import LocalFS\n',
    'crypto/__init__.py': '',
    'crypto/cipher.py': 'from obnamlib import errors\n'
                        'from obnamlib.vfs import local\n',
    'crypto/helper.py': 'SCRIPT = "import sys; from obnamlib.crypto.cipher'
                        ' import run; run()"\n',
    'repo/__init__.py': '',
    'repo/interface.py': '"""Made by obnamlib.repo.factory: from '
                         'obnamlib.repo.factory import open_repository"""\n',
    'repo/factory.py': 'from obnamlib.repo.fmt_6 import fmt\n',
    'repo/storage/__init__.py': '',
    'repo/storage/filters.py': 'from obnamlib.crypto import cipher\n',
    'repo/fmt_6/__init__.py': '',
    'repo/fmt_6/fmt.py': 'from obnamlib import larch\n'
                         'from obnamlib.repo.storage import filters\n',
    'engine/__init__.py': '',
    'engine/walker.py': 'from obnamlib.repo import interface\n',
    'cli/__init__.py': '',
    'cli/plugin.py': '',
    'cli/settings.py': '',
    'cli/app.py': 'import importlib\n'
                  'def load(name):\n'
                  '    return importlib.import_module('
                  '"obnamlib.cli.plugins." + name)\n',
    'cli/plugins/__init__.py': '',
    'cli/plugins/verify_plugin.py': '',
    'cli/plugins/backup_plugin.py': 'from obnamlib.cli import plugin\n'
                                    'from obnamlib.engine import walker\n'
                                    'from obnamlib.vfs import factory\n',
}

# (rule, file, line added to it, the import reported, how it is written)
BREACHES = [
    ('larch', 'larch/tree.py', 'from obnamlib import errors',
     'obnamlib.errors', 'statement'),
    ('larch', 'larch/nodes.py', 'import ttystatus', 'ttystatus',
     'statement'),
    ('vfs', 'vfs/base.py',
     'def f():\n    import importlib\n'
     '    return importlib.import_module("obnamlib.crypto.cipher")',
     'obnamlib.crypto.cipher', 'import_module'),
    ('crypto', 'crypto/helper.py',
     'BOOT = "import sys; from obnamlib.repo.storage.filters import unwrap"',
     'obnamlib.repo.storage.filters', 'script'),
    ('crypto', 'crypto/cipher.py', 'from ..repo.storage import filters',
     'obnamlib.repo.storage.filters', 'statement'),
    ('storage', 'repo/storage/filters.py',
     'def f():\n    from obnamlib.repo import factory',
     'obnamlib.repo.factory', 'statement'),
    ('fmt_6', 'repo/fmt_6/fmt.py', 'from obnamlib.repo import factory',
     'obnamlib.repo.factory', 'statement'),
    ('the repository layer', 'repo/interface.py',
     'from obnamlib.engine.walker import walk', 'obnamlib.engine.walker',
     'statement'),
    ('engines', 'engine/walker.py', 'from obnamlib.larch import Tree',
     'obnamlib.larch', 'statement'),
    ('engines', 'engine/walker.py',
     'import importlib\nM = importlib.import_module("obnamlib.repo.fmt_6")',
     'obnamlib.repo.fmt_6', 'import_module'),
    ('plugins', 'cli/plugins/backup_plugin.py',
     'from obnamlib.vfs.local import LocalFS', 'obnamlib.vfs.local',
     'statement'),
    ('plugins', 'cli/plugins/backup_plugin.py',
     'from obnamlib.cli.plugins import verify_plugin',
     'obnamlib.cli.plugins.verify_plugin', 'statement'),
    ('nothing outside cli', 'errors.py',
     'CODE = """\nfrom obnamlib.cli import settings\nsettings.run()\n"""',
     'obnamlib.cli.settings', 'script'),
    ('the command-line framework', 'cli/settings.py',
     'from obnamlib.cli import plugin', 'obnamlib.cli.plugin', 'statement'),
    ('nothing in obnamlib imports cliapp', 'cli/app.py', 'import cliapp',
     'cliapp', 'statement'),
]


def write_tree(root, files):
    for name, text in files.items():
        path = root / 'obnamlib' / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / 'obnamlib' / '__init__.py').write_text('')


def all_violations(root):
    imports = import_graph.all_imports(str(root), PACKAGE)
    return [(rule.name, imp.importer, imp.imported, imp.kind)
            for rule in RULES
            for imp in import_graph.violations(imports, rule)]


def test_the_clean_tree_breaks_no_rule(tmp_path):
    write_tree(tmp_path, CLEAN_TREE)
    assert all_violations(tmp_path) == []
    imports = import_graph.all_imports(str(tmp_path), PACKAGE)
    modules = import_graph.package_modules(str(tmp_path), PACKAGE)
    assert import_graph.cycles(imports, modules) == []


@pytest.mark.parametrize('breach', BREACHES,
                         ids=lambda b: '%s: %s' % (b[0], b[2][:40]))
def test_each_breach_is_reported_exactly(tmp_path, breach):
    rule, filename, added, imported, kind = breach
    files = dict(CLEAN_TREE)
    files[filename] = files[filename] + added + '\n'
    write_tree(tmp_path, files)
    importer = import_graph.module_name(
        str(tmp_path), str(tmp_path / 'obnamlib' / filename))
    assert all_violations(tmp_path) == [
        (rule_named(rule).name, importer, imported, kind)]


def test_every_rule_has_a_breach_it_reports():
    assert {rule_named(b[0]).name for b in BREACHES} == \
        {rule.name for rule in RULES}


def test_an_allowed_pair_is_allowed_for_that_importer_only(tmp_path):
    files = dict(CLEAN_TREE)
    line = 'from obnamlib.repo.storage.toplevel_keys import SHARED\n'
    files['cli/plugins/encryption_plugin.py'] = line
    files['cli/plugins/backup_plugin.py'] += line
    files['repo/storage/toplevel_keys.py'] = ''
    write_tree(tmp_path, files)
    assert all_violations(tmp_path) == [
        (rule_named('plugins').name, 'obnamlib.cli.plugins.backup_plugin',
         'obnamlib.repo.storage.toplevel_keys', 'statement')]


def test_a_cycle_through_a_string_import_is_reported(tmp_path):
    files = dict(CLEAN_TREE)
    files['vfs/base.py'] += ('import importlib\n'
                             'def open_vfs(url):\n'
                             '    return importlib.import_module('
                             '"obnamlib.vfs.local").LocalFS(url)\n')
    write_tree(tmp_path, files)
    imports = import_graph.all_imports(str(tmp_path), PACKAGE)
    modules = import_graph.package_modules(str(tmp_path), PACKAGE)
    assert all_violations(tmp_path) == []      # vfs may import vfs
    assert import_graph.cycles(imports, modules) == [
        ['obnamlib.vfs.base', 'obnamlib.vfs.local']]


def test_a_longer_cycle_is_one_component(tmp_path):
    files = dict(CLEAN_TREE)
    files['larch/nodes.py'] = 'from obnamlib.larch import tree\n'
    files['repo/fmt_6/fmt.py'] += 'SCRIPT = "import obnamlib.engine.walker"\n'
    files['engine/walker.py'] += ('import importlib\n'
                                  'importlib.import_module('
                                  '"obnamlib.repo.factory")\n')
    write_tree(tmp_path, files)
    imports = import_graph.all_imports(str(tmp_path), PACKAGE)
    modules = import_graph.package_modules(str(tmp_path), PACKAGE)
    assert import_graph.cycles(imports, modules) == [
        ['obnamlib.engine.walker', 'obnamlib.repo.factory',
         'obnamlib.repo.fmt_6.fmt'],
        ['obnamlib.larch.nodes', 'obnamlib.larch.tree']]


def test_docstrings_are_not_imports(tmp_path):
    """repo/interface.py of the clean tree names an import in prose."""
    write_tree(tmp_path, CLEAN_TREE)
    imports = import_graph.all_imports(str(tmp_path), PACKAGE)
    assert [imp for imp in imports
            if imp.importer == 'obnamlib.repo.interface'] == []


def test_the_checker_finds_print_calls(tmp_path):
    files = dict(CLEAN_TREE)
    files['larch/nodes.py'] = 'import sys\nprint("x")\nsys.stderr.write("")\n'
    write_tree(tmp_path, files)
    assert import_graph.prints(str(tmp_path), PACKAGE, NEVER_PRINT) == [
        ('obnamlib.larch.nodes', 2), ('obnamlib.larch.nodes', 3)]
