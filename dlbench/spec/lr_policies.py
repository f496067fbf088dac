"""Learning-rate policies, with Caffe's definitions, as a function of the iteration (0-based).

Every adapter takes its learning rate from here (or, for Caffe, writes the same
policy into the solver), so the same point means the same schedule everywhere.
"""

from __future__ import annotations

import math


def steps_per_epoch(train_size: int, batch_size: int) -> int:
    return max(1, math.ceil(train_size / batch_size))


def normalise(policy: dict, train_size: int, batch_size: int, total_iterations: int | None = None) -> dict:
    """Turn epoch-based settings into iterations, so the policy needs no dataset size later.

    `step_epochs` counts an epoch as train_size / batch_size batches, a fraction, and rounds the
    product down, as TensorFlow's CIFAR-10 tutorial does: int(50000 / 128 x 350) = 136,718 steps
    (whole batches per epoch would give 391 x 350 = 136,850). `warmup_epochs` likewise; `cosine` without
    `total_iterations` decays over the point's own length (total_iterations here), whatever its scale.
    """
    policy = dict(policy)
    if policy.get("name") == "step" and "step_epochs" in policy:
        policy["step_iterations"] = max(1, int(train_size / batch_size * policy.pop("step_epochs")))
    if policy.get("name") == "cosine":
        if "warmup_epochs" in policy:
            policy["warmup_iterations"] = int(train_size / batch_size * policy.pop("warmup_epochs"))
        if "total_iterations" not in policy:
            if total_iterations is None:
                raise ValueError("a cosine policy needs the training length (total_iterations)")
            policy["total_iterations"] = int(total_iterations)
        # a warm-up longer than the run (a short, scaled run) is cut to the run's first half
        policy["warmup_iterations"] = min(int(policy.get("warmup_iterations", 0)), policy["total_iterations"] // 2)
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
    if name == "cosine":
        return cosine(policy, base_lr, it)
    raise ValueError(f"unknown learning-rate policy {name!r}")


def cosine(policy: dict, base_lr: float, it: int) -> float:
    """Linear warm-up, then cosine decay (Loshchilov and Hutter 2017, SGDR without restarts), as timm's
    CosineLRScheduler steps it for DeiT (Touvron et al. 2021): over the first W = warmup_iterations iterations the
    rate climbs linearly from warmup_lr towards the base, lr(it) = warmup_lr + (base - warmup_lr) * it / W; then
    over the remaining iterations to total_iterations T it falls from the base to min_lr along half a cosine,
    lr(it) = min_lr + (base - min_lr) * (1 + cos(pi * (it - W) / (T - W))) / 2 (the base at it = W; min_lr at T,
    and from there on)."""
    warmup, total = int(policy.get("warmup_iterations", 0)), int(policy["total_iterations"])
    low, start = float(policy.get("min_lr", 0.0)), float(policy.get("warmup_lr", 0.0))
    if it < warmup:
        return start + (base_lr - start) * it / warmup
    progress = min(1.0, (it - warmup) / max(1, total - warmup))
    return low + (base_lr - low) * 0.5 * (1.0 + math.cos(math.pi * progress))
