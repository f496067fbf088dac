"""An environment's hash lock: every package it installs, resolved, each with its hashes, so that two caches
with one key hold the same bytes.

The pins in envs/ are locked by pip-compile (`dlbench envs lock`, after changing a pins file); a framework
version's pins (dlbench.environments.versions) by pip's own resolver, the first time a study needs them. Either
asks the package index that pip's own configuration names; the lock names no index, and the hashes decide what
is accepted.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from dlbench.environments import pins, steps
from dlbench.environments.errors import EnvError
from dlbench.frameworks import registry


def lock(env: str) -> Path:
    """Write envs/<env>.lock from envs/<env>.txt with pip-compile; its path."""
    out = pins.lock_file(env)
    compiler = Path(sys.executable).with_name("pip-compile")
    if not compiler.exists():
        raise EnvError(f"no pip-compile beside {sys.executable}: install pip-tools into that environment "
                       "(python -m pip install pip-tools), then lock again")
    cmd = [str(compiler), "--quiet", "--generate-hashes", "--allow-unsafe",
           "--strip-extras", "--no-emit-index-url", "--no-emit-find-links", "--no-emit-trusted-host",
           "--annotation-style", "line", "--output-file", str(out), str(pins.pins_file(env))]
    proc = steps.limited(cmd, "lock", f"pip-compile locking {env}", cwd=pins.ENVS)
    if proc.returncode != 0:
        raise EnvError(f"pip-compile could not lock {env}: {proc.stderr.strip().splitlines()[-1:]}")
    return out


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


def resolve_command(pins_path: Path, report: Path) -> list[str]:
    """pip's resolver over a pins file, wheels only: a source package would run its setup.py to be resolved."""
    return [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary", ":all:",
            "--quiet", "--no-input", "--report", str(report), "-r", str(pins_path)]


def resolve(env: str) -> str:
    """The lock of a framework version's environment: every package pip's resolver picks for its pins, with its
    hash. EnvError with pip's own last word where the index has no such version (or the pins conflict)."""
    base, version = pins.split_version(env)
    framework = registry.framework_of_env(env).name
    with tempfile.TemporaryDirectory(prefix="dlbench-lock-") as tmp:
        report = Path(tmp) / "report.json"
        proc = steps.limited(resolve_command(pins.pins_file(env), report), "resolve",
                             f"versions.{framework}: pip's resolver for {version}")
        if proc.returncode != 0:
            # pip's first error says what failed (no such version, a conflict); its last one points to its help
            errors = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip().startswith("ERROR")]
            last = errors[0] if errors else (proc.stderr.strip().splitlines() or ["no message"])[-1]
            raise EnvError(f"versions.{framework}: {version} does not resolve for the {base} environment ({last}); "
                           "list a version the package index has as a wheel for this Python and platform (a "
                           "package published only as source is refused: building it would run its code)")
        installs = json.loads(report.read_text())["install"]
    lines = [f"# Locked from {pins.pins_file(env).name} by dlbench.environments.lock (pip's resolver, Python "
             f"{sys.version_info.major}.{sys.version_info.minor} on this platform)."]
    for item in sorted(installs, key=lambda i: _normal(i["metadata"]["name"])):
        hashes = item["download_info"].get("archive_info", {}).get("hashes", {})
        if "sha256" not in hashes:
            raise EnvError(f"versions.{framework}: pip gave no sha256 for {item['metadata']['name']} "
                           f"({item['download_info']['url']}), so {version} cannot be locked")
        lines += [f"{_normal(item['metadata']['name'])}=={item['metadata']['version']} \\",
                  f"    --hash=sha256:{hashes['sha256']}"]
    return "\n".join(lines) + "\n"
