"""Sweep expansion: the product of the lists, presets filled in, stable path-safe ids."""

import re

from dlbench import config, sweep

BASE = {"datasets": ["digits"], "frameworks": ["pytorch", "tensorflow"], "preset": ["caffe"],
        "sweep": {"batch_size": [32, 64], "learning_rate": [0.01, 0.1], "epochs": [2]}}


def expand(cfg):
    return sweep.expand(config.validate(cfg))


def test_points_are_the_product_of_the_lists():
    points = expand(BASE)
    assert len(points) == 2 * 2 * 2
    combos = {(p["framework"], p["batch_size"], p["learning_rate"]) for p in points}
    assert len(combos) == 8
    assert all(p["epochs"] == 2 and p["iterations"] is None for p in points)


def test_axes_left_out_take_the_preset_values():
    (p,) = expand({"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"]})
    assert (p["network"], p["batch_size"], p["learning_rate"], p["iterations"]) == ("lenet", 64, 0.01, 10000)
    assert p["lr_policy"] == {"name": "inv", "gamma": 1e-4, "power": 0.75}
    assert (p["momentum"], p["weight_decay"], p["optimizer"]) == (0.9, 5e-4, "sgd")
    assert (p["device"], p["threads"], p["library"], p["repeat"]) == ("cpu", 1, "default", 0)


def test_own_preset_gives_each_framework_its_defaults():
    points = expand({"datasets": ["digits"], "frameworks": ["pytorch", "tensorflow", "theano", "caffe"],
                     "preset": ["own"]})
    nets = {p["framework"]: p["network"] for p in points}
    assert nets == {"pytorch": "torch_mnist", "tensorflow": "mnist_deep", "theano": "lenet5_tanh", "caffe": "lenet"}
    inits = {p["framework"]: p["init"]["name"] for p in points}
    assert inits == {"pytorch": "torch", "tensorflow": "truncated_normal", "theano": "theano", "caffe": "xavier"}
    shuffled = {p["framework"]: p["shuffle"] for p in points}
    assert shuffled == {"pytorch": False, "tensorflow": True, "theano": False, "caffe": False}
    theano = next(p for p in points if p["framework"] == "theano")
    assert theano["validation"]["patience"] == 10000 and theano["ema_decay"] is None


def test_a_cross_applied_preset_brings_its_network_initialiser_and_procedure():
    points = expand({"datasets": ["cifar10"], "frameworks": ["pytorch", "caffe"], "preset": ["tensorflow", "theano"]})
    for p in points:
        if p["preset"] == "tensorflow":
            assert p["network"] == "tf_cifar10" and p["ema_decay"] == 0.9999 and p["init"]["name"] == "truncated_normal"
        else:
            assert p["network"] == "reslab_cifar10" and p["init"] == {"name": "gaussian", "std": 0.1, "bias_std": 0.1}
            assert (p["momentum"], p["learning_rate"], p["batch_size"], p["epochs"]) == (0.9, 0.01, 50, 50)


def test_torch_cifar10_decays_its_rate_as_its_script_and_the_paper_runs_torch_on_everything():
    (p,) = expand({"datasets": ["cifar10"], "frameworks": ["pytorch"], "preset": ["own"]})
    assert p["lr_policy"] == {"name": "decay", "decay": 5e-7} and p["input"]["train_samples"] == 2000
    (full,) = expand({"datasets": ["cifar10"], "frameworks": ["pytorch"], "preset": ["own"], "full": True})
    assert "train_samples" not in full["input"] and "test_samples" not in full["input"]
    import yaml

    from dlbench.paths import ROOT

    assert yaml.safe_load((ROOT / "config/paper.yaml").read_text())["full"] is True


def test_ids_are_stable_and_path_safe():
    a, b = expand(BASE), expand(BASE)
    assert [p["id"] for p in a] == [p["id"] for p in b]
    assert len({p["id"] for p in a}) == len(a)
    for p in a:
        assert re.fullmatch(r"[A-Za-z0-9._-]+", p["id"])
    # known value: the same parameters give the same id on every machine
    assert a[0]["id"] == sweep.point_id({k: v for k, v in a[0].items() if k != "id"})


def test_changing_one_value_changes_only_the_points_that_use_it():
    before = {p["id"] for p in expand(BASE)}
    changed = dict(BASE, sweep={**BASE["sweep"], "learning_rate": [0.01, 0.2]})
    after = {p["id"] for p in expand(changed)}
    assert len(before & after) == 4 and len(after - before) == 4


def test_repeats_get_their_own_seeds():
    points = expand(dict(BASE, repeats=3, frameworks=["pytorch"], sweep={"batch_size": [32]}))
    assert [p["repeat"] for p in points] == [0, 1, 2]
    assert [p["seed"] for p in points] == [1, 2, 3]
    assert len({p["id"] for p in points}) == 3


def test_scale_shrinks_lengths_and_keeps_the_points():
    full = expand(dict(BASE, sweep={"iterations": [1000]}))
    small = expand(dict(BASE, sweep={"iterations": [1000]}, scale=0.01))
    assert [p["iterations"] for p in small] == [10] * len(full)
    assert len(small) == len(full)


def test_sweep_replaces_the_preset_length_kind():
    (p,) = expand({"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"],
                   "sweep": {"epochs": [3]}})
    assert p["epochs"] == 3 and p["iterations"] is None
