"""Verdicts at the paper's scale, on hand-made runs tables whose right verdict is known: the groups a comparison
is taken on (own defaults, float64 apart, CPU/GPU pairs), the test the design calls for, the four words and what
they count for, intervals that respect their metric, and headlines that read once."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from dlbench.analysis import frames, groups, observations, published, stats, summary, verdicts
from dlbench.present import findings


def point(framework: str, seed: int, time: float, acc: float, **settings) -> dict:
    base = {"framework": framework, "dataset": "mnist", "device": "cpu", "preset": "own", "network": "lenet",
            "optimizer": "sgd", "batch_size": 64, "learning_rate": 0.01, "epochs": 4, "threads": 2,
            "library": "default", "status": "ok", "seed": seed, "repeat": seed - 1, "train_time_s": time,
            "test_time_s": time / 10, "accuracy": acc}
    base.update(settings)
    base["run_id"] = "-".join(str(v) for v in base.values())
    return base


def seeds(framework: str, time: float, acc: float, n: int = 3, spread=(-0.02, 0.0, 0.025, 0.01, -0.015),
          **settings) -> list[dict]:
    """`n` seeds of one setting: times off by a few per cent and accuracies by a few hundredths of a point."""
    return [point(framework, s + 1, time * (1 + spread[s]), acc + spread[s] / 50, **settings) for s in range(n)]


# ------------------------------------------------------------------------------------------- the right groups

def test_own_defaults_are_each_frameworks_default_point_not_its_sweeps():
    # Caffe is fastest at its defaults (10 s against TensorFlow's 14 s); TensorFlow's batch-size sweep around its
    # defaults has far faster points (batch 512: 2 s), which pooled into "own defaults" made TensorFlow fastest
    tf = {"learning_rate": 1e-4, "optimizer": "adam"}  # TensorFlow's own preset: batch 50, lr 1e-4
    rows = seeds("caffe", 10.0, 0.99) + seeds("tensorflow", 14.0, 0.99, batch_size=50, **tf)
    for bs, t in ((128, 6.0), (256, 3.0), (512, 2.0)):
        rows += seeds("tensorflow", t, 0.98, batch_size=bs, **tf)
    runs = pd.DataFrame(rows)
    leaders = summary.framework_leaders(runs, "train_time_s")
    own = leaders[leaders["comparison"] == "own defaults"].iloc[0]
    assert own["leader"] == "caffe" and own["state"] == "distinct"
    assert own["settings"] == {"caffe": 1, "tensorflow": 1}  # one setting each: the default point
    assert observations.observe_caffe_fastest_on_cpu(runs).verdict == verdicts.AGREES
    defaults = groups.default_points(frames.points(runs))
    assert set(defaults.loc[defaults["framework"] == "tensorflow", "batch_size"]) == {50}  # the preset's
    # a sweep that leaves out the preset's value has no default point: no swept value stands in for it
    assert groups.default_points(frames.points(runs[runs["batch_size"] > 50])).query("framework == 'tensorflow'").empty


def test_a_full_factorial_without_a_default_has_no_default_point():
    rows = []
    for bs in (32, 128):  # neither is Caffe's own 64
        rows += seeds("caffe", 10.0 * bs / 32, 0.99, batch_size=bs)
    assert groups.default_points(frames.points(pd.DataFrame(rows))).empty


def test_frameworks_are_matched_on_threads_in_their_own_defaults():
    rows = seeds("caffe", 10.0, 0.99) + seeds("tensorflow", 14.0, 0.99)
    rows += seeds("caffe", 18.0, 0.99, threads=1) + seeds("tensorflow", 16.0, 0.99, threads=1)
    leaders = summary.framework_leaders(pd.DataFrame(rows), "train_time_s").set_index("comparison")
    assert leaders.loc["own defaults", "leader"] == "caffe"  # 2 threads: the combination with the most points
    assert leaders.loc["own defaults (1 threads)", "leader"] == "tensorflow"


def test_float64_points_keep_their_own_label_and_never_replace_their_float32_twins():
    rows = seeds("theano", 10.0, 0.99) + seeds("theano", 30.0, 0.99, precision="fp64")
    df = frames.points(pd.DataFrame(rows))
    labels = frames.settings_label(df, set())
    assert labels[df["precision"] == "fp64"].str.endswith("fp64").all()
    assert labels[df["precision"] == "fp32"].nunique() == 1 and set(labels[df["precision"] == "fp32"]).isdisjoint(
        set(labels[df["precision"] == "fp64"]))
    table = summary.summary_table(pd.DataFrame(rows))
    times = table[table["metric"] == "train_time_s"].set_index("precision")
    assert times.loc["fp32", "n"] == 3 and times.loc["fp64", "n"] == 3
    assert times.loc["fp64", "mean"] == pytest.approx(30.0 * (1 + 0.005 / 3))
    # beside the published figures Theano stands in float64, as the study's command ran it
    ratios = published.published_ratios(pd.DataFrame(rows).assign(dataset="fashion_mnist"),
                                        published.read_published())
    assert ratios.set_index("framework").loc["theano", "precision"] == "fp64"
    assert ratios.set_index("framework").loc["theano", "train_time_s"] == pytest.approx(30.0 * (1 + 0.005 / 3))


def test_cpu_and_gpu_are_paired_on_the_same_threads_and_library_not_pooled():
    # at the matched setting (2 threads) CPU and GPU take the same time; the CPU's 1-thread and no_onednn points
    # have no GPU twin. Pooled as repeats, they made the GPU "faster" (ratio about 1.45)
    rows = seeds("pytorch", 10.0, 0.99) + seeds("pytorch", 10.0, 0.99, device="gpu", spread=(0.01, -0.02, 0.015))
    rows += seeds("pytorch", 20.0, 0.99, threads=1) + seeds("pytorch", 14.0, 0.99, library="no_onednn")
    runs = pd.DataFrame(rows)
    pairs = published.device_pairs(runs, own_only=False).set_index("framework")
    assert pairs.loc["pytorch", "settings_compared"] == 1
    assert pairs.loc["pytorch", "cpu_over_gpu"] == pytest.approx(1.0, abs=0.02)
    assert pairs.loc["pytorch", "told"] != published.GPU_FASTER
    assert observations.observe_gpu_faster(runs).verdict != verdicts.AGREES


# ---------------------------------------------------------------------------------- the test the design calls for

def test_the_framework_effect_reads_friedman_where_the_seeds_pair_the_frameworks():
    # the seed moves every framework alike (a shared data order), far more than the frameworks differ; within
    # each seed TensorFlow is slowest and Caffe fastest: the one-way ANOVA sees only noise, Friedman sees it all
    shared = [10.0, 30.0, 18.0, 26.0, 14.0]
    offsets = {"caffe": 0.0, "pytorch": 0.3, "tensorflow": 0.6}
    rows = [point(fw, s + 1, shared[s] + off + 0.01 * s, 0.9, preset="caffe") for fw, off in offsets.items()
            for s in range(5)]
    effect = summary.framework_effect(pd.DataFrame(rows)).set_index("metric").loc["train_time_s"]
    assert effect["anova_p"] > 0.5
    assert effect["test"].name == "two-way ANOVA (seed as block)" and effect["test_p"] < 0.01
    assert effect["friedman_p"] < 0.01  # the rank test agrees, with less power at few seeds
    assert effect["verdict"] == "differ"


def test_the_blocked_anova_is_the_randomised_block_f_test():
    from scipy import stats as sps

    rng = np.random.default_rng(7)
    m = rng.normal(0, 1, (5, 3)) + rng.normal(0, 3, (5, 1)) + np.array([0.0, 0.5, 1.0])
    test = stats.blocked_anova(m)
    # the residual sum of squares of the additive model, by its own formula
    resid = m - m.mean(axis=1, keepdims=True) - m.mean(axis=0, keepdims=True) + m.mean()
    ss_treat = 5 * ((m.mean(axis=0) - m.mean()) ** 2).sum()
    f = (ss_treat / 2) / ((resid ** 2).sum() / 8)
    assert test.statistic == pytest.approx(f) and test.p == pytest.approx(sps.f.sf(f, 2, 8))
    assert (test.df, test.df2) == (2.0, 8.0)
    # three seeds of three frameworks, ranked alike every time: Friedman cannot go below e^-3; the F test can
    alike = np.array([[10.0, 10.4, 10.9], [14.0, 14.5, 14.8], [12.0, 12.3, 12.9]])
    assert stats.friedman(alike).p == pytest.approx(math.exp(-3)) and stats.blocked_anova(alike).p < 0.01


# -------------------------------------------------------------------------------------------- four words

def test_no_spread_is_not_testable_not_told_apart():
    rows = [point("caffe", s, 10.0, 0.99) for s in (1, 2, 3)] + [point("tensorflow", s, 10.5, 0.99) for s in (1, 2, 3)]
    leaders = summary.framework_leaders(pd.DataFrame(rows), "train_time_s")
    assert leaders.iloc[0]["state"] == "untestable"
    assert observations.observe_caffe_fastest_on_cpu(pd.DataFrame(rows)).verdict.startswith(stats.UNTESTABLE)
    two = seeds("caffe", 10.0, 0.99, n=2) + seeds("tensorflow", 20.0, 0.99, n=2)
    assert summary.framework_leaders(pd.DataFrame(two), "train_time_s").iloc[0]["state"] == "untestable"


def cross_rows(b_with_a: list[float], n: int) -> pd.DataFrame:
    """Caffe and TensorFlow each under both presets (settings reading): TensorFlow's preset serves both best;
    Caffe reaches `b_with_a` (per seed) with it and 99 % with its own."""
    rows = []
    for s in range(n):
        rows += [point("tensorflow", s + 1, 10.0, 0.995 + 0.001 * (s % 2)),
                 point("tensorflow", s + 1, 10.0, 0.97 + 0.002 * (s % 2), preset="caffe", cross_apply="settings"),
                 point("caffe", s + 1, 10.0, 0.99 + 0.0005 * (s % 3)),
                 point("caffe", s + 1, 10.0, b_with_a[s], preset="tensorflow", cross_apply="settings")]
    return pd.DataFrame(rows)


def test_carries_over_is_an_equivalence_verdict_not_a_reading_of_means():
    # one run a side, 0.3 points short: the means alone said "carries over"
    single = summary.carry_over(cross_rows([0.987], 1)).set_index(["from_framework", "to_framework"])
    assert single.loc[("tensorflow", "caffe"), "told"] == stats.UNTESTABLE
    close = summary.carry_over(cross_rows([0.9885, 0.9895, 0.989, 0.9888], 4)).set_index(
        ["from_framework", "to_framework"])
    # 0.14 points short on every seed: a real difference, and well within 0.5 points: it carries over
    assert close.loc[("tensorflow", "caffe"), "told"] == "carries over"
    far = summary.carry_over(cross_rows([0.975, 0.976, 0.974], 3)).set_index(["from_framework", "to_framework"])
    assert far.loc[("tensorflow", "caffe"), "told"] == "falls short"  # 1.5 points short, told apart
    wide = summary.carry_over(cross_rows([0.999, 0.975, 0.992], 3)).set_index(["from_framework", "to_framework"])
    assert wide.loc[("tensorflow", "caffe"), "told"] == stats.INCONCLUSIVE  # within 0.5 on means, noise 1 point
    assert observations.observe_best_does_not_carry_over(cross_rows([0.987], 1)).verdict.startswith(stats.UNTESTABLE)


def batch_sweeps(n: int, told_lower: int) -> pd.DataFrame:
    """`n` batch-size sweeps (64 -> 256) at a fixed number of epochs, each at its own learning rate: the large
    batch clearly faster everywhere; its accuracy a noisy null, but in `told_lower` sweeps 0.3 points lower
    consistently enough that its own paired t says p < 0.01 (and Holm over n sweeps does not)."""
    rows = []
    noise = [(0.1, -0.1, 0.05), (-0.05, 0.1, -0.1), (0.08, -0.02, -0.1)]
    for k in range(n):
        lr = 0.001 * (k + 1)
        for s in range(3):
            base = 95.0 + 0.2 * s
            drop = (-0.3 + (-0.05, 0.0, 0.05)[s]) if k < told_lower else noise[k % 3][s]
            rows += [point("pytorch", s + 1, 10.0 + 0.1 * s, base / 100, learning_rate=lr),
                     point("pytorch", s + 1, 4.0 + 0.07 * s + 0.02 * (k % 2), (base + drop) / 100, learning_rate=lr,
                           batch_size=256)]
    return pd.DataFrame(rows)


def test_batch_size_observation_corrects_over_the_sweeps_it_pools():
    # one of sixteen sweeps "less accurate" at its own p < 0.01 made (e) agree; Holm over 16 does not tell it
    v = observations.observe_batch_size(batch_sweeps(16, told_lower=1))
    assert v.verdict == verdicts.INCONCLUSIVE and "less accurate in 0" in v.evidence and "Holm" in v.evidence
    # ... while one sweep alone is told, and so are the same drops where most sweeps show them
    assert observations.observe_batch_size(batch_sweeps(1, told_lower=1)).verdict == verdicts.AGREES


def test_only_better_worse_and_equivalent_count_as_answered():
    assert verdicts.answered(verdicts.AGREES) and verdicts.answered(verdicts.EQUIVALENT)
    assert not verdicts.answered(verdicts.INCONCLUSIVE)
    assert not verdicts.answered(verdicts.untestable("fewer than 3 runs on a side"))
    # the same accuracy within noise of 0.05 points: equivalent within 0.5, an answer
    rows = seeds("tensorflow", 10.0, 0.990) + seeds("caffe", 10.0, 0.9901, spread=(0.01, -0.02, 0.005))
    assert observations.observe_tensorflow_most_accurate(pd.DataFrame(rows)).verdict == verdicts.EQUIVALENT
    # the same means with a noise of several points: inconclusive, no answer
    wide = seeds("tensorflow", 10.0, 0.95, spread=(-1.0, 1.5, 0.5)) + seeds("caffe", 10.0, 0.95,
                                                                           spread=(1.0, -1.5, -0.25))
    assert observations.observe_tensorflow_most_accurate(pd.DataFrame(wide)).verdict == verdicts.INCONCLUSIVE


# ------------------------------------------------------------------------------ intervals that respect the metric

def test_accuracy_intervals_stay_within_0_and_100_percent():
    # before: "tensorflow 90.95% [78.56, 103.3], n 2" (the linear t interval of 2 runs)
    rows = [point("tensorflow", 1, 10.0, 0.999), point("tensorflow", 2, 12.0, 0.82),
            point("caffe", 1, 10.0, 0.95), point("caffe", 2, 11.0, 0.96)]
    text = findings.render(pd.DataFrame(rows))
    bounds = [float(x) for x in re.findall(r"\[([0-9.]+), [0-9.]+\], n \d", text) +
              re.findall(r"\[[0-9.]+, ([0-9.]+)\], n \d", text)]
    assert bounds and all(0 <= b for b in bounds)
    for m in re.finditer(r"(\d+(?:\.\d+)?)% \[([0-9.]+), ([0-9.]+)\]", text):
        assert 0 <= float(m.group(2)) <= float(m.group(1)) <= float(m.group(3)) <= 100
    table = summary.summary_table(pd.DataFrame(rows))
    acc = table[table["metric"] == "accuracy"]
    assert (acc["ci_high"] <= 1).all() and (acc["ci_low"] >= 0).all()
    times = table[table["metric"] == "train_time_s"]
    assert (times["ci_low"] > 0).all()


# --------------------------------------------------------------------------------------- headlines read once

def test_a_headline_never_names_a_leader_it_has_not_earned():
    # before: "**digits/cpu, own defaults: fastest pytorch** (tied (within noise))"
    rows = (seeds("pytorch", 2.13, 0.99, spread=(-0.3, 0.25, 0.1)) +
            seeds("caffe", 3.14, 0.99, spread=(0.35, -0.3, -0.1)))
    text = findings.render(pd.DataFrame(rows).assign(dataset="digits"))
    line = next(x for x in text.splitlines() if "own defaults" in x and "fastest" in x.lower())
    assert line.startswith("- No clear fastest on digits/cpu, own defaults: pytorch")
    assert "within noise" in line and "would have been detected" in line
    assert "**" not in line.split(".")[0]  # no bold leader
    told = seeds("pytorch", 2.0, 0.99) + seeds("caffe", 3.0, 0.99, spread=(0.01, -0.02, 0.015))
    text = findings.render(pd.DataFrame(told).assign(dataset="digits"))
    assert "- **Fastest on digits/cpu, own defaults: pytorch**" in text


def test_inconclusive_says_what_the_data_could_have_detected():
    a = {s: v for s, v in enumerate([10.0, 12.0, 9.0, 11.0, 10.5])}
    b = {s + 10: v for s, v in enumerate([11.0, 10.0, 12.5, 10.5, 11.5])}
    j = stats.judge_metric(a, b, "train_time_s", larger_is_better=False)
    assert j.word == stats.INCONCLUSIVE
    # the detectable ratio: exp((t(0.975, df) + t(0.8, df)) se); it is larger than the 5 % margin, which is why
    # no equivalence could be shown either
    assert math.exp(j.detectable) > 1.05 and j.size().endswith("x")
    assert "would have been detected" in verdicts.judgement_text(j, " s")


def test_a_published_tie_agrees_where_the_leader_is_one_of_them_told_better_than_the_rest():
    """The study's MNIST GPU accuracy: TensorFlow and Torch tied. Here TensorFlow and PyTorch a hair apart (no test
    tells them), both well above Caffe and Theano: the tie's claim agrees; a leader outside the tie, told better
    than both, disagrees; the tie's members alone and within the margin, equivalent."""
    def values(means: dict) -> dict:  # five seeds, each framework's spread its own (paired differences vary)
        spread = (-0.2, 0.0, 0.25, 0.1, -0.15)
        return {fw: {s: m + spread[(s + k) % 5] for s in range(5)} for k, (fw, m) in enumerate(means.items())}

    tie = ["tensorflow", "pytorch"]
    result = stats.leader(values({"tensorflow": 99.3, "pytorch": 99.25, "caffe": 97.0, "theano": 96.5}), True,
                          "accuracy_pct")
    assert verdicts.claim(result, "pytorch") != verdicts.AGREES  # not the leader: one name alone cannot agree
    assert verdicts.claim_any(result, tie) == verdicts.AGREES
    assert verdicts.claim_any(result, ["tensorflow"]) == verdicts.claim(result, "tensorflow")
    other = stats.leader(values({"caffe": 99.9, "tensorflow": 97.0, "pytorch": 97.1, "theano": 96.5}), True,
                         "accuracy_pct")
    assert verdicts.claim_any(other, tie) == verdicts.DISAGREES
    close = stats.leader(values({"tensorflow": 99.3, "pytorch": 99.25, "caffe": 99.2, "theano": 96.5}), True,
                         "accuracy_pct")
    assert verdicts.claim_any(close, tie) == verdicts.INCONCLUSIVE  # Caffe not told from the tie's leader
    alone = stats.leader({fw: {s: 99.3 + 0.01 * ((s + k) % 5) for s in range(5)} for k, fw in enumerate(tie)}, True,
                         "accuracy_pct")
    assert verdicts.claim_any(alone, tie) == verdicts.EQUIVALENT
