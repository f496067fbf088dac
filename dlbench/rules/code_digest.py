"""Digests of the code a result depends on, so that Snakemake reruns exactly what a change invalidates.

Nothing here is listed by hand. A framework's digest covers every dlbench module its training job
imports, found statically from the package's import graph: the `import` and `from ... import`
statements of each module (those inside functions too, and relative ones), followed through
dlbench.* modules only, from these roots:

- the trainer process: dlbench.frameworks.trainer and the framework's adapter, dlbench.frameworks.<name>
  (the trainer imports the adapter by name, the one import a parse cannot see);
- the runner, which starts the trainer, monitors it and writes the record: dlbench.run.runner.

Importing a module runs its packages' __init__.py files, so those count too. Package data files that
the trainer process's modules name in a string literal (a file beside the module or under the
package, such as a YAML table it opens) are digested with the code. Caffe's data preparation is
digested the same way from dlbench.frameworks.caffe_data.

The graph is parsed once per process (the Snakefile asks at every DAG build; about 60 small files).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import re
from pathlib import Path

from dlbench.paths import PACKAGE

TRAINER = "dlbench.frameworks.trainer"
RUNNER = "dlbench.run.runner"
CAFFE_DATA = "dlbench.frameworks.caffe_data"


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


@functools.cache
def _facts(path: Path, mtime_ns: int, size: int) -> tuple[tuple[int, str | None, tuple[str, ...]], ...]:
    """A module's import statements as (level, module, names), parsed once per version of the file."""
    out = []
    todo = list(ast.parse(path.read_bytes(), filename=str(path)).body)
    while todo:  # statements only (function and class bodies, branches, handlers): an import is one
        node = todo.pop()
        if isinstance(node, ast.Import):
            out.extend((0, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module, tuple(alias.name for alias in node.names)))
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo.extend(child for child in getattr(node, name, ()) if isinstance(child, ast.AST))
    return tuple(out)


def _imports_of(path: Path):
    stat = path.stat()
    return _facts(path, stat.st_mtime_ns, stat.st_size)


def direct_imports(name: str, package: Path = PACKAGE) -> set[str]:
    """The dlbench modules that module `name` imports anywhere in its source (function bodies included)."""
    path = module_file(name, package)
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for level, module, names in _imports_of(path):
        if level:  # relative: from .x import y, from .. import z
            base = ".".join(here.split(".")[: len(here.split(".")) - (level - 1)] + ([module] if module else []))
        else:
            base = module or ""
        found.add(base)
        # `from dlbench import initialisers` imports a module where one has that name, else an attribute.
        found.update(f"{base}.{alias}" for alias in names)
    return {m for m in found if module_file(m, package) is not None}


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


def framework_roots(framework: str) -> tuple[str, ...]:
    return (TRAINER, f"dlbench.frameworks.{framework}", RUNNER)


def framework_files(framework: str, package: Path = PACKAGE) -> list[Path]:
    """The files a framework's points depend on: the modules its training job imports, and the data they read."""
    modules = closure(framework_roots(framework), package)
    trainer_process = closure(framework_roots(framework)[:2], package)
    files = {module_file(m, package) for m in modules} | data_files(trainer_process, package)
    return sorted(files)


def files_digest(paths, package: Path = PACKAGE) -> str:
    """A digest of the files named (their paths inside the package, and their contents)."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


@functools.cache
def adapter_digest(framework: str, package: Path = PACKAGE) -> str:
    """The digest of every file a framework's training job imports or reads (see the module's docstring)."""
    return files_digest(framework_files(framework, package), package)


def caffe_data_files(package: Path = PACKAGE) -> list[Path]:
    """The files Caffe's data preparation depends on: the modules dlbench.frameworks.caffe_data imports, their data."""
    modules = closure((CAFFE_DATA,), package)
    return sorted({module_file(m, package) for m in modules} | data_files(modules, package))


@functools.cache
def caffe_data_digest(package: Path = PACKAGE) -> str:
    """The digest of the code that writes Caffe's HDF5 input (workflow/rules/data.smk, rule caffe_data)."""
    return files_digest(caffe_data_files(package), package)
