"""Learning-rate policies with Caffe's definitions."""

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
