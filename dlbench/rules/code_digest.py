"""Digests of what a job's code does, so that Snakemake reruns exactly what a change invalidates.

A digest covers the definitions a job can run, found by parsing, nothing listed by hand:

- The modules: every dlbench module the job's roots import (the `import` and `from ... import` statements of each
  module, those inside functions and relative ones too, followed through dlbench.* only) and their packages.
- The definitions: importing a module runs its top-level statements, so each of them counts, with every
  definition it names, and every definition those name, and so on (a function, a class whole, a constant). A
  definition of an imported module that nothing reachable names never runs, and does not count. The roots'
  modules count whole: their definitions are the job's entry points.
- What a definition is: its syntax tree, without docstrings and bare strings (they do nothing), comments, blank
  lines and layout (a tree has none); a name it uses that is a dlbench definition stands for that definition by
  its name, wherever it lives, and the import statements that bring it are left out. So a definition moved to
  another module, or a module moved or renamed, changes no digest; where two modules define one name differently,
  the name stands with its definition's own digest, so that taking the other changes it.
- What no result depends on: a dataclass field marked `field(metadata=NO_RERUN)` (dlbench.rerun: a description, a
  label, a colour) is left out of every construction of its class.
- Package data files that the modules name in a string literal (a YAML table beside a module): their contents.

The digest is of that set of definitions (each once), in no order and under no module's name. Five jobs have one:
- a framework's training job: the trainer process (dlbench.frameworks.trainer and the framework's adapter, which
  the trainer imports by name, the one import a parse cannot see) and the measurement (dlbench.run.measure);
- the record rule: how a record is made from a raw measurement and written (dlbench.run.rebuild, its job);
- Caffe's data preparation (dlbench.frameworks.caffe_data);
- the charts and the findings (dlbench.present.charts.draw, dlbench.present.findings): a finished study draws and
  writes them again where what they compute or say changes. A NO_RERUN field is left out of theirs too: a
  framework's colour or label changes no result, and takes `--forcerun charts findings` to be seen.

Each module is parsed once per version of its file (dlbench.rules.code_modules), and the digests of a version of
the package are kept in dlbench's cache (`cached`): the Snakefile asks for them at every DAG build.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from dlbench.atomic import write_text
from dlbench.paths import PACKAGE, cache_root
from dlbench.rules.code_modules import Module, Unit, absolute, closure, data_files, module_file, parsed

TRAINER = "dlbench.frameworks.trainer"
MEASURE = "dlbench.run.measure"
RECORD = "dlbench.run.rebuild"
CAFFE_DATA = "dlbench.frameworks.caffe_data"
CHARTS = "dlbench.present.charts.draw"
FINDINGS = "dlbench.present.findings"
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp,
          ast.GeneratorExp)


# ------------------------------------------------------------------------------------------ definitions

Target = tuple  # ("unit", module, index) | ("module", name)


@dataclass
class Analysed:
    """One unit as every digest sees it: its tree written out with a slot for each name of a dlbench definition
    (template; an int k is the slot of refs[k]), and what those names are."""

    template: list
    refs: list[Target]


class Universe:
    """The package's modules as one version of its files has them: how each name resolves, and each unit
    written out, once for every digest of that version."""

    def __init__(self, package: Path = PACKAGE):
        self.package = package
        self._files: dict[str, Path | None] = {}
        self._modules: dict[str, Module | None] = {}
        self._analysed: dict[tuple[str, int], Analysed] = {}
        self._identities: dict[tuple[str, int], str] = {}

    def file(self, name: str) -> Path | None:
        if name not in self._files:
            self._files[name] = module_file(name, self.package)
        return self._files[name]

    def module(self, name: str) -> Module | None:
        if name not in self._modules:
            self._modules[name] = parsed(name, self.package) if self.file(name) else None
        return self._modules[name]

    def is_package(self, name: str) -> bool:
        path = self.file(name)
        return path is not None and path.name == "__init__.py"

    def resolve(self, module: str, name: str, seen=()) -> Target | None:
        """What `name` at the top level of `module` is: one of its units, a dlbench module, or (None) neither."""
        mod = self.module(module)
        if mod is None or (module, name) in seen:
            return None
        binding = mod.bindings.get(name)
        if binding is None:
            return None
        if binding[0] == "unit":
            return ("unit", module, binding[1])
        if binding[0] == "module":
            return ("module", binding[1])
        return self.attribute(("module", binding[1]), binding[2], (*seen, (module, name)))

    def attribute(self, target: Target | None, attr: str, seen=()) -> Target | None:
        """What `<target>.attr` is, where target is a dlbench module: a submodule, or what that module binds."""
        if target is None or target[0] != "module":
            return None
        sub = f"{target[1]}.{attr}"
        if self.file(sub) is not None:
            return ("module", sub)
        return self.resolve(target[1], attr, seen)

    def unit(self, key: tuple[str, int]) -> Unit:
        return self.module(key[0]).units[key[1]]

    def analysed(self, key: tuple[str, int]) -> Analysed:
        if key not in self._analysed:
            writer = _Writer(self, key[0])
            writer.write(self.unit(key).node)
            template: list = []
            for part in writer.out:  # the text between two slots as one string
                if isinstance(part, str) and template and isinstance(template[-1], str):
                    template[-1] += part
                else:
                    template.append(part)
            self._analysed[key] = Analysed(template, writer.refs)
        return self._analysed[key]

    def name_of(self, target: Target) -> str:
        names = self.unit((target[1], target[2])).names
        return names[0] if names else "<statement>"

    def identity(self, key: tuple[str, int]) -> str:
        """A definition's own digest: its tree, each name of a dlbench definition as that name alone."""
        if key not in self._identities:
            self._identities[key] = _sha(self.text(key, {}))
        return self._identities[key]

    def text(self, key: tuple[str, int], ambiguous) -> str:
        """The unit written out, each dlbench name as its definition's name, with the definition's own digest where
        two reachable definitions share the name."""
        analysed = self.analysed(key)
        names = []
        for target in analysed.refs:
            name = self.name_of(target)
            names.append(f"{name}@{self.identity((target[1], target[2]))}" if name in ambiguous else name)
        return "".join(names[part] if isinstance(part, int) else part for part in analysed.template)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _fingerprint(package: Path) -> tuple:
    """The versions of the package's Python files: a new one is a new universe."""
    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(package.rglob("*.py")))


@functools.lru_cache(maxsize=8)
def _universe(package: Path, fingerprint: tuple) -> Universe:
    return Universe(package)


def universe(package: Path = PACKAGE) -> Universe:
    return _universe(package, _fingerprint(package))


class Program:
    """The modules a job imports, and the definitions it can run: what its digest is of."""

    def __init__(self, roots, package: Path = PACKAGE):
        self.package = package
        self.universe = universe(package)
        self.roots = tuple(roots)
        self.modules = sorted(closure(self.roots, package))
        self.reachable = self._reach()

    def _reach(self) -> set[tuple[str, int]]:
        roots = set(self.roots)
        todo = [(name, i) for name in self.modules for i, unit in enumerate(self.universe.module(name).units)
                if unit.runs_at_import or name in roots]
        seen = set(todo)
        while todo:
            for target in self.universe.analysed(todo.pop()).refs:
                if (key := (target[1], target[2])) not in seen:
                    seen.add(key)
                    todo.append(key)
        return seen

    def definitions(self) -> set[str]:
        """The reachable definitions, as module:name (module:<line> for a statement that binds no name)."""
        out = set()
        for key in self.reachable:
            unit = self.universe.unit(key)
            out.update(f"{key[0]}:{name}" for name in unit.names or (f"<{unit.node.lineno}>",))
        return out

    def digest(self) -> str:
        by_name: dict[str, set[str]] = {}
        for key in self.reachable:
            for name in self.universe.unit(key).names:
                by_name.setdefault(name, set()).add(self.universe.identity(key))
        ambiguous = {name for name, ids in by_name.items() if len(ids) > 1}
        h = hashlib.sha256()
        # A set: a statement two modules share (`import json`) is one, so that a module split in two is the same.
        for text in sorted({self.universe.text(key, ambiguous) for key in self.reachable}):
            h.update(text.encode() + b"\0")
        for data in sorted(hashlib.sha256(p.read_bytes()).hexdigest() for p in data_files(self.modules,
                                                                                           self.package)):
            h.update(data.encode())
        return h.hexdigest()[:16]


def _names_bound_in(body) -> tuple[set[str], list[ast.AST]]:
    """The names a scope's statements bind (not inside nested scopes), and its imports."""
    bound, imports, todo = set(), [], list(body)
    while todo:
        node = todo.pop()
        kind = type(node)
        if kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            bound.add(node.name)
            continue
        if kind in (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp):
            continue
        if kind is ast.Name:
            if type(node.ctx) is not ast.Load:
                bound.add(node.id)
            continue
        if kind in (ast.Import, ast.ImportFrom):
            imports.append(node)
        elif kind is ast.ExceptHandler and node.name:
            bound.add(node.name)
        elif kind in (ast.Global, ast.Nonlocal, ast.Constant):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return bound, imports


class _Writer:
    """A unit written out as its digest sees it: fields in order, no line numbers; a dlbench import without its
    module's path; a construction of a class with NO_RERUN fields without them; each name that is a dlbench
    definition a slot (refs), the definition it names found through the scopes around it (a local of a
    function, a class body's name in its methods, shadows nothing it should not)."""

    def __init__(self, universe: Universe, module: str):
        self.universe, self.module = universe, module
        self.is_package = universe.is_package(module)
        self.out: list = []
        self.refs: list[Target] = []
        # each scope: the names local there, those of them a local import binds, whether it is a class body
        self.stack: list[tuple[set[str], dict[str, Target | None], bool]] = []

    # scopes ----------------------------------------------------------------------------------------------------

    def _push(self, node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
            params |= {a.arg for a in (args.vararg, args.kwarg) if a}
            bound, imports = _names_bound_in(node.body if isinstance(node.body, list) else [node.body])
            bound |= params
        elif isinstance(node, ast.ClassDef):
            bound, imports = _names_bound_in(node.body)
        else:  # a comprehension: its targets
            bound = {n.id for gen in node.generators for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
            imports = []
        local: dict[str, Target | None] = {}
        for imp in imports:
            for alias in imp.names:
                if isinstance(imp, ast.Import):
                    if alias.name.split(".")[0] == PACKAGE.name:
                        local[alias.asname or PACKAGE.name] = ("module", alias.name if alias.asname else PACKAGE.name)
                else:
                    base = absolute(self.module, imp.level, imp.module, self.is_package)
                    if base.split(".")[0] == PACKAGE.name:
                        local[alias.asname or alias.name] = self.universe.attribute(("module", base), alias.name)
        self.stack.append((bound, local, isinstance(node, ast.ClassDef)))

    def lookup(self, name: str) -> Target | None:
        """What a name used here is (None: a local, a builtin, a third-party name). A class body's names are seen
        in the class body only, not in its methods, as Python has it."""
        for depth, (bound, local, is_class) in enumerate(reversed(self.stack)):
            if is_class and depth:
                continue
            if name in local:
                return local[name]
            if name in bound:
                return None
        return self.universe.resolve(self.module, name)

    def target(self, node: ast.expr) -> Target | None:
        """What a dotted name (`base.Reporter`, `dlbench.frameworks.base`) is, where it starts at a dlbench name."""
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            return self.universe.attribute(self.target(node.value), node.attr)
        return None

    # writing -----------------------------------------------------------------------------------------------------

    def _ref(self, target: Target) -> None:
        self.out.append(len(self.refs))
        self.refs.append(target)

    def write(self, node) -> None:
        out = self.out
        if isinstance(node, list):
            out.append("[")
            for item in node:
                self.write(item)
                out.append(",")
            out.append("]")
            return
        if not isinstance(node, ast.AST):
            out.append(repr(node))
            return
        kind = type(node)
        if kind is ast.Name or kind is ast.Attribute:
            if type(node.ctx) is ast.Load:
                target = self.target(node)
                if target is not None and target[0] == "unit":
                    return self._ref(target)
                if target is not None:  # a module: by its own name, not its path
                    out.append(f"module:{target[1].rpartition('.')[2]}")
                    return
        elif kind is ast.ImportFrom:
            if absolute(self.module, node.level, node.module, self.is_package).split(".")[0] == PACKAGE.name:
                out.append(f"ImportFrom({PACKAGE.name}," + ",".join(f"{a.name}:{a.asname}" for a in node.names)
                           + ")")
                return
        elif kind is ast.Import:
            out.append("Import(" + ",".join(f"{PACKAGE.name}:{a.asname or a.name.split('.')[-1]}"
                                            if a.name.split(".")[0] == PACKAGE.name else f"{a.name}:{a.asname}"
                                            for a in node.names) + ")")
            return
        elif kind is ast.Call and (marked := self._marked(node.func)) is not None:
            positions, names = marked
            node = ast.Call(node.func, [ast.Constant(None) if i in positions else a for i, a in enumerate(node.args)],
                            [ast.keyword(k.arg, ast.Constant(None)) if k.arg in names else k for k in node.keywords])
        scoped = kind in _SCOPE_KINDS
        if scoped:
            self._push(node)
        out.append(kind.__name__ + "(")
        for name in node._fields:
            if name in ("ctx", "type_comment"):
                continue
            self.write(getattr(node, name, None))
            out.append(";")
        out.append(")")
        if scoped:
            self.stack.pop()

    def _marked(self, func: ast.expr):
        """The NO_RERUN fields of the class a call constructs (directly or through an alias); None: not such."""
        target = self.target(func)
        if target is None or target[0] != "unit":
            return None
        unit = self.universe.unit((target[1], target[2]))
        mod = self.universe.module(target[1])
        if isinstance(unit.node, ast.ClassDef):
            return mod.marked.get(unit.node.name)
        if unit.names and unit.names[0] in mod.aliases:
            return mod.marked.get(mod.aliases[unit.names[0]])
        return None


_SCOPE_KINDS = frozenset(SCOPES)


# ------------------------------------------------------------------------------------------ the digests

def framework_roots(framework: str) -> tuple[str, ...]:
    return (TRAINER, f"dlbench.frameworks.{framework}", MEASURE)


def digest_of(roots, package: Path = PACKAGE) -> str:
    """The digest of what the roots' modules can run (see the module's docstring)."""
    return Program(roots, package).digest()


CACHE_KEPT = 16  # versions of the package whose digests the cache keeps


def package_version(package: Path = PACKAGE) -> str:
    """A digest of every file of the package (its path in it and its bytes): the digests of one version are the
    same wherever it lies, so they are kept (cached) under it."""
    h = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cached(what: str, compute, package: Path = PACKAGE) -> str:
    """compute(), kept under the package's version in dlbench's cache (the newest CACHE_KEPT versions): parsing
    the package costs a second or two, and Snakemake reads the Snakefile at every run and in every job's own
    Snakemake."""
    path = cache_root() / "code-digests.json"
    version = package_version(package)
    kept = _kept(path)
    found = kept.get(version, {}).get(what)
    if found:
        return found
    value = compute()
    kept = _kept(path)  # as another process may have left it meanwhile
    mine = {**kept.pop(version, {}), what: value}
    try:
        write_text(path, json.dumps({**dict(list(kept.items())[-(CACHE_KEPT - 1):]), version: mine}))
    except OSError:  # a read-only cache: computed every time, nothing else
        pass
    return value


def _kept(path: Path) -> dict:
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in kept.items() if isinstance(v, dict)} if isinstance(kept, dict) else {}


@functools.cache
def training_digest(framework: str, package: Path = PACKAGE) -> str:
    """The digest of a framework's training job: its trainer process and the measurement around it."""
    return cached(f"training {framework}", lambda: digest_of(framework_roots(framework), package), package)


@functools.cache
def record_digest(package: Path = PACKAGE) -> str:
    """The digest of how a record is made from a raw measurement (the record rule reruns where it changes)."""
    return cached("record", lambda: digest_of((RECORD,), package), package)


@functools.cache
def caffe_data_digest(package: Path = PACKAGE) -> str:
    """The digest of the code that writes Caffe's HDF5 input (workflow/rules/data.smk, rule caffe_data)."""
    return cached("caffe_data", lambda: digest_of((CAFFE_DATA,), package), package)


@functools.cache
def charts_digest(package: Path = PACKAGE) -> str:
    """The digest of the code that draws the charts (workflow/rules/report.smk, rule charts)."""
    return cached("charts", lambda: digest_of((CHARTS,), package), package)


@functools.cache
def findings_digest(package: Path = PACKAGE) -> str:
    """The digest of the code that writes the findings (workflow/rules/report.smk, rule findings)."""
    return cached("findings", lambda: digest_of((FINDINGS,), package), package)
