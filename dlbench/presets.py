"""Whose default settings a point starts from: the study's presets and custom ones."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import yaml

from dlbench import models

PRESETS_PATH = Path(__file__).resolve().parent / "presets.yaml"

# The study ran Torch7; dlbench runs its successor with Torch's defaults.
OWN_PRESET = {"pytorch": "torch", "tensorflow": "tensorflow", "caffe": "caffe", "theano": "theano"}

# Dataset -> the family whose example scripts set the defaults.
FAMILY = {"digits": "mnist", "fashion_mnist": "mnist", "mnist": "mnist", "cifar10": "cifar10"}


@functools.cache
def study_presets() -> dict:
    with open(PRESETS_PATH) as fh:
        return yaml.safe_load(fh)


def preset_names() -> set[str]:
    return {name for family in study_presets().values() for name in family}


def check_network(where: str, network: str) -> None:
    from dlbench.config import ConfigError

    if network not in models.NETWORKS:
        raise ConfigError(f"presets.{where}.network: unknown network {network!r}; "
                          f"known: {', '.join(sorted(models.NETWORKS))}")


def resolve(preset: str, framework: str, dataset: str, custom: dict | None = None) -> dict:
    """The full settings for one (preset, framework, dataset); `own` picks the framework's own."""
    custom = custom or {}
    if preset in custom:
        return copy.deepcopy(custom[preset])
    name = OWN_PRESET[framework] if preset == "own" else preset
    return copy.deepcopy(study_presets()[FAMILY[dataset]][name])
