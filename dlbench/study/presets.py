"""Whose default settings a point starts from: the study's presets and custom ones."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from dlbench.datasets import catalog
from dlbench.frameworks import registry

PRESETS_PATH = Path(__file__).resolve().parent / "presets.yaml"


@functools.cache
def study_presets() -> dict:
    with open(PRESETS_PATH) as fh:
        return yaml.safe_load(fh)


def preset_names() -> set[str]:
    return {name for family in study_presets().values() for name in family}


# How a preset other than a framework's own is applied to it (config `cross_apply`):
#   settings: only the hyper-parameters below; the framework keeps its own network, input handling,
#             initialisation and every other key of its own preset (the study's reading);
#   preset:   the whole preset, network and input handling included.
READINGS = ("settings", "preset")
HYPER_PARAMETERS = ("optimizer", "momentum", "weight_decay", "learning_rate", "lr_policy", "batch_size",
                    "test_batch_size", "epochs", "iterations", "test_interval")


def own_name(framework: str) -> str:
    return registry.get(framework).own_preset


def is_own(preset: str, framework: str) -> bool:
    """Whether `preset` names the framework's own defaults (`own`, or its own preset by name)."""
    return preset in ("own", own_name(framework))


def reading(point: dict) -> str | None:
    """How the point's preset was applied: None for the framework's own defaults, else `settings` or `preset`."""
    if is_own(point["preset"], point["framework"]):
        return None
    return point.get("cross_apply", "preset")


def missing(preset: str, framework: str, dataset: str, custom: dict, cross_apply: str = "preset") -> str | None:
    """Why (preset, framework, dataset) has no settings (one line), or None where it has them."""
    if preset in custom:
        return None
    family = catalog.family(dataset)
    needed = [own_name(framework) if preset == "own" else preset]
    if cross_apply == "settings" and not is_own(preset, framework):
        needed.append(own_name(framework))  # the settings reading keeps the framework's own network
    for name in needed:
        if name not in study_presets()[family]:
            whose = f"{framework}'s own preset ({name})" if name == own_name(framework) else f"preset {name!r}"
            return (f"{whose} has no settings for {dataset} (the {family} family of dlbench/study/presets.yaml has "
                    f"none); leave {framework} out of the {dataset} points, or give a preset it has")
    return None


def _named(preset: str, framework: str, dataset: str, custom: dict) -> dict:
    if preset in custom:
        return copy.deepcopy(custom[preset])
    name = own_name(framework) if preset == "own" else preset
    return copy.deepcopy(study_presets()[catalog.family(dataset)][name])


def resolve(preset: str, framework: str, dataset: str, custom: dict | None = None,
            cross_apply: str = "preset") -> dict:
    """The full settings for one (preset, framework, dataset); `own` picks the framework's own.

    cross_apply: "preset" takes the named preset whole; "settings" takes only its HYPER_PARAMETERS over
    the framework's own preset (a key the named preset lacks, such as test_interval, is then unset).
    """
    if cross_apply not in READINGS:
        raise ValueError(f"cross_apply: {cross_apply!r} is not one of {', '.join(READINGS)}")
    custom = custom or {}
    named = _named(preset, framework, dataset, custom)
    if cross_apply == "preset" or is_own(preset, framework):
        return named
    own = _named("own", framework, dataset, {})
    settings = {k: v for k, v in own.items() if k not in HYPER_PARAMETERS}
    settings.update({k: v for k, v in named.items() if k in HYPER_PARAMETERS})
    return settings
