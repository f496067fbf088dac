"""Framework environments: built on demand from the pins in envs/, cached outside the clone.

Each framework gets a virtual environment under $DLBENCH_CACHE (default
~/.cache/dlbench) named `<framework>-<key>`, where the key digests everything it
was built from (pins, build recipe, Python version). A second clone, or CI, finds
it already there. A build happens in a temporary folder renamed into place at the
end, under a lock, so an interrupted build never looks finished.

    python -m dlbench.envs build FRAMEWORK --out resources/envs/FRAMEWORK.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from dlbench.atomic import write_json
from dlbench.frameworks import registry
from dlbench.locks import flocked
from dlbench.paths import ENVS, ROOT, cache_root


class EnvError(RuntimeError):
    """An environment that cannot be built; the message says what to do."""


def recipe_files(framework: str) -> list[Path]:
    """Everything an environment is built from: its pins and, for Caffe, the build recipe."""
    files = [ENVS / f"{framework}.txt"]
    recipe = ENVS / framework
    if recipe.is_dir():
        files += sorted(p for p in recipe.rglob("*") if p.is_file())
    return files


def env_key(framework: str) -> str:
    h = hashlib.sha256(f"python{sys.version_info.major}.{sys.version_info.minor}".encode())
    for path in recipe_files(framework):
        if not path.exists():
            raise EnvError(f"{path.relative_to(ROOT)} is missing: the pins of the {framework} environment")
        h.update(path.relative_to(ROOT).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


def env_dir(framework: str) -> Path:
    return cache_root() / "envs" / f"{framework}-{env_key(framework)}"


def _run(cmd: list[str], log, **kw) -> None:
    log.write(f"$ {' '.join(map(str, cmd))}\n")
    log.flush()
    proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, **kw)
    if proc.returncode:
        raise EnvError(f"`{' '.join(map(str, cmd))}` failed (exit {proc.returncode}); see {log.name}")


def build(framework: str) -> Path:
    """The environment's folder, building it first if this machine has none for its key."""
    final = env_dir(framework)
    if (final / "READY").exists():
        return final
    with flocked(final.with_name(final.name + ".lock")):
        if (final / "READY").exists():
            return final
        tmp = final.with_name(final.name + f".building-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        log_path = final.with_name(final.name + ".build.log")
        started = time.monotonic()
        with open(log_path, "w") as log:
            _run([sys.executable, "-m", "venv", str(tmp)], log)
            py = tmp / "bin" / "python"
            _run([str(py), "-m", "pip", "install", "--no-input", "-r", str(ENVS / f"{framework}.txt")], log)
            recipe = ENVS / framework / "build.sh"
            if recipe.exists():
                _run(["bash", str(recipe), str(tmp / framework)], log)
            freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
        info = {"framework": framework, "key": env_key(framework), "python": sys.version.split()[0],
                "packages": freeze.split(), "build_seconds": round(time.monotonic() - started, 1)}
        (tmp / "ENV_INFO.json").write_text(json.dumps(info, indent=2))
        (tmp / "READY").write_text("ok\n")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        return final


def describe(framework: str, folder: Path) -> dict:
    info = json.loads((folder / "ENV_INFO.json").read_text())
    return {"framework": framework, "prefix": str(folder), "python": str(folder / "bin" / "python"),
            "key": info["key"], "packages": info["packages"]}


def provide(framework: str, out: str | os.PathLike | None = None) -> int:
    """Build (or find) a framework's environment and write its description to `out`; 2 with one line on failure."""
    try:
        desc = describe(framework, build(framework))
    except EnvError as exc:
        print(f"dlbench: {framework} environment: {exc}", file=sys.stderr)
        return 2
    if out:
        write_json(out, desc)
    print(desc["prefix"])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.envs")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or find) a framework's environment")
    b.add_argument("framework")
    b.add_argument("--out", help="write the environment's description here (JSON)")
    sub.add_parser("key", help="print a framework's cache key").add_argument("framework")
    sub.add_parser("list", help="print the frameworks, one a line")
    args = parser.parse_args(argv)
    if args.cmd == "list":
        print("\n".join(registry.names()))
        return 0
    if args.cmd == "key":
        print(env_key(args.framework))
        return 0
    return provide(args.framework, args.out)


if __name__ == "__main__":
    sys.exit(main())
