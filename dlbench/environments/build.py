"""Framework environments: built on demand from the pins in envs/, cached outside the clone; site ones checked.

Each environment (a framework's CPU one, `pytorch`, or a variant, `pytorch-cuda`: see
frameworks/registry.py) is a virtual environment under $DLBENCH_CACHE (default
~/.cache/dlbench) named `<env>-<key>`, where the key digests everything it was built from:
its pins envs/<env>.txt and lock, its framework's build recipe envs/<framework>/, the full
version and real path of the base interpreter that builds it (two clones with their own
.venv on one Python share it, another Python does not), and for a recipe with a
debian-packages.txt (Caffe) the installed versions of those Debian packages. A second clone,
or CI, finds it already there. A build happens in a temporary folder renamed into place at
the end, under a lock, so an interrupted build never looks finished; READY and ENV_INFO.json
are written atomically and fsynced, and an environment counts as built only with both (ready). A
folder already at the name is swapped out in one step (renameat2) and kept aside, never deleted under
a point running from it. Each build step runs in a process group of its own, ended with the step, so
a failed or cancelled build leaves nothing running; its log is a new file, never written through a
planted link. pip needs no GPU: a CUDA environment builds on a login node.

A cached environment is reused where it is ready, except where set-up asks for a check
(`build ENV --check`, check_env): the environment must import its framework's trainer (probe)
and train one iteration of a tiny point on the embedded digits with the real trainer. A passing
check leaves CHECKED.json in the environment; it is repeated only where that stamp is missing or
older than the key's inputs (or than the environment's site-packages folder). An environment that
fails it is renamed `<name>.broken-<host>-<pid>` (a process still running from it keeps its
files) and built again, in one line on stderr saying why.

A site environment is an existing interpreter the config names instead (`envs.site`): it is
checked, not built (site_env).

The conda files workflow/envs/<env>.yaml (for `snakemake --sdm conda`) are generated from the same
pins (conda_yaml), so both ways install the same versions:

    dlbench envs build ENV [--check] [--out resources/envs/ENV.json]     (or python -m dlbench.environments.build ...)
    dlbench envs conda [--check]
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from dlbench.atomic import fsync_dir, write_json, write_text
from dlbench.frameworks import registry
from dlbench.frameworks.pins import (
    EnvError,
    lock_file,
    pins_file,
    split_version,
)
from dlbench.node.locks import LockTimeout, LockUnusable, flocked, heavy_work, node_lock
from dlbench.node.procs import kill_tree, owner_tag, remove_dead_leftovers
from dlbench.paths import CONDA_ENVS, ENVS, ROOT, cache_root

# The conda files' Python: the version dlbench is developed and tested on (pyproject's requires-python).
CONDA_PYTHON = "3.11"
# What the runner itself needs where a job runs in the framework's conda environment (--sdm conda):
# the monitor (psutil, NVML). Their versions are those of envs/base.txt.
RUNNER_PACKAGES = ("psutil", "nvidia-ml-py", "pyyaml")
# A pins file line `# conda: SPEC` asks conda for a package pip cannot give (a compiler, a shared library).
CONDA_LINE = re.compile(r"^#\s*conda:\s*(\S+)")


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


def interpreter() -> tuple[str, str]:
    """(full version, real path) of the base interpreter that builds the environments (the one behind a venv)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return platform.python_version(), os.path.realpath(base)


def debian_packages(env: str) -> list[str]:
    """The Debian packages its framework's build recipe names (envs/<framework>/debian-packages.txt); [] if none."""
    listed = ENVS / registry.framework_of_env(env).name / "debian-packages.txt"
    if not listed.is_file():
        return []
    return [ln.strip() for ln in listed.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


@functools.cache
def debian_versions(names: tuple[str, ...]) -> dict[str, str]:
    """{package: installed version, or "absent"}: one dpkg-query for them all, asked once per process."""
    found: dict[str, list[str]] = {}
    try:
        proc = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${db:Status-Abbrev}\t${Version}\n", *names],
                              capture_output=True, text=True, timeout=60)
        lines = proc.stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):  # no dpkg on this machine: none of them is installed
        lines = []
    for line in lines:
        name, status, version = (line.split("\t") + ["", ""])[:3]
        if status.startswith("ii") and version:  # installed (a removed package keeps its config files: not this)
            found.setdefault(name.split(":")[0], []).append(version)
    return {name: ",".join(sorted(found.get(name, []))) or "absent" for name in names}


def env_key(env: str) -> str:
    version, path = interpreter()
    h = hashlib.sha256(f"python{version}\0{path}\0".encode())
    for file in recipe_files(env):
        if not file.exists():
            raise EnvError(f"{file.relative_to(ROOT)} is missing: the pins of the {env} environment")
        h.update(file.relative_to(ROOT).as_posix().encode())
        h.update(file.read_bytes())
    packages = debian_packages(env)
    if packages:
        versions = debian_versions(tuple(packages))
        h.update("".join(f"deb:{name}={versions[name]}\n" for name in packages).encode())
    return h.hexdigest()[:12]


def env_dir(env: str) -> Path:
    return cache_root() / "envs" / f"{env}-{env_key(env)}"


def _run(cmd: list[str], log, **kw) -> None:
    """Run one build step in a session of its own, so that what it starts ends with it (_end_group)."""
    log.write(f"$ {' '.join(map(str, cmd))}\n")
    log.flush()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, **kw)
    try:
        # Exited but not reaped: its pid, the group's id, cannot be reused while the group is ended.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    finally:
        returncode = _end_group(proc)
    if returncode:
        raise EnvError(f"`{' '.join(map(str, cmd))}` failed (exit {returncode}); see {log.name}")


# How long an interrupted build step has after SIGTERM before its group is killed.
STEP_TERM_S = 5.0


def _end_group(proc: subprocess.Popen) -> int | None:
    """End a build step's process group (a step still running was interrupted: SIGTERM first) and reap it;
    its exit status. A failed compiler or pip leaves children that would outlive the build and its folder."""
    if not _exited(proc.pid):
        kill_tree(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STEP_TERM_S)
        except subprocess.TimeoutExpired:
            pass
    kill_tree(proc.pid, signal.SIGKILL)
    return proc.wait()


def _exited(pid: int) -> bool:
    """Whether a child has exited (a zombie not yet reaped), without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def probe(framework: str, python: str | os.PathLike, timeout_s: float = 600) -> dict:
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


def build(env: str, check: bool = False) -> Path:
    """The environment's folder, building it first if this machine has none for its key.

    check: make sure a cached one still works before it is handed out (check_env), unless its last passing
    check is newer than everything its key is made of (checked); one that fails is moved aside and built
    again. Set-up asks for it; the workflow and the tests do not (a check trains, build() is called often).
    A build is heavy work: no point measures on this node while it runs (dlbench.node.locks.heavy_work); builds of
    other environments run beside it.
    """
    if split_version(env)[0] not in registry.env_names():
        raise EnvError(f"unknown environment {env!r}; known: {', '.join(registry.env_names())}")
    final = env_dir(env)
    if ready(final) and (not check or checked(env, final)):
        return final
    # The heavy side first, then the build lock: a builder waiting for another one holds no lock a point needs.
    with heavy_work(node_lock(), f"building {env}"), flocked(final.with_name(final.name + ".lock")):
        if ready(final):
            if not check or checked(env, final):
                return final
            try:
                _check_and_stamp(env, final)
                return final
            except EnvError as exc:
                aside = _move_aside(final)
                print(f"dlbench: rebuilding the {env} environment: its check failed ({exc}); the old one is "
                      f"{aside.name} (delete it once nothing runs from it)", file=sys.stderr)
        # A failed or killed build leaves its multi-GB folder: remove those of dead builders of this host.
        remove_dead_leftovers(final.parent, f"{final.name}.building-")
        tmp = final.with_name(final.name + f".building-{owner_tag()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            _build_into(env, tmp, final.with_name(final.name + ".build.log"))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)  # the log beside it says what failed
            raise
        _put_in_place(tmp, final)
        if check:  # in place: what the check leaves (Theano's compile cache) names the final path
            try:
                _check_and_stamp(env, final)
            except EnvError as exc:
                aside = _move_aside(final)
                raise EnvError(f"the {env} environment, just built, fails its check ({exc}); it is kept as "
                               f"{aside}, its build log is {final.name}.build.log") from None
        return final


def ready(folder: Path) -> bool:
    """Whether a built environment is whole: READY, and an ENV_INFO.json that parses and names this folder's key
    (a copied or torn one is no environment)."""
    try:
        info = json.loads((folder / "ENV_INFO.json").read_text())
        return (folder / "READY").read_text() == "ok\n" and folder.name.endswith(f"-{info['key']}")
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _put_in_place(new: Path, final: Path) -> None:
    """Rename a finished build onto the environment's name. One that is there already (not whole) is swapped out
    in one step and kept aside, not deleted: a point may still run from it."""
    if not final.exists():
        os.replace(new, final)
    elif _exchange(new, final):
        aside = final.with_name(f"{final.name}.replaced-{owner_tag()}")
        shutil.rmtree(aside, ignore_errors=True)
        os.replace(new, aside)  # `new` now names the old environment
        print(f"dlbench: the {final.name} environment was not whole (READY or ENV_INFO.json); built again, the old "
              f"one is {aside.name} (delete it once nothing runs from it)", file=sys.stderr)
    else:  # no atomic exchange here: the old one renamed aside first, a moment without the name
        _move_aside(final, "replaced")
        os.replace(new, final)
    fsync_dir(final.parent)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE); False where the system cannot."""
    import ctypes

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # a file system or kernel without it
        return False
    raise OSError(err, os.strerror(err), str(b))


def _move_aside(folder: Path, why: str = "broken") -> Path:
    """Rename a broken environment out of the way, not delete it: a point may still be running from it."""
    aside = folder.with_name(f"{folder.name}.{why}-{owner_tag()}")
    shutil.rmtree(aside, ignore_errors=True)
    os.replace(folder, aside)
    return aside


# The stamp of an environment's last passing check (check_env), inside it.
CHECKED = "CHECKED.json"


def _inputs_mtime(env: str, folder: Path) -> float:
    """The newest modification time of what the environment's key is made of (its pins, lock and recipe, the
    base interpreter, its Debian packages' file lists) and of its own site-packages folder (a package added
    or removed there)."""
    paths = [*recipe_files(env), Path(interpreter()[1]), *folder.glob("lib/python*/site-packages")]
    for name in debian_packages(env):
        paths += [*Path("/var/lib/dpkg/info").glob(f"{name}.list"), *Path("/var/lib/dpkg/info").glob(f"{name}:*.list")]
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def checked(env: str, folder: Path) -> bool:
    """Whether the environment's last passing check still stands: its stamp is for this key and newer than
    everything the key is made of."""
    try:
        stamp = json.loads((folder / CHECKED).read_text())
        return stamp["key"] == env_key(env) and float(stamp["checked_at"]) >= _inputs_mtime(env, folder)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _check_and_stamp(env: str, folder: Path) -> None:
    started = time.time()  # an input changed while the check ran makes the stamp stale
    versions = check_env(env, folder)
    write_json(folder / CHECKED, {"env": env, "key": env_key(env), "checked_at": started,
                                  "checked": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
                                  "seconds": round(time.time() - started, 1), "versions": versions})


def check_env(env: str, folder: str | os.PathLike, timeout_s: float = 1200) -> dict:
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
    if "mkl" in (variant_of(env) or "").split("-"):
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


def build_steps(env: str, tmp: Path) -> list[list[str]]:
    """The commands that build `env` into tmp: a venv, exactly the locked packages (hashes checked), the recipe."""
    framework = registry.framework_of_env(env).name
    py = tmp / "bin" / "python"
    # Every package and its hash from the lock: two caches with one key hold the same bytes.
    steps = [[sys.executable, "-m", "venv", str(tmp)],
             [str(py), "-m", "pip", "install", "--no-input", "--require-hashes", "--no-deps", "-r",
              str(lock_file(env))]]
    recipe = ENVS / framework / "build.sh"
    if recipe.exists():  # a variant's build is switched on by its name: build.sh --cuda PREFIX
        variant = variant_of(env)
        steps.append(["bash", str(recipe), *([f"--{variant}"] if variant else []), str(tmp / framework)])
    return steps


def _new_log(path: Path):
    """The build log, a new file: whatever was at its name (a link somebody planted into a shared cache, an old
    log) is removed first, and a link made in between is not followed."""
    path.unlink(missing_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise EnvError(f"{path} appeared while the build started (another process writes there); remove it "
                       "and build again") from None
    return os.fdopen(fd, "w")


def _build_into(env: str, tmp: Path, log_path: Path) -> None:
    """Build `env` in the folder tmp: a venv with exactly the locked packages (hashes checked), then the recipe."""
    framework = registry.framework_of_env(env).name
    started = time.monotonic()
    py = tmp / "bin" / "python"
    with _new_log(log_path) as log:
        for cmd in build_steps(env, tmp):
            _run(cmd, log)
        freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    versions = probe(framework, py)
    if variant_of(env) == "cuda" and not versions.get("cuda_version"):
        raise EnvError(f"the {env} environment got a build without CUDA ({framework} "
                       f"{versions.get('framework_version')}); check the pins of {pins_file(env).name} "
                       f"and {log_path}")
    version, interp = interpreter()
    info = {"env": env, "framework": framework, "key": env_key(env), "python": version, "interpreter": interp,
            "debian_packages": debian_versions(tuple(debian_packages(env))), "versions": versions,
            "packages": freeze.split(), "build_seconds": round(time.monotonic() - started, 1)}
    # Atomic and fsynced, READY last: after a crash the folder holds both, or no READY.
    write_json(tmp / "ENV_INFO.json", info)
    write_text(tmp / "READY", "ok\n")


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


def describe(env: str, folder: Path) -> dict:
    info = json.loads((folder / "ENV_INFO.json").read_text())
    return {"env": env, "framework": registry.framework_of_env(env).name, "kind": "built", "prefix": str(folder),
            "python": str(folder / "bin" / "python"), "key": info["key"], "versions": info.get("versions"),
            "packages": info["packages"]}


@contextlib.contextmanager
def _cancel_ends_the_build():
    """SIGTERM (Snakemake, scancel) and SIGHUP raise SystemExit for the block, so that a cancelled build ends its
    step's process group and removes its folder (build) rather than dying with its children left running."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def cancel(signum, _frame):
        raise SystemExit(128 + signum)

    saved = {sig: signal.signal(sig, cancel) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def provide(env: str, out: str | os.PathLike | None = None, check: bool = False) -> int:
    """Build (or find) an environment and write its description to `out`; 2 with one line on failure.
    check: check a cached one first (build)."""
    try:
        with _cancel_ends_the_build():
            desc = describe(env, build(env, check=check))
    except (EnvError, LockTimeout, LockUnusable) as exc:  # the node's locks: held too long, or unusable here
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
                       f"dlbench.frameworks.trainer --probe {framework}` with PYTHONPATH={ROOT}), or remove it to use "
                       "the built environment") from None
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
    lines = [f"# Generated from envs/{env}.txt by `dlbench envs conda`: edit the pins, not this file.",
             "# Used by `snakemake --sdm conda` (each point's environment; see dlbench/environments/build.py).",
             *comments,
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
    parser = argparse.ArgumentParser(prog="dlbench envs",
                                     description="build, check, list, key and lock the framework environments; "
                                     "write their conda files")
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build (or find) an environment: a framework's (pytorch) or a variant's")
    b.add_argument("env")
    b.add_argument("--out", help="write the environment's description here (JSON)")
    b.add_argument("--check", action="store_true", help="check that a cached one imports and trains one step "
                   "(unless checked since its inputs last changed); move a broken one aside and build it again")
    sub.add_parser("key", help="print an environment's cache key").add_argument("env")
    lst = sub.add_parser("list", help="print the frameworks' CPU environments (what set-up builds), one a line")
    lst.add_argument("--all", action="store_true", help="every environment, the variants too")
    lk = sub.add_parser("lock", help="write envs/<env>.lock (every package, hashed) from envs/<env>.txt; needs PyPI")
    lk.add_argument("envs", nargs="*", help="environments to lock (default: every one, and base)")
    c = sub.add_parser("conda", help="write workflow/envs/*.yaml from the pins")
    c.add_argument("--check", action="store_true", help="only say which differ from the pins (exit 1 if any)")
    args = parser.parse_args(argv)
    known = [*registry.env_names(), *(["base"] if args.cmd == "lock" else [])]
    named = args.envs if args.cmd == "lock" else [args.env] if args.cmd in ("build", "key") else []
    unknown = [env for env in named if env not in known]
    if unknown:  # one line, before any build or resolver run
        print(f"dlbench envs {args.cmd}: no environment {unknown[0]!r}; the environments are {', '.join(known)}",
              file=sys.stderr)
        return 2
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
    return provide(args.env, args.out, check=args.check)


if __name__ == "__main__":
    sys.exit(main())
