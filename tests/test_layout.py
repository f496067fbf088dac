"""docs/layout.md as the code keeps it: no module imports another in a loop (every import statement parsed, those
inside functions too), and every folder of the package has its row in the page's table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from dlbench.paths import PACKAGE, ROOT


def modules(package: Path) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its __init__.py)."""
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that module `name` imports: each statement anywhere in it, relative ones resolved; a
    `from a import b` imports a, and a.b where that is a module."""
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in known and m != name}


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import loop, each as the chain of modules that closes it (empty: none)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    found = []

    def visit(name: str) -> None:
        state[name] = 1
        path.append(name)
        for other in sorted(graph[name]):
            if state.get(other) == 1:
                found.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other)
        path.pop()
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    known = modules(package)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def test_no_module_imports_another_in_a_loop():
    graph = import_graph(PACKAGE)
    assert len(graph) > 100 and "dlbench.environments.environment" in graph["dlbench.rules.jobs"]
    assert loops(graph) == [], "an import loop: " + " -> ".join(loops(graph)[0])


def test_the_loop_check_finds_a_loop_through_a_function_and_a_relative_import(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from .c import g\n")
    (pkg / "sub" / "c.py").write_text("import pkg.a\n")
    assert loops(import_graph(pkg)) == [["pkg.a", "pkg.sub.b", "pkg.sub.c", "pkg.a"]]
    (pkg / "sub" / "c.py").write_text("import pkg\n")  # the package itself: its __init__ imports nothing
    assert loops(import_graph(pkg)) == []


def test_every_folder_of_the_package_has_its_row_in_the_layout():
    page = (ROOT / "docs" / "layout.md").read_text()
    rows = set(re.findall(r"^\| `dlbench/([a-z_]+)/` \|", page, re.M))
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert rows == folders
    assert "no module imports another in a loop" in page
