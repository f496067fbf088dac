"""Framework versions as an axis (config `versions: {pytorch: ["2.12.0", "2.13.0"]}`).

Each version a study lists runs in an environment of its own, `<env>@<version>` (pytorch@2.12.0,
pytorch-cuda@2.12.0): the framework's pins (envs/<env>.txt) with its own packages' version replaced
(registry `packages`), written to envs/versions/<env>@<version>.txt, locked with hashes beside it the first
time it is needed, and then built and cached under its own key like any other environment (dlbench.environments.build).
The version of the pins themselves is the framework's usual environment. Locking asks the package index
(pip's own configuration says which) through pip's resolver, for this machine's Python and platform; a lock
already made needs no index. A version the index does not have is refused in one line before any job runs;
a dry run asks no index, and says which versions its run will lock first.

A point's id carries its version only where a study lists several; with one, the version is the study's and
changes only the environment its points run in (and so reruns them, as another environment would).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from contextlib import nullcontext
from pathlib import Path

from dlbench import atomic
from dlbench.frameworks import registry
from dlbench.frameworks.pins import PIN_LINE, EnvError, lock_file, lock_problems, pins_file, split_version


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
    for line in pins_file(split_version(env)[0]).read_text().splitlines():
        if (m := PIN_LINE.match(line.strip())) and _normal(m.group(1)) in own:
            return m.group(3)
    return None


def env_of(env: str, version: str | None) -> str:
    """The environment a point of `env` runs in at `version`: env itself at its pins' version (or None)."""
    if version is None or version == pinned(env):
        return env
    return f"{env}{registry.VERSION_SEP}{version}"


def pins_text(env: str) -> str:
    """The pins of `<env>@<version>`: those of <env> with the framework's own packages at that version."""
    base, version = split_version(env)
    framework = registry.framework_of_env(env)
    own = {_normal(p) for p in framework.packages}
    lines, replaced = [], 0
    for line in pins_file(base).read_text().splitlines():
        m = PIN_LINE.match(line.strip())
        if m and _normal(m.group(1)) in own:
            line = line.strip()[: m.start(3)] + version
            replaced += 1
        lines.append(line)
    if not replaced:
        raise EnvError(f"versions.{framework.name}: envs/{base}.txt pins none of {framework.name}'s own packages "
                       f"({', '.join(framework.packages) or 'none known'}), so no version of it can be chosen")
    header = f"# {base} with {framework.name} at {version}: written by dlbench.study.versions from envs/{base}.txt."
    return "\n".join([header, *lines]) + "\n"


def resolve_command(pins: Path, report: Path) -> list[str]:
    """pip's resolver over a pins file, wheels only: a source package would run its setup.py to be resolved."""
    return [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary", ":all:",
            "--quiet", "--no-input", "--report", str(report), "-r", str(pins)]


def resolve(env: str) -> str:
    """The lock of a version environment: every package pip's resolver picks for its pins, with its hash.

    EnvError with pip's own last word where the index has no such version (or the pins conflict)."""
    base, version = split_version(env)
    framework = registry.framework_of_env(env).name
    with tempfile.TemporaryDirectory(prefix="dlbench-lock-") as tmp:
        report = Path(tmp) / "report.json"
        proc = subprocess.run(resolve_command(pins_file(env), report), capture_output=True, text=True)
        if proc.returncode != 0:
            # pip's first error says what failed (no such version, a conflict); its last one points to its help
            errors = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip().startswith("ERROR")]
            last = errors[0] if errors else (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise EnvError(f"versions.{framework}: {version} does not resolve for the {base} environment ({last}); "
                           "list a version the package index has as a wheel for this Python and platform (a "
                           "package published only as source is refused: building it would run its code)")
        installs = json.loads(report.read_text())["install"]
    lines = [f"# Locked from {pins_file(env).name} by dlbench.study.versions (pip's resolver, Python "
             f"{sys.version_info.major}.{sys.version_info.minor} on this platform)."]
    for item in sorted(installs, key=lambda i: _normal(i["metadata"]["name"])):
        hashes = item["download_info"].get("archive_info", {}).get("hashes", {})
        if "sha256" not in hashes:
            raise EnvError(f"versions.{framework}: pip gave no sha256 for {item['metadata']['name']} "
                           f"({item['download_info']['url']}), so {version} cannot be locked")
        lines += [f"{_normal(item['metadata']['name'])}=={item['metadata']['version']} \\",
                  f"    --hash=sha256:{hashes['sha256']}"]
    return "\n".join(lines) + "\n"


def prepare(env: str, lock: bool = True, heavy: Callable[[str], ContextManager] = lambda what: nullcontext()) -> bool:
    """Write a version environment's pins, and lock it where it has no lock that agrees with them (lock=False:
    only say whether it has one, as a dry run does, which asks no index). Whether it is locked; EnvError if its
    version does not resolve. heavy(what): the caller's heavy-work lock, held while pip's resolver works (it
    loads the CPU for seconds to minutes: dlbench.node.locks.heavy_work)."""
    pins = pins_file(env)
    text = pins_text(env)
    if not pins.exists() or pins.read_text() != text:
        atomic.write_text(pins, text)  # whole or as it was: a half pins file would build a wrong environment
    if not lock_problems(env):
        return True
    if not lock:
        return False
    path = lock_file(env)
    with heavy(f"locking {env} (pip's resolver)"):
        text = resolve(env)
    atomic.write_text(path, text)  # a temporary name of its own: two runs locking at once never share one
    return True
