"""Learning-rate policies with Caffe's definitions, and warm-up + cosine (DeiT's, timm's scheduler)."""

import math

import pytest

from dlbench.spec import lr_policies


def test_fixed_inv_step_multistep_decay():
    assert lr_policies.rate({"name": "fixed"}, 0.1, 500) == 0.1
    inv = {"name": "inv", "gamma": 1e-4, "power": 0.75}
    assert lr_policies.rate(inv, 0.01, 10000) == pytest.approx(0.01 * 2 ** -0.75)
    assert lr_policies.rate({"name": "step", "factor": 0.1, "step_iterations": 100}, 1.0, 250) == pytest.approx(0.01)
    ms = {"name": "multistep", "factor": 0.1, "at_iterations": [4000]}
    assert lr_policies.rate(ms, 0.001, 3999) == 0.001 and lr_policies.rate(ms, 0.001, 4000) == pytest.approx(1e-4)
    assert lr_policies.rate({"name": "decay", "decay": 0.5}, 1.0, 2) == pytest.approx(0.5)


def test_epoch_based_step_becomes_iterations():
    policy = lr_policies.normalise({"name": "step", "factor": 0.1, "step_epochs": 2}, train_size=1000, batch_size=100)
    assert policy == {"name": "step", "factor": 0.1, "step_iterations": 20}


def test_step_epochs_counts_fractional_batches_as_tensorflows_cifar10_tutorial():
    # cifar10.py: decay_steps = int(50000 / 128 * 350), not 391 whole batches x 350
    step = {"name": "step", "factor": 0.1, "step_epochs": 350}
    policy = lr_policies.normalise(step, train_size=50000, batch_size=128)
    assert policy["step_iterations"] == 136718


def test_warmup_then_cosine_by_hand():
    policy = lr_policies.normalise({"name": "cosine", "warmup_epochs": 2, "warmup_lr": 0.0, "min_lr": 0.1},
                                   train_size=1000, batch_size=100, total_iterations=120)
    assert policy == {"name": "cosine", "warmup_iterations": 20, "total_iterations": 120, "warmup_lr": 0.0,
                      "min_lr": 0.1}
    rate = [lr_policies.rate(policy, 1.1, it) for it in (0, 10, 20, 70, 120, 500)]
    assert rate == pytest.approx([0.0, 0.55, 1.1, 0.1 + 1.0 * 0.5, 0.1, 0.1])
    # a quarter of the way through the cosine: min + (base - min) (1 + cos(pi / 4)) / 2
    assert lr_policies.rate(policy, 1.1, 45) == pytest.approx(0.1 + 0.5 * (1 + math.sqrt(0.5)))
    # a warm-up longer than a short (scaled) run is cut to half of it; the decay spans the point's own length
    short = lr_policies.normalise({"name": "cosine", "warmup_epochs": 5}, 60000, 128, total_iterations=300)
    assert (short["warmup_iterations"], short["total_iterations"]) == (150, 300)
    with pytest.raises(ValueError, match="training length"):
        lr_policies.normalise({"name": "cosine"}, 1000, 100)
