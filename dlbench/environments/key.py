"""An environment's cache key, and its folder in the cache.

Each environment is a virtual environment under $DLBENCH_CACHE (default ~/.cache/dlbench) named `<env>-<key>`,
where the key digests everything it was built from: its pins and lock, its framework's build recipe
(dlbench.environments.pins), the full version and real path of the base interpreter that builds it (two clones
with their own .venv on one Python share it, another Python does not), and for a recipe with a
debian-packages.txt (Caffe) the installed versions of those Debian packages. A second clone, or CI, finds it
already there.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path

from dlbench.environments import pins
from dlbench.environments.errors import EnvError
from dlbench.paths import cache_root

DPKG_TIMEOUT_S = 60  # one dpkg-query for every Debian package a recipe names


def recipe_files(env: str) -> list[Path]:
    """Everything an environment is built from: its pins, its lock and, for Caffe, its framework's build recipe."""
    files = [pins.pins_file(env), pins.lock_file(env)]
    recipe = pins.recipe_dir(env)
    if recipe.is_dir():
        files += sorted(p for p in recipe.rglob("*") if p.is_file())
    return files


def interpreter() -> tuple[str, str]:
    """(full version, real path) of the base interpreter that builds the environments (the one behind a venv)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return platform.python_version(), os.path.realpath(base)


def debian_packages(env: str) -> list[str]:
    """The Debian packages its framework's build recipe names (envs/<framework>/debian-packages.txt); [] if none."""
    listed = pins.recipe_dir(env) / "debian-packages.txt"
    if not listed.is_file():
        return []
    return [ln.strip() for ln in listed.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


@functools.cache
def debian_versions(names: tuple[str, ...]) -> dict[str, str]:
    """{package: installed version, or "absent"}: one dpkg-query for them all, asked once per process."""
    found: dict[str, list[str]] = {}
    try:
        proc = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${db:Status-Abbrev}\t${Version}\n", *names],
                              capture_output=True, text=True, timeout=DPKG_TIMEOUT_S)
        lines = proc.stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):  # no dpkg on this machine: none of them is installed
        lines = []
    for line in lines:
        name, status, version = (line.split("\t") + ["", ""])[:3]
        if status.startswith("ii") and version:  # installed (a removed package keeps its config files: not this)
            found.setdefault(name.split(":")[0], []).append(version)
    return {name: ",".join(sorted(found.get(name, []))) or "absent" for name in names}


def env_key(env: str) -> str:
    """The digest of everything the environment is built from (the module's docstring): 12 hex digits."""
    version, path = interpreter()
    h = hashlib.sha256(f"python{version}\0{path}\0".encode())
    repo = pins.ENVS.parent  # each file named as in the repository (envs/pytorch.txt), wherever the clone lies
    for file in recipe_files(env):
        if not file.exists():
            raise EnvError(f"{file.relative_to(repo)} is missing: the pins of the {env} environment")
        h.update(file.relative_to(repo).as_posix().encode())
        h.update(file.read_bytes())
    packages = debian_packages(env)
    if packages:
        versions = debian_versions(tuple(packages))
        h.update("".join(f"deb:{name}={versions[name]}\n" for name in packages).encode())
    return h.hexdigest()[:12]


def built_folder(env: str, key: str) -> Path:
    """Where the cache keeps the environment built for `key`."""
    return cache_root() / "envs" / f"{env}-{key}"


def env_dir(env: str) -> Path:
    """Where the cache keeps the environment as its pins and recipe are now."""
    return built_folder(env, env_key(env))
