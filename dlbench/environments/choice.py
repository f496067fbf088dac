"""Which environment a study's point runs in: its framework's built one (the variant its device and the config's
opt-ins choose, at the study's version: dlbench.study.versions), or the site interpreter the config names instead
(`envs.site`). Building and checking environments is dlbench.environments.build."""

from __future__ import annotations

import os

from dlbench.frameworks import registry
from dlbench.study import versions


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
