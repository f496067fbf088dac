"""Two result sets compared: hand-made ones whose verdicts are worked out by hand, and the statistics under them."""

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats

import dlbench
from dlbench.analysis import comparison_stats
from dlbench.analysis import stats as dlstats
from dlbench.present import comparison, comparison_series
from dlbench.testing.sandbox import copy_workflow, snakemake, tiny_study

T_975_DF8 = 2.306004  # Student's t, 97.5% quantile, 8 degrees of freedom (a printed table's value)


def run(setting: dict, repeat: int, time_s: float, acc: float = 0.9, status: str = "ok", **extra) -> dict:
    base = {"framework": "pytorch", "dataset": "digits", "preset": "caffe", "network": "lenet", "optimizer": "sgd",
            "momentum": 0.9, "weight_decay": 0.0, "batch_size": 32, "iterations_planned": 30, "iterations": 30,
            "device": "cpu", "threads": 1, "library": "default", "test_batch_size": 100}
    row = {**base, **setting, "repeat": repeat, "seed": 1 + repeat, "status": status,
           "train_time_s": time_s if status == "ok" else None, "test_time_s": time_s / 10 if status == "ok" else None,
           "accuracy": acc if status == "ok" else None, **extra}
    row["run_id"] = f"{row['framework']}-lr{row['learning_rate']}-r{repeat}"
    return row


SLOW = {"learning_rate": 0.01}                              # 1.5 x slower in B, same accuracy
TIE = {"framework": "tensorflow", "learning_rate": 0.01}    # B within the noise of A; one B run contended
ONLY_A = {"learning_rate": 0.1}                              # measured in A only
FAILS_IN_B = {"framework": "tensorflow", "learning_rate": 0.1}  # finished in A, every run failed in B


def hand_made() -> tuple[pd.DataFrame, pd.DataFrame]:
    times_a = [10.0, 10.2, 9.8, 10.1, 9.9]
    a = [run(SLOW, i, t, host="node-a") for i, t in enumerate(times_a)]
    b = [run(SLOW, i, t * 1.5, host="node-b") for i, t in enumerate(times_a)]
    a += [run(TIE, i, t, acc=0.8 + i / 100, host="node-a") for i, t in enumerate([20.0, 21.0, 19.0])]
    b += [run(TIE, i, t, acc=0.8 + i / 100, host="node-b", contended=i == 1) for i, t in enumerate([20.5, 19.5, 21.0])]
    a += [run(ONLY_A, i, 5.0 + i / 10, host="node-a") for i in range(2)]
    a += [run(FAILS_IN_B, i, 7.0 + i / 10, host="node-a") for i in range(2)]
    b += [run(FAILS_IN_B, i, 0.0, status="error", host="node-b") for i in range(2)]
    return pd.DataFrame(a), pd.DataFrame(b)


def row_of(table: pd.DataFrame, framework: str, lr: float, metric: str) -> pd.Series:
    (i,) = table.index[(table.framework == framework) & (table.learning_rate == lr) & (table.metric == metric)]
    return table.loc[i]


def test_a_known_slowdown_a_tie_and_points_in_one_set_only(tmp_path):
    a, b = hand_made()
    a.to_parquet(tmp_path / "a.parquet")
    (tmp_path / "b").mkdir()
    b.to_parquet(tmp_path / "b" / "runs.parquet")  # a results folder
    assert comparison.main([str(tmp_path / "a.parquet"), str(tmp_path / "b"), "--out", str(tmp_path / "out")]) == 0
    table = pd.read_parquet(tmp_path / "out" / "comparison.parquet")

    # The slowdown by hand: both sides' variance is 0.025 x (mean^2 / 100), so each mean adds 0.025 / (5 x 100)
    # = 5e-5 to var(log ratio): se 0.01, Welch's df (1e-4)^2 / (2 (5e-5)^2 / 4) = 8.
    slow = row_of(table, "pytorch", 0.01, "train_time_s")
    assert (slow.a_n, slow.b_n) == (5, 5)
    assert slow.a_mean == pytest.approx(10.0) and slow.b_mean == pytest.approx(15.0)
    assert slow.ratio == pytest.approx(1.5)
    assert slow.ratio_ci_low == pytest.approx(1.5 * math.exp(-T_975_DF8 * 0.01), rel=1e-5)
    assert slow.ratio_ci_high == pytest.approx(1.5 * math.exp(T_975_DF8 * 0.01), rel=1e-5)
    # A's mean interval on the log scale (a time's interval stays positive): exp(mean(log t) -+ t(4) x
    # sd(log t) / sqrt(5)), t(4) = 2.776445, not the linear 10 -+ t(4) x sqrt(0.025 / 5)
    logs = np.log([10.0, 10.2, 9.8, 10.1, 9.9])
    half = 2.776445 * logs.std(ddof=1) / math.sqrt(5)
    assert slow.a_ci_low == pytest.approx(math.exp(logs.mean() - half), rel=1e-5)
    assert slow.a_ci_high == pytest.approx(math.exp(logs.mean() + half), rel=1e-5)
    assert slow.a_ci_low != pytest.approx(10 - 2.776445 * math.sqrt(0.005), rel=1e-5)
    assert slow.verdict == "slower" and slow.p_adjusted < 0.05 and "p_holm" not in table
    same_acc = row_of(table, "pytorch", 0.01, "accuracy")  # 0.9 in every run of both: no spread, no p
    assert same_acc.verdict == comparison.UNTESTABLE and np.isnan(same_acc.p_value)

    tie = row_of(table, "tensorflow", 0.01, "train_time_s")
    assert tie.ratio == pytest.approx(61 / 3 / 20)
    assert tie.ratio_ci_low < 1 < tie.ratio_ci_high
    # B within A's noise, but three runs a side of 5 % noise cannot put it within 5 %: inconclusive, and what the
    # test could have found: (t(0.975, df) + t(0.8, df)) x se on the log scale
    assert tie.verdict == "inconclusive (contended runs)" and tie.contended and tie.b_contended == 1
    va = np.var([20.0, 21.0, 19.0], ddof=1) / (3 * 20.0 ** 2)
    vb = np.var([20.5, 19.5, 21.0], ddof=1) / (3 * (61 / 3) ** 2)
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 2)
    se = math.sqrt(va + vb)
    # sized at the level the smallest adjusted p is read at: alpha / m over the m testable comparisons (BH, Holm)
    m = int(table.p_value.notna().sum())
    assert m == 5  # the slowdown's and the tie's times and the tie's accuracy (the slowdown's accuracy has no spread)
    quantile = stats.t.ppf(1 - 0.05 / (2 * m), df)
    assert tie.detectable == pytest.approx(math.exp((quantile + stats.t.ppf(0.8, df)) * se))
    assert tie.detectable > math.exp((stats.t.ppf(0.975, df) + stats.t.ppf(0.8, df)) * se)  # not the uncorrected

    only = row_of(table, "pytorch", 0.1, "train_time_s")
    assert only.verdict == "only in A" and only.a_n == 2 and only.b_n == 0
    failed = row_of(table, "tensorflow", 0.1, "accuracy")
    assert failed.verdict == "no finished run in B" and failed.b_failed == 2

    text = (tmp_path / "out" / "comparison.md").read_text()
    assert "- host: A node-a; B node-b" in text
    assert "p adjusted by Benjamini-Hochberg (false discovery rate) over the comparison's 5 tests" in text
    assert "times within 5 % (B / A in [0.952, 1.050]), accuracy within 0.5 points" in text
    changed = text.split("## Changed beyond the noise: ")[1].split("## Inconclusive")[0]
    # train and test time (a tenth of it in every run) slower; nothing else
    assert changed.startswith("2\n") and changed.count("| pytorch | digits | cpu |") == 2
    assert ("| train_time_s | 10 s [9.8 s, 10.2 s] (n=5) | 15 s [14.7 s, 15.3 s] (n=5) | 1.500 [1.466, 1.535] "
            "| slower |") in changed
    # per framework: PyTorch's one compared setting is 1.5 x slower, but one setting is no sample
    assert "| pytorch | train_time_s | 1 | 1.500 | not testable |" in text
    assert "In A only: 1 settings (pytorch 1), not compared." in text
    assert "In B only: 0 settings" in text
    assert "Settings with contended runs (timed while other work took the machine's CPUs): 1" in text
    assert "| train_time_s | inconclusive (contended runs) | 1 |" in text
    assert "Not testable: no spread: every run gave the same value: 1." in text
    html = (tmp_path / "out" / "comparison_ratios.html").read_text()
    assert "vegaEmbed" in html and "B / A per framework" in html
    assert (tmp_path / "out" / "comparison_ratios.svg").read_text().lstrip().startswith("<svg")


def test_text_from_the_records_is_shown_in_comparison_md_never_as_markup(tmp_path):
    # a host name and a framework version are the records' own text: written as it came, they became HTML and a
    # link in the report
    a, b = hand_made()
    a = a.assign(host="<script>alert(1)</script>")
    b = b.assign(host="[node](javascript:alert(1))", framework_version="1.0 | 2.0")
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    args = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--out", str(tmp_path / "o")]
    assert comparison.main(args) == 0
    text = (tmp_path / "o" / "comparison.md").read_text()
    # every opening of a tag is an entity: the text reads as it came and no browser starts a script from it
    assert "<script>" not in text and "&lt;script>alert(1)&lt;/script>" in text
    assert "](javascript" not in text and "[node]\\(javascript" in text


def test_records_with_a_setting_id_join_on_it_whatever_else_differs():
    a, b = hand_made()
    for df in (a, b):
        df["setting_id"] = df["framework"] + df["learning_rate"].astype(str)
    b["test_batch_size"] = 50  # would split the settings if the columns were the key
    table = comparison.compare(a, b)
    assert row_of(table, "pytorch", 0.01, "train_time_s").verdict == "slower"
    assert set(table.setting) == {"pytorch0.01", "tensorflow0.01", "pytorch0.1", "tensorflow0.1"}


def test_a_small_shift_in_every_setting_shows_per_framework():
    """Ten settings of 3 repeats, B about 3% slower in each (+-2% noise within a setting): no setting alone
    tells it (nor puts it within 5 %), the framework's ten settings do."""
    a, b = [], []
    for k in range(10):
        shift = (0.99, 1.0, 1.01)[k % 3]  # B's slowdown varies a little between settings: 1.03 x this
        for repeat, noise in enumerate((0.98, 1.0, 1.02)):
            a.append(run({"learning_rate": k + 1.0}, repeat, 10.0 * noise))
            b.append(run({"learning_rate": k + 1.0}, repeat, 10.3 * shift * noise))
    table = comparison.compare(pd.DataFrame(a), pd.DataFrame(b))
    train = table[table.metric == "train_time_s"]
    assert (train.verdict == comparison.INCONCLUSIVE).all()
    row = comparison.per_framework(table).set_index("metric").loc["train_time_s"]
    # the geometric mean of the settings' ratios: four at 1.03 x 0.99, three at 1.03, three at 1.03 x 1.01
    assert row.settings == 10
    assert row.change == pytest.approx(1.03 * math.exp((4 * math.log(0.99) + 3 * math.log(1.01)) / 10))
    assert row.change_ci_low > 1 and row.verdict == "slower"


def test_one_run_a_side_is_not_tested():
    a = pd.DataFrame([run(SLOW, 0, 10.0)])
    b = pd.DataFrame([run(SLOW, 0, 30.0)])
    row = row_of(comparison.compare(a, b), "pytorch", 0.01, "train_time_s")
    assert row.ratio == pytest.approx(3.0) and np.isnan(row.ratio_ci_low)
    assert row.verdict == comparison.UNTESTABLE and row.why == "fewer than 3 runs on a side"


def test_a_folder_without_results_is_refused_in_one_line(tmp_path, capsys):
    a, _ = hand_made()
    a.to_parquet(tmp_path / "a.parquet")
    assert comparison.main([str(tmp_path / "a.parquet"), str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{tmp_path} holds no results" in err


@pytest.mark.parametrize("flag, value, says", [
    ("--alpha", "5", "between 0 and 1"), ("--alpha", "0", "between 0 and 1"), ("--alpha", "nan", "between 0 and 1"),
    ("--time-margin-pct", "-5", "above 0"), ("--time-margin-pct", "nan", "above 0"),
    ("--accuracy-margin-pp", "inf", "above 0"), ("--accuracy-margin-pp", "0", "above 0"),
])
def test_a_level_or_margin_that_is_not_one_is_refused_before_any_work(tmp_path, capsys, flag, value, says):
    a, b = hand_made()
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    with pytest.raises(SystemExit) as info:
        comparison.main([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--out", str(tmp_path / "out"),
                         f"{flag}={value}"])
    assert info.value.code == 2 and not (tmp_path / "out").exists()
    err = capsys.readouterr().err
    assert flag in err and says in err, err


def test_an_out_that_is_a_file_is_refused_in_one_line(tmp_path, capsys):
    a, b = hand_made()
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    (tmp_path / "out").write_text("mine")
    assert comparison.main([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--out",
                            str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is a file, not a folder" in err
    assert (tmp_path / "out").read_text() == "mine"


def the_issue() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The issue's two result sets: four settings x three seeds, B beside three busy processes. PyTorch 2.30 s ->
    27.5 s (12 x, B contended), TensorFlow 1.8 x slower, Caffe unchanged (1 % noise), Theano unchanged but noisy."""
    times = {  # framework: (A's three times, B's three times)
        "pytorch": ([2.28, 2.30, 2.32], [25.0, 27.5, 30.0]),
        "tensorflow": ([5.0, 5.1, 4.9], [9.1, 8.9, 9.0]),
        "caffe": ([3.00, 3.03, 2.97], [3.02, 2.98, 3.00]),
        "theano": ([10.0, 14.0, 7.0], [12.0, 8.0, 13.0]),
    }
    acc = ([0.981, 0.980, 0.979], [0.980, 0.981, 0.979])  # the same within a tenth of a point
    a = [run({"framework": fw, "learning_rate": 0.01}, i, t, acc=acc[0][i]) for fw, (ta, _) in times.items()
         for i, t in enumerate(ta)]
    b = [run({"framework": fw, "learning_rate": 0.01}, i, t, acc=acc[1][i], contended=fw == "pytorch")
         for fw, (_, tb) in times.items() for i, t in enumerate(tb)]
    return pd.DataFrame(a), pd.DataFrame(b)


def test_the_issue_four_words_each_earned(tmp_path):
    a, b = the_issue()
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    args = [str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--out", str(tmp_path / "o")]
    assert comparison.main(args) == 0
    table = pd.read_parquet(tmp_path / "o" / "comparison.parquet")
    verdict = {fw: row_of(table, fw, 0.01, "train_time_s").verdict for fw in ("pytorch", "tensorflow", "caffe",
                                                                              "theano")}
    assert verdict == {"pytorch": "slower (contended runs)", "tensorflow": "slower", "caffe": "equivalent",
                       "theano": "inconclusive"}
    assert row_of(table, "pytorch", 0.01, "train_time_s").ratio == pytest.approx(27.5 / 2.3)
    noisy = row_of(table, "theano", 0.01, "train_time_s")
    assert noisy.detectable > 1.5 and noisy.tost_p >= 0.05  # it could only have found a large change
    # accuracy: the same within a tenth of a point, three runs a side: within 0.5 points
    assert row_of(table, "caffe", 0.01, "accuracy").verdict == "equivalent"
    assert row_of(table, "pytorch", 0.01, "accuracy").verdict == "equivalent (contended runs)"
    assert row_of(table, "caffe", 0.01, "accuracy").margin == pytest.approx(0.005)
    text = (tmp_path / "o" / "comparison.md").read_text()
    assert "## Changed beyond the noise: 4\n" in text  # train and test time of PyTorch and TensorFlow
    inconclusive = text.split("## Inconclusive: ")[1].split("## Per framework")[0]
    # Theano's train time by hand: Welch on log(B / A), each side's variance var / (n mean^2) (the delta method),
    # sized at alpha / m over the m = 12 tests of the comparison
    ta, tb = np.array([10.0, 14.0, 7.0]), np.array([12.0, 8.0, 13.0])
    va, vb = ta.var(ddof=1) / (3 * ta.mean() ** 2), tb.var(ddof=1) / (3 * tb.mean() ** 2)
    df = (va + vb) ** 2 / (va ** 2 / 2 + vb ** 2 / 2)
    m = int(table.p_value.notna().sum())
    assert m == 12
    hand = math.exp((stats.t.ppf(1 - 0.05 / (2 * m), df) + stats.t.ppf(0.8, df)) * math.sqrt(va + vb))
    assert noisy.detectable == pytest.approx(hand)
    assert inconclusive.startswith("2\n") and f"| inconclusive | {hand:.3g}x |" in inconclusive  # train, test


def test_the_margins_are_flags_and_the_report_states_them(tmp_path):
    a, b = the_issue()
    a.to_parquet(tmp_path / "a.parquet")
    b.to_parquet(tmp_path / "b.parquet")
    out = tmp_path / "o"
    assert comparison.main([str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"), "--out", str(out),
                         "--time-margin-pct", "0.5", "--accuracy-margin-pp", "0.01"]) == 0
    table = pd.read_parquet(out / "comparison.parquet")
    # Caffe's 1 % noise cannot put it within 0.5 %, nor the accuracies within 0.01 points
    assert row_of(table, "caffe", 0.01, "train_time_s").verdict == "inconclusive"
    assert row_of(table, "caffe", 0.01, "accuracy").verdict == "inconclusive"
    assert row_of(table, "caffe", 0.01, "train_time_s").margin == pytest.approx(1.005)
    assert "times within 0.5 % (B / A in [0.995, 1.005]), accuracy within 0.01 points" in (out / "comparison.md"
                                                                                            ).read_text()


def noise_and_real_changes(settings: int, changed: int, seed: int = 7) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`settings` settings x three seeds, times with 2 % noise (log-normal) and accuracy with half a point, the
    same in A and B, except the first `changed` settings, whose times B doubles (A 0.98, 1, 1.02 x 10 s)."""
    rng = np.random.default_rng(seed)
    setting = np.repeat(np.arange(settings), 3)
    real = setting < changed
    out = []
    for factor in (1.0, 2.0):
        time_s = np.where(real, 10.0 * factor * np.tile([0.98, 1.0, 1.02], settings),
                          10.0 * np.exp(rng.normal(0, 0.02, len(setting))))
        out.append(pd.DataFrame({
            "framework": "pytorch", "dataset": "digits", "preset": "caffe", "network": "lenet", "batch_size": 32,
            "learning_rate": setting.astype(float), "iterations_planned": 30, "device": "cpu", "threads": 1,
            "library": "default", "repeat": np.tile([0, 1, 2], settings), "status": "ok", "train_time_s": time_s,
            "test_time_s": time_s / 10, "accuracy": 0.9 + rng.normal(0, 0.005, len(setting)),
            "setting_id": [f"s{i}" for i in setting]}))
    return out[0], out[1]


def test_the_false_discovery_rate_finds_real_changes_among_60000_tests():
    """20,000 settings x 3 metrics of noise and 5 settings twice as slow (10 tests): Holm over 60,000 tests
    cannot call a 2 x change at three runs a side; Benjamini-Hochberg does, and flags nothing else."""
    a, b = noise_and_real_changes(20_000, 5)
    table = comparison.compare(a, b)
    assert table["p_value"].notna().sum() == 60_000
    real = table["setting"].isin([f"s{i}" for i in range(5)]) & table["metric"].ne("accuracy")
    assert (table.loc[real, "verdict"] == "slower").all() and real.sum() == 10
    assert not comparison.is_changed(table.loc[~real, "verdict"]).any()
    assert (np.array(dlstats.holm(table["p_value"]))[real.to_numpy()] > 0.05).all()  # the old adjustment


def test_two_runs_a_side_or_no_spread_is_not_testable_never_p_0():
    a = pd.DataFrame([run(SLOW, i, 10.0 + i) for i in range(2)] + [run(TIE, i, 20.0) for i in range(3)])
    b = pd.DataFrame([run(SLOW, i, 30.0 + i) for i in range(2)] + [run(TIE, i, 40.0) for i in range(3)])
    table = comparison.compare(a, b)
    two = row_of(table, "pytorch", 0.01, "train_time_s")
    assert two.verdict == comparison.UNTESTABLE and two.why == "fewer than 3 runs on a side" and np.isnan(two.p_value)
    flat = row_of(table, "tensorflow", 0.01, "train_time_s")  # 20 s against 40 s, every run alike: no noise known
    assert flat.ratio == 2.0 and flat.verdict == comparison.UNTESTABLE and flat.why == dlstats.NO_SPREAD
    assert table["p_value"].isna().all() and table["p_adjusted"].isna().all()
    # the statistics alone: no spread on either side gives no p at all, spread on one side is enough
    ma, va, na = np.array([0.9, 0.9, 0.9]), np.zeros(3), np.full(3, 3)
    mb, vb, nb = np.array([0.9, 0.8, 0.8]), np.array([0.0, 0.0, 1e-4]), np.full(3, 3)
    est, se, df = comparison_stats.difference(ma, va, na, mb, vb, nb)
    why = comparison_stats.untestable(na, nb, est, se)
    got = comparison_stats.welch_test(est, se, df, 0.005, why)
    assert list(why) == [dlstats.NO_SPREAD, dlstats.NO_SPREAD, ""]
    assert np.isnan(got["p_value"][:2]).all() and 0 < got["p_value"][2] < 0.05


def test_the_vectorised_tests_agree_with_scipy():
    rng = np.random.default_rng(3)
    cases = 300
    na, nb = rng.integers(3, 12, cases), rng.integers(3, 12, cases)
    xs = [rng.normal(rng.uniform(0.5, 1), rng.uniform(0.001, 0.05), n) for n in na]
    ys = [rng.normal(rng.uniform(0.5, 1), rng.uniform(0.001, 0.05), n) for n in nb]
    summary = [np.array([f(v) for v in vals]) for vals in (xs, ys) for f in (np.mean, lambda v: v.var(ddof=1))]
    ma, va, mb, vb = summary
    margin = rng.uniform(0.001, 0.3, cases)
    # the difference B - A: two one-sided Welch t tests of the samples themselves, B shifted by the margin
    est, se, df = comparison_stats.difference(ma, va, na, mb, vb, nb)
    got = comparison_stats.welch_test(est, se, df, margin, comparison_stats.untestable(na, nb, est, se))
    for i in range(cases):
        lower = stats.ttest_ind(ys[i] + margin[i], xs[i], equal_var=False, alternative="greater").pvalue
        upper = stats.ttest_ind(ys[i] - margin[i], xs[i], equal_var=False, alternative="less").pvalue
        assert got["tost_p"][i] == pytest.approx(max(lower, upper), abs=1e-10)
        assert got["p_value"][i] == pytest.approx(stats.ttest_ind(ys[i], xs[i], equal_var=False).pvalue, abs=1e-10)
    # the ratio: the same on the logarithms of the means, each mean's sd there sd / mean (the delta method)
    est, se, df = comparison_stats.log_ratio(ma, va, na, mb, vb, nb)
    got = comparison_stats.welch_test(est, se, df, margin, comparison_stats.untestable(na, nb, est, se))
    for i in range(cases):
        args = (np.sqrt(vb[i]) / mb[i], nb[i], np.log(ma[i]), np.sqrt(va[i]) / ma[i], na[i])
        lower = stats.ttest_ind_from_stats(np.log(mb[i]) + margin[i], *args, equal_var=False, alternative="greater")
        upper = stats.ttest_ind_from_stats(np.log(mb[i]) - margin[i], *args, equal_var=False, alternative="less")
        assert got["tost_p"][i] == pytest.approx(max(lower.pvalue, upper.pvalue), abs=1e-10)
        d = (stats.t.ppf(0.975, df[i]) + stats.t.ppf(0.8, df[i])) * se[i]
        assert got["detectable"][i] == pytest.approx(d, abs=1e-10)


def test_benjamini_hochberg_agrees_with_scipy():
    rng = np.random.default_rng(5)
    p = np.concatenate([rng.uniform(size=500), rng.uniform(0, 1e-4, 20)])
    assert np.allclose(dlstats.benjamini_hochberg(p), stats.false_discovery_control(p), atol=1e-12, rtol=0)


# ---------------------------------------------------------------------------------------------- a series and the gate

TIMES = [10.0, 10.2, 9.8, 10.1, 9.9]  # A's five seeds: 2 % spread


def release(slow: float = 1.0, tie: float = 1.0, noise=(1, 1, 1, 1, 1), runs: int = 5, times=TIMES) -> pd.DataFrame:
    """One result set of SLOW's setting (PyTorch) and TIE's (TensorFlow, twice as long), `runs` seeds each: the
    seeds' times times `slow` and `tie`, each seed's also times its `noise`; accuracy the same in every set."""
    rows = []
    for i in range(runs):
        t = times[i] * noise[i]
        rows.append(run(SLOW, i, t * slow, acc=0.9 + i / 1000))
        rows.append(run(TIE, i, 2 * t * tie, acc=0.8 + i / 1000))
    return pd.DataFrame(rows)


def releases(tmp_path: Path) -> list[str]:
    """The baseline and three releases, each a results folder named for it: `same` (within 0.2 % of the baseline),
    `regressed` (PyTorch's setting 1.5 x slower: a planted regression) and `noisy` (both settings 1.3 x slower by
    their means, but three seeds of +-50 % noise)."""
    sets = {"baseline": release(), "same": release(noise=(1.002, 0.999, 1.001, 0.998, 1.0)),
            "regressed": release(slow=1.5), "noisy": release(slow=1.3, tie=1.3, noise=(0.6, 1.5, 1.0), runs=3)}
    for name, df in sets.items():
        (tmp_path / name / "results").mkdir(parents=True)
        df.to_parquet(tmp_path / name / "results" / "runs.parquet")
    return [str(tmp_path / name) for name in sets]


def compare_main(capsys, *args) -> tuple[int, list[str], str]:
    """The command's exit, its stdout's lines and its stderr, less the line saying it waited for a measurement
    on this node (other work on the machine may hold the node's lock a while)."""
    code = comparison.main([str(a) for a in args])
    out, err = capsys.readouterr()
    err = "".join(ln for ln in err.splitlines(keepends=True) if "for the measurement on this node" not in ln)
    return code, out.splitlines(), err


def test_a_series_compares_each_set_with_the_baseline_and_the_gate_fails_on_the_planted_regression(tmp_path, capsys):
    paths = releases(tmp_path)
    out = tmp_path / "out"
    code, lines, err = compare_main(capsys, *paths, "--out", out, "--fail-on", "slower,less-accurate")
    assert code == comparison.EXIT_GATE_FAILED == 1 and err == ""
    gate = [ln for ln in lines if ln.startswith("dlbench: compare: gate: ")]
    # one line per offending setting and metric: PyTorch's train and test time in `regressed`, nothing of `noisy`
    assert len(gate) == 2 and all(ln.startswith("dlbench: compare: gate: regressed: pytorch digits cpu ")
                                  for ln in gate), lines
    assert any(" train_time_s slower, 1.500 [" in ln and "beyond the margin of 5 %" in ln for ln in gate), gate
    assert lines[-1].startswith("dlbench: compare: the gate fails: 2 settings and metrics slower or less-accurate")

    series = pd.read_parquet(out / "series.parquet")
    assert [*series.drop_duplicates("set")[["set", "order"]].itertuples(index=False, name=None)] == [
        ("same", 1), ("regressed", 2), ("noisy", 3)]
    assert (series.baseline == "baseline").all() and len(series) == 3 * 2 * len(comparison.METRICS)
    verdicts = {(r.set, r.framework, r.metric): r.verdict for r in series.itertuples()}
    assert all(verdicts[("same", fw, m)] == "equivalent" for fw in ("pytorch", "tensorflow")
               for m in comparison.METRICS)
    assert verdicts[("regressed", "pytorch", "train_time_s")] == "slower"
    assert verdicts[("regressed", "tensorflow", "train_time_s")] == "equivalent"
    # the noisy set: 1.3 x by its means, far beyond the 5 % margin, yet neither equivalent nor slower
    noisy = series[(series.set == "noisy") & (series.metric == "train_time_s")]
    assert (noisy.ratio > 1.25).all() and (noisy.verdict == comparison.INCONCLUSIVE).all()
    assert noisy.beyond_margin.all()  # its estimate is; no verdict says so, and the gate goes by the verdict
    # Benjamini-Hochberg over every test of every set together, not per set
    tested = series.p_value.notna()
    assert tested.sum() == 18
    assert np.allclose(series.p_adjusted[tested], stats.false_discovery_control(series.p_value[tested]))
    alone = comparison.compare(pd.read_parquet(Path(paths[0]) / "results/runs.parquet"),
                               pd.read_parquet(Path(paths[3]) / "results/runs.parquet"))
    by_itself = alone.set_index(["setting", "metric"]).p_adjusted
    pooled = series[series.set == "noisy"].set_index(["setting", "metric"]).p_adjusted
    assert (pooled.loc[by_itself.index] >= by_itself - 1e-12).all() and (pooled.loc[by_itself.index] > by_itself).any()
    # what the noisy test could have detected is sized at alpha / 18, the series' tests
    ta, tb = np.array(TIMES), np.array(TIMES[:3]) * 1.3 * np.array([0.6, 1.5, 1.0])
    va, vb = ta.var(ddof=1) / (5 * ta.mean() ** 2), tb.var(ddof=1) / (3 * tb.mean() ** 2)
    df = (va + vb) ** 2 / (va ** 2 / 4 + vb ** 2 / 2)
    hand = math.exp((stats.t.ppf(1 - 0.05 / (2 * 18), df) + stats.t.ppf(0.8, df)) * math.sqrt(va + vb))
    assert row_of(noisy, "pytorch", 0.01, "train_time_s").detectable == pytest.approx(hand)

    text = (out / "series.md").read_text()
    assert text.startswith("# 3 result sets against baseline (the baseline)\n")
    assert "over the series' 18 tests (every set's together)" in text
    assert "| same | 0 | 0 | 0 | 0 | 6 | 0 | 0 | 0 |" in text
    assert "| regressed | 2 | 0 | 0 | 0 | 4 | 0 | 0 | 0 |" in text
    assert "| noisy | 0 | 0 | 0 | 0 | 2 | 4 | 0 | 0 |" in text
    changed = text.split("## Changed beyond the noise in some set: ")[1].split("## Per framework")[0]
    assert changed.startswith("2\n") and "| baseline (baseline) | same | regressed | noisy |" in changed
    assert "| 1.500 [1.466, 1.535] slower |" in changed and "inconclusive |" in changed


def test_the_trend_draws_each_set_in_order_with_each_settings_interval(tmp_path, capsys):
    paths = releases(tmp_path)
    out = tmp_path / "out"
    assert compare_main(capsys, *paths, "--out", out)[0] == 0
    series = pd.read_parquet(out / "series.parquet")
    names = ["baseline", "same", "regressed", "noisy"]
    points = comparison_series.trend_points(series, names)
    # every setting and metric: the baseline's mean and one per set, in order, each with its interval
    for _, group in points.groupby(["setting", "metric"]):
        assert list(group.set) == names and list(group.order) == [0, 1, 2, 3]
        assert (group.ci_low <= group["mean"]).all() and (group["mean"] <= group.ci_high).all()
        assert group.verdict.iloc[0] == comparison_series.BASELINE
    slow = points[(points.framework == "pytorch") & (points.metric == "train_time_s")].set_index("set")
    assert slow.loc["regressed", "mean"] == pytest.approx(15.0) and slow.loc["baseline", "mean"] == pytest.approx(10.0)
    svg = (out / "series_trend.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "Each setting across the result sets" in svg
    labels = re.findall(r">(baseline|same|regressed|noisy)</text>", svg)
    assert labels[:12] == names * 3  # an axis per metric's panel, the sets in order (then the legend's baseline)
    html = (out / "series_trend.html").read_text()
    assert "vegaEmbed" in html and all(f'"set":"{n}"' in html.replace(" ", "") for n in names)


def test_equal_sets_pass_the_gate(tmp_path, capsys):
    paths = releases(tmp_path)
    code, lines, err = compare_main(capsys, paths[0], paths[1], "--out", tmp_path / "o", "--fail-on",
                                    "slower,less-accurate")
    assert code == 0 and err == "" and not any(" gate: " in ln for ln in lines)
    assert lines[-1] == "dlbench: compare: the gate passes: no setting slower or less-accurate"
    table = pd.read_parquet(tmp_path / "o" / "comparison.parquet")  # the two-set form's own files
    assert (table.verdict == "equivalent").all()
    assert all((tmp_path / "o" / name).exists() for name in comparison.OUTPUTS)


def test_a_noisy_set_with_too_few_runs_neither_passes_as_equivalent_nor_fails_as_slower(tmp_path, capsys):
    paths = releases(tmp_path)
    code, lines, _ = compare_main(capsys, paths[0], paths[3], "--out", tmp_path / "o", "--fail-on",
                                  "slower,less-accurate")
    assert code == 0
    assert lines[-1] == ("dlbench: compare: the gate passes: no setting slower or less-accurate; 4 could not be told "
                         "(inconclusive or not testable)")
    table = pd.read_parquet(tmp_path / "o" / "comparison.parquet")
    times = table[table.metric != "accuracy"]
    assert (times.verdict == comparison.INCONCLUSIVE).all() and (times.ratio > 1.25).all()
    # a gate that asks for an answer fails on it, one line each
    code, lines, _ = compare_main(capsys, paths[0], paths[3], "--out", tmp_path / "o2", "--fail-on",
                                  "slower,inconclusive")
    gate = [ln for ln in lines if " gate: " in ln]
    assert code == 1 and len(gate) == 4 and all(ln.endswith(f"s {comparison.INCONCLUSIVE}") for ln in gate), gate


def test_a_slowdown_told_within_the_margin_does_not_fail_the_gate_one_beyond_it_does(tmp_path, capsys):
    tight = [10.0, 10.01, 9.99, 10.005, 9.995]  # 0.1 % spread: a 2 % slowdown is told, and lies within 5 %
    release(times=tight).to_parquet(tmp_path / "a.parquet")
    release(slow=1.02, times=tight).to_parquet(tmp_path / "b.parquet")
    args = [tmp_path / "a.parquet", tmp_path / "b.parquet", "--fail-on", "slower"]
    code, lines, _ = compare_main(capsys, *args, "--out", tmp_path / "o")
    table = pd.read_parquet(tmp_path / "o" / "comparison.parquet")
    told = row_of(table, "pytorch", 0.01, "train_time_s")
    assert told.verdict == "slower" and told.ratio == pytest.approx(1.02) and not told.beyond_margin
    assert code == 0 and lines[-1] == "dlbench: compare: the gate passes: no setting slower"
    code, lines, _ = compare_main(capsys, *args, "--out", tmp_path / "o1", "--time-margin-pct", "1")
    assert code == 1 and sum(" gate: b: pytorch " in ln and "beyond the margin of 1 %" in ln for ln in lines) == 2


@pytest.mark.parametrize("case", ["missing set", "names", "no setting in common", "not parquet", "not runs"])
def test_sets_that_cannot_be_compared_exit_2_in_one_line_having_written_nothing(tmp_path, capsys, case):
    paths = releases(tmp_path)
    (tmp_path / "junk.parquet").write_text("not a table")
    pd.DataFrame({"run_id": ["x"], "step": [1]}).to_parquet(tmp_path / "curves.parquet")
    other = release().assign(batch_size=64)  # another study: no setting of the baseline's
    other.to_parquet(tmp_path / "other.parquet")
    args, says = {
        "missing set": ([*paths[:2], tmp_path / "nowhere"], "nowhere holds no results"),
        "names": ([*paths, "--names", "a,b"], "--names gives 2 names for 4 result sets"),
        "no setting in common": ([paths[0], paths[1], tmp_path / "other.parquet"],
                                 "other and baseline share no setting with finished runs in both"),
        "not parquet": ([paths[0], tmp_path / "junk.parquet"], "junk.parquet is not a Parquet table"),
        "not runs": ([paths[0], tmp_path / "curves.parquet"], "curves.parquet is not a table of runs (no framework "
                     "or status column)"),
    }[case]
    code, lines, err = compare_main(capsys, *args, "--out", tmp_path / "o", "--fail-on", "slower")
    assert code == comparison.EXIT_NOT_COMPARED == 2 and lines == []
    assert err.count("\n") == 1 and err.startswith("dlbench: compare: ") and says in err, err
    assert not (tmp_path / "o").exists()


def test_a_verdict_the_gate_does_not_know_is_refused_with_a_near_miss(tmp_path, capsys):
    paths = releases(tmp_path)
    with pytest.raises(SystemExit) as info:
        comparison.main([*paths[:2], "--out", str(tmp_path / "o"), "--fail-on", "slower,less_accurate"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "'less_accurate' is not a verdict the gate knows (did you mean 'less-accurate'?)"\
        in err and not (tmp_path / "o").exists()


def test_set_names_are_the_folders_of_the_runs_unless_two_would_read_the_same():
    assert comparison.set_names(["v1/results", "v2/results/runs.parquet", "v3.parquet"], None) == ["v1", "v2", "v3"]
    assert comparison.set_names(["a/results", "b/a/results"], None) == ["a/results", "b/a/results"]
    assert comparison.set_names(["x", "x"], None) == ["x", "x (2)"]
    assert comparison.set_names(["x", "y"], "2.12, 2.13") == ["2.12", "2.13"]



# ---------------------------------------------------------------------------------------------- two real runs


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The tiny study (one learning rate, 3 repeats) run twice, in two copies of the workflow started together:
    their points take turns on the machine's measurement lock, so that both sets are timed under the same load.
    Then B's config names A as its baseline, which adds the compare rule (no point runs again)."""
    study = {**tiny_study(), "repeats": 3}
    study["sweep"] = {**study["sweep"], "learning_rate": [0.01]}
    root = tmp_path_factory.mktemp("two")
    copies = [copy_workflow(root / name, study, "tiny.yaml") for name in ("a", "b")]
    procs = [subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "tiny.yaml"],
                              cwd=c, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for c in copies]
    for proc in procs:
        out = proc.communicate(timeout=1800)[0]
        assert proc.returncode == 0, out[-3000:]
    a, b = copies
    (b / "tiny.yaml").write_text(yaml.safe_dump({**study, "compare": {"baseline": str(a / "results")}}))
    proc = snakemake(b, "--configfile", "tiny.yaml")
    return a, b, proc.stdout + proc.stderr


def contended_runs(runs: pd.DataFrame) -> pd.Series:
    """Per framework, how many of a result set's runs its runs table marks contended (timed while other work took
    the machine's CPUs; dlbench.node.hostload): records without the flag count as quiet."""
    flag = runs["contended"] if "contended" in runs else pd.Series(False, index=runs.index)
    return flag.map(lambda v: v is True or v == 1).groupby(runs["framework"]).sum()


def assert_nothing_changed_beyond_the_noise(a: Path, b: Path) -> None:
    """B's comparison (b/results/compare) against A, two runs of one config: no verdict tells a direction unless the
    runs it counts were contended, as the runs tables say; a contended verdict says so; accuracy, not a timing, is the
    same whatever the load; comparison.md counts what the table says."""
    runs_a, runs_b = (pd.read_parquet(x / "results/runs.parquet") for x in (a, b))
    table = pd.read_parquet(b / "results/compare/comparison.parquet")
    busy_a, busy_b = contended_runs(runs_a), contended_runs(runs_b)
    cols = ["framework", "metric", "a_contended", "b_contended", "ratio", "ratio_ci_low", "ratio_ci_high",
            "p_adjusted", "verdict"]
    for _, row in table.iterrows():
        what = row[cols].to_dict()
        # the contended counts are the runs tables' (each framework is one setting here)
        assert (row["a_contended"], row["b_contended"]) == (busy_a[row["framework"]], busy_b[row["framework"]]), what
        contended = busy_a[row["framework"]] + busy_b[row["framework"]] > 0
        assert bool(row["contended"]) == contended, what
        # a verdict carries the mark exactly where its runs were contended
        mark = comparison.CONTENDED if contended else ""
        assert row["verdict"].endswith(comparison.CONTENDED) == contended, what
        base = row["verdict"].removesuffix(mark)
        unchanged = {comparison.EQUIVALENT, comparison.INCONCLUSIVE, comparison.UNTESTABLE}  # no direction told
        if row["metric"] == "accuracy" or not contended:
            assert base in unchanged, what  # quiet timings, and accuracy under any load: no change told
        else:  # a contended timing may have changed, and says which way
            assert base in {*unchanged, *comparison.METRICS[row["metric"]]}, what
    # accuracy is compared for every framework, whatever the load: never nothing to check
    acc = table[table.metric == "accuracy"]
    assert set(acc.framework) == set(runs_b.framework) and len(acc) == runs_b.framework.nunique()
    assert np.allclose(acc.ratio, 1.0, atol=0.02), acc  # the same seeds train to the same accuracy on one machine
    text = (b / "results/compare/comparison.md").read_text()
    assert "# this study (B) against" in text
    words = {w for pair in comparison.METRICS.values() for w in pair}
    changed = sum(v.removesuffix(comparison.CONTENDED) in words for v in table.verdict)  # contended timings, if any
    assert f"## Changed beyond the noise: {changed}\n" in text
    busy = int(((busy_a + busy_b) > 0).sum())
    assert (f"Settings with contended runs (timed while other work took the machine's CPUs): {busy};" in text
            if busy else "No run of either set is marked contended" in text)


@pytest.mark.long
def test_two_real_runs_of_one_config_differ_in_nothing_beyond_the_noise(two_runs):
    a, b, _ = two_runs
    runs = pd.read_parquet(b / "results/runs.parquet")
    assert (runs.status == "ok").all() and len(runs) == 6
    for column in ("setting_id", "dlbench_version", "dlbench_commit", "dlbench_dirty", "cpu_governor", "cpu_boost"):
        assert column in runs.columns, column
    assert runs.groupby("framework").setting_id.nunique().eq(1).all()  # the repeats share their setting
    assert runs.dlbench_version.eq(dlbench.__version__).all()
    table = pd.read_parquet(b / "results/compare/comparison.parquet")
    assert len(table) == 2 * len(comparison.METRICS)
    assert (table.a_n == 3).all() and (table.b_n == 3).all()
    # Uncontended, nothing differs beyond the noise; where something else loaded the machine during either run
    # (the runs tables say which), the comparison may see a change in a timing, and says its runs were contended.
    assert_nothing_changed_beyond_the_noise(a, b)


@pytest.mark.long
def test_the_compare_rule_runs_when_the_config_names_a_baseline_and_nothing_else_reruns(two_runs):
    a, b, jobs = two_runs
    assert "rule compare:" in jobs or "localrule compare:" in jobs
    assert "rule train:" not in jobs and "localrule train:" not in jobs
    for name in comparison.OUTPUTS:
        assert (b / "results/compare" / name).stat().st_size > 0
    (b / "bad.yaml").write_text(yaml.safe_dump({**yaml.safe_load((b / "tiny.yaml").read_text()),
                                                 "compare": {"baseline": str(a / "nothing-here")}}))
    proc = snakemake(b, "-n", "--configfile", "bad.yaml", check=False)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "dlbench: config error" in ln]
    assert proc.returncode != 0 and len(lines) == 1 and "nothing-here holds no runs.parquet" in lines[0]


@pytest.mark.long
def test_selecting_finished_points_by_status_runs_them_again(two_runs):
    _, b, _ = two_runs
    plain = snakemake(b, "-n", "--configfile", "tiny.yaml", "--config", 'select={"status": ["ok"]}')
    assert "dlbench: select.status removed 0; 6 of 6 points remain" in plain.stderr
    assert "dlbench: select.status: 6 of the points kept have a record; add --forcerun train" in plain.stderr
    assert not re.search(r"^train\s", plain.stdout, re.M)
    forced = snakemake(b, "-n", "--configfile", "tiny.yaml", "--config", 'select={"status": ["ok"]}',
                       "--forcerun", "train")
    assert re.search(r"^train\s+6$", forced.stdout, re.M), forced.stdout[-2000:]
    assert "add --forcerun" not in forced.stderr
    none = snakemake(b, "-n", "--configfile", "tiny.yaml", "--config", 'select={"status": ["error", "timeout"]}',
                     "--forcerun", "train")
    assert "select.status removed 6; 0 of 6 points remain" in none.stderr
    assert not re.search(r"^train\s", none.stdout, re.M)
