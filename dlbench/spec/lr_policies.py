"""Learning-rate policies, with Caffe's definitions, as a function of the iteration (0-based).

Every adapter takes its learning rate from here (or, for Caffe, writes the same
policy into the solver), so the same point means the same schedule everywhere.
"""

from __future__ import annotations

import math


def steps_per_epoch(train_size: int, batch_size: int) -> int:
    return max(1, math.ceil(train_size / batch_size))


def normalise(policy: dict, train_size: int, batch_size: int) -> dict:
    """Turn epoch-based settings into iterations, so the policy needs no dataset size later.

    `step_epochs` counts an epoch as train_size / batch_size batches, a fraction, and rounds the
    product down, as TensorFlow's CIFAR-10 tutorial does: int(50000 / 128 x 350) = 136,718 steps
    (whole batches per epoch would give 391 x 350 = 136,850).
    """
    policy = dict(policy)
    if policy.get("name") == "step" and "step_epochs" in policy:
        policy["step_iterations"] = max(1, int(train_size / batch_size * policy.pop("step_epochs")))
    return policy


def rate(policy: dict, base_lr: float, it: int) -> float:
    name = policy.get("name", "fixed")
    if name == "fixed":
        return base_lr
    if name == "inv":
        return base_lr * (1.0 + policy["gamma"] * it) ** (-policy["power"])
    if name == "step":
        return base_lr * policy["factor"] ** (it // policy["step_iterations"])
    if name == "multistep":
        passed = sum(1 for at in policy["at_iterations"] if it >= at)
        return base_lr * policy["factor"] ** passed
    if name == "decay":  # Torch optim.sgd learningRateDecay
        return base_lr / (1.0 + it * policy["decay"])
    raise ValueError(f"unknown learning-rate policy {name!r}")
