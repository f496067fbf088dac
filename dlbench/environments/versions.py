"""Framework versions as an axis (config `versions: {pytorch: ["2.12.0", "2.13.0"]}`).

Each version a study lists runs in an environment of its own, `<env>@<version>` (pytorch@2.12.0,
pytorch-cuda@2.12.0): the framework's pins (envs/<env>.txt) with its own packages' version replaced
(registry `packages`), written to envs/versions/<env>@<version>.txt, locked with hashes beside it the first
time it is needed (dlbench.environments.lock), and then built and cached under its own key like any other
environment (dlbench.environments.build). The version of the pins themselves is the framework's usual
environment. Locking asks the package index (pip's own configuration says which) through pip's resolver, for
this machine's Python and platform; a lock already made needs no index. A version the index does not have is
refused in one line before any job runs; a dry run asks no index, and says which versions its run will lock
first.

A point's id carries its version only where a study lists several; with one, the version is the study's and
changes only the environment its points run in (and so reruns them, as another environment would).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext

from dlbench import atomic
from dlbench.environments import lock, pins
from dlbench.environments.errors import EnvError
from dlbench.frameworks import registry

# The first line of a version's pins. Its words are part of the pins, and so of the environment's key: new words
# would rebuild every version's environment already built, and rerun its points. Kept as they were first written.
PINS_HEADER = "# {base} with {framework} at {version}: written by dlbench.study.versions from envs/{base}.txt."


def listed(cfg: dict, framework: str) -> list[str]:
    """The versions the config lists for a framework (empty: its pins' own)."""
    return list((cfg.get("versions") or {}).get(framework, []))


def version_of(cfg: dict, point: dict) -> str | None:
    """The framework version a point runs at: its own (a study listing several), the study's one, or None."""
    if point.get("version"):
        return point["version"]
    given = listed(cfg, point["framework"])
    return given[0] if len(given) == 1 else None


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


def pinned(env: str) -> str | None:
    """The version the environment's pins give its framework's own package."""
    own = {_normal(p) for p in registry.framework_of_env(env).packages}
    for line in pins.pins_file(pins.split_version(env)[0]).read_text().splitlines():
        if (m := pins.PIN_LINE.match(line.strip())) and _normal(m.group(1)) in own:
            return m.group(3)
    return None


def env_of(env: str, version: str | None) -> str:
    """The environment a point of `env` runs in at `version`: env itself at its pins' version (or None)."""
    if version is None or version == pinned(env):
        return env
    return f"{env}{registry.VERSION_SEP}{version}"


def pins_text(env: str) -> str:
    """The pins of `<env>@<version>`: those of <env> with the framework's own packages at that version."""
    base, version = pins.split_version(env)
    framework = registry.framework_of_env(env)
    own = {_normal(p) for p in framework.packages}
    lines, replaced = [], 0
    for line in pins.pins_file(base).read_text().splitlines():
        m = pins.PIN_LINE.match(line.strip())
        if m and _normal(m.group(1)) in own:
            line = line.strip()[: m.start(3)] + version
            replaced += 1
        lines.append(line)
    if not replaced:
        raise EnvError(f"versions.{framework.name}: envs/{base}.txt pins none of {framework.name}'s own packages "
                       f"({', '.join(framework.packages) or 'none known'}), so no version of it can be chosen")
    header = PINS_HEADER.format(base=base, framework=framework.name, version=version)
    return "\n".join([header, *lines]) + "\n"


def prepare(env: str, locking: bool = True,
            heavy: Callable[[str], ContextManager] = lambda what: nullcontext()) -> bool:
    """Write a version environment's pins, and lock it where it has no lock that agrees with them (locking=False:
    only say whether it has one, as a dry run does, which asks no index). Whether it is locked; EnvError if its
    version does not resolve. heavy(what): the caller's heavy-work lock, held while pip's resolver works (it
    loads the CPU for seconds to minutes: dlbench.node.locks.heavy_work)."""
    path = pins.pins_file(env)
    text = pins_text(env)
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, text)
    if not pins.lock_problems(env):
        return True
    if not locking:
        return False
    with heavy(f"locking {env} (pip's resolver)"):
        text = lock.resolve(env)
    atomic.write_text(pins.lock_file(env), text)
    return True
