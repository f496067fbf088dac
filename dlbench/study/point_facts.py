"""What a point implies besides its own parameters: the record's fields that follow from the point alone.

Computed once per point (the runner, before it launches the trainer) and carried to the record, which only
assembles them: the reading of its preset, its setting id, the initialisation scheme, the network's size and
cost on the point's input, the compile and precision it runs with. None of it enters the point itself, so its
id and digest stay as the sweep made them (dlbench.study.identity).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from dlbench.frameworks import registry
from dlbench.spec import initial_weights, inputs, networks
from dlbench.study import identity, presets


@dataclass(frozen=True)
class PointFacts:
    """The record's fields a point implies (their meaning: dlbench.record.fields)."""

    cross_apply: str | None  # how the preset was applied: None for the framework's own defaults
    setting_id: str  # shared by the point's repeats, on any machine (compare)
    lr_policy: str | None
    lr_policy_json: str
    input_json: str
    init: str  # the scheme the initial weights were drawn from
    validation_json: str | None
    params: int
    flops_per_image_train: int
    compile: str | None  # the point's value, its framework's natural one where it gives none (None: no switch)
    precision: str | None
    memory_format: str | None

    def fields(self) -> dict:
        """The facts as the record's fields."""
        return asdict(self)


def derive(point: dict) -> PointFacts:
    """The facts of `point`, as the sweep expanded it."""
    shape = tuple(point.get("input_shape") or inputs.model_input_shape(point))
    framework = registry.get(point["framework"])
    policy = point.get("lr_policy", {})
    return PointFacts(
        cross_apply=presets.reading(point),
        setting_id=identity.setting_id(point),
        lr_policy=policy.get("name"),
        lr_policy_json=json.dumps(policy, sort_keys=True),
        input_json=json.dumps(point.get("input", {}), sort_keys=True),
        init=initial_weights.describe(point.get("init")),
        validation_json=json.dumps(point["validation"], sort_keys=True) if point.get("validation") else None,
        params=networks.param_count(point["layers"], shape),
        flops_per_image_train=networks.flops_per_image(point["layers"], shape)["train"],
        compile=framework.in_effect("compile", point),
        precision=framework.in_effect("precision", point),
        memory_format=framework.in_effect("memory_format", point),
    )
