"""Which environment each point of a study runs in.

A point runs in its framework's built environment (the variant its device and the config's opt-ins choose, at
the study's framework version: dlbench.environments.versions), or in the site interpreter the config names
instead (`envs.site`): point_env. choose works out a study's environments once, when the workflow reads the
study: the framework versions' pins written and locked (the main process only; a dry run locks nothing and
says what its run will lock), each built environment's key, each site interpreter probed
(dlbench.environments.site), and one Environment per environment, shared by its points.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Mapping
from contextlib import AbstractContextManager as ContextManager
from dataclasses import dataclass

from dlbench.environments import key, pins, site, versions
from dlbench.environments.environment import Environment
from dlbench.frameworks import registry

# The key of a framework version's environment that a dry run has not locked (its key is its lock's digest).
NOT_LOCKED = "not locked yet"


def site_pythons(cfg: dict, framework: str) -> dict[str, str]:
    """The site interpreters the config gives a framework, by variant (`cpu` for its CPU environment)."""
    given = cfg.get("envs", {}).get("site", {}).get(framework)
    if given is None:
        return {}
    if isinstance(given, str):  # one interpreter for every point of the framework
        given = {registry.PLAIN_VARIANT: given, **{v: given for v in registry.DEVICE_VARIANTS.values()}}
    return {variant: os.path.expanduser(path) for variant, path in given.items()}


def point_env(cfg: dict, point: dict) -> tuple[str, str | None]:
    """(environment name, site interpreter or None) of a point under a study's config."""
    fw = registry.get(point["framework"])
    sites = site_pythons(cfg, fw.name)
    opted = {env.split("-", 1)[1] for env in cfg.get("envs", {}).get("opt_in", []) if env.startswith(fw.name + "-")}
    env = fw.env_name(point, tuple(opted | (set(sites) - {registry.PLAIN_VARIANT})))
    variant = env[len(fw.name) + 1:] or registry.PLAIN_VARIANT
    if variant in sites:
        return env, sites[variant]
    return versions.env_of(env, versions.version_of(cfg, point)), None


@dataclass(frozen=True)
class Chosen:
    """A study's environments: each point's, the framework versions' among them, and each built one's key."""

    of_point: dict[Hashable, Environment]
    version_envs: list[str]  # the environments of framework versions (`pytorch@2.12.0`), which the rules build too
    keys: dict[str, str]  # built environment -> its key (NOT_LOCKED: a dry run's version not locked yet)


def choose(cfg: dict, points: Mapping[Hashable, dict], *, main: bool, dryrun: bool, use_conda: bool,
           say: Callable[[str], None], heavy: Callable[[str], ContextManager]) -> Chosen:
    """Each point's Environment under the study (see the module's docstring); EnvError, one line, where a version
    does not resolve or a site interpreter does not work. main: the main Snakemake (not a job's own); use_conda:
    --sdm conda; say: its lines; heavy(what): its heavy-work lock, held while pip's resolver or a site
    interpreter works."""
    named = {k: point_env(cfg, p) for k, p in points.items()}
    built = {env for env, python in named.values() if not python}
    version_envs = sorted(env for env in built if pins.split_version(env)[1])
    unlocked = []
    if main:
        # Pins written and, the first time, locked (the package index answers) before any job; a version
        # that does not resolve stops the run here. A dry run asks no index: it names what the run will lock.
        unlocked = [env for env in version_envs if not versions.prepare(env, locking=not dryrun, heavy=heavy)]
        if unlocked:
            say("dlbench: not locked yet, locked by the run before any job (it asks the package index): "
                + ", ".join(unlocked))
    keys = {env: NOT_LOCKED if env in unlocked else key.env_key(env) for env in built}  # read once, not per point
    wanted = {}
    for k, (env, python) in named.items():
        if python:
            wanted.setdefault((env, python), points[k]["framework"])
    sites = site.describe_all(wanted, main=main, dryrun=dryrun, say=say, heavy=heavy)
    environments = {env: Environment.built(env, keys[env], conda=use_conda) for env in built}
    of_point = {k: sites[(env, python)] if python else environments[env] for k, (env, python) in named.items()}
    return Chosen(of_point, version_envs, keys)
