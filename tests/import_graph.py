"""Every import in a package's source, as tests/test_layering.py checks them.

An import is seen wherever Python would run it: `import` and `from ...
import` statements at the top of a module or inside a function, a
literal `importlib.import_module('pkg.x')` (or `__import__`; with
`'pkg.x.' + name` the package `pkg.x` is what is known), and a string
holding Python code that imports the package (the `-c` script of a
helper process, `from pkg.x import serve; serve()`), or the module named
by a literal first argument of `start_child('pkg.x', ...)`, which writes
that script.  Docstrings are prose, not code: they are not read.

A name is resolved to the longest module of the package it names
(`from pkg.x import Class` is an import of `pkg.x`, `from pkg import x`
of `pkg.x`); names outside the package are kept as written.
"""

import ast
import dataclasses
import os
import re


@dataclasses.dataclass(frozen=True, order=True)
class Import:
    importer: str       # module name
    imported: str       # module name (resolved within the package)
    line: int
    kind: str           # 'statement', 'import_module' or 'script'


@dataclasses.dataclass(frozen=True)
class Rule:
    """Modules under `importers` (prefixes, minus `exempt`) must not
    import a module under `forbidden`; if `only` is given, they may
    import of `package` only modules under those prefixes.  `allowed`:
    (importer, imported) pairs the rule lets through, each for a reason
    written beside it."""
    name: str
    importers: tuple
    forbidden: tuple = ()
    only: tuple = None
    exempt: tuple = ()
    allowed: tuple = ()
    package: str = 'obnamlib'

    def applies_to(self, module):
        return under(module, self.importers) and not under(module,
                                                           self.exempt)

    def breaks(self, imp):
        """The package itself (`import obnamlib`, for its __file__) is no
        layer: its __init__ holds no code (test_layering checks that)."""
        if (imp.importer, imp.imported) in self.allowed:
            return False
        if under(imp.imported, self.forbidden):
            return True
        return (self.only is not None and imp.imported != self.package and
                under(imp.imported, (self.package,)) and
                not under(imp.imported, self.only))


def under(name, prefixes):
    """Whether name is one of prefixes or inside one of them."""
    return any(name == p or name.startswith(p + '.') for p in prefixes)


def package_modules(root, package):
    """{module name: file path} of every .py file of root/package."""
    modules = {}
    top = os.path.join(root, package)
    for dirpath, dirnames, names in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != '__pycache__')
        for name in sorted(names):
            if name.endswith('.py'):
                path = os.path.join(dirpath, name)
                modules[module_name(root, path)] = path
    return modules


def module_name(root, path):
    parts = os.path.relpath(path, root)[:-len('.py')].split(os.sep)
    if parts[-1] == '__init__':
        parts = parts[:-1]
    return '.'.join(parts)


def all_imports(root, package):
    """Every Import of every module of root/package, sorted."""
    modules = package_modules(root, package)
    found = []
    for module, path in modules.items():
        found.extend(imports_of(module, path, modules, package))
    return sorted(found)


def imports_of(module, path, modules, package):
    with open(path, 'rb') as f:
        tree = ast.parse(f.read(), filename=path)
    here = module if path.endswith('__init__.py') else \
        module.rpartition('.')[0]
    found = []
    for name, line, kind in _imported_names(tree, here, package):
        found.append(Import(module, resolve(name, modules), line, kind))
    return found


def resolve(name, modules):
    """The longest prefix of name that is a module of the package."""
    parts = name.split('.')
    for end in range(len(parts), 0, -1):
        candidate = '.'.join(parts[:end])
        if candidate in modules:
            return candidate
    return name


def _imported_names(tree, here, package):
    """(dotted name, line, kind) of everything tree imports."""
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, 'statement'
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, here)
            for alias in node.names:
                yield '%s.%s' % (base, alias.name), node.lineno, 'statement'
        elif isinstance(node, ast.Call):
            name = _import_module_argument(node)
            if name is not None:
                yield name, node.lineno, 'import_module'
            name = _started_module(node)
            if name is not None:
                yield name, node.lineno, 'script'
        elif isinstance(node, ast.Constant) and \
                isinstance(node.value, str) and node not in docstrings:
            for name in _script_imports(node.value, package):
                yield name, node.lineno, 'script'


def _absolute(node, here):
    """The module a `from ... import` names, relative ones resolved."""
    if not node.level:
        return node.module
    parent = here.split('.')
    parent = parent[:len(parent) - (node.level - 1)]
    return '.'.join(parent + ([node.module] if node.module else []))


def _docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and \
                    isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                found.add(first.value)
    return found


def _import_module_argument(call):
    """The module a literal importlib.import_module/__import__ call names
    (for 'pkg.x.' + name: the package pkg.x), else None."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else None
    if called not in ('import_module', '__import__') or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Add):
        arg = arg.left
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value.rstrip('.') or None
    return None


def _started_module(call):
    """The module a helper process runs, named by a literal first argument
    of frame_pipe.start_child (its -c script imports it), else None."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else \
        func.id if isinstance(func, ast.Name) else None
    if called != 'start_child' or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


_IMPORT_WORDS = r'(?:\bfrom\s+{p}[\w.]*\s+import\b|\bimport\s+{p}\b)'


def _script_imports(text, package):
    """Names of package modules a string of Python code imports."""
    if not re.search(_IMPORT_WORDS.format(p=re.escape(package)), text):
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return _script_imports_by_pattern(text, package)
    names = []
    for name, _, _ in _imported_names(tree, package, package):
        if under(name, (package,)):
            names.append(name)
    return names


def _script_imports_by_pattern(text, package):
    """For code that is not a whole program (a template, a fragment)."""
    p = re.escape(package)
    names = []
    for base, what in re.findall(r'\bfrom\s+(%s[\w.]*)\s+import\s+'
                                 r'\(?\s*([\w\s,]+)' % p, text):
        names.extend('%s.%s' % (base, w.strip())
                     for w in what.split(',') if w.strip())
    names.extend(re.findall(r'\bimport\s+(%s(?:\.\w+)*)' % p, text))
    return names


def violations(imports, rule):
    """The imports that break rule, sorted."""
    return sorted(imp for imp in imports
                  if rule.applies_to(imp.importer) and rule.breaks(imp))


def cycles(imports, modules):
    """Import cycles among modules: each a sorted list of the modules of
    one strongly connected component of the import graph (Tarjan)."""
    graph = {m: set() for m in modules}
    for imp in imports:
        if imp.imported in graph and imp.imported != imp.importer:
            graph[imp.importer].add(imp.imported)
    return sorted(sorted(c) for c in _components(graph) if len(c) > 1)


def _components(graph):
    """Strongly connected components, iteratively (no recursion limit)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    found.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def prints(root, package, prefixes):
    """(module, line) of print() calls and sys.stdout/sys.stderr uses in
    the modules under prefixes."""
    found = []
    for module, path in package_modules(root, package).items():
        if not under(module, prefixes):
            continue
        with open(path, 'rb') as f:
            tree = ast.parse(f.read(), filename=path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and \
                    isinstance(node.func, ast.Name) and \
                    node.func.id == 'print':
                found.append((module, node.lineno))
            if isinstance(node, ast.Attribute) and \
                    node.attr in ('stdout', 'stderr') and \
                    isinstance(node.value, ast.Name) and \
                    node.value.id == 'sys':
                found.append((module, node.lineno))
    return sorted(found)
