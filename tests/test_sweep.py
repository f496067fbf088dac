"""Sweep expansion: the product of the lists, presets filled in, stable path-safe ids."""

import re

from dlbench.paths import ROOT
from dlbench.run import measure
from dlbench.study import config, presets, sweep

PAPER = ROOT / "config" / "paper.yaml"

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
    # known value: these parameters have this id on every machine (the slug, then the first 10 hex digits of the
    # SHA-256 of their compact, key-sorted JSON); another seed is another id with the same slug
    params = {"preset": "caffe", "network": "lenet", "batch_size": 32, "learning_rate": 0.01, "epochs": 2,
              "device": "cpu", "threads": 1, "library": "default", "repeat": 0, "framework": "pytorch",
              "dataset": "digits", "seed": 1}
    assert sweep.point_id(params) == "caffe-lenet-bs32-lr0.01-e2-cpu-t1-r0-1e781201bd"
    assert sweep.point_id({**params, "seed": 2}) == "caffe-lenet-bs32-lr0.01-e2-cpu-t1-r0-b308838fc1"
    assert sweep.point_id({**params, "id": "ignored"}) == sweep.point_id(params)  # a point's own id is no parameter


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


def one(framework, preset, **extra):
    (p,) = expand({"datasets": ["digits"], "frameworks": [framework], "preset": [preset], **extra})
    return p


def test_the_settings_reading_keeps_the_frameworks_network_and_input():
    own = one("pytorch", "own")
    caffe = one("pytorch", "caffe")  # the whole preset, as before
    settings = one("pytorch", "caffe", cross_apply=["settings"])
    assert caffe["network"] == "lenet" and caffe["input"] == {"scale": 0.00390625}
    assert settings["network"] == own["network"] == "torch_mnist"
    assert settings["input"] == own["input"] and settings["layers"] == own["layers"]
    for key in ("optimizer", "momentum", "weight_decay", "learning_rate", "lr_policy", "batch_size",
                "test_batch_size", "iterations", "epochs", "test_interval"):
        assert settings[key] == caffe[key], key
    assert settings["cross_apply"] == "settings" and "cross_apply" not in caffe and "cross_apply" not in own
    assert "-settings-torch_mnist-" in settings["id"] and settings["id"] != caffe["id"]


def test_a_key_the_applied_settings_lack_is_unset_not_kept():
    # TensorFlow's MNIST defaults test only at the end; under them Caffe keeps its network but not its test interval
    p = one("caffe", "tensorflow", cross_apply=["settings"])
    assert p["network"] == "lenet" and p["test_interval"] is None and p["optimizer"] == "adam"
    assert p["iterations"] == 20000 and p["batch_size"] == 50
    assert presets.resolve("tensorflow", "caffe", "digits", cross_apply="settings")["input"] == \
        presets.resolve("own", "caffe", "digits")["input"]


def test_own_defaults_are_one_point_under_both_readings():
    points = expand({"datasets": ["digits"], "frameworks": ["pytorch", "caffe"], "preset": ["own", "caffe"],
                     "cross_apply": ["settings", "preset"]})
    kinds = sorted((p["framework"], p["preset"], p.get("cross_apply", "-")) for p in points)
    # caffe's own defaults by either name, and pytorch's own: one point each; caffe's on pytorch: one per reading
    assert kinds == [("caffe", "caffe", "-"), ("caffe", "own", "-"), ("pytorch", "caffe", "-"),
                     ("pytorch", "caffe", "settings"), ("pytorch", "own", "-")]
    assert [presets.reading(p) for p in points if p["framework"] == "pytorch" and p["preset"] == "caffe"] == \
        ["settings", "preset"]


def test_inter_op_threads_enter_the_point_only_when_set():
    plain = one("tensorflow", "caffe", sweep={"iterations": [10]})
    set_ = one("tensorflow", "caffe", sweep={"iterations": [10], "interop_threads": [2]})
    assert "interop_threads" not in plain and set_["interop_threads"] == 2
    assert "-t1-io2-" in set_["id"] and "-io" not in plain["id"]
    assert measure.trainer_env(set_)["TF_NUM_INTEROP_THREADS"] == "2"
    assert measure.trainer_env(plain)["TF_NUM_INTEROP_THREADS"] == "1"


TUNING = {"datasets": ["digits"], "frameworks": ["pytorch", "tensorflow"], "preset": ["own"], "repeats": 2,
          "studies": {"defaults": {}, "tuning": {"tune": {"batch_size": [0.5, 1], "learning_rate": [0.1, 1],
                                                          "length": [1, 2]}}}}


def test_a_tuning_grid_multiplies_each_frameworks_own_values():
    cfg = config.validate(TUNING)
    tuning = sweep.tuning(cfg)
    grid = [p for p in sweep.expand(cfg) if p["id"] in tuning]
    assert len(grid) == 2 * 8 * 2  # frameworks x (2 x 2 x 2 cells) x repeats
    torch = {(p["batch_size"], p["learning_rate"], p["epochs"]) for p in grid if p["framework"] == "pytorch"}
    assert torch == {(b, lr, e) for b in (5, 10) for lr in (0.005, 0.05) for e in (20, 40)}
    tf = {(p["batch_size"], p["learning_rate"], p["iterations"]) for p in grid if p["framework"] == "tensorflow"}
    assert tf == {(b, lr, i) for b in (25, 50) for lr in (1e-5, 1e-4) for i in (20000, 40000)}
    # the grid's defaults are the defaults study's own points (one id, run once)
    defaults = {p["id"] for p in sweep.expand_one(sweep.sub_studies(cfg)["defaults"])}
    marked = {i for i, t in tuning.items() if t["tuning_is_default"]}
    assert marked == defaults and len(marked) == 4
    # one grid per framework (its repeats together), named after its sub-study
    grids = {tuning[p["id"]]["tuning_grid"] for p in grid}
    assert len(grids) == 2 and all(g.startswith("tuning:") for g in grids)
    assert sweep.tuning(config.validate({**TUNING, "studies": {"defaults": {}}})) == {}


def test_tuned_values_stay_whole_and_positive():
    s = {"batch_size": 1, "learning_rate": 0.05, "iterations": 3}
    assert sweep.tuned_settings(s, {"batch_size": 0.5, "learning_rate": 3, "length": 0.5}) == \
        {"batch_size": 1, "learning_rate": 0.15, "iterations": 2}
    assert sweep.tuned_settings({"epochs": 45}, {"length": 0.5}) == {"epochs": 22.5}
    assert sweep.tuned_settings(s, {"batch_size": 1}) is not s


def test_the_papers_cross_study_applies_settings_and_tunes_around_own_defaults():
    cfg = config.load(PAPER)
    members = sweep.membership(cfg)
    cross = [p for p in sweep.expand(cfg) if "cross" in members[p["id"]]]
    foreign = [p for p in cross if presets.reading(p) is not None]
    assert foreign and all(p["cross_apply"] == "settings" for p in foreign)
    own_network = {(p["framework"], p["dataset"]): p["network"] for p in sweep.expand(cfg) if p["preset"] == "own"}
    assert all(p["network"] == own_network[(p["framework"], p["dataset"])] for p in foreign)
    tuning = sweep.tuning(cfg)
    assert sum(t["tuning_is_default"] for t in tuning.values()) == 4 * 2 * 2 * cfg["repeats"]
    assert all("tuning" in members[i] for i in tuning)


def test_compile_and_precision_enter_the_point_only_where_they_change_what_runs():
    """A framework's natural value (PyTorch eager, JAX compiled, fp32) is the point as it always was: same id."""
    plain = one("pytorch", "caffe", sweep={"iterations": [10]})
    natural = one("pytorch", "caffe", sweep={"iterations": [10], "compile": ["eager"], "precision": ["fp32"]})
    assert natural == plain and "compile" not in plain and "precision" not in plain
    both = one("pytorch", "caffe", sweep={"iterations": [10], "compile": ["compiled"], "precision": ["bf16"]})
    assert both["compile"] == "compiled" and both["precision"] == "bf16" and "-t1-compiled-bf16-r0-" in both["id"]
    jax_plain = one("jax", "caffe", sweep={"iterations": [10]})
    assert one("jax", "caffe", sweep={"iterations": [10], "compile": ["compiled"]}) == jax_plain
    eager = one("jax", "caffe", sweep={"iterations": [10], "compile": ["eager"]})
    assert eager["compile"] == "eager" and "-eager-" in eager["id"] and eager["id"] != jax_plain["id"]
    points = expand({"datasets": ["digits"], "frameworks": ["pytorch", "tensorflow", "jax"], "preset": ["caffe"],
                     "sweep": {"iterations": [10], "compile": ["eager", "compiled"], "precision": ["fp32", "bf16"]}})
    assert len(points) == len({p["id"] for p in points}) == 12


def test_pytorchs_own_layout_is_the_point_as_it_was_and_channels_last_another_point():
    """`memory_format: contiguous` (what a PyTorch user gets) leaves the point as it was; channels_last is a point of
    its own whose id says so, and the record's facts say the layout either way (None for a framework without it)."""
    from dlbench.study import point_facts

    plain = one("pytorch", "caffe", sweep={"iterations": [10]})
    assert one("pytorch", "caffe", sweep={"iterations": [10], "memory_format": ["contiguous"]}) == plain
    assert "memory_format" not in plain and point_facts.derive(plain).memory_format == "contiguous"
    opted = one("pytorch", "caffe", sweep={"iterations": [10], "memory_format": ["channels_last"]})
    assert opted["memory_format"] == "channels_last" and "-t1-channels_last-r0-" in opted["id"]
    assert point_facts.derive(opted).memory_format == "channels_last"
    assert point_facts.derive(one("tensorflow", "caffe", sweep={"iterations": [10]})).memory_format is None


def test_a_frameworks_thread_knob_is_set_from_the_point():
    """XLA's CPU pool (JAX) and inductor's compile workers (PyTorch) take the point's threads; no GPU for CPU points."""
    jax = measure.trainer_env(one("jax", "caffe", sweep={"iterations": [10], "threads": [2]}))
    assert jax["PJRT_NPROC"] == "2" and jax["OMP_NUM_THREADS"] == "2" and jax["CUDA_VISIBLE_DEVICES"] == ""
    torch = measure.trainer_env(one("pytorch", "caffe", sweep={"iterations": [10], "compile": ["compiled"]}))
    assert torch["TORCHINDUCTOR_COMPILE_THREADS"] == "1" and torch["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] == "1"
    assert "TORCHINDUCTOR_FORCE_DISABLE_CACHES" not in measure.trainer_env(one("pytorch", "caffe",
                                                                              sweep={"iterations": [10]}))
