"""The findings in words (dlbench.present.findings) on small hand-made frames: each observation agrees and disagrees."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from dlbench.analysis import observations, published, stats, summary
from dlbench.analysis.frames import points as frames_points
from dlbench.present import findings
from dlbench.testing.study import make_curves, make_runs, make_samples, one_default, preset_matrix

T975_DF2 = 4.302652729749462  # the t table: two-sided 95 %, 2 degrees of freedom


@pytest.fixture(scope="module")
def study():
    runs = make_runs()
    return runs, make_curves(runs), make_samples(runs)


def own_points(times: dict, accs: dict, dataset="mnist", device="cpu") -> pd.DataFrame:
    rows = [{"run_id": f"{fw}-{dataset}-{device}", "framework": fw, "dataset": dataset, "preset": "own",
             "device": device, "batch_size": 64, "learning_rate": 0.01, "iterations": 100, "threads": 1,
             "status": "ok", "train_time_s": t, "accuracy": accs[fw]} for fw, t in times.items()]
    return pd.DataFrame(rows)


# Three seeds of each point: times off by -2 %, 0, +2 % and accuracies by -0.1, 0, +0.1 points, and a small
# jitter of each point's own (JITTER, by its row), so that the pairs by seed differ a little from seed to seed:
# a difference with no spread at all is not testable (told apart where the means differ by more than noise).
SPREAD = ((1, 0.98, -0.001), (2, 1.0, 0.0), (3, 1.02, 0.001))
JITTER = (-0.5, 0.0, 0.5)


def repeated(df: pd.DataFrame) -> pd.DataFrame:
    def jitter(seed: int) -> np.ndarray:
        return np.array([JITTER[(i + seed) % 3] for i in range(len(df))])
    return pd.concat([df.assign(run_id=df["run_id"] + f"-s{seed}", seed=seed,
                                train_time_s=df["train_time_s"] * (t + 0.004 * jitter(seed)),
                                accuracy=df["accuracy"] + a + 0.0002 * jitter(seed)) for seed, t, a in SPREAD],
                     ignore_index=True)


def test_findings_pick_the_fastest_and_most_accurate_framework():
    runs = repeated(pd.concat([own_points({"caffe": 10, "tensorflow": 20, "pytorch": 15},
                                          {"caffe": 0.97, "tensorflow": 0.99, "pytorch": 0.98}),
                               own_points({"caffe": 5, "tensorflow": 1}, {"caffe": 0.90, "tensorflow": 0.90},
                                          device="gpu")]))
    fast = summary.framework_leaders(runs, "train_time_s").set_index("device")
    accurate = summary.framework_leaders(runs, "accuracy_pct").set_index("device")
    assert fast.loc["cpu", "leader"] == "caffe" and fast.loc["cpu", "state"] == "distinct"
    assert accurate.loc["cpu", "leader"] == "tensorflow" and accurate.loc["cpu", "state"] == "distinct"
    assert fast.loc["gpu", "leader"] == "tensorflow"
    # the same 90 % on the GPU, seed by seed within 0.02 points of each other: equivalent within 0.5 points
    assert accurate.loc["gpu", "state"] == "equivalent"
    # caffe's three CPU times 9.8, 10.02, 10.18 s (SPREAD and its JITTER): mean 10, the interval on the log scale,
    # exp(mean(log t) -/+ t(0.975, 2) sd(log t) / sqrt(3))
    caffe = runs[(runs["framework"] == "caffe") & (runs["device"] == "cpu")]["train_time_s"]
    assert sorted(caffe) == pytest.approx([9.8, 10.02, 10.18])
    logs = np.log([9.8, 10.02, 10.18])
    half = T975_DF2 * logs.std(ddof=1) / np.sqrt(3)
    low, high = np.exp(logs.mean() - half), np.exp(logs.mean() + half)
    text = findings.render(runs)
    assert f"caffe 10 s [{low:.4g}, {high:.4g}], n 3" in text
    assert "**Fastest on mnist/cpu, own defaults: caffe**, 10 s against pytorch 15 s" in text
    assert "No single most accurate on mnist/gpu, own defaults: caffe 90% and tensorflow are equivalent within " \
        "0.5 points" in text


def test_a_single_run_and_a_tie_read_as_such():
    single = own_points({"caffe": 10, "tensorflow": 20}, {"caffe": 0.97, "tensorflow": 0.99})
    v = observations.observe_caffe_fastest_on_cpu(single)
    assert v.verdict == "not testable (fewer than 3 runs on a side)"
    assert "caffe 10 s (a single run: no interval)" in v.evidence
    # the tie: caffe 9, 10, 11 s against tensorflow 10, 10.5, 9.5 s by seed, both 10 s on average: the paired t of
    # the log times (two degrees of freedom) cannot tell them apart, and the spread is too wide for equivalence
    # within 5 %: inconclusive, with the smallest ratio the test would have found
    tie = pd.concat([own_points({"caffe": t, "tensorflow": u}, {"caffe": 0.9, "tensorflow": 0.9}).assign(
        seed=seed, run_id=lambda d, s=seed: d["run_id"] + f"-{s}") for seed, t, u in ((1, 9.0, 10.0),
                                                                                     (2, 10.0, 10.5),
                                                                                     (3, 11.0, 9.5))])
    v = observations.observe_caffe_fastest_on_cpu(tie)
    assert v.verdict == "inconclusive"
    d = np.log([9.0, 10.0, 11.0]) - np.log([10.0, 10.5, 9.5])
    se = d.std(ddof=1) / np.sqrt(3)
    p = 2 * sps.t.sf(abs(d.mean()) / se, 2)
    detectable = np.exp((T975_DF2 + sps.t.ppf(0.8, 2)) * se)
    assert f"caffe not told apart from (inconclusive) tensorflow (paired t by seed of log values, p = {p:.3g}; a " \
        f"{detectable:.2g}x difference would have been detected)" in v.evidence
    logs = np.log([9.0, 10.0, 11.0])  # caffe's interval on the log scale
    half = T975_DF2 * logs.std(ddof=1) / np.sqrt(3)
    assert f"caffe 10 s [{np.exp(logs.mean() - half):.4g}, {np.exp(logs.mean() + half):.4g}], n 3" in v.evidence


def test_observations_a_and_b_agree_and_disagree():
    holds = repeated(own_points({"caffe": 10, "tensorflow": 20}, {"caffe": 0.97, "tensorflow": 0.99}))
    fails = repeated(own_points({"caffe": 30, "tensorflow": 20}, {"caffe": 0.99, "tensorflow": 0.97}))
    assert observations.observe_caffe_fastest_on_cpu(holds).verdict == "agrees"
    assert observations.observe_caffe_fastest_on_cpu(fails).verdict == "disagrees"
    assert observations.observe_tensorflow_most_accurate(holds).verdict == "agrees"
    assert observations.observe_tensorflow_most_accurate(fails).verdict == "disagrees"
    no_caffe = repeated(own_points({"pytorch": 1, "tensorflow": 2}, {"pytorch": 0.9, "tensorflow": 0.9}))
    assert observations.observe_caffe_fastest_on_cpu(no_caffe).verdict.startswith("not tested in this run (")
    cross = holds.assign(preset="caffe")  # the same settings for all: not the frameworks' own defaults
    assert observations.observe_caffe_fastest_on_cpu(cross).verdict.startswith("not tested")
    # contended points are left out: caffe's fast runs were timed under load, so nothing is left to compare
    loaded = holds.assign(contended=holds["framework"] == "caffe")
    assert observations.observe_caffe_fastest_on_cpu(loaded).verdict.startswith("not tested")
    assert "3 ok point(s) trained while others loaded the machine" in findings.render(loaded)


def test_observation_c_gpu_faster():
    cpu = own_points({"caffe": 10, "tensorflow": 20}, {"caffe": 0.9, "tensorflow": 0.9})
    gpu = own_points({"caffe": 1, "tensorflow": 2}, {"caffe": 0.9, "tensorflow": 0.9}, device="gpu")
    v = observations.observe_gpu_faster(repeated(pd.concat([cpu, gpu])))
    # caffe: CPU 9.8, 10.02, 10.18 s against GPU 0.978, 1, 1.022 s (SPREAD and JITTER): ratio of the means 10; the
    # variance of its log by the delta method, var / (n mean^2) of each side, its degrees of freedom by
    # Welch-Satterthwaite
    c, g = np.array([9.8, 10.02, 10.18]), np.array([0.978, 1.0, 1.022])
    shares = np.array([c.var(ddof=1) / 3 / c.mean() ** 2, g.var(ddof=1) / 3 / g.mean() ** 2])
    df = shares.sum() ** 2 / (shares ** 2 / 2).sum()
    half = sps.t.ppf(0.975, df) * np.sqrt(shares.sum())
    assert v.verdict == "agrees"
    assert f"caffe on mnist 10x [{10 * np.exp(-half):.3g}, {10 * np.exp(half):.3g}], GPU faster" in v.evidence
    single = observations.observe_gpu_faster(pd.concat([cpu, gpu]))
    assert single.verdict.startswith("not testable")
    assert "caffe on mnist 10x (not testable: fewer than 3 runs on a side)" in single.evidence
    slow = own_points({"caffe": 1, "tensorflow": 40}, {"caffe": 0.9, "tensorflow": 0.9}, device="gpu")
    v = observations.observe_gpu_faster(repeated(pd.concat([cpu, slow])))
    assert v.verdict == "disagrees" and "tensorflow on mnist 0.5x [" in v.evidence and "CPU faster" in v.evidence
    # tensorflow's GPU 1 % slower than its CPU, within the 2 % spread of the seeds: inconclusive, not "disagrees"
    close = repeated(pd.concat([cpu, own_points({"caffe": 1, "tensorflow": 20.2}, {"caffe": 0.9, "tensorflow": 0.9},
                                                device="gpu")]))
    close.loc[(close["framework"] == "tensorflow") & (close["device"] == "gpu"), "train_time_s"] = [20.6, 19.8, 20.2]
    v = observations.observe_gpu_faster(close)
    assert v.verdict == "inconclusive" and "tensorflow on mnist 0.99x [" in v.evidence
    assert "tensorflow on mnist 0.99x [0.947, 1.03], inconclusive" in v.evidence
    assert observations.observe_gpu_faster(cpu).verdict == "not tested in this run (no ok GPU point)"
    assert "Holm over the 2 pairs" in v.evidence


def test_observation_c_reads_each_pair_at_holms_p_over_the_frameworks_and_datasets():
    """Eight framework-dataset pairs where nothing differs but one pair's CPU is faster at p about 0.01: alone it
    would say "disagrees"; read at Holm's p over the eight, it is told from nothing."""
    fws = {"caffe": 10.0, "tensorflow": 10.0, "pytorch": 10.0, "theano": 10.0}
    rows = []
    for dataset in ("mnist", "cifar10"):
        for device in ("cpu", "gpu"):
            rows.append(own_points(fws, dict.fromkeys(fws, 0.9), dataset=dataset, device=device))
    runs = repeated(pd.concat(rows, ignore_index=True))
    # each pair: GPU the same as the CPU, with a spread of its own (the seeds' 2 %, and a wobble per pair)
    wobble = {(f, d): 1 + 0.01 * i for i, (f, d) in enumerate((f, d) for f in fws for d in ("mnist", "cifar10"))}
    gpu = runs["device"] == "gpu"
    runs.loc[gpu, "train_time_s"] *= [wobble[(f, d)] for f, d in zip(runs.loc[gpu, "framework"],
                                                                      runs.loc[gpu, "dataset"])]
    one = gpu & (runs["framework"] == "theano") & (runs["dataset"] == "cifar10")
    runs.loc[one, "train_time_s"] = [10.5, 10.8, 10.6]  # its CPU 9.8, 10.02, 10.18 s: alone, p about 0.013
    pairs = published.device_pairs(runs, "train_time_s", own_only=False).set_index(["framework", "dataset"])
    assert pairs.loc[("theano", "cifar10"), "told"] == "CPU faster"  # the pair by itself
    assert pairs.loc[("theano", "cifar10"), "test"].p * 8 > stats.ALPHA  # but not at Holm's p over eight
    v = observations.observe_gpu_faster(runs)
    assert v.verdict == "inconclusive" and "Holm over the 8 pairs" in v.evidence, v
    assert "theano on cifar10 0.9" in v.evidence and "CPU faster" not in v.evidence


def presets_runs(own_acc: float, cross_acc: float) -> pd.DataFrame:
    rows = []
    for preset, acc in (("own", own_acc), ("tensorflow", cross_acc), ("caffe", 0.5)):
        rows.append({"run_id": preset, "framework": "pytorch", "dataset": "mnist", "preset": preset, "device": "cpu",
                     "status": "ok", "train_time_s": 1.0, "accuracy": acc, "batch_size": 64, "learning_rate": 0.01,
                     "iterations": 100})
    rows.append({**rows[-1], "run_id": "x", "preset": "theano", "status": "diverged", "accuracy": np.nan,
                 "train_time_s": np.nan})
    return pd.DataFrame(rows)


def test_own_vs_cross_and_cross_effects_name_the_reading():
    beaten = presets_runs(0.90, 0.95)
    table = summary.own_vs_cross(beaten)
    assert table.iloc[0]["best_cross"] == "tensorflow" and not table.iloc[0]["own_is_best"]
    assert table.iloc[0]["reading"] == "whole preset"  # records without cross_apply: the whole preset
    settings = beaten.assign(cross_apply="settings")
    assert set(summary.own_vs_cross(settings)["reading"]) == {"settings only"}
    cross = summary.cross_effects(beaten).set_index("whose")
    assert cross.loc["tensorflow", "accuracy_change_pp"] == pytest.approx(5.0)
    assert cross.loc["theano", "n_failed"] == 1
    assert cross.loc["torch", "reading"] == "own defaults"
    assert summary.readings_ran(settings) == ["settings"] and summary.readings_ran(beaten) == ["preset"]


def test_observation_d_best_settings_do_not_carry_over():
    # each framework is best with its own settings, and loses more than 0.5 points with the other's
    apart = repeated(preset_matrix({"caffe": {"caffe": 0.99, "tensorflow": 0.97}, "tensorflow": {"tensorflow": 0.99,
                                                                                      "caffe": 0.96}}))
    v = observations.observe_best_does_not_carry_over(apart)
    assert v.verdict == "agrees" and "settings only reading (the study's)" in v.evidence
    assert "in 2 of 2 pairs" in v.evidence and "caffe's best (caffe's) on tensorflow (mnist/cpu): 96.00%" in v.evidence
    # both are best with Caffe's settings: Caffe's best carries over to TensorFlow, and TensorFlow's to Caffe
    shared = repeated(preset_matrix({"caffe": {"caffe": 0.99, "tensorflow": 0.97}, "tensorflow": {"tensorflow": 0.96,
                                                                                       "caffe": 0.99}}))
    v = observations.observe_best_does_not_carry_over(shared)
    assert v.verdict == "disagrees" and "in 0 of 2 pairs" in v.evidence
    # only the whole-preset reading ran: tested on it, and said so
    v = observations.observe_best_does_not_carry_over(repeated(preset_matrix(
        {"caffe": {"caffe": 0.99, "tensorflow": 0.97}, "tensorflow": {"tensorflow": 0.99, "caffe": 0.96}},
        reading="preset")))
    assert v.verdict == "agrees" and "whole preset reading (not the study's" in v.evidence
    # both readings: the study's decides, the other is reported
    both = pd.concat([apart, repeated(preset_matrix({"caffe": {"tensorflow": 0.99}, "tensorflow": {"caffe": 0.99}},
                                                 reading="preset"))])
    v = observations.observe_best_does_not_carry_over(both)
    assert v.verdict == "agrees" and "Under the whole preset reading: 0 of 2 pairs fell short" in v.evidence
    one_preset = preset_matrix({"caffe": {"caffe": 0.99}, "tensorflow": {"tensorflow": 0.99}})
    single = observations.observe_best_does_not_carry_over(preset_matrix(
        {"caffe": {"caffe": 0.99, "tensorflow": 0.97}, "tensorflow": {"tensorflow": 0.99, "caffe": 0.96}}))
    # one run per preset: a shortfall, but no test
    assert single.verdict == "not testable (fewer than three runs, or no spread, on a side of every pair)"
    assert "96.00% vs its best (tensorflow's) 99.00%: not testable (fewer than 3 runs on a side)" in single.evidence
    assert observations.observe_best_does_not_carry_over(one_preset).verdict.startswith("not tested in this run (")


def published_table():
    return published.read_published()


def test_observations_g_and_h_per_dataset_and_device_against_the_published_leaders():
    # published: MNIST/CPU fastest Caffe, most accurate TensorFlow; CIFAR-10/GPU fastest Caffe, most accurate TF
    holds = repeated(pd.concat([own_points({"caffe": 10, "tensorflow": 20}, {"caffe": 0.97, "tensorflow": 0.99}),
                                own_points({"caffe": 5, "tensorflow": 20}, {"caffe": 0.70, "tensorflow": 0.80},
                                           dataset="cifar10", device="gpu")]))
    fails = repeated(pd.concat([own_points({"caffe": 10, "tensorflow": 20}, {"caffe": 0.97, "tensorflow": 0.99}),
                                own_points({"caffe": 25, "tensorflow": 20}, {"caffe": 0.85, "tensorflow": 0.80},
                                           dataset="cifar10", device="gpu")]))
    g, h = observations.observe_fastest_per_dataset_device, observations.observe_most_accurate_per_dataset_device
    assert g(holds, published_table()).verdict == "agrees" and h(holds, published_table()).verdict == "agrees"
    v = g(fails, published_table())
    assert v.verdict == "disagrees" and "mnist/cpu: published caffe (512.2 s on mnist); here caffe 10 s" in v.evidence
    assert "cifar10/gpu: published caffe (183.5 s on cifar10); here tensorflow 20 s" in v.evidence
    # digits are not MNIST: the order is compared, no published figure is set beside them
    digits = observations.observe_fastest_per_dataset_device(
        holds[holds["device"] == "cpu"].assign(dataset="digits"), published_table())
    assert digits.verdict == "agrees" and "digits (not mnist: only the frameworks' order is compared)/cpu: published " \
        "caffe; here" in digits.evidence and "512.2" not in digits.evidence
    assert h(fails, published_table()).verdict == "disagrees"
    one = own_points({"caffe": 10}, {"caffe": 0.97})
    assert g(one, published_table()).verdict.startswith("not tested in this run (")
    assert h(holds, None).verdict == "not tested in this run (the published table is missing)"
    texts = {o.key: o.text for o in observations.OBSERVATIONS}
    assert "mnist: CPU caffe, GPU tensorflow; cifar10: CPU theano, GPU caffe" in texts["g"]
    assert "GPU tensorflow and torch (tied)" in texts["h"]


def test_observation_i_gpu_speedups_in_the_published_order():
    # published MNIST: Torch 28.5x > TensorFlow 16.3x > Caffe 5.3x
    cpu = own_points({"caffe": 10, "tensorflow": 20, "pytorch": 40}, {"caffe": 0.9, "tensorflow": 0.9,
                                                                     "pytorch": 0.9})
    same = own_points({"caffe": 5, "tensorflow": 4, "pytorch": 2}, {"caffe": 0.9, "tensorflow": 0.9,
                                                                    "pytorch": 0.9}, device="gpu")
    v = observations.observe_gpu_speedup_order(repeated(pd.concat([cpu, same])), published_table())
    assert v.verdict == "agrees" and "pytorch 20x [" in v.evidence and "(published 28.5x)" in v.evidence
    assert "pytorch > tensorflow agrees, pytorch > caffe agrees, tensorflow > caffe agrees" in v.evidence
    single = observations.observe_gpu_speedup_order(pd.concat([cpu, same]), published_table())
    assert single.verdict.startswith("not testable (")
    assert "pytorch 20x (not testable: fewer than 3 runs on a side)" in single.evidence
    swapped = same.assign(train_time_s=[1.0, 4.0, 2.0])  # caffe 10x now gains more than tensorflow 5x
    v = observations.observe_gpu_speedup_order(repeated(pd.concat([cpu, swapped])), published_table())
    assert v.verdict == "disagrees" and "tensorflow > caffe disagrees" in v.evidence
    # tensorflow 5x against caffe 4.95x, within the seeds' spread: that pair is inconclusive, the others agree
    near = repeated(pd.concat([cpu, same.assign(train_time_s=[10 / 4.95, 4.0, 2.0])]))
    near.loc[(near["framework"] == "caffe") & (near["device"] == "gpu"), "train_time_s"] *= [1.03, 0.97, 1.0]
    v = observations.observe_gpu_speedup_order(near, published_table())
    assert v.verdict == "inconclusive" and "tensorflow > caffe inconclusive" in v.evidence
    assert "pytorch > tensorflow agrees, pytorch > caffe agrees" in v.evidence
    alone = observations.observe_gpu_speedup_order(pd.concat([cpu, same.iloc[:1]]), published_table())
    assert alone.verdict.startswith("not tested in this run (one framework per dataset")
    assert "mnist: caffe 5.28x, tensorflow 16.3x, theano 20.6x, torch 28.5x" in \
        next(o.text for o in observations.OBSERVATIONS if o.key == "i")


def test_observation_j_tensorflow_tests_cifar10_more_slowly_on_gpu():
    cpu = own_points({"tensorflow": 100}, {"tensorflow": 0.8}, dataset="cifar10")
    gpu = own_points({"tensorflow": 10}, {"tensorflow": 0.8}, dataset="cifar10", device="gpu")

    def seeds(cpu_s: float, gpu_s: float, spread=(0.98, 1.0, 1.02)) -> pd.DataFrame:
        runs = repeated(pd.concat([cpu.assign(test_time_s=cpu_s), gpu.assign(test_time_s=gpu_s)]))
        return runs.assign(test_time_s=runs["test_time_s"] * np.tile(spread, 2))

    v = observations.observe_tensorflow_cifar_testing(seeds(2.0, 3.0), published_table())
    assert v.verdict == "agrees" and "CPU 2 s, GPU 3 s, CPU / GPU 0.667x [" in v.evidence
    assert "(published: CPU 2.69 s, GPU 5.76 s)" in v.evidence and "Welch's t of log means" in v.evidence
    assert observations.observe_tensorflow_cifar_testing(seeds(2.0, 0.5), published_table()).verdict == "disagrees"
    noisy = seeds(2.0, 2.04, spread=(0.9, 1.0, 1.1))
    v = observations.observe_tensorflow_cifar_testing(noisy, published_table())
    assert v.verdict == "inconclusive" and "CPU / GPU 0.98x [" in v.evidence
    once = pd.concat([cpu.assign(test_time_s=2.0), gpu.assign(test_time_s=3.0)])
    v = observations.observe_tensorflow_cifar_testing(once, published_table())
    assert v.verdict.startswith("not testable") and "0.667x (not testable: fewer than 3 runs on a side)" in v.evidence
    mnist = seeds(2.0, 3.0).assign(dataset="mnist")
    assert observations.observe_tensorflow_cifar_testing(mnist, published_table()).verdict.startswith("not tested")


def test_provider_guidance_carries_its_numbers_or_says_what_is_missing():
    runs = own_points({"caffe": 10, "tensorflow": 20}, {"caffe": 0.97, "tensorflow": 0.99})
    runs = runs.assign(throughput_img_s=[1000.0, 600.0], rss_peak_mb=[512.0, 2048.0], threads=[2, 1])
    lines = findings.provider_guidance(runs)
    assert lines[0].startswith("On mnist/cpu, the most training throughput per core (CPU thread allotted): "
                               "tensorflow with own defaults")
    assert "600 img/s (600 img/s on 1 threads)" in lines[0]
    assert "the best of the others: caffe 500 img/s" in lines[0]
    assert "per GB of peak resident memory: caffe" in lines[1] and "2000 img/s (1000 img/s at 0.5 GB)" in lines[1]
    assert any("No library, thread or inter-op setting was varied" in li for li in lines)
    assert any("No GPU point ran ok" in li for li in lines)
    knobs = pd.concat([runs, runs.iloc[[1]].assign(run_id="tf2", interop_threads=2, throughput_img_s=900.0)])
    line = next(li for li in findings.provider_guidance(knobs) if li.startswith("tensorflow on mnist/cpu"))
    assert "default library, 1 threads, 2 inter-op gave the most throughput per core in 1 of 1" in line
    assert "900 img/s per core" in line and "600 img/s per core" in line
    assert "No ok point measured" in findings.provider_guidance(runs.assign(throughput_img_s=np.nan))[0]
    assert "tensorflow 600 img/s (a single run: no interval); caffe 500 img/s (a single run: no interval): not " \
        "testable (fewer than 3 runs on a side)" in lines[0]
    # three seeds, 2 % apart (caffe 490, 510, 500 img/s per core by seed, tensorflow 600, 588, 612): tensorflow's
    # 600 img/s per core told apart from caffe's 500 (paired t by seed)
    seeded = repeated(runs.assign(train_time_s=1.0))
    seeded = seeded.assign(throughput_img_s=seeded["throughput_img_s"] * np.tile([0.98, 1.0, 1.02], 2))
    line = findings.provider_guidance(seeded)[0]
    assert "tensorflow 600 img/s [" in line and "tensorflow told apart from caffe (paired t by seed" in line


def test_consumer_guidance_names_the_soonest_to_a_target():
    runs = own_points({"caffe": 4, "tensorflow": 8}, {"caffe": 0.95, "tensorflow": 0.93})
    curves = pd.DataFrame({"run_id": ["caffe-mnist-cpu"] * 2 + ["tensorflow-mnist-cpu"] * 2, "kind": ["test"] * 4,
                           "iteration": [50, 100, 50, 100], "train_time_s": [2.0, 4.0, 3.0, 8.0],
                           "accuracy": [0.94, 0.95, 0.90, 0.93]})
    lines = findings.consumer_guidance(runs, curves)
    assert lines[0].startswith("To reach 93.0% test accuracy on mnist/cpu") and "the soonest was caffe" in lines[0]
    assert ": 2 s (test at iteration 50; 1 of that setting's 1 counted runs reached it)" in lines[0]
    assert "then tensorflow with own defaults" in lines[0] and ": 8 s (1 of that setting's 1 counted" in lines[0]
    assert "cannot be said" in findings.consumer_guidance(runs, pd.DataFrame())[0]
    # a compile phase is part of the time to the target, and said (a few microseconds between phase marks is not)
    compiled = runs.assign(compile_time_s=[1e-05, 0.5])
    line = findings.consumer_guidance(compiled, curves)[0]
    assert ": 8.5 s (0.5 s of it compiling; 1 of that setting's 1" in line
    assert line.count("of it compiling") == 1, line
    assert "caffe 2 s (a single run: no interval); tensorflow 8 s (a single run: no interval): not testable (fewer " \
        "than 3 runs on a side)" in lines[0]
    # three seeds of each: caffe reaches 93 % in 1.95, 2.0, 2.05 s, tensorflow in 7.7, 8.0, 8.3 s (a ratio
    # that varies: times are compared on their logarithms): told apart
    seeded = repeated(runs)
    curves3 = pd.concat([curves.assign(run_id=curves["run_id"] + f"-s{seed}", train_time_s=curves["train_time_s"] +
                                       (seed - 2) * np.array([0.05, 0.1, 0.1, 0.3])) for seed in (1, 2, 3)])
    line = findings.consumer_guidance(seeded, curves3)[0]
    assert "caffe 2 s [" in line and "caffe told apart from tensorflow (paired t by seed" in line


def test_the_tuning_table_in_the_findings():
    rows = []
    for bs, lr, acc, t in ((64, 0.01, 0.95, 100.0), (32, 0.01, 0.97, 150.0), (128, 0.01, 0.966, 60.0)):
        rows.append({"run_id": f"c{bs}", "framework": "caffe", "dataset": "mnist", "preset": "own", "device": "cpu",
                     "batch_size": bs, "learning_rate": lr, "iterations": 100, "status": "ok", "accuracy": acc,
                     "train_time_s": t, "tuning_grid": "tuning:x", "tuning_is_default": bs == 64})
    text = findings.render(pd.DataFrame(rows), None, published_table())
    section = text.split("## Tuned against own defaults")[1].split("\n## ")[0]
    # one run per cell: every gain and the best cell's lead are not testable
    assert ("| caffe | mnist | cpu | caffe | best accuracy | 32 | 0.01 | 100 | iterations | 97 | 150 | +2, not "
            "testable | -50, not testable | not testable |") in section
    assert ("| fastest within 0.5 points | 128 | 0.01 | 100 | iterations | 96.6 | 60 | +1.6, not testable "
            "| +40, not testable |") in section
    assert "| defaults | 64 | 0.01 | 100 | iterations | 95 | 100 | +0 | +0 |" in section
    assert "Not tested in this run: no sub-study tunes" in findings.render(pd.DataFrame(rows[:1]).drop(
        columns=["tuning_grid"]), None, published_table())


def batch_runs(times, accs, length="epochs") -> pd.DataFrame:
    return pd.DataFrame({"run_id": ["s", "l"], "framework": ["caffe"] * 2, "dataset": ["mnist"] * 2,
                         "preset": ["own"] * 2, "device": ["cpu"] * 2, "batch_size": [32, 256],
                         "learning_rate": [0.01] * 2, "epochs": [2, 2] if length == "epochs" else [np.nan] * 2,
                         "iterations": [2000, 250] if length == "epochs" else [100, 100], "threads": [1, 1],
                         "status": ["ok"] * 2, "train_time_s": times, "accuracy": accs})


def test_observation_e_batch_size():
    e = observations.observe_batch_size
    assert e(repeated(batch_runs([10.0, 4.0], [0.98, 0.95]))).verdict == "agrees"
    assert e(repeated(batch_runs([10.0, 14.0], [0.98, 0.95]))).verdict == "disagrees"
    assert e(repeated(batch_runs([10.0, 4.0], [0.95, 0.98]))).verdict == "disagrees"
    assert e(batch_runs([10.0, 4.0], [0.98, 0.95])).verdict == "not testable (fewer than 3 runs on a side)"
    # faster, but the accuracies (98 % against 97, 99, 97.5 %) can neither be told apart nor held within 0.5 points
    # of each other: inconclusive, not "agrees"
    noisy = repeated(batch_runs([10.0, 4.0], [0.98, 0.98]))
    noisy.loc[noisy["batch_size"] == 256, "accuracy"] = [0.97, 0.99, 0.975]
    v = e(noisy)
    assert v.verdict == "inconclusive" and "faster in 1 of 1 sweeps" in v.evidence
    assert "less accurate in 0 (more accurate in 0)" in v.evidence and "(inconclusive; paired t by seed" in v.evidence
    v = observations.observe_batch_size(batch_runs([10.0, 40.0], [0.95, 0.98], length="iterations"))
    assert v.verdict == "not tested in this run (batch sizes were swept at a fixed number of iterations, not epochs)"


def length_runs(accs, times=(1.0, 2.0, 4.0)) -> pd.DataFrame:
    return pd.DataFrame({"run_id": list("abc"), "framework": ["tensorflow"] * 3, "dataset": ["mnist"] * 3,
                         "preset": ["own"] * 3, "device": ["cpu"] * 3, "batch_size": [50] * 3,
                         "learning_rate": [1e-4] * 3, "epochs": [1, 2, 4], "threads": [1] * 3,
                         "status": ["ok"] * 3, "train_time_s": list(times), "accuracy": accs})


def test_observation_f_length():
    f = observations.observe_length
    v = f(repeated(length_runs([0.80, 0.90, 0.92])))
    # lengths 1, 2, 4 epochs: the first step gains 10 points per epoch, the last 1: 9 points per epoch less
    assert v.verdict == "agrees" and "last's +9 points" in v.evidence and "saturate in 1 of 1" in v.evidence
    assert f(repeated(length_runs([0.80, 0.81, 0.95]))).verdict == "disagrees"  # 1 then 7 points per epoch
    assert f(repeated(length_runs([0.80, 0.90, 0.92], times=(4.0, 2.0, 1.0)))).verdict == "disagrees"
    once = f(length_runs([0.80, 0.90, 0.92]))
    assert once.verdict == "not testable (fewer than three runs, or no spread, at every length)"
    # 0.4 points per epoch against 0.35: within the seeds' spread of 0.5 points, inconclusive
    noisy = repeated(length_runs([0.800, 0.804, 0.811]))
    noisy["accuracy"] = noisy["accuracy"] + np.repeat([-0.004, 0.0, 0.004], 3)
    assert f(noisy).verdict == "inconclusive"
    two = repeated(length_runs([0.80, 0.90, 0.92]))
    two = two[two["epochs"] < 4]
    assert "saturation needs at least three" in f(two).verdict
    assert f(length_runs([0.80, 0.90, 0.92]).iloc[:1]).verdict.startswith("not tested")


def test_observation_f_from_learning_curves_without_a_length_sweep():
    runs = repeated(length_runs([0.8, 0.9, 0.92]).iloc[:1])
    curves = pd.DataFrame({"run_id": np.repeat(list(runs["run_id"]), 3), "kind": ["test"] * 9,
                           "framework": "tensorflow", "dataset": "mnist",  # as the curves table has them
                           "iteration": [100, 200, 300] * 3, "train_time_s": [1.0, 2.0, 3.0] * 3,
                           "accuracy": [0.79, 0.89, 0.91, 0.80, 0.90, 0.92, 0.81, 0.91, 0.93]})
    v = observations.observe_length(runs, curves)
    # 10 points per 100 iterations, then 2: saturates, told by the slopes' contrast over the three seeds
    assert v.verdict == "agrees" and "learning curves" in v.evidence and "3 run(s)" in v.evidence
    one = observations.observe_length(runs.iloc[:1], curves[curves["run_id"] == runs["run_id"].iloc[0]])
    assert one.verdict == "not testable (fewer than three runs, or no spread, at every length)"


def test_findings_count_failed_points(study):
    runs, curves, _ = study
    fails = summary.failures(runs)
    assert fails["n"].sum() == (runs.status != "ok").sum()
    row = fails[(fails.framework == "theano") & (fails.status == "diverged")].iloc[0]
    assert row["n"] == ((runs.framework == "theano") & (runs.status == "diverged")).sum()
    assert "nan" in row["example_reason"]


def test_write_findings_writes_markdown_with_every_observation(study, tmp_path):
    # make_runs is a full factorial: every framework's own points split evenly between epochs 2 and 8, threads 1
    # and 4, and its tuning grid's batch sizes and learning rates, so none of them is its default point (a tie)
    # and nothing would be set beside the published figures: one_default keeps its own points at one setting.
    full, _, _ = study
    runs = one_default(full)
    curves = make_curves(runs)
    out = tmp_path / "results" / "findings.md"
    text = findings.write_findings(runs, curves, out, published.PUBLISHED_CSV)
    assert out.read_text() == text
    failed = int((runs.status != "ok").sum())
    assert f"{failed} of {len(runs)} points failed" in text
    assert "## This machine next to the published figures" in text and "| cifar10 | cifar10 |" in text
    assert "| digits | mnist |" not in text  # digits (1,797 small images) are not timed against MNIST
    # Every observation's verdict, as the hand-made study (dlbench.testing.study.make_runs) was built to give it;
    # findings.md states each one. One seed per point: each default point is a single run, so no comparison of
    # them is testable (three runs a side at least).
    single = "not testable (fewer than 3 runs on a side)"
    expected = {
        "a": single,  # Caffe's base time is the lowest, but one run per framework
        "b": single,  # accuracy has no framework term, and one run per framework
        "d": "not tested in this run (no two frameworks each ran at least two frameworks' presets, among them "
             "the one that served the other best)",  # presets `own` and `caffe`: Caffe's own is `caffe`
        "e": single,  # larger batches faster and less accurate, but one run per setting
        "f": "not tested in this run (lengths swept with only two values (time longer, told apart, in 0 of 84 "
             "sweeps), and saturation needs at least three)",  # epochs 2 and 8 only, one run each
        "g": single,  # published: Theano fastest on CIFAR-10's CPU; here Caffe, by one run each
        "h": single,  # as b
        "i": single,  # every framework's GPU speed-up is 10x, one run each
        "j": single,  # TensorFlow tests CIFAR-10 ten times faster on the GPU here, by one run a device
        "c": single,  # GPU 10x faster, but every CPU/GPU pair is single runs
    }
    verdicts = observations.observations(runs, curves, pd.read_csv(published.PUBLISHED_CSV))
    assert {key: v.verdict for key, v in verdicts.items()} == expected
    for obs in observations.OBSERVATIONS:
        assert f"- ({obs.key}) {obs.text} **{expected[obs.key]}**" in text
    assert "here caffe 48 s (a single run: no interval); pytorch 96 s" in verdicts["g"].evidence
    assert "Answered (agrees, disagrees or equivalent within the margin) for 0 of 10 observations" in text


def test_write_findings_on_an_empty_run(tmp_path):
    text = findings.write_findings(pd.DataFrame(columns=["run_id", "framework", "dataset", "status"]),
                                   pd.DataFrame(), tmp_path / "f.md")
    assert "nothing to report" in text


def test_the_modern_section_names_the_fastest_configuration_to_a_target_and_what_each_switch_bought():
    from dlbench.testing.study import make_modern_runs

    runs = pd.concat([make_runs(), make_modern_runs()], ignore_index=True).assign(cpu_bf16="avx512_bf16")
    text = findings.render(runs, make_curves(runs))
    section = text.split("## Compiled or not, and in which precision", 1)[1].split("\n## ", 1)[0]
    assert "native bfloat16 instructions: avx512_bf16" in section
    fastest = next(line for line in section.splitlines() if line.startswith("**Fastest to"))
    assert fastest.startswith("**Fastest to 84.2% test accuracy on fashion_mnist/cpu**")
    assert "jax compiled, fp32 on 2 thread(s) with flax defaults" in fastest and "(3.5 s of it compiling)" in fastest
    assert "| pytorch compiled, fp32 | 2 | flax |" in section
    # one seed per point: every pair's speed-up and accuracy change is a single run, no interval
    assert "- pytorch: compiled trained 1.30-1.30x as fast as eager over 4 setting(s), told faster in 0" in section
    assert "- jax: bf16 trained 0.80-0.80x as fast as fp32" in section
    assert "1 thread(s): 0.8x, not testable, accuracy -0.4, not testable points" in section
    plain = findings.render(make_runs(), make_curves(make_runs()))
    assert "Not tested in this run: no framework ran both eager and compiled" in plain


# docs/reproduction.md: the framework effect at full length, Caffe's LeNet on four frameworks, 5 seeds (accuracy %)
EVIDENCE = {"caffe": [89.80, 89.65, 89.32, 89.84, 90.02], "pytorch": [89.73, 90.15, 89.39, 89.77, 90.06],
            "tensorflow": [89.51, 89.90, 89.51, 89.75, 89.82], "theano": [89.92, 89.50, 89.61, 89.64, 89.74]}


def test_the_findings_test_the_framework_effect_as_docs_reproduction_cites_it():
    rows = [{"run_id": f"{fw}{seed}", "framework": fw, "dataset": "fashion_mnist", "preset": "caffe",
             "cross_apply": None if fw == "caffe" else "preset", "network": "lenet", "device": "cpu",
             "batch_size": 64, "learning_rate": 0.01, "iterations": 10000, "threads": 2, "seed": seed,
             "status": "ok", "train_time_s": 100.0 + seed * fw.count("a"), "accuracy": acc / 100}
            for fw, accs in EVIDENCE.items() for seed, acc in enumerate(accs, start=1)]
    text = findings.render(pd.DataFrame(rows))
    section = text.split("## Does the framework matter?")[1].split("\n## ")[0]
    line = next(li for li in section.splitlines() if "test accuracy" in li)
    assert "one-way ANOVA: F(3, 16) = 0.352, p = 0.788" in line
    assert "Friedman (seed as block): chi2(3) = 1.32, p = 0.724" in line
    # every two frameworks' accuracies within 0.5 points by two one-sided tests (paired by seed); the widest pair,
    # pytorch and theano (0.14 points apart), at p = 0.0452
    assert ("**the frameworks are equivalent within the margin** (TOST within +/-0.5 points: p = 0.0452, the "
            "widest pair)") in line
    assert "caffe 89.73% [89.4, 90.05], n 5" in line  # the interval docs/reproduction.md's table gives


def test_the_switch_section_says_what_channels_last_bought_with_its_interval():
    """PyTorch's layout as a switch, on a hand-made table: three seeds in each layout, everything else the same; the
    findings give channels_last's speed-up over contiguous with its 95 % interval (paired t by seed on the log
    scale), as they give compiling's, and no framework without the switch has the line."""
    from dlbench.testing.study import make_modern_runs

    base = make_modern_runs()
    base = base[(base["compile"] == "eager") & (base["precision"] == "fp32") & (base["threads"] == 1)]
    contiguous, opted = [2000.0, 2100.0, 1900.0], [2900.0, 2950.0, 2800.0]
    rows = []
    for seed in (1, 2, 3):
        for r in base.to_dict("records"):
            layouts = {"contiguous": contiguous, "channels_last": opted} if r["framework"] == "pytorch" else {None: []}
            for layout, speeds in layouts.items():
                img_s = speeds[seed - 1] if speeds else r["throughput_img_s"]
                rows.append({**r, "run_id": f"{r['run_id']}-{layout}-s{seed}", "seed": seed, "repeat": seed - 1,
                             "memory_format": layout, "throughput_img_s": img_s, "train_time_s": 60000 / img_s,
                             "accuracy": r["accuracy"] + 0.001 * seed + 0.002 * (layout == "channels_last")})
    runs = pd.DataFrame(rows)
    section = findings.render(runs, make_curves(runs)).split("## Compiled or not, and in which precision", 1)[1]
    section = section.split("\n## ", 1)[0]
    log_ratios = np.log(np.array(opted) / np.array(contiguous))
    half = T975_DF2 * log_ratios.std(ddof=1) / np.sqrt(3)
    low, high = np.exp(log_ratios.mean() - half), np.exp(log_ratios.mean() + half)  # 1.36 to 1.53
    speedup = np.mean(opted) / np.mean(contiguous)  # 1.44
    assert ("PyTorch's channels-last layout (torch.channels_last), against contiguous with everything else the same"
            in section)
    line = next(li for li in section.splitlines() if li.startswith("- pytorch: channels_last trained"))
    assert line.startswith(f"- pytorch: channels_last trained {speedup:.2f}-{speedup:.2f}x as fast as contiguous "
                           "over 1 setting(s), told faster in 1, slower in 0")
    assert f": {speedup:.3g}x [{low:.3g}, {high:.3g}], faster, accuracy +0.2 [+0.2, +0.2]" in line
    assert [li for li in section.splitlines() if "channels_last trained" in li] == [line]


def test_a_calibrated_studys_sentences_say_their_measured_power():
    """A study run as config/config.yaml is quotes the power dlbench calibrate measured for that shape
    (dlbench/analysis/calibration/default.json) beside each sentence found less than 80 % of the time at its
    repeats; any other study says once that its shape was not simulated."""
    from dlbench.analysis import designs
    from dlbench.present import calibrated

    power = designs.measured_power("default")
    weak = {name for (name, repeats), (found, _) in power.items() if repeats == 4 and found < 0.8}
    assert "(a)" in weak and "framework effect, train time" in weak  # what the measured table says at 4 seeds
    runs = one_default(make_runs())
    runs = pd.concat([runs.assign(seed=s, run_id=runs["run_id"] + f"-{s}") for s in (1, 2, 3, 4)],
                     ignore_index=True)
    quoted = calibrated.power_of(frames_points(runs), designs.DEFAULT.config)
    assert quoted.repeats == 4 and quoted.design is designs.DEFAULT
    found = power[("(a)", 4)][0]
    assert quoted.note("(a)") == (f" (calibrated power: a planted 3-sd difference is found {found:.0%} of the "
                                  "time at 4 repeats in simulated studies of this shape; docs/verdicts.md)")
    strong = next(name for (name, repeats), (f, _) in power.items() if repeats == 4 and f >= 0.8)
    assert quoted.note(strong) == ""
    text = findings.render(runs, study_file=designs.DEFAULT.config)
    assert f"**{observations.observations(runs)['a'].verdict}** (calibrated power: " in text
    assert "this study's 4 repeats says how often" in text
    other = findings.render(runs, study_file=None)
    assert "calibrated power" not in other and "this study's shape was not simulated" in other


def test_the_study_file_is_the_one_config_unchanged_by_overrides(tmp_path):
    from dlbench.rules import context

    config = tmp_path / "study.yaml"
    assert context.study_file([config], {}) == str(config.resolve())
    assert context.study_file([config], {"repeats": 2}) == ""  # --config changed the study: not its shape
    assert context.study_file([config, tmp_path / "more.yaml"], {}) == ""
    assert context.study_file([], {}) == ""


def test_the_study_file_param_does_not_change_when_a_finished_workflow_is_moved(tmp_path, monkeypatch):
    """The findings rule's param: relative to the working directory, so that a workflow copied elsewhere finds its
    findings up to date (an absolute path planned them again)."""
    from dlbench.rules import context

    for where in ("a", "b"):
        (tmp_path / where / "config").mkdir(parents=True)
        (tmp_path / where / "config" / "config.yaml").write_text("repeats: 4\n")
    said = []
    for where in ("a", "b"):
        monkeypatch.chdir(tmp_path / where)
        said.append(context.study_file(["config/config.yaml"], {}))
    assert said == ["config/config.yaml", "config/config.yaml"]
