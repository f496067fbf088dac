"""The pins each framework environment is built from, and what an environment's name says.

An environment (`pytorch`, a variant `pytorch-cuda`, a framework version `pytorch@2.12.0`: see
frameworks/registry.py) is built from its pins, envs/<env>.txt (envs/versions/<env>@<version>.txt for another
framework version: dlbench.environments.versions), the hash lock beside them (dlbench.environments.lock), and,
for Caffe, its framework's build recipe envs/<framework>/. Every path under envs/ is named here (ENVS), so that
a test may point it at a copy.
"""

from __future__ import annotations

import re
from pathlib import Path

from dlbench.frameworks import registry
from dlbench.paths import ENVS

# The pins and locks of environments at another framework version (`pytorch@2.12.0`, dlbench.environments.versions).
VERSIONS = "versions"


def _folder(env: str) -> Path:
    return ENVS / VERSIONS if registry.VERSION_SEP in env else ENVS


def pins_file(env: str) -> Path:
    return _folder(env) / f"{env}.txt"


def lock_file(env: str) -> Path:
    """Every package the environment installs, transitive ones included, each with its hashes (`lock`)."""
    return _folder(env) / f"{env}.lock"


def recipe_dir(env: str) -> Path:
    """The build recipe of the environment's framework (envs/caffe/: build.sh, debian-packages.txt), if it has one."""
    return ENVS / registry.framework_of_env(env).name


def split_version(env: str) -> tuple[str, str | None]:
    """(`pytorch-cuda`, `2.12.0`) for `pytorch-cuda@2.12.0`; (env, None) for an environment at its pins' version."""
    base, _, version = env.partition(registry.VERSION_SEP)
    return base, version or None


def variant_of(env: str) -> str | None:
    """`cuda` for `pytorch-cuda` (and `pytorch-cuda@2.12.0`); None for a framework's CPU environment."""
    name = registry.framework_of_env(env).name
    return split_version(env)[0][len(name) + 1:] or None


LOCK_LINE = re.compile(r"^([A-Za-z0-9_.-]+)(?:===|==)(\S+)")
PIN_LINE = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^]]*\])?(===?)(\S+)")


def lock_problems(env: str) -> list[str]:
    """What is wrong between an environment's pins and its lock (empty: the lock holds the pins, hashed)."""
    path = lock_file(env)
    if not path.exists():
        return [f"{path.name} is missing (dlbench envs lock {env})"]
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
                            f"(dlbench envs lock {env})")
    return problems
