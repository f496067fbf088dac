"""That an environment works: its interpreter imports the framework's trainer (probe) and trains one iteration of a
tiny point with the real trainer (check_env).

A cached environment is reused where it is ready, except where set-up asks for a check (`dlbench envs build ENV
--check`, dlbench.environments.build). A passing check leaves CHECKED.json in the environment; it is repeated
only where that stamp is missing or older than the key's inputs (or than the environment's site-packages
folder): checked.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from dlbench.atomic import write_json
from dlbench.environments import key, pins
from dlbench.environments.errors import EnvError
from dlbench.frameworks import registry
from dlbench.paths import ROOT

PROBE_TIMEOUT_S = 600  # importing a framework the first time (its caches cold) can take a minute
CHECK_TIMEOUT_S = 1200  # one iteration, Theano's compile included
# The stamp of an environment's last passing check (check_env), inside it.
CHECKED = "CHECKED.json"


def probe(framework: str, python: str | os.PathLike, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """What an interpreter holds for a framework's trainer (dlbench.frameworks.trainer --probe): versions, or EnvError.

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
        proc = subprocess.run([str(python), "-m", "dlbench.frameworks.trainer", "--probe", framework],
                              capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout_s)
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


def _inputs_mtime(env: str, folder: Path) -> float:
    """The newest modification time of what the environment's key is made of (its pins, lock and recipe, the
    base interpreter, its Debian packages' file lists) and of its own site-packages folder (a package added
    or removed there)."""
    paths = [*key.recipe_files(env), Path(key.interpreter()[1]), *folder.glob("lib/python*/site-packages")]
    for name in key.debian_packages(env):
        paths += [*Path("/var/lib/dpkg/info").glob(f"{name}.list"), *Path("/var/lib/dpkg/info").glob(f"{name}:*.list")]
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def checked(env: str, folder: Path) -> bool:
    """Whether the environment's last passing check still stands: its stamp is for this key and newer than
    everything the key is made of."""
    try:
        stamp = json.loads((folder / CHECKED).read_text())
        return stamp["key"] == key.env_key(env) and float(stamp["checked_at"]) >= _inputs_mtime(env, folder)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def check_and_stamp(env: str, folder: Path) -> None:
    """check_env, and where it passes the stamp that says so (CHECKED)."""
    started = time.time()  # an input changed while the check ran makes the stamp stale
    versions = check_env(env, folder)
    write_json(folder / CHECKED, {"env": env, "key": key.env_key(env), "checked_at": started,
                                  "checked": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                                  "seconds": round(time.time() - started, 1), "versions": versions})


def check_env(env: str, folder: str | os.PathLike, timeout_s: float = CHECK_TIMEOUT_S) -> dict:
    """That an environment works: it imports its framework's trainer (probe) and trains one iteration of a tiny
    point (the `caffe` preset, one thread, on the CPU; `library: mkl` in an MKL variant) on the embedded
    digits, with the real trainer (python -m dlbench.frameworks.trainer) as a point runs it. Its versions, or
    EnvError."""
    from dlbench.datasets import prepare
    from dlbench.run.measure import trainer_env
    from dlbench.study.sweep import one_point

    framework = registry.framework_of_env(env).name
    python = Path(folder) / "bin" / "python"
    versions = probe(framework, python)
    settings = {"iterations": 1, "threads": 1, "device": "cpu"}
    if "mkl" in (pins.variant_of(env) or "").split("-"):
        settings["library"] = "mkl"  # the variant's reason to be: its adapter refuses the point without MKL
    point = one_point(framework, "caffe", **settings)
    with tempfile.TemporaryDirectory(prefix=f"dlbench-check-{env}-") as tmp:
        work = Path(tmp)
        prepare.prepare("digits", work / "digits")
        (work / "point.json").write_text(json.dumps(point))
        events, log = work / "events.jsonl", work / "trainer.log"
        try:
            with open(log, "wb") as out:
                proc = subprocess.run([str(python), "-m", "dlbench.frameworks.trainer", str(work / "point.json"),
                                       str(work / "digits"), str(events)], stdout=out, stderr=subprocess.STDOUT,
                                      env=trainer_env(point), cwd=ROOT, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise EnvError(f"{python} did not train one {framework} iteration within {timeout_s:.0f} s") from None
        ended = {}
        if events.exists():
            for line in events.read_text().splitlines():
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    break
                if event.get("e") == "status":
                    ended = event
        if proc.returncode != 0 or ended.get("status") != "ok":
            last = next((ln.strip() for ln in reversed(log.read_text(errors="replace").splitlines()) if ln.strip()),
                        "no output")
            why = ended.get("reason") or last
            raise EnvError(f"{python} did not train one {framework} iteration (exit {proc.returncode}, "
                           f"status {ended.get('status', 'none')}: {why})")
    return versions
