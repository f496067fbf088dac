"""The study's tables (dlbench.analysis.frames) on small hand-made frames: known answers, no drawing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dlbench.analysis import frames, groups, guidance, joint_grids, summary
from dlbench.analysis import published as pub
from dlbench.testing.study import make_runs, preset_matrix, small_runs


def test_pareto_front_on_a_known_set():
    df = pd.DataFrame({"train_time_s": [1, 2, 3, 2, 5, 1, 4, np.nan],
                       "accuracy": [0.5, 0.8, 0.9, 0.7, 0.9, 0.4, 0.95, 0.99]},
                      index=list("abcdefgh"))
    front = frames.pareto_front(df)
    # a: fastest; b: beats d; c: beats e (same accuracy, faster); g: most accurate; h: no time
    assert sorted(front[front].index) == ["a", "b", "c", "g"]


def test_pareto_front_keeps_identical_points_and_ties():
    df = pd.DataFrame({"train_time_s": [1.0, 1.0, 1.0, 2.0], "accuracy": [0.9, 0.9, 0.8, 0.9]})
    assert frames.pareto_front(df).tolist() == [True, True, False, False]


def test_speedup_against_the_fewest_threads():
    runs = pd.DataFrame({
        "run_id": list("abcdefg"), "framework": ["pytorch"] * 4 + ["tensorflow"] * 3, "dataset": ["digits"] * 7,
        "preset": ["caffe"] * 7, "batch_size": [32] * 7, "learning_rate": [0.01] * 7, "epochs": [1] * 7,
        "device": ["cpu"] * 7, "threads": [2, 4, 8, 8, 1, 2, 4], "repeat": [0, 0, 0, 1, 0, 0, 0],
        "status": ["ok"] * 6 + ["timeout"], "train_time_s": [8.0, 4.0, 3.0, 1.0, 6.0, 4.0, np.nan],
        "accuracy": [0.9] * 7})
    s = frames.speedups(runs).set_index(["framework", "threads"])
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
    s = frames.speedups(runs)
    assert sorted(s[s.threads == 2]["speedup"]) == [2.0, 3.0]


def test_ratio_to_published():
    runs = pd.DataFrame({
        "run_id": list("abcdef"), "framework": ["caffe", "caffe", "pytorch", "tensorflow", "tensorflow", "caffe"],
        "dataset": ["digits", "digits", "fashion_mnist", "mnist", "mnist", "cifar10"],
        "preset": ["own", "own", "own", "caffe", "own", "own"], "device": ["cpu", "cpu", "gpu", "cpu", "cpu", "cpu"],
        "status": ["ok", "ok", "ok", "ok", "diverged", "ok"],
        "train_time_s": [100.0, 300.0, 33.846, 5.0, np.nan, 270.888],
        "test_time_s": [1.0, 1.0, 1.73, 1.0, np.nan, 1.0], "accuracy": [0.99, 0.98, 0.9522, 0.9, np.nan, 0.8]})
    published = pd.read_csv(pub.PUBLISHED_CSV)
    r = pub.published_ratios(runs, published).set_index(["dataset", "framework", "device"])
    # like with like: the digits (1,797 small images) are never timed or accuracy-compared against MNIST
    assert ("digits", "caffe", "cpu") not in r.index
    fashion = pub.published_ratios(runs.assign(dataset=runs["dataset"].replace("digits", "fashion_mnist")),
                                   published).set_index(["dataset", "framework", "device"])
    caffe = fashion.loc[("fashion_mnist", "caffe", "cpu")]
    assert caffe["published_dataset"] == "mnist" and caffe["n"] == 2
    assert caffe["train_time_ratio"] == pytest.approx(200.0 / 512.18)
    assert caffe["accuracy_diff_pp"] == pytest.approx(98.5 - 99.03)
    assert pub.stand_in("fashion_mnist").startswith("fashion_mnist (a stand-in for mnist")
    torch = r.loc[("fashion_mnist", "pytorch", "gpu")]
    assert torch["train_time_ratio"] == pytest.approx(0.1) and torch["test_time_ratio"] == pytest.approx(1.0)
    assert torch["accuracy_diff_pp"] == pytest.approx(-4.0)
    assert r.loc[("cifar10", "caffe", "cpu")]["train_time_ratio"] == pytest.approx(0.1)
    # cross-applied presets and failed points are not compared with the published own-defaults figures
    assert ("mnist", "tensorflow", "cpu") not in r.index


def test_resource_correlations_are_taken_where_one_hyper_parameter_varied_alone():
    # a batch-size sweep at 20 iterations (a-d) and a length sweep at batch 16 (e, f, with a): each correlation
    # reads its own sweep only
    runs = pd.DataFrame({"run_id": list("abcdef"), "framework": ["pytorch"] * 6, "dataset": ["digits"] * 6,
                         "batch_size": [16, 32, 64, 128, 16, 16], "learning_rate": [0.1] * 6,
                         "iterations": [20, 20, 20, 20, 40, 80],
                         "status": ["ok"] * 6, "train_time_s": [1.0] * 6, "accuracy": [0.9] * 6,
                         "cpu_util_mean_pct": [100.0, 150, 170, 190, 90, 80], "rss_peak_mb": [500.0, 400, 300, 200,
                                                                                             510, 520],
                         "rss_mean_mb": [1.0, 3, 2, 4, 1, 1]})
    table = frames.resource_correlations(runs).set_index(["resource", "hyper_parameter"])
    c = table["r"]
    assert c[("cpu_util_mean_pct", "batch_size")] == pytest.approx(1.0)
    assert c[("rss_peak_mb", "batch_size")] == pytest.approx(-1.0)
    assert c[("rss_peak_mb", "iterations")] == pytest.approx(1.0)
    assert c[("cpu_util_mean_pct", "iterations")] == pytest.approx(-1.0)  # not the batch sweep's +0.x across both
    assert c[("rss_mean_mb", "batch_size")] == pytest.approx(0.8)
    assert table.loc[("rss_peak_mb", "batch_size"), "n"] == 4 and table.loc[("rss_peak_mb", "iterations"), "n"] == 3
    assert math.isnan(c[("cpu_util_mean_pct", "learning_rate")])  # constant: no correlation to speak of
    # batch size and length changed together: confounded, so no correlation is claimed for either
    both = runs.iloc[:4].assign(iterations=[40, 30, 20, 10])
    confounded = frames.resource_correlations(both).set_index(["resource", "hyper_parameter"])["r"]
    assert math.isnan(confounded[("cpu_util_mean_pct", "batch_size")])


def test_phase_spans_are_contiguous():
    samples = pd.DataFrame({"run_id": ["r"] * 6, "t": [0.2, 0.4, 0.6, 0.8, 1.0, 1.2],
                            "phase": ["import", "import", "train", "train", "train", "test"]})
    spans = frames.phase_spans(samples)
    assert spans[["phase", "start", "end"]].values.tolist() == [
        ["import", 0.2, 0.6], ["train", 0.6, 1.2], ["test", 1.2, pytest.approx(1.4)]]


def test_sweeps_use_only_the_sub_study_that_varies_the_axis():
    runs = pd.DataFrame({"run_id": list("abcde"), "framework": ["pytorch"] * 5, "dataset": ["digits"] * 5,
                         "preset": ["own"] * 5, "batch_size": [32, 64, 128, 32, 32],
                         "learning_rate": [0.01, 0.01, 0.01, 0.1, 0.5], "epochs": [1] * 5,
                         "status": ["ok"] * 5, "train_time_s": [3.0, 2, 1, 3, 3], "accuracy": [0.9] * 5,
                         "studies": ["defaults,batch_size", "batch_size", "batch_size", "learning_rate",
                                     "learning_rate"]})
    bs = frames.sweep_table(runs, "batch_size", "train_time_s")
    assert sorted(bs["batch_size"]) == [32, 64, 128]
    lr = frames.sweep_table(runs, "learning_rate", "train_time_s")
    assert sorted(lr["learning_rate"]) == [0.1, 0.5]  # the batch_size study's lr 0.01 is not part of this sweep
    assert "studies" not in small_runs().columns and frames.sweep_table(small_runs(), "batch_size", "accuracy").empty


def test_peak_fraction_is_used_when_present():
    runs = make_runs()
    runs["peak_fraction"] = runs["cpu_util_mean_pct"] / 1000
    c = frames.resource_correlations(runs)
    assert "peak_fraction" in set(c.resource)
    assert "peak_fraction" not in set(frames.resource_correlations(make_runs()).resource)


def grid_runs(cells: dict, framework="caffe", default=(64, 0.01), repeats=1) -> pd.DataFrame:
    """A tuning grid of one framework: (batch, lr) -> (accuracy, train time) or None for a failed cell."""
    rows = []
    for (bs, lr), result in cells.items():
        for r in range(repeats):
            acc, t = result if result else (np.nan, np.nan)
            rows.append({"run_id": f"{framework}-{bs}-{lr}-{r}", "framework": framework, "dataset": "digits",
                         "preset": "own", "device": "cpu", "batch_size": bs, "learning_rate": lr, "iterations": 100,
                         "iterations_planned": 100, "threads": 2, "repeat": r,
                         "status": "ok" if result else "diverged", "accuracy": acc + 0.002 * (r - (repeats - 1) / 2),
                         "train_time_s": t, "tuning_grid": f"tuning:{framework}",
                         "tuning_is_default": (bs, lr) == default})
    return pd.DataFrame(rows)


def test_tuning_table_picks_the_best_and_the_fastest_near_it():
    runs = grid_runs({(64, 0.01): (0.950, 100.0), (32, 0.01): (0.970, 150.0), (128, 0.01): (0.966, 60.0),
                      (128, 0.1): (0.960, 40.0), (64, 0.1): None}, repeats=2)
    t = joint_grids.tuning_table(runs).set_index("choice")
    assert list(t.index) == joint_grids.CHOICES
    d, best, fast = t.loc["defaults"], t.loc["best accuracy"], t.loc["fastest within 0.5 points"]
    assert (d["batch_size"], d["accuracy_pct"], d["accuracy_gain_pp"], d["time_saved_pct"]) == (64, 95.0, 0, 0)
    assert (best["batch_size"], best["learning_rate"]) == (32, 0.01)
    assert best["accuracy_pct"] == pytest.approx(97.0)  # the mean of its two repeats
    assert best["accuracy_gain_pp"] == pytest.approx(2.0) and best["time_saved_pct"] == pytest.approx(-50.0)
    # 96.0 is 1 point below the best: not near it; 96.6 is, and faster
    assert (fast["batch_size"], fast["learning_rate"]) == (128, 0.01)
    assert fast["accuracy_gain_pp"] == pytest.approx(1.6) and fast["time_saved_pct"] == pytest.approx(40.0)
    assert (best["tried"], best["failed"]) == (5, 1)


def test_tuning_table_with_failed_defaults_and_ties():
    runs = grid_runs({(64, 0.01): None, (32, 0.01): (0.97, 30.0), (16, 0.01): (0.97, 20.0)})
    t = joint_grids.tuning_table(runs).set_index("choice")
    assert t.loc["best accuracy", "batch_size"] == 16  # a tie in accuracy goes to the faster
    assert math.isnan(t.loc["best accuracy", "accuracy_gain_pp"]) and math.isnan(t.loc["defaults", "accuracy_pct"])
    assert joint_grids.tuning_table(small_runs()).empty  # no grid, no table
    both = pd.concat([runs, grid_runs({(64, 0.01): (0.9, 1.0), (32, 0.01): (0.8, 1.0)}, framework="pytorch")])
    assert sorted(set(joint_grids.tuning_table(both)["framework"])) == ["caffe", "pytorch"]


T975_DF2 = 4.302652729749462  # the t table: two-sided 95 %, 2 degrees of freedom
T975_DF1 = 12.706204736174704  # ... 1 degree of freedom


def seeded_grid(cells: dict) -> pd.DataFrame:
    """A tuning grid of three seeds per cell: batch size -> [(accuracy %, train time s) per seed 0, 1, 2]."""
    return pd.DataFrame([{"run_id": f"g{bs}-{seed}", "framework": "caffe", "dataset": "digits", "preset": "own",
                          "device": "cpu", "batch_size": bs, "learning_rate": 0.01, "iterations": 100, "threads": 2,
                          "seed": seed, "status": "ok", "accuracy": acc / 100, "train_time_s": t,
                          "tuning_grid": "tuning:caffe", "tuning_is_default": bs == 64}
                         for bs, values in cells.items() for seed, (acc, t) in enumerate(values)])


def test_tuning_gains_carry_their_interval_and_test():
    runs = seeded_grid({64: [(95.0, 100.0), (95.4, 110.0), (95.2, 90.0)],
                        32: [(96.0, 150.0), (96.8, 165.0), (96.4, 135.0)],
                        128: [(96.0, 50.0), (96.3, 60.0), (96.2, 40.0)]})
    t = joint_grids.tuning_table(runs).set_index("choice")
    best, near = t.loc["best accuracy"], t.loc["fastest within 0.5 points"]
    # paired by seed: gains 1.0, 1.4, 1.2 points: mean 1.2, sd 0.2, half-width t(0.975, 2) 0.2 / sqrt(3)
    half = T975_DF2 * 0.2 / math.sqrt(3)
    assert best["batch_size"] == 32 and best["accuracy_gain_pp"] == pytest.approx(1.2)
    assert (best["gain_ci_low"], best["gain_ci_high"]) == pytest.approx((1.2 - half, 1.2 + half))
    assert best["gain_told"] == "higher"
    # every seed took 1.5x as long: an exact ratio, 50 % more time, but no spread to judge it against: a test
    # would have called a difference of any size told (p = 0); none is run
    assert best["time_saved_pct"] == pytest.approx(-50.0) and best["time_told"] == "not testable"
    assert (best["saved_ci_low"], best["saved_ci_high"]) == pytest.approx((-50.0, -50.0))
    # batch 128 is 0, 0.5, 0.2 points below it (paired t 1.6 on 2 df): not told apart from the best
    assert best["best_told"] == "not told apart from 1 other cell(s)"
    two = joint_grids.tuning_table(runs[runs["batch_size"] != 128]).set_index("choice")
    assert two.loc["best accuracy", "best_told"] == "told apart from the other 1 cells"
    # batch 128 within 0.5 points of the best and fastest: 1.0, 0.9, 1.0 points over the defaults, told higher;
    # half the time or less on each seed (ratios 0.5, 0.545, 0.444), told shorter
    assert near["batch_size"] == 128 and near["gain_told"] == "higher"
    assert near["accuracy_gain_pp"] == pytest.approx(2.9 / 3) and near["time_told"] == "shorter"
    # paired by seed, the ratio is the geometric mean of the seeds' ratios
    assert near["time_saved_pct"] == pytest.approx(100 * (1 - (50 / 100 * 60 / 110 * 40 / 90) ** (1 / 3)))
    once = joint_grids.tuning_table(runs[runs["seed"] < 2]).set_index("choice")  # two seeds: below three a side
    assert once.loc["best accuracy", "gain_told"] == "not testable"
    assert math.isnan(once.loc["best accuracy", "gain_ci_low"])
    assert once.loc["best accuracy", "accuracy_gain_pp"] == pytest.approx(1.2)  # the difference is still stated
    assert once.loc["best accuracy", "best_told"] == "not testable"


def test_the_speed_ups_of_a_switch_carry_their_interval():
    runs = modern_runs()
    compiled = frames.axis_speedups(runs, "compile").set_index(["framework", "threads", "with"])
    assert compiled.loc[("pytorch", 1, "fp32"), "speedup_told"] == "not testable"  # one seed each
    ok = runs[runs["status"] == "ok"]
    seeds = [ok.assign(seed=seed, run_id=ok["run_id"] + f"-s{seed}") for seed in (2, 3)]
    for extra, gain in zip(seeds, (1.1, 1.2)):
        faster = extra["compile"] == "compiled"
        extra.loc[faster, "throughput_img_s"] *= gain  # seed 2's compiled points 10 % faster, seed 3's 20 %
    two = frames.axis_speedups(pd.concat([runs, seeds[0]]), "compile").set_index(["framework", "threads", "with"])
    assert two.loc[("pytorch", 1, "fp32"), "speedup_told"] == "not testable"  # two seeds: below three a side
    again = frames.axis_speedups(pd.concat([runs, *seeds]), "compile").set_index(["framework", "threads", "with"])
    row = again.loc[("pytorch", 1, "fp32")]
    # log speed-ups by seed: log 1.3, log 1.43 and log 1.56; their t interval on 2 degrees of freedom
    logs = np.log([1.3, 1.43, 1.56])
    half = T975_DF2 * logs.std(ddof=1) / math.sqrt(3)
    assert (row["speedup_low"], row["speedup_high"]) == pytest.approx((math.exp(logs.mean() - half),
                                                                       math.exp(logs.mean() + half)))
    assert row["speedup_told"] == "faster"
    # the same accuracy on every seed: an exact zero, but no spread to test it by
    assert row["change_told"] == "not testable"
    assert row["change_low"] == pytest.approx(0.0) and row["change_high"] == pytest.approx(0.0)


def own_runs(rows: list[tuple]) -> pd.DataFrame:
    """(framework, dataset, device, train time, test time, accuracy) with own defaults."""
    return pd.DataFrame([{"run_id": f"{fw}-{ds}-{dev}", "framework": fw, "dataset": ds, "preset": "own",
                          "device": dev, "batch_size": 64, "learning_rate": 0.01, "iterations": 100, "threads": 2,
                          "status": "ok", "train_time_s": t, "test_time_s": tt, "accuracy": acc}
                         for fw, ds, dev, t, tt, acc in rows])


def test_leaders_next_to_the_published_ones_among_the_same_frameworks():
    published = pub.read_published()
    runs = own_runs([("caffe", "digits", "cpu", 5.0, 1, 0.97), ("pytorch", "digits", "cpu", 9.0, 1, 0.98),
                     ("theano", "cifar10", "cpu", 3.0, 1, 0.50), ("tensorflow", "cifar10", "cpu", 9.0, 1, 0.80),
                     ("tensorflow", "mnist", "gpu", 1.0, 1, 0.99), ("pytorch", "mnist", "gpu", 2.0, 1, 0.99),
                     ("caffe", "mnist", "gpu", 9.0, 1, 0.99)])
    t = pub.leaders_vs_published(runs, published).set_index(["dataset", "device"])
    digits = t.loc[("digits", "cpu")]
    assert digits["published_dataset"] == "mnist" and digits["frameworks"] == "caffe, pytorch"
    assert digits["published_fastest"] == "caffe" and digits["fastest_agrees"]
    # published among Caffe and Torch on MNIST/CPU: Torch 99.24% > Caffe 99.03%
    assert digits["published_most_accurate"] == "pytorch" and digits["most_accurate_agrees"]
    cifar = t.loc[("cifar10", "cpu")]
    assert cifar["published_fastest"] == "theano" and cifar["fastest_agrees"]
    assert cifar["published_most_accurate"] == "tensorflow" and cifar["most_accurate_agrees"]
    gpu = t.loc[("mnist", "gpu")]
    # published MNIST/GPU: TensorFlow and Torch tie at 99.22%; here all three tie
    assert gpu["published_most_accurate"] == "pytorch and tensorflow" and gpu["most_accurate_agrees"]
    assert gpu["most_accurate"] == "caffe and pytorch and tensorflow" and gpu["published_fastest"] == "tensorflow"
    lonely = own_runs([("caffe", "digits", "cpu", 5.0, 1, 0.97)])
    assert pub.leaders_vs_published(lonely, published).empty  # one framework: nothing to rank


def test_published_gpu_speedups_are_the_studys():
    ratios = pub.published_device_ratios(pub.read_published()).set_index(["dataset", "framework"])
    mnist = ratios.loc["mnist", "published_cpu_over_gpu"].round(1).to_dict()
    assert mnist == {"caffe": 5.3, "tensorflow": 16.3, "theano": 20.6, "torch": 28.5}
    cifar = ratios.loc["cifar10", "published_cpu_over_gpu"]
    assert cifar["tensorflow"] == pytest.approx(119102.62 / 26160.37)
    assert cifar["caffe"] == pytest.approx(2708.88 / 183.49)


def test_gpu_speedups_over_matched_own_settings():
    runs = own_runs([("caffe", "digits", "cpu", 10.0, 2.0, 0.9), ("caffe", "digits", "gpu", 2.5, 4.0, 0.9),
                     ("pytorch", "digits", "cpu", 10.0, 1.0, 0.9)])
    runs = pd.concat([runs, runs.iloc[:2].assign(run_id=["x", "y"], batch_size=128, train_time_s=[30.0, 3.0])])
    pairs = pub.device_pairs(runs, own_only=False).set_index("framework")
    assert list(pairs.index) == ["caffe"]  # pytorch ran on CPU only
    assert pairs.loc["caffe", "cpu_over_gpu"] == pytest.approx(40 ** 0.5)  # geometric mean of 4x and 10x
    assert pairs.loc["caffe", "told"] == "not testable" and np.isnan(pairs.loc["caffe", "ratio_ci_low"])
    assert pairs.loc["caffe", "settings_compared"] == 2
    # own defaults: the default point only (Caffe's own batch size, 64), not the batch-128 point beside it
    own = pub.device_pairs(runs)
    assert own.loc[0, "settings_compared"] == 1 and own.loc[0, "cpu_over_gpu"] == pytest.approx(4.0)
    assert pub.device_pairs(runs, "test_time_s").loc[0, "cpu_over_gpu"] == pytest.approx(0.5)
    assert pub.speedups_vs_published(runs, pub.read_published())["published_cpu_over_gpu"].isna().all()  # digits
    s = pub.speedups_vs_published(runs.assign(dataset="fashion_mnist"), pub.read_published()).iloc[0]
    assert s["published_dataset"] == "mnist" and s["published_cpu_over_gpu"] == pytest.approx(512.18 / 97.02)
    assert pub.device_pairs(runs.assign(preset="tensorflow")).empty  # not its own defaults


def test_efficiency_per_core_and_per_gb():
    runs = own_runs([("caffe", "digits", "cpu", 1.0, 1, 0.9), ("pytorch", "digits", "cpu", 1.0, 1, 0.9)])
    runs = runs.assign(throughput_img_s=[1000.0, 600.0], rss_peak_mb=[512.0, 2048.0], threads=[2, 1],
                       library=["default", "no_onednn"])
    e = guidance.efficiency(runs).set_index("framework")
    assert e.loc["caffe", "img_s_per_core"] == 500 and e.loc["caffe", "img_s_per_gb"] == 2000
    assert e.loc["pytorch", "img_s_per_core"] == 600 and e.loc["pytorch", "img_s_per_gb"] == 300
    assert e.loc["pytorch", "knobs"] == "no_onednn library, 1 threads"
    assert e.loc["caffe", "base"] != e.loc["pytorch", "base"]  # other frameworks, other settings


def test_time_to_target_is_the_best_level_every_framework_reached():
    runs = own_runs([("caffe", "digits", "cpu", 4.0, 1, 0.95), ("pytorch", "digits", "cpu", 8.0, 1, 0.93)])
    runs = pd.concat([runs, runs.iloc[[1]].assign(run_id="p2", batch_size=128)])
    curves = pd.DataFrame({"run_id": ["caffe-digits-cpu"] * 3 + ["pytorch-digits-cpu"] * 2 + ["p2"] * 2,
                           "kind": ["test"] * 7, "iteration": [10, 20, 30, 10, 20, 10, 20],
                           "train_time_s": [1.0, 2.0, 4.0, 3.0, 8.0, 2.5, 5.0],
                           "accuracy": [0.90, 0.935, 0.95, 0.92, 0.93, 0.80, 0.9349]})
    t = guidance.time_to_target(runs, curves).set_index("framework")
    assert set(t["target_pct"]) == {93.4}  # pytorch's best, 93.49%, floored to 0.1 points
    assert t.loc["caffe", "time_to_target_s"] == 2.0 and t.loc["caffe", "iteration"] == 20
    assert t.loc["pytorch", "run_id"] == "p2" and t.loc["pytorch", "time_to_target_s"] == 5.0
    # counted over the soonest setting's runs (batch 128: one), not every pytorch run
    assert (t.loc["pytorch", "runs_reaching"], t.loc["pytorch", "runs"]) == (1, 1)
    assert list(guidance.time_to_target(runs, curves)["framework"]) == ["caffe", "pytorch"]  # soonest first
    assert guidance.time_to_target(runs, pd.DataFrame()).empty


def test_points_say_how_a_preset_was_applied():
    runs = preset_matrix({"caffe": {"caffe": 0.99, "tensorflow": 0.98}, "pytorch": {"torch": 0.9, "caffe": 0.95}})
    runs.loc[runs.run_id == "pytorch-caffe-settings", "cross_apply"] = np.nan  # a record made before the key existed
    df = frames.points(runs).set_index("run_id")
    assert df.loc["caffe-caffe-settings", "reading"] == "own"
    assert df.loc["caffe-tensorflow-settings", "reading"] == "settings"
    assert df.loc["pytorch-caffe-settings", "reading"] == "preset"
    both = pd.concat([runs, runs.assign(run_id=runs.run_id + "-w", cross_apply="preset")])
    d = frames.defaults_table(both)
    assert len(d[(d.framework == "caffe") & (d.whose == "tensorflow")]) == 2  # one row per reading


def test_carry_over_applies_each_frameworks_best_to_the_others():
    runs = preset_matrix({"caffe": {"caffe": 0.99, "tensorflow": 0.97, "torch": 0.90},
                          "tensorflow": {"caffe": 0.985, "tensorflow": 0.99, "torch": 0.80},
                          "pytorch": {"caffe": 0.93, "tensorflow": 0.92, "torch": 0.96}})
    c = summary.carry_over(runs).set_index(["from_framework", "to_framework"])
    assert len(c) == 6 and set(c["reading"]) == {"settings"}
    # caffe's best (its own) on tensorflow: 98.5% against tensorflow's best 99%: within 0.5 points
    assert c.loc[("caffe", "tensorflow"), "best_preset"] == "caffe"
    assert c.loc[("caffe", "tensorflow"), "shortfall_pp"] == pytest.approx(0.5)
    assert c.loc[("caffe", "tensorflow"), "carries_over"]
    assert c.loc[("tensorflow", "caffe"), "shortfall_pp"] == pytest.approx(2.0)
    assert not c.loc[("pytorch", "caffe"), "carries_over"] and c.loc[("pytorch", "caffe"), "to_best_preset"] == "caffe"
    whole = summary.carry_over(preset_matrix({"caffe": {"caffe": 0.99, "torch": 0.9},
                                             "pytorch": {"torch": 0.9, "caffe": 0.95}}, reading="preset"))
    assert set(whole["reading"]) == {"preset"} and len(whole) == 2
    assert summary.carry_over(preset_matrix({"caffe": {"caffe": 0.99}, "pytorch": {"torch": 0.9}})).empty


def test_a_study_of_own_defaults_does_not_vary_whose_defaults():
    """Own defaults differ between frameworks, which is no sweep: the defaults table keeps the cross study's points,
    not the tuning grid's (which would be averaged into the own-defaults cell)."""
    rows = [("a", "pytorch", "own", 10, "defaults,cross,tuning", 0.90),
            ("b", "caffe", "own", 64, "defaults,cross", 0.99),
            ("c", "pytorch", "caffe", 64, "cross", 0.95), ("d", "pytorch", "own", 5, "tuning", 0.50)]
    runs = pd.DataFrame([{"run_id": i, "framework": fw, "dataset": "digits", "preset": p, "device": "cpu",
                          "batch_size": bs, "learning_rate": 0.01, "iterations": 10, "status": "ok",
                          "train_time_s": 1.0, "accuracy": acc, "studies": st} for i, fw, p, bs, st, acc in rows])
    d = frames.defaults_table(runs).set_index(["framework", "whose"])
    assert d.loc[("pytorch", "torch"), "accuracy_pct"] == pytest.approx(90.0)  # the tuning point "d" is left out
    assert d.loc[("pytorch", "torch"), "n_ok"] == 1 and len(d) == 3
    assert sorted(frames.sweep_table(runs, "batch_size", "accuracy")["batch_size"]) == [5, 10]


def test_time_to_accuracy_counts_the_compile_time_before_training():
    runs = own_runs([("jax", "digits", "cpu", 4.0, 1, 0.95), ("pytorch", "digits", "cpu", 4.0, 1, 0.95)])
    runs = runs.assign(compile_time_s=[3.0, np.nan], compile=["compiled", None])
    curves = pd.DataFrame({"run_id": ["jax-digits-cpu", "pytorch-digits-cpu"], "kind": ["test"] * 2,
                           "iteration": [10, 10], "train_time_s": [1.0, 2.5], "accuracy": [0.95, 0.95]})
    t = frames.time_to_accuracy_table(runs, curves).set_index("framework")
    assert t.loc["jax", "train_time_s"] == 4.0 and t.loc["jax", "train_only_s"] == 1.0
    assert t.loc["pytorch", "train_time_s"] == 2.5  # no compile phase recorded: nothing added
    target = guidance.time_to_target(runs, curves)
    assert list(target["framework"]) == ["pytorch", "jax"]  # jax trained sooner, but compiling made it later
    assert target.set_index("framework").loc["jax", "compile_time_s"] == 3.0


def modern_runs() -> pd.DataFrame:
    from dlbench.testing.study import make_modern_runs

    return make_modern_runs()


def test_the_speed_up_of_each_switch_is_taken_with_everything_else_the_same():
    compiled = frames.axis_speedups(modern_runs(), "compile").set_index(["framework", "threads", "with"])
    # PyTorch compiled trains 1.3x as fast, JAX op by op is 6x slower than jitted, TensorFlow's XLA 0.7x
    assert compiled.loc[("pytorch", 1, "fp32"), "speedup"] == pytest.approx(1.3)
    assert compiled.loc[("jax", 2, "bf16"), "speedup"] == pytest.approx(6.0)
    assert compiled.loc[("tensorflow", 1, "fp32"), "speedup"] == pytest.approx(0.7)
    assert compiled.loc[("pytorch", 1, "fp32"), "compile_time_s"] == 25.0
    assert ("tensorflow", 2, "bf16") not in compiled.index  # its compiled bf16 point failed: no pair
    bf16 = frames.axis_speedups(modern_runs(), "precision").set_index(["framework", "threads", "with"])
    assert bf16.loc[("pytorch", 2, "eager"), "speedup"] == pytest.approx(1.6)
    assert bf16.loc[("pytorch", 2, "eager"), "accuracy_change_pp"] == pytest.approx(-0.4)
    assert len(bf16) == 11 and set(bf16["precision"]) == {"bf16"}
    assert frames.axis_speedups(make_runs(), "compile").empty  # the study's frameworks never switch


def test_pytorchs_memory_layout_is_a_switch_whose_speed_up_is_taken_and_whose_old_records_say_channels_last():
    """PyTorch's points in both layouts: channels_last's speed-up over contiguous, everything else the same; a record
    made before the axis (no `memory_format`, its build saying channels_last) reads as what it ran."""
    runs = modern_runs()
    torch = runs[runs["framework"] == "pytorch"]
    opted = torch.assign(memory_format="channels_last", run_id=torch["run_id"] + "-cl",
                         throughput_img_s=torch["throughput_img_s"] * 1.4)
    both = pd.concat([runs, opted], ignore_index=True)
    layout = frames.axis_speedups(both, "memory_format").set_index(["framework", "threads", "with"])
    assert set(layout.index.get_level_values("framework")) == {"pytorch"}
    assert layout.loc[("pytorch", 1, "eager, fp32"), "speedup"] == pytest.approx(1.4)
    assert len(layout) == len(torch)  # every PyTorch point has its channels-last twin
    # compiling's speed-up is taken in each layout apart: the two layouts' points are never averaged together
    compiled = frames.axis_speedups(both, "compile")
    alone = frames.axis_speedups(runs, "compile")
    assert (compiled["framework"] == "pytorch").sum() == 2 * (alone["framework"] == "pytorch").sum()
    old = torch.assign(memory_format=None, build_json='{"memory_format": "channels_last", "mkldnn": true}')
    pts = frames.points(pd.concat([old, runs[runs["framework"] != "pytorch"]], ignore_index=True))
    assert set(pts.loc[pts["framework"] == "pytorch", "memory_format"]) == {"channels_last"}
    assert pts.loc[pts["framework"] != "pytorch", "memory_format"].isna().all()
    labels = frames.settings_label(pts, set())
    assert labels[pts["framework"] == "pytorch"].str.endswith("channels last").all()
    assert not labels[pts["framework"] != "pytorch"].str.contains("channels").any()


def test_the_fastest_configuration_to_a_target_includes_its_compile_time():
    runs = modern_runs()
    curves = pd.DataFrame([{"run_id": r.run_id, "kind": "test", "iteration": 469, "train_time_s": r.train_time_s,
                            "accuracy": r.accuracy} for r in runs[runs.status == "ok"].itertuples()])
    fast = guidance.fastest_configurations(pd.concat([runs, make_runs()]), curves)
    assert set(fast["dataset"]) == {"fashion_mnist"}  # where compile and precision varied
    assert len(fast) == 12 and fast["target_pct"].iloc[0] == pytest.approx(87.6)  # every configuration's best
    first = fast.iloc[0]
    assert (first.framework, first.compile, first.precision, first.threads) == ("jax", "compiled", "fp32", 2)
    got = fast.set_index(["framework", "compile", "precision"])
    jax = runs.set_index("run_id").loc["jax-modern-compiled-fp32-t2"]
    assert got.loc[("jax", "compiled", "fp32"), "time_to_target_s"] == pytest.approx(jax.train_time_s + 3.5)
    assert list(fast["time_to_target_s"]) == sorted(fast["time_to_target_s"])
    # a study with no framework that switches compile or precision (Caffe and Theano alone): no rows, no error
    caffe_only = make_runs()
    caffe_only = caffe_only[caffe_only["framework"].isin(["caffe", "theano"])]
    assert guidance.fastest_configurations(caffe_only, curves).empty


def test_peak_fractions_compare_like_with_like():
    from dlbench.aggregate import collect

    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "device": ["cpu"] * 3, "threads": [1, 1, 2],
                         "precision": ["fp32", "bf16", "bf16"], "achieved_gflops": [50.0, 90.0, 90.0]})
    peak = {"gflops_by_threads": {"1": 100.0, "2": 180.0}, "bf16_gflops_by_threads": {"1": 300.0, "2": 500.0}}
    got = collect.add_study_context(runs, None, peak).set_index("run_id")
    assert got.loc["a", "peak_fraction"] == 0.5 and got.loc["b", "peak_fraction"] == pytest.approx(0.3)
    assert got.loc["c", "peak_fraction"] == pytest.approx(0.18) and got.loc["c", "peak_fraction_fp32"] == 0.5
    old = collect.add_study_context(runs.drop(columns="precision"), None, {"gflops_by_threads": {"1": 100.0}})
    assert old.set_index("run_id").loc["b", "peak_fraction"] == 0.9  # a peak.json of before: float32 only
    assert old["peak_fraction"].isna().sum() == 1  # no peak measured for 2 threads


T975_DF2 = 4.302652729749462  # the t table: two-sided 95 %, 2 degrees of freedom


def summary_runs() -> pd.DataFrame:
    """One setting run five times (three ok, one diverged, one ok but timed under outside load), and a second
    setting (another batch size) run once."""
    base = {"framework": "pytorch", "dataset": "digits", "preset": "caffe", "device": "cpu", "batch_size": 32,
            "learning_rate": 0.01, "iterations": 30, "threads": 1}
    rows = [{**base, "run_id": f"a{i}", "seed": i, "status": st, "train_time_s": t, "accuracy": acc,
             "contended": busy}
            for i, (st, t, acc, busy) in enumerate([("ok", 10.0, 0.90, False), ("ok", 12.0, 0.92, False),
                                                    ("ok", 14.0, 0.94, None), ("diverged", np.nan, np.nan, False),
                                                    ("ok", 40.0, 0.96, True)], start=1)]
    rows.append({**base, "run_id": "b1", "seed": 1, "batch_size": 128, "status": "ok", "train_time_s": 5.0,
                 "accuracy": 0.8})
    return pd.DataFrame(rows)


def test_the_summary_has_each_settings_interval_with_failed_and_contended_runs_apart():
    table = summary.summary_table(summary_runs()).set_index(["batch_size", "metric"])
    t = table.loc[(32, "train_time_s")]
    # the three quiet ok runs only: 10, 12, 14 s: mean 12, sd 2; a time's interval on the log scale
    logs = np.log([10.0, 12.0, 14.0])
    half = T975_DF2 * logs.std(ddof=1) / np.sqrt(3)
    assert (t["n"], t["mean"], t["sd"], t["min"], t["max"]) == (3, 12.0, 2.0, 10.0, 14.0)
    assert t["ci_low"] == pytest.approx(np.exp(logs.mean() - half))
    assert t["ci_high"] == pytest.approx(np.exp(logs.mean() + half))
    assert t["n_failed"] == 1 and t["n_contended"] == 1
    acc = table.loc[(32, "accuracy")]  # load changes no accuracy: the run timed under load counts for it
    assert acc["n"] == 4 and acc["n_contended"] == 0
    assert acc["mean"] == pytest.approx(0.93) and acc["sd"] == pytest.approx(np.std([0.90, 0.92, 0.94, 0.96], ddof=1))
    single = table.loc[(128, "train_time_s")]
    assert single["n"] == 1 and single["mean"] == 5.0 and np.isnan(single["ci_low"]) and np.isnan(single["sd"])
    assert {"throughput_img_s", "gpu_util_mean_pct"}.isdisjoint(set(table.index.get_level_values("metric")))
    # records made before outside load was measured (no column) count as quiet: the fifth run is averaged in
    old = summary.summary_table(summary_runs().drop(columns=["contended"])).set_index(["batch_size", "metric"])
    assert old.loc[(32, "train_time_s"), "n"] == 4 and old.loc[(32, "train_time_s"), "n_contended"] == 0
    assert groups.contended_count(frames.points(summary_runs())) == 1
    # every ok run (4 + 1) under outside load: the settings are still listed, with nothing averaged in
    busy = summary.summary_table(summary_runs().assign(contended=True)).set_index(["batch_size", "metric"])
    times = busy.xs("train_time_s", level="metric")
    assert set(times["n"]) == {0} and times["n_contended"].sum() == 5 and times["mean"].isna().all()
    assert busy.loc[(32, "accuracy"), "n"] == 4 and busy.loc[(128, "accuracy"), "n"] == 1  # accuracies count


def test_repeats_needed_for_a_target_half_width():
    need = summary.repeats_needed(summary_runs())
    need = need[need["metric"] == "train_time_s"].set_index("n")
    row = need.loc[3]
    # 3 runs, sd 2 s on a mean of 12 s: half-width 4.97 s against 3 % of 12 s = 0.36 s. n runs reach it when
    # t(n-1) x 2 / sqrt(n) <= 0.36: n = 121 (t(120) = 1.97993: 0.35999) does, n = 120 (t(119) = 1.98010: 0.36152)
    # does not
    assert row["half_width"] == pytest.approx(T975_DF2 * 2 / np.sqrt(3)) and not row["reached"]
    assert row["runs_needed"] == 121
    assert need.loc[1, "runs_needed"] is None or np.isnan(need.loc[1, "runs_needed"])  # one run: no spread


def test_the_framework_effect_is_tested_by_anova_and_friedman():
    rows = []
    accs = {"pytorch": [0.90, 0.91, 0.92], "tensorflow": [0.91, 0.92, 0.93], "caffe": [0.95, 0.96, 0.97]}
    for fw, values in accs.items():
        for seed, acc in enumerate(values, start=1):
            rows.append({"run_id": f"{fw}{seed}", "framework": fw, "dataset": "fashion_mnist", "preset": "caffe",
                         "cross_apply": None if fw == "caffe" else "preset", "network": "lenet", "device": "cpu",
                         "batch_size": 64, "learning_rate": 0.01, "iterations": 100, "threads": 2, "seed": seed,
                         "status": "ok", "train_time_s": 10.0 + seed, "accuracy": acc})
    effect = summary.framework_effect(pd.DataFrame(rows)).set_index("metric")
    acc = effect.loc["accuracy_pct"]
    # group means 91, 92, 96 (points), grand mean 93: between 3 (4 + 1 + 9) = 42 on 2 df; within 3 x 2 = 6 on 6 df
    f = (42 / 2) / (6 / 6)
    assert acc["anova"].statistic == pytest.approx(f) and acc["anova_p"] == pytest.approx((1 + 2 * f / 6) ** -3)
    # every seed ranks pytorch < tensorflow < caffe: rank sums 3, 6, 9; chi2 = 12 / (3 x 3 x 4) x 126 - 36 = 6
    assert acc["friedman"].statistic == pytest.approx(6.0) and acc["friedman_p"] == pytest.approx(np.exp(-3.0))
    tie = effect.loc["train_time_s", "friedman"]  # the same time for each framework on each seed
    assert np.isnan(tie.p) and tie.why == "every seed ties the frameworks"
    # Caffe's own runs and the two frameworks it was applied to share one label: the preset's, named by its owner
    # ("own defaults" would be true of Caffe's runs alone)
    owner_first = pd.DataFrame(sorted(rows, key=lambda r: r["framework"] != "caffe"))
    for table in (effect, summary.framework_effect(owner_first)):
        assert set(table["settings"]) == {"caffe's preset, bs 64, lr 0.01, 100 iterations, 2 threads"}
