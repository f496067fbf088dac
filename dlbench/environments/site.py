"""Site environments: interpreters the config names instead of built environments (`envs.site`), an HPC site's
own framework build. Each is probed, never built: it must import its framework, numpy and dlbench's trainer, and
the versions it reports key its points, so that another site build reruns them.

Who probes: the main Snakemake probes each interpreter once, before any job (describe_all), and hands what it
found to the jobs it starts (SITE_ENVS_VAR, which they inherit); a job's own Snakemake probes nothing. A dry run
runs no interpreter of the user's (running one runs its code: its sitecustomize, its framework's import): it
plans with what the last real run probed of the same interpreter file, kept beside Snakemake's own state
(remember, recall).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path

from dlbench import atomic
from dlbench.environments import check
from dlbench.environments.environment import Environment
from dlbench.environments.errors import EnvError
from dlbench.paths import ROOT

# The site environments the main process probed, as JSON, for its jobs' own Snakemake.
SITE_ENVS_VAR = "DLBENCH_SITE_ENVS"
# Beside Snakemake's own state in the working directory: a dry run reads it from where the real run wrote it.
STORE = Path(".snakemake") / "dlbench-site-probes.json"

Wanted = dict[tuple[str, str], str]  # (environment, interpreter) -> its framework


def probed(framework: str, env: str, python: str) -> Environment:
    """A site environment with the versions its interpreter reports; EnvError with the fix."""
    try:
        versions = check.probe(framework, python)
    except EnvError as exc:
        raise EnvError(f"site environment of {framework} for {env} points: {exc}; fix: point envs.site.{framework} "
                       f"at a Python that imports {framework}, numpy and dlbench's trainer (try `{python} -m "
                       f"dlbench.frameworks.trainer --probe {framework}` with PYTHONPATH={ROOT}), or remove it to use "
                       "the built environment") from None
    return Environment.site(env, framework, python, versions)


def describe_all(wanted: Wanted, *, main: bool, dryrun: bool, say: Callable[[str], None],
                 heavy: Callable[[str], ContextManager]) -> dict[tuple[str, str], Environment]:
    """(environment, interpreter) -> its Environment, for each site interpreter a study's points run in: probed
    once by the main process (heavy: its heavy-work lock, held while the interpreters import their frameworks),
    inherited by a job's own Snakemake, recalled by a dry run (see the module's docstring)."""
    if not main:
        known = {(d["env"], d["python"]): d for d in json.loads(os.environ.get(SITE_ENVS_VAR) or "[]")}
        return {(env, python): Environment.of_params(known[(env, python)]) if (env, python) in known
                else Environment.site(env, framework, python) for (env, python), framework in wanted.items()}
    if dryrun:
        return _recalled(wanted, say)
    out = {}
    with heavy("probing the site interpreters") if wanted else contextlib.nullcontext():
        for (env, python), framework in wanted.items():
            out[(env, python)] = probed(framework, env, python)
    if out:
        remember(out.values())
    return out


def handed_on(found: Iterable[Environment]) -> str:
    """What the main process's jobs inherit in SITE_ENVS_VAR: the site environments it probed."""
    return json.dumps([env.params() for env in found])


def _recalled(wanted: Wanted, say: Callable[[str], None]) -> dict[tuple[str, str], Environment]:
    """A dry run's site environments: what the last real run probed of the same interpreter file (recall), else
    one without versions, said in one line (the dry run then plans those points as changed: the real run probes
    them and knows)."""
    known = recall()
    out, unknown = {}, []
    for (env, python), framework in wanted.items():
        found = known.get((env, python))
        if found is None:
            unknown.append(python)
            found = Environment.site(env, framework, python)
        out[(env, python)] = found
    if unknown:
        say("dlbench: dry run: not probing the site interpreters (running them runs their code), and no "
            "earlier run probed " + ", ".join(sorted(set(unknown))) + "; the run itself probes them")
    return out


def _identity(python: str) -> list | None:
    """The interpreter file as it is now (its real path and a digest of its bytes): another file, or the same
    one rebuilt or rewritten to run another build, is probed again; the same bytes written again are not."""
    try:
        real = os.path.realpath(python)
        digest = hashlib.sha256(Path(real).read_bytes()).hexdigest()
    except OSError:
        return None
    return [real, digest]


def remember(found: Iterable[Environment], store: Path = STORE) -> None:
    """Keep the probed environments, each with its interpreter's identity (atomically: a dry run beside a
    starting run reads the old file or the new one)."""
    kept = [{**env.params(), "identity": _identity(env.python)} for env in found]
    try:
        store.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(store, json.dumps(kept, indent=1))
    except OSError:  # a read-only working directory: the next dry run probes nothing and says so
        pass


def recall(store: Path = STORE) -> dict[tuple[str, str], Environment]:
    """(environment, interpreter) -> the environment the last run probed, where the interpreter is the same
    file still; unreadable or missing: nothing."""
    try:
        kept = json.loads(store.read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for d in kept if isinstance(kept, list) else []:
        if isinstance(d, dict) and d.get("identity") and d["identity"] == _identity(d.get("python", "")):
            try:
                out[(d["env"], d["python"])] = Environment.of_params({k: v for k, v in d.items() if k != "identity"})
            except (KeyError, TypeError):  # not a description this version wrote: probed again by the run
                continue
    return out
