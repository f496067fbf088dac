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


def resolve(preset: str, framework: str, dataset: str, custom: dict | None = None) -> dict:
    """The full settings for one (preset, framework, dataset); `own` picks the framework's own."""
    custom = custom or {}
    if preset in custom:
        return copy.deepcopy(custom[preset])
    name = registry.get(framework).own_preset if preset == "own" else preset
    return copy.deepcopy(study_presets()[catalog.family(dataset)][name])
