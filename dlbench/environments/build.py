"""An environment built on demand from its pins, cached outside the clone, and swapped into place whole.

An environment's folder is named by its key (dlbench.environments.key). A build happens in a temporary folder
renamed into place at the end, under a lock, so an interrupted build never looks finished; READY and
ENV_INFO.json are written atomically and fsynced, and an environment counts as built only with both (ready). A
folder already at the name is swapped out in one step (renameat2) and kept aside, never deleted under a point
running from it. Each build step runs in a process group of its own with a time limit, ended with the step
(dlbench.environments.steps), so a failed, cancelled or hung build leaves nothing running; its log is a new
file, never written through a planted link. pip needs no GPU: a CUDA environment builds on a login node.

Where set-up asks for a check (`dlbench envs build ENV --check`), a cached environment is checked before it is
handed out (dlbench.environments.check); one that fails it is renamed `<name>.broken-<host>-<pid>` (a process
still running from it keeps its files) and built again, in one line on stderr saying why.

Under `snakemake --sdm conda` each point's environment is instead its conda file, generated from the same pins
(dlbench.environments.conda); a site environment (`envs.site`) is checked, not built (dlbench.environments.site).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path

from dlbench.atomic import fsync_dir, write_json, write_text
from dlbench.environments import check, key, pins, steps
from dlbench.environments.environment import Environment
from dlbench.environments.errors import EnvError
from dlbench.frameworks import registry
from dlbench.node.locks import LockTimeout, LockUnusable, flocked, heavy_work, node_lock
from dlbench.node.procs import owner_tag, remove_dead_leftovers


def build(env: str, check_first: bool = False) -> Path:
    """The environment's folder, building it first if this machine has none for its key.

    check_first: make sure a cached one still works before it is handed out (check.check_env), unless its last
    passing check is newer than everything its key is made of (check.checked); one that fails is moved aside and
    built again. Set-up asks for it; the workflow and the tests do not (a check trains, build() is called often).
    A build is heavy work: no point measures on this node while it runs (dlbench.node.locks.heavy_work); builds of
    other environments run beside it.
    """
    if pins.split_version(env)[0] not in registry.env_names():
        raise EnvError(f"unknown environment {env!r}; known: {', '.join(registry.env_names())}")
    final = key.env_dir(env)
    if ready(final) and (not check_first or check.checked(env, final)):
        return final
    # The heavy side first, then the build lock: a builder waiting for another one holds no lock a point needs.
    with heavy_work(node_lock(), f"building {env}"), _build_lock(env, final):
        return _build_locked(env, final, check_first)


@contextlib.contextmanager
def _build_lock(env: str, final: Path):
    """The lock of one environment's builders, waited for as long as a whole build may take (steps.build_limit)."""
    path, limit = final.with_name(final.name + ".lock"), steps.build_limit()
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(flocked(path, timeout_s=limit))
        except LockTimeout:
            raise EnvError(f"another process has held {path} for {limit:g} s, building the {env} environment, "
                           f"longer than a whole build may take: it hangs; end it (its log: {final.name}.build.log) "
                           f"and build again, or allow more time with {steps.LIMIT_ENV}=SECONDS") from None
        yield


def _build_locked(env: str, final: Path, check_first: bool) -> Path:
    if ready(final):
        if not check_first or check.checked(env, final):
            return final
        try:
            check.check_and_stamp(env, final)
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
    if check_first:  # in place: what the check leaves (Theano's compile cache) names the final path
        try:
            check.check_and_stamp(env, final)
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


def build_steps(env: str, tmp: Path) -> list[tuple[str, list[str]]]:
    """The steps that build `env` into tmp, each (its kind, for its time limit: steps.LIMITS_S; its command): a venv,
    exactly the locked packages (hashes checked), the recipe."""
    framework = registry.framework_of_env(env).name
    py = tmp / "bin" / "python"
    # Every package and its hash from the lock: two caches with one key hold the same bytes.
    todo = [("venv", [sys.executable, "-m", "venv", str(tmp)]),
            ("install", [str(py), "-m", "pip", "install", "--no-input", "--require-hashes", "--no-deps", "-r",
                         str(pins.lock_file(env))])]
    recipe = pins.recipe_dir(env) / "build.sh"
    if recipe.exists():  # a variant's build is switched on by its name: build.sh --cuda PREFIX
        variant = pins.variant_of(env)
        todo.append(("recipe", ["bash", str(recipe), *([f"--{variant}"] if variant else []), str(tmp / framework)]))
    return todo


def _new_log(path: Path):
    """The build log, a new file: whatever was at its name (a link somebody planted into a shared cache, an old
    log) is removed first, and a link made in between is not followed."""
    path.unlink(missing_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise EnvError(f"{path} appeared while the build started (another process writes there); remove it "
                       "and build again") from None
    log = os.fdopen(fd, "w")
    log.buffer.raw.name = str(path)  # its name in the steps' messages (see ...): the path, not the descriptor
    return log


def _build_into(env: str, tmp: Path, log_path: Path) -> None:
    """Build `env` in the folder tmp: a venv with exactly the locked packages (hashes checked), then the recipe."""
    framework = registry.framework_of_env(env).name
    started = time.monotonic()
    py = tmp / "bin" / "python"
    with _new_log(log_path) as log:
        for kind, cmd in build_steps(env, tmp):
            steps.run(cmd, log, kind)
    freeze = steps.limited([str(py), "-m", "pip", "freeze"], "freeze", f"`pip freeze` in the new {env} environment")
    versions = check.probe(framework, py)
    if pins.variant_of(env) == "cuda" and not versions.get("cuda_version"):
        raise EnvError(f"the {env} environment got a build without CUDA ({framework} "
                       f"{versions.get('framework_version')}); check the pins of {pins.pins_file(env).name} "
                       f"and {log_path}")
    version, interp = key.interpreter()
    info = {"env": env, "framework": framework, "key": key.env_key(env), "python": version, "interpreter": interp,
            "debian_packages": key.debian_versions(tuple(key.debian_packages(env))), "versions": versions,
            "packages": freeze.stdout.split(), "build_seconds": round(time.monotonic() - started, 1)}
    # Atomic and fsynced, READY last: after a crash the folder holds both, or no READY.
    write_json(tmp / "ENV_INFO.json", info)
    write_text(tmp / "READY", "ok\n")


def describe(env: str, folder: Path) -> dict:
    """A built environment's description (the framework_env rule's output, resources/envs/<env>.json): what
    dlbench.environments.environment.Environment.read reads, with its prefix and packages for the reader."""
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


def environment(env: str) -> Environment:
    """The built environment as a point runs in it, building it first where this machine has none for its key."""
    folder = build(env)
    return Environment.built(env, json.loads((folder / "ENV_INFO.json").read_text())["key"])


def provide(env: str, out: str | os.PathLike | None = None, check_first: bool = False) -> int:
    """Build (or find) an environment and write its description to `out`; 2 with one line on failure.
    check_first: check a cached one first (build)."""
    try:
        with _cancel_ends_the_build():
            desc = describe(env, build(env, check_first=check_first))
    except (EnvError, LockTimeout, LockUnusable) as exc:  # the node's locks: held too long, or unusable here
        print(f"dlbench: {env} environment: {exc}", file=sys.stderr)
        return 2
    if out:
        write_json(out, desc)
    print(desc["prefix"])
    return 0
