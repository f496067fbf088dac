"""The study's tables (dlbench.tables) on small hand-made frames: known answers, no drawing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dlbench import tables
from dlbench.testing.study import make_runs, small_runs


def test_pareto_front_on_a_known_set():
    df = pd.DataFrame({"train_time_s": [1, 2, 3, 2, 5, 1, 4, np.nan],
                       "accuracy": [0.5, 0.8, 0.9, 0.7, 0.9, 0.4, 0.95, 0.99]},
                      index=list("abcdefgh"))
    front = tables.pareto_front(df)
    # a: fastest; b: beats d; c: beats e (same accuracy, faster); g: most accurate; h: no time
    assert sorted(front[front].index) == ["a", "b", "c", "g"]


def test_pareto_front_keeps_identical_points_and_ties():
    df = pd.DataFrame({"train_time_s": [1.0, 1.0, 1.0, 2.0], "accuracy": [0.9, 0.9, 0.8, 0.9]})
    assert tables.pareto_front(df).tolist() == [True, True, False, False]


def test_speedup_against_the_fewest_threads():
    runs = pd.DataFrame({
        "run_id": list("abcdefg"), "framework": ["pytorch"] * 4 + ["tensorflow"] * 3, "dataset": ["digits"] * 7,
        "preset": ["caffe"] * 7, "batch_size": [32] * 7, "learning_rate": [0.01] * 7, "epochs": [1] * 7,
        "device": ["cpu"] * 7, "threads": [2, 4, 8, 8, 1, 2, 4], "repeat": [0, 0, 0, 1, 0, 0, 0],
        "status": ["ok"] * 6 + ["timeout"], "train_time_s": [8.0, 4.0, 3.0, 1.0, 6.0, 4.0, np.nan],
        "accuracy": [0.9] * 7})
    s = tables.speedups(runs).set_index(["framework", "threads"])
    assert s.loc[("pytorch", 2), "speedup"] == 1.0
    assert s.loc[("pytorch", 4), "speedup"] == 2.0
    assert s.loc[("pytorch", 8), "speedup"] == 4.0  # repeats averaged: (3 + 1) / 2 = 2 s
    assert s.loc[("pytorch", 8), "ideal"] == 4.0
    assert s.loc[("tensorflow", 2), "speedup"] == 1.5 and ("tensorflow", 4) not in s.index  # timed out
    assert set(s["base_threads"]) == {1, 2}


def test_speedup_groups_keep_other_settings_apart():
    runs = pd.DataFrame({"run_id": list("abcd"), "framework": ["caffe"] * 4, "dataset": ["mnist"] * 4,
                         "preset": ["own"] * 4, "batch_size": [64, 64, 256, 256], "learning_rate": [0.01] * 4,
                         "iterations": [100] * 4, "device": ["cpu"] * 4, "threads": [1, 2, 1, 2],
                         "status": ["ok"] * 4, "train_time_s": [10.0, 5.0, 30.0, 10.0], "accuracy": [0.9] * 4})
    s = tables.speedups(runs)
    assert sorted(s[s.threads == 2]["speedup"]) == [2.0, 3.0]


def test_ratio_to_published():
    runs = pd.DataFrame({
        "run_id": list("abcdef"), "framework": ["caffe", "caffe", "pytorch", "tensorflow", "tensorflow", "caffe"],
        "dataset": ["digits", "digits", "fashion_mnist", "mnist", "mnist", "cifar10"],
        "preset": ["own", "own", "own", "caffe", "own", "own"], "device": ["cpu", "cpu", "gpu", "cpu", "cpu", "cpu"],
        "status": ["ok", "ok", "ok", "ok", "diverged", "ok"],
        "train_time_s": [100.0, 300.0, 33.846, 5.0, np.nan, 270.888],
        "test_time_s": [1.0, 1.0, 1.73, 1.0, np.nan, 1.0], "accuracy": [0.99, 0.98, 0.9522, 0.9, np.nan, 0.8]})
    published = pd.read_csv(tables.PUBLISHED_CSV)
    r = tables.published_ratios(runs, published).set_index(["dataset", "framework", "device"])
    caffe = r.loc[("digits", "caffe", "cpu")]
    assert caffe["published_dataset"] == "mnist" and caffe["n"] == 2
    assert caffe["train_time_ratio"] == pytest.approx(200.0 / 512.18)
    assert caffe["accuracy_diff_pp"] == pytest.approx(98.5 - 99.03)
    torch = r.loc[("fashion_mnist", "pytorch", "gpu")]
    assert torch["train_time_ratio"] == pytest.approx(0.1) and torch["test_time_ratio"] == pytest.approx(1.0)
    assert torch["accuracy_diff_pp"] == pytest.approx(-4.0)
    assert r.loc[("cifar10", "caffe", "cpu")]["train_time_ratio"] == pytest.approx(0.1)
    # cross-applied presets and failed points are not compared with the published own-defaults figures
    assert ("mnist", "tensorflow", "cpu") not in r.index


def test_resource_correlations():
    runs = pd.DataFrame({"run_id": list("abcd"), "framework": ["pytorch"] * 4, "dataset": ["digits"] * 4,
                         "batch_size": [16, 32, 64, 128], "learning_rate": [0.1] * 4, "iterations": [40, 30, 20, 10],
                         "status": ["ok"] * 4, "train_time_s": [1.0] * 4, "accuracy": [0.9] * 4,
                         "cpu_util_mean_pct": [100.0, 150, 170, 190], "rss_peak_mb": [500.0, 400, 300, 200],
                         "rss_mean_mb": [1.0, 3, 2, 4]})
    c = tables.resource_correlations(runs).set_index(["resource", "hyper_parameter"])["r"]
    assert c[("cpu_util_mean_pct", "batch_size")] == pytest.approx(1.0)
    assert c[("rss_peak_mb", "batch_size")] == pytest.approx(-1.0)
    assert c[("rss_peak_mb", "iterations")] == pytest.approx(1.0)
    assert c[("rss_mean_mb", "batch_size")] == pytest.approx(0.8)
    assert math.isnan(c[("cpu_util_mean_pct", "learning_rate")])  # constant: no correlation to speak of


def test_phase_spans_are_contiguous():
    samples = pd.DataFrame({"run_id": ["r"] * 6, "t": [0.2, 0.4, 0.6, 0.8, 1.0, 1.2],
                            "phase": ["import", "import", "train", "train", "train", "test"]})
    spans = tables.phase_spans(samples)
    assert spans[["phase", "start", "end"]].values.tolist() == [
        ["import", 0.2, 0.6], ["train", 0.6, 1.2], ["test", 1.2, pytest.approx(1.4)]]


def test_sweeps_use_only_the_sub_study_that_varies_the_axis():
    runs = pd.DataFrame({"run_id": list("abcde"), "framework": ["pytorch"] * 5, "dataset": ["digits"] * 5,
                         "preset": ["own"] * 5, "batch_size": [32, 64, 128, 32, 32],
                         "learning_rate": [0.01, 0.01, 0.01, 0.1, 0.5], "epochs": [1] * 5,
                         "status": ["ok"] * 5, "train_time_s": [3.0, 2, 1, 3, 3], "accuracy": [0.9] * 5,
                         "studies": ["defaults,batch_size", "batch_size", "batch_size", "learning_rate",
                                     "learning_rate"]})
    bs = tables.sweep_table(runs, "batch_size", "train_time_s")
    assert sorted(bs["batch_size"]) == [32, 64, 128]
    lr = tables.sweep_table(runs, "learning_rate", "train_time_s")
    assert sorted(lr["learning_rate"]) == [0.1, 0.5]  # the batch_size study's lr 0.01 is not part of this sweep
    assert "studies" not in small_runs().columns and tables.sweep_table(small_runs(), "batch_size", "accuracy").empty


def test_peak_fraction_is_used_when_present():
    runs = make_runs()
    runs["peak_fraction"] = runs["cpu_util_mean_pct"] / 1000
    c = tables.resource_correlations(runs)
    assert "peak_fraction" in set(c.resource)
    assert "peak_fraction" not in set(tables.resource_correlations(make_runs()).resource)
