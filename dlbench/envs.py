"""Framework environments: built on demand from the pins in envs/, cached outside the clone; site ones checked.

Each environment (a framework's CPU one, `pytorch`, or a variant, `pytorch-cuda`: see
frameworks/registry.py) is a virtual environment under $DLBENCH_CACHE (default
~/.cache/dlbench) named `<env>-<key>`, where the key digests everything it was built from
(its pins envs/<env>.txt, its framework's build recipe envs/<framework>/, the Python
version). A second clone, or CI, finds it already there. A build happens in a temporary
folder renamed into place at the end, under a lock, so an interrupted build never looks
finished. pip needs no GPU: a CUDA environment builds on a login node.

A site environment is an existing interpreter the config names instead (`envs.site`): it is
checked, not built (site_env).

The conda files workflow/envs/<env>.yaml (for `snakemake --sdm conda`) are generated from the same
pins (conda_yaml), so both ways install the same versions:

    python -m dlbench.envs build ENV --out resources/envs/ENV.json
    python -m dlbench.envs conda [--check]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from dlbench.atomic import write_json
from dlbench.frameworks import registry
from dlbench.locks import flocked, heavy_work, node_lock
from dlbench.paths import CONDA_ENVS, ENVS, ROOT, cache_root
from dlbench.procs import owner_tag, remove_dead_leftovers

# The conda files' Python: the version dlbench is developed and tested on (pyproject's requires-python).
CONDA_PYTHON = "3.11"
# What the runner itself needs where a job runs in the framework's conda environment (--sdm conda):
# the monitor (psutil, NVML). Their versions are those of envs/base.txt.
RUNNER_PACKAGES = ("psutil", "nvidia-ml-py", "pyyaml")
# A pins file line `# conda: SPEC` asks conda for a package pip cannot give (a compiler, a shared library).
CONDA_LINE = re.compile(r"^#\s*conda:\s*(\S+)")


class EnvError(RuntimeError):
    """An environment that cannot be built or used; the message says what to do."""


# The pins and locks of environments at another framework version (`pytorch@2.12.0`, dlbench.versions).
VERSIONS = ENVS / "versions"


def _folder(env: str) -> Path:
    return VERSIONS if registry.VERSION_SEP in env else ENVS


def pins_file(env: str) -> Path:
    return _folder(env) / f"{env}.txt"


def lock_file(env: str) -> Path:
    """Every package the environment installs, transitive ones included, each with its hashes (`lock`)."""
    return _folder(env) / f"{env}.lock"


def split_version(env: str) -> tuple[str, str | None]:
    """(`pytorch-cuda`, `2.12.0`) for `pytorch-cuda@2.12.0`; (env, None) for an environment at its pins' version."""
    base, _, version = env.partition(registry.VERSION_SEP)
    return base, version or None


def recipe_files(env: str) -> list[Path]:
    """Everything an environment is built from: its pins, its lock and, for Caffe, its framework's build recipe."""
    files = [pins_file(env), lock_file(env)]
    recipe = ENVS / registry.framework_of_env(env).name
    if recipe.is_dir():
        files += sorted(p for p in recipe.rglob("*") if p.is_file())
    return files


def variant_of(env: str) -> str | None:
    """`cuda` for `pytorch-cuda` (and `pytorch-cuda@2.12.0`); None for a framework's CPU environment."""
    name = registry.framework_of_env(env).name
    return split_version(env)[0][len(name) + 1:] or None


def env_key(env: str) -> str:
    h = hashlib.sha256(f"python{sys.version_info.major}.{sys.version_info.minor}".encode())
    for path in recipe_files(env):
        if not path.exists():
            raise EnvError(f"{path.relative_to(ROOT)} is missing: the pins of the {env} environment")
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def env_dir(env: str) -> Path:
    return cache_root() / "envs" / f"{env}-{env_key(env)}"


def _run(cmd: list[str], log, **kw) -> None:
    log.write(f"$ {' '.join(map(str, cmd))}\n")
    log.flush()
    proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, **kw)
    if proc.returncode:
        raise EnvError(f"`{' '.join(map(str, cmd))}` failed (exit {proc.returncode}); see {log.name}")


def probe(framework: str, python: str | os.PathLike, timeout_s: float = 600) -> dict:
    """What an interpreter holds for a framework's trainer (dlbench.trainer --probe): versions, or EnvError.

    It imports the framework's adapter as a training job would, so a missing framework, numpy or
    anything else the trainer needs fails here, with the last line the interpreter printed.
    """
    if not os.path.isfile(python) or not os.access(python, os.X_OK):
        raise EnvError(f"{python} is not an executable file")
    env = dict(os.environ)
    env.update(registry.get(framework).environment({"device": "cpu"}))  # the probe must not take a GPU
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.pop("PYTHONHOME", None)
    try:
        proc = subprocess.run([str(python), "-m", "dlbench.trainer", "--probe", framework], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise EnvError(f"{python} did not import the {framework} trainer within {timeout_s:.0f} s") from None
    except OSError as exc:
        raise EnvError(f"{python} does not start ({exc.strerror})") from None
    if proc.returncode != 0:
        last = next((ln.strip() for ln in reversed(proc.stderr.splitlines()) if ln.strip()), "no message")
        raise EnvError(f"{python} cannot run the {framework} trainer ({last})")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise EnvError(f"{python} gave no versions for {framework} (stdout: {proc.stdout[-200:]!r})") from None


def build(env: str) -> Path:
    """The environment's folder, building it first if this machine has none for its key.

    A build is heavy work: no point measures on this node while it runs (dlbench.locks.heavy_work); builds of
    other environments run beside it.
    """
    if split_version(env)[0] not in registry.env_names():
        raise EnvError(f"unknown environment {env!r}; known: {', '.join(registry.env_names())}")
    final = env_dir(env)
    if (final / "READY").exists():
        return final
    # The heavy side first, then the build lock: a builder waiting for another one holds no lock a point needs.
    with heavy_work(node_lock(), f"building {env}"), flocked(final.with_name(final.name + ".lock")):
        if (final / "READY").exists():
            return final
        # A failed or killed build leaves its multi-GB folder: remove those of dead builders of this host.
        remove_dead_leftovers(final.parent, f"{final.name}.building-")
        tmp = final.with_name(final.name + f".building-{owner_tag()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _build_into(env, tmp, final.with_name(final.name + ".build.log"))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # the log beside it says what failed
            raise
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        return final


def _build_into(env: str, tmp: Path, log_path: Path) -> None:
    """Build `env` in the folder tmp: a venv with exactly the locked packages (hashes checked), then the recipe."""
    framework = registry.framework_of_env(env).name
    started = time.monotonic()
    with open(log_path, "w") as log:
        _run([sys.executable, "-m", "venv", str(tmp)], log)
        py = tmp / "bin" / "python"
        # Every package and its hash from the lock: two caches with one key hold the same bytes.
        _run([str(py), "-m", "pip", "install", "--no-input", "--require-hashes", "--no-deps", "-r",
              str(lock_file(env))], log)
        recipe = ENVS / framework / "build.sh"
        if recipe.exists():  # a variant's build is switched on by its name: build.sh --cuda PREFIX
            variant = variant_of(env)
            _run(["bash", str(recipe), *([f"--{variant}"] if variant else []), str(tmp / framework)], log)
        freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    versions = probe(framework, py)
    if variant_of(env) == "cuda" and not versions.get("cuda_version"):
        raise EnvError(f"the {env} environment got a build without CUDA ({framework} "
                       f"{versions.get('framework_version')}); check the pins of {pins_file(env).name} "
                       f"and {log_path}")
    info = {"env": env, "framework": framework, "key": env_key(env), "python": sys.version.split()[0],
            "versions": versions, "packages": freeze.split(), "build_seconds": round(time.monotonic() - started, 1)}
    (tmp / "ENV_INFO.json").write_text(json.dumps(info, indent=2))
    (tmp / "READY").write_text("ok\n")


def lock(env: str) -> Path:
    """Write envs/<env>.lock from envs/<env>.txt: every package it needs, resolved, with hashes (pip-compile).

    Needs the package index; run after changing a pins file. The lock names no index: pip's own
    configuration decides where packages come from, the hashes decide what is accepted.
    """
    out = lock_file(env)
    compiler = Path(sys.executable).with_name("pip-compile")
    if not compiler.exists():
        raise EnvError(f"no pip-compile beside {sys.executable}: install pip-tools into that environment "
                       "(python -m pip install pip-tools), then lock again")
    cmd = [str(compiler), "--quiet", "--generate-hashes", "--allow-unsafe",
           "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--no-emit-trusted-host",
           "--annotation-style", "line", "--output-file", str(out), str(pins_file(env))]
    proc = subprocess.run(cmd, cwd=ENVS, capture_output=True, text=True)
    if proc.returncode != 0:
        raise EnvError(f"pip-compile could not lock {env}: {proc.stderr.strip().splitlines()[-1:]}")
    return out


LOCK_LINE = re.compile(r"^([A-Za-z0-9_.-]+)(?:===|==)(\S+)")
PIN_LINE = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^]]*\])?(===?)(\S+)")


def lock_problems(env: str) -> list[str]:
    """What is wrong between an environment's pins and its lock (empty: the lock holds the pins, hashed)."""
    path = lock_file(env)
    if not path.exists():
        return [f"{path.name} is missing (python -m dlbench.envs lock {env})"]
    locked, problems, current = {}, [], None
    for line in path.read_text().splitlines():
        if m := LOCK_LINE.match(line):
            current = m.group(1).lower().replace("_", "-")
            locked[current] = {"version": m.group(2), "hashed": False}
        elif line.strip().startswith("--hash=sha256:") and current:
            locked[current]["hashed"] = True
        elif line.startswith(("--index-url", "--extra-index-url", "--find-links", "-f ", "-i ")):
            problems.append(f"{path.name} names a package source ({line.split()[0]}): it must not")
    problems += [f"{path.name}: {name} has no hash" for name, v in locked.items() if not v["hashed"]]
    for line in pins_file(env).read_text().splitlines():
        if not (m := PIN_LINE.match(line.strip())):
            continue
        name, op, version = m.group(1).lower().replace("_", "-"), m.group(2), m.group(3)
        got = locked.get(name, {}).get("version")
        matches = got == version if op == "===" else got is not None and got.split("+")[0] == version
        if not matches:
            problems.append(f"{path.name}: {name} is {got or 'absent'}, the pins say {op}{version} "
                            f"(python -m dlbench.envs lock {env})")
    return problems


def describe(env: str, folder: Path) -> dict:
    info = json.loads((folder / "ENV_INFO.json").read_text())
    return {"env": env, "framework": registry.framework_of_env(env).name, "kind": "built", "prefix": str(folder),
            "python": str(folder / "bin" / "python"), "key": info["key"], "versions": info.get("versions"),
            "packages": info["packages"]}


def provide(env: str, out: str | os.PathLike | None = None) -> int:
    """Build (or find) an environment and write its description to `out`; 2 with one line on failure."""
    try:
        desc = describe(env, build(env))
    except EnvError as exc:
        print(f"dlbench: {env} environment: {exc}", file=sys.stderr)
        return 2
    if out:
        write_json(out, desc)
    print(desc["prefix"])
    return 0


def site_env(framework: str, env: str, python: str) -> dict:
    """A site environment's description, its versions read from the interpreter; EnvError with the fix."""
    try:
        versions = probe(framework, python)
    except EnvError as exc:
        raise EnvError(f"site environment of {framework} for {env} points: {exc}; fix: point envs.site.{framework} "
                       f"at a Python that imports {framework}, numpy and dlbench's trainer (try `{python} -m "
                       f"dlbench.trainer --probe {framework}` with PYTHONPATH={ROOT}), or remove it to use the "
                       "built environment") from None
    return {"env": env, "framework": framework, "kind": "site", "python": python, "versions": versions}


# ---------------------------------------------------------------------------------------------- conda files


def _pins(path: Path) -> tuple[list[str], list[str], list[str]]:
    """(comment lines, conda specs, pip requirements) of a pins file."""
    comments, conda, pip = [], [], []
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if m := CONDA_LINE.match(stripped):
            conda.append(m.group(1))
        elif stripped.startswith("#"):
            comments.append(stripped)
        elif stripped:
            pip.append(stripped)
    return comments, conda, pip


def _runner_pins() -> list[str]:
    _, _, base = _pins(ENVS / "base.txt")
    found = {re.split(r"[=<>!~\[ ]", p, maxsplit=1)[0].lower(): p for p in base}
    return [found[name] for name in RUNNER_PACKAGES]


def conda_yaml(env: str) -> str:
    """workflow/envs/<env>.yaml as generated from envs/<env>.txt: Python and the `# conda:` packages from conda-forge,
    every pin through pip (one version everywhere), and for a framework environment the runner's packages."""
    comments, conda, pip = _pins(pins_file(env))
    if env != "base":
        pip += [p for p in _runner_pins() if p not in pip]
    lines = [f"# Generated from envs/{env}.txt by `python -m dlbench.envs conda`: edit the pins, not this file.",
             "# Used by `snakemake --sdm conda` (each point's environment; see dlbench/envs.py).", *comments,
             f"name: dlbench-{env}", "channels: [conda-forge]", "dependencies:", f"  - python={CONDA_PYTHON}",
             *(f"  - {spec}" for spec in conda), "  - pip", "  - pip:", *(f"      - {req}" for req in pip)]
    return "\n".join(lines) + "\n"


def conda_envs() -> list[str]:
    return ["base", *registry.env_names()]


def write_conda(check: bool = False) -> list[str]:
    """Write every workflow/envs/<env>.yaml from its pins (check: only compare); the names of those that differed."""
    stale = []
    for env in conda_envs():
        path = CONDA_ENVS / f"{env}.yaml"
        text = conda_yaml(env)
        if not path.exists() or path.read_text() != text:
            stale.append(env)
            if not check:
                path.write_text(text)
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.envs")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or find) an environment: a framework's (pytorch) or a variant's")
    b.add_argument("env")
    b.add_argument("--out", help="write the environment's description here (JSON)")
    sub.add_parser("key", help="print an environment's cache key").add_argument("env")
    lst = sub.add_parser("list", help="print the frameworks' CPU environments (what set-up builds), one a line")
    lst.add_argument("--all", action="store_true", help="every environment, the variants too")
    lk = sub.add_parser("lock", help="write envs/<env>.lock (every package, hashed) from envs/<env>.txt; needs PyPI")
    lk.add_argument("envs", nargs="*", help="environments to lock (default: every one, and base)")
    c = sub.add_parser("conda", help="write workflow/envs/*.yaml from the pins")
    c.add_argument("--check", action="store_true", help="only say which differ from the pins (exit 1 if any)")
    args = parser.parse_args(argv)
    if args.cmd == "list":
        print("\n".join(registry.env_names() if args.all else registry.names()))
        return 0
    if args.cmd == "key":
        print(env_key(args.env))
        return 0
    if args.cmd == "lock":
        for env in args.envs or [*registry.env_names(), "base"]:
            print(lock(env))
        return 0
    if args.cmd == "conda":
        stale = write_conda(check=args.check)
        for env in stale:
            print(f"workflow/envs/{env}.yaml {'differs from' if args.check else 'written from'} envs/{env}.txt")
        return 1 if args.check and stale else 0
    return provide(args.env, args.out)


if __name__ == "__main__":
    sys.exit(main())
