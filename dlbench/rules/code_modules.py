"""The package's modules as the code digests read them (dlbench/rules/code_digest.py): where each lies, what it
imports (its import graph, followed through dlbench.* only), and its top-level statements as units, each parsed
once per version of its file.

A unit is one top-level statement without its docstrings and bare strings (they do nothing); a dlbench import
statement is no unit but a binding of a name to what it imports. A dataclass whose fields are marked NO_RERUN
(dlbench.rerun) is noted with them, so that its constructions can be digested without them.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

from dlbench.paths import PACKAGE

MARK = "NO_RERUN"  # dlbench.rerun's mark of a field no result depends on
# Decorators that only wrap or describe what they decorate: a definition they decorate runs only where it is named.
PLAIN_DECORATORS = {"dataclass", "cache", "lru_cache", "contextmanager", "wraps", "total_ordering", "property",
                    "staticmethod", "classmethod", "abstractmethod", "cached_property", "optional_hook"}


def module_file(name: str, package: Path = PACKAGE) -> Path | None:
    """The source file of dlbench module `name` (a module or a package's __init__.py); None if there is none."""
    parts = name.split(".")
    if parts[0] != package.name:
        return None
    rel = package.joinpath(*parts[1:])
    for candidate in (rel.with_suffix(".py"), rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _parents(name: str) -> list[str]:
    """The packages whose __init__.py importing `name` runs: dlbench, dlbench.frameworks, ..."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def absolute(module: str, level: int, target: str | None, is_package: bool) -> str:
    """The absolute name of a (possibly relative) import's module, seen from `module`."""
    if not level:
        return target or ""
    here = module if is_package else module.rpartition(".")[0]
    parts = here.split(".")
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([target] if target else []))


@dataclass
class Unit:
    """One top-level statement of a module: a definition (def, class) or a statement run at import."""

    module: str
    node: ast.stmt
    names: tuple[str, ...]  # the names it binds
    runs_at_import: bool  # a statement that does more than define (or a definition a decorator registers)


@dataclass
class Module:
    """What one module's parse gives: its units, its imports of dlbench, the dataclasses with NO_RERUN fields."""

    name: str
    units: list[Unit]
    bindings: dict[str, tuple]  # top-level name -> ("unit", i) | ("module", name) | ("from", module, attr)
    imports: set[str]  # every dlbench module it imports (or that an import from a package may name)
    marked: dict[str, tuple[tuple[int, ...], frozenset[str]]] = field(default_factory=dict)  # class -> marked fields
    aliases: dict[str, str] = field(default_factory=dict)  # a name bound to a class of `marked` (`_f = Field`)
    source: bytes = b""


def _strip_strings(tree: ast.AST) -> None:
    """Drop every statement that is only a string (docstrings, attribute docstrings): it does nothing."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            body = getattr(node, name, None)
            if isinstance(body, list) and body and isinstance(body[0], ast.AST):
                kept = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                                and isinstance(s.value.value, str))]
                if len(kept) != len(body):
                    setattr(node, name, kept or ([] if isinstance(node, ast.Module) else [ast.Pass()]))


def _bound(node: ast.stmt) -> tuple[str, ...]:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (node.name,)
    targets = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    names = []
    for target in targets:
        names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return tuple(names)


def _main_guard(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"'


def _decorator_name(node: ast.expr) -> str:
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def _marked_fields(node: ast.ClassDef) -> tuple[tuple[int, ...], frozenset[str]] | None:
    """The positions and names of a dataclass's fields marked NO_RERUN; None where it has none."""
    if not any(_decorator_name(d) == "dataclass" for d in node.decorator_list):
        return None
    fields_, marked = [], []
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if "ClassVar" in ast.dump(stmt.annotation):
                continue
            fields_.append(stmt.target.id)
            value = stmt.value
            if isinstance(value, ast.Call) and _decorator_name(value) == "field" and any(
                    k.arg == "metadata" and _decorator_name(k.value) == MARK for k in value.keywords):
                marked.append(stmt.target.id)
    if not marked:
        return None
    return tuple(i for i, name in enumerate(fields_) if name in marked), frozenset(marked)


@functools.cache
def _parse(name: str, path: Path, mtime_ns: int, size: int) -> Module:
    """A module's units and imports, parsed once per version of its file."""
    source = path.read_bytes()
    tree = ast.parse(source, filename=str(path))
    _strip_strings(tree)
    is_package = path.name == "__init__.py"
    top = PACKAGE.name
    units, bindings, imports, marked, aliases = [], {}, set(), {}, {}
    for node in ast.walk(tree):  # every import anywhere (function bodies too): the modules it may load
        if isinstance(node, ast.Import):
            imports.update(alias.name for alias in node.names if alias.name.split(".")[0] == top)
        elif isinstance(node, ast.ImportFrom):
            base = absolute(name, node.level, node.module, is_package)
            if base.split(".")[0] == top:
                imports.add(base)
                imports.update(f"{base}.{alias.name}" for alias in node.names)
    for node in tree.body:
        if isinstance(node, ast.Import) and all(a.name.split(".")[0] == top for a in node.names):
            for alias in node.names:
                bindings[alias.asname or alias.name.split(".")[0]] = ("module", alias.name if alias.asname else top)
            continue
        if isinstance(node, ast.ImportFrom):
            base = absolute(name, node.level, node.module, is_package)
            if base.split(".")[0] == top:
                for alias in node.names:
                    bindings[alias.asname or alias.name] = ("from", base, alias.name)
                continue
        decorated = [d for d in getattr(node, "decorator_list", []) if _decorator_name(d) not in PLAIN_DECORATORS]
        runs = not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or bool(decorated)
        if _main_guard(node):  # runs only where the module is run as a program: a root's, counted whole
            runs = False
        unit = Unit(name, node, _bound(node), runs)
        for bound in unit.names:
            bindings[bound] = ("unit", len(units))
        units.append(unit)
        if isinstance(node, ast.ClassDef) and (found := _marked_fields(node)):
            marked[node.name] = found
    for unit in units:  # `_f = Field`: constructions through the alias are marked as the class's
        node = unit.node
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Name) and node.value.id in marked):
            aliases[node.targets[0].id] = node.value.id
    return Module(name, units, bindings, imports, marked, aliases, source)


def parsed(name: str, package: Path = PACKAGE) -> Module | None:
    path = module_file(name, package)
    if path is None:
        return None
    stat = path.stat()
    return _parse(name, path, stat.st_mtime_ns, stat.st_size)


def direct_imports(name: str, package: Path = PACKAGE) -> set[str]:
    """The dlbench modules that module `name` imports anywhere in its source (function bodies included)."""
    return {m for m in parsed(name, package).imports if module_file(m, package) is not None}


def closure(roots, package: Path = PACKAGE) -> set[str]:
    """Every dlbench module that importing the roots imports, the roots and their packages included."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen or module_file(name, package) is None:
            continue
        seen.add(name)
        todo.extend(_parents(name))
        todo.extend(direct_imports(name, package))
    return seen


# A quoted relative file name with a data suffix (`"presets.yaml"`): the files a module may open.
_DATA_NAME = re.compile(rb"""["']([A-Za-z0-9_][A-Za-z0-9_./-]*\.(?:yaml|yml|json|csv|txt|npz|h5|prototxt))["']""")


def data_files(modules, package: Path = PACKAGE) -> set[Path]:
    """Package files (not Python) that the modules name in a string: beside the module, or under the package."""
    found = set()
    for name in modules:
        path = module_file(name, package)
        for literal in set(_DATA_NAME.findall(path.read_bytes())):
            for folder in (path.parent, package):
                candidate = folder / literal.decode()
                if candidate.is_file():
                    found.add(candidate.resolve())
    return found
