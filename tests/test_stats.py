"""Intervals and tests (dlbench.analysis.stats) against values worked out by hand in each test: the t interval from
the t table, Welch's and the paired t from their formulas and the t distribution's closed forms for 2 and 4
degrees of freedom, Holm's steps, the ANOVA's sums of squares and Friedman's rank sums."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dlbench.analysis import stats

T975_DF2 = 4.302652729749462  # the t table: two-sided 95 %, 2 degrees of freedom


def p_t2(t: float) -> float:
    """Two-sided p of a t statistic with 2 degrees of freedom (closed form: F(t) = 1/2 + t / (2 sqrt(2 + t^2)))."""
    return 1 - abs(t) / math.sqrt(2 + t * t)


def p_t4(t: float) -> float:
    """Two-sided p of a t statistic with 4 degrees of freedom (closed form)."""
    t = abs(t)
    return 1 - t * (t * t + 6) / (t * t + 4) ** 1.5


def test_the_t_interval_of_three_runs():
    mean, low, high = stats.t_interval([10.0, 12.0, 14.0])
    half = T975_DF2 * 2.0 / math.sqrt(3)  # sd 2, n 3
    assert mean == 12.0 and low == pytest.approx(12 - half) and high == pytest.approx(12 + half)
    d = stats.describe([10.0, 12.0, 14.0, float("nan")])
    assert (d["n"], d["sd"], d["min"], d["max"]) == (3, 2.0, 10.0, 14.0)
    assert d["half_width"] == pytest.approx(half)


def test_a_single_run_has_no_interval():
    mean, low, high = stats.t_interval([7.5])
    assert mean == 7.5 and math.isnan(low) and math.isnan(high)
    assert math.isnan(stats.describe([7.5])["sd"])
    assert math.isnan(stats.welch([7.5], [1.0, 2.0]).p) and "fewer than two" in stats.welch([7.5], [1, 2]).why


def test_welch_by_its_formula():
    t = stats.welch([10.0, 12.0, 14.0], [20.0, 22.0, 24.0])
    # variances of the means 4/3 each: t = -10 / sqrt(8/3); Welch-Satterthwaite df = (8/3)^2 / (2 (4/3)^2 / 2) = 4
    expected_t = -10 / math.sqrt(8 / 3)
    assert t.statistic == pytest.approx(expected_t) and t.df == pytest.approx(4.0)
    assert t.p == pytest.approx(p_t4(expected_t))
    assert t.name == "Welch's t" and "t(4) = -6.12" in t.text()


def test_paired_by_seed_by_its_formula():
    # differences -1, -2, -2: mean -5/3, sd sqrt(1/3); t = (-5/3) / (sqrt(1/3) / sqrt(3)) = -5
    t = stats.paired([1.0, 2.0, 3.0], [2.0, 4.0, 5.0])
    assert t.statistic == pytest.approx(-5.0) and t.df == 2 and t.p == pytest.approx(p_t2(-5.0))
    # judge() pairs by seed only when both ran the same seeds
    assert stats.judge({1: 1.0, 2: 2.0, 3: 3.0}, {3: 5.0, 1: 2.0, 2: 4.0}).test.name == "paired t by seed"
    assert stats.judge({1: 1.0, 2: 2.0, 3: 3.0}, {1: 2.0, 2: 4.0, 4: 5.0}).test.name == "Welch's t"


def test_holm_steps_down():
    # sorted 0.01, 0.03, 0.04: x3 = 0.03, x2 = 0.06, x1 = 0.04 -> kept at 0.06 (monotone); NaN is not counted
    adjusted = stats.holm([0.01, 0.04, 0.03, float("nan")])
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06]) and math.isnan(adjusted[3])


def test_anova_by_its_sums_of_squares():
    groups = [[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]
    # grand mean 11/3; between: 3 ((2-11/3)^2 + (3-11/3)^2 + (6-11/3)^2) = 26 on 2 df; within: 6 on 6 df
    f = (26 / 2) / (6 / 6)
    test = stats.anova(groups)
    assert test.statistic == pytest.approx(f) and (test.df, test.df2) == (2, 6)
    assert test.p == pytest.approx((1 + 2 * f / 6) ** (-6 / 2))  # F(2, d2) tail: (1 + 2F/d2)^(-d2/2)
    assert "F(2, 6) = 13" in test.text()
    assert math.isnan(stats.anova([[1.0, 2.0], [3.0]]).p)


def test_friedman_by_its_rank_sums():
    blocks = [[1.0, 2.0, 3.0], [1.0, 3.0, 2.0], [1.0, 2.0, 3.0]]
    # rank sums 3, 7, 8 over n = 3 blocks, k = 3: 12 / (n k (k+1)) sum R^2 - 3 n (k+1)
    chi2 = 12 / (3 * 3 * 4) * (9 + 49 + 64) - 3 * 3 * 4
    test = stats.friedman(blocks)
    assert test.statistic == pytest.approx(chi2) and test.p == pytest.approx(math.exp(-chi2 / 2))  # chi2, 2 df
    assert math.isnan(stats.friedman([[1.0, 2.0], [2.0, 1.0]]).p)  # two frameworks: a paired test instead


def test_repeats_for_a_target_half_width():
    # sd 1, target 0.5: n = 18 gives t(17) / sqrt(18) = 2.1098 / 4.2426 = 0.497; n = 17: 2.1199 / 4.1231 = 0.514
    assert stats.repeats_for(1.0, 0.5) == 18
    assert stats.repeats_for(float("nan"), 0.5) is None


def test_the_leader_inconclusive_distinct_and_untestable():
    close = stats.leader({"a": {1: 1.0, 2: 1.1, 3: 0.9}, "b": {1: 1.05, 2: 1.0, 3: 1.2}}, larger_is_better=False)
    # differences a - b by seed: -0.05, 0.1, -0.3: mean -0.0833, sd 0.2021, t = -0.714 on 2 df; no margin given,
    # so no equivalence either: inconclusive, not "tied"
    assert close.name == "a" and close.state == "inconclusive" and close.undecided == ["b"]
    assert close.rivals[0].test.p == pytest.approx(p_t2(-0.0833333 / (0.2020726 / math.sqrt(3))), rel=1e-4)
    apart = stats.leader({"a": {1: 10.0, 2: 12.0, 3: 14.0}, "b": {1: 20.0, 2: 22.0, 4: 24.0}}, larger_is_better=True)
    assert apart.name == "b" and apart.state == "distinct" and apart.rivals[0].test.name == "Welch's t"
    assert apart.rivals[0].p_holm == pytest.approx(p_t4(10 / math.sqrt(8 / 3)))
    few = stats.leader({"a": {1: 1.0, 2: 1.2}, "b": {1: 2.0, 2: 2.5, 3: 2.2}}, larger_is_better=True)
    assert few.state == "untestable" and few.name == "b"  # two runs on a side: below MIN_RUNS


def test_no_spread_is_never_told_apart():
    # before: p = 0 and "told apart" for any difference at all, even with two runs a side
    assert math.isnan(stats.welch([1.0, 1.0], [2.0, 2.0]).p) and "no spread" in stats.welch([1.0, 1.0], [2.0, 2.0]).why
    assert math.isnan(stats.paired([1.0, 2.0, 3.0], [2.0, 3.0, 4.0]).p)
    flat = stats.leader({"a": {1: 1.0, 2: 1.0, 3: 1.0}, "b": {1: 2.0, 2: 2.0, 3: 2.0}}, False, "train_time_s")
    assert flat.state == "untestable" and "no spread" in flat.rivals[0].judgement.why


def test_equivalence_by_two_one_sided_tests():
    from scipy import stats as sps

    rng = np.random.default_rng(4)
    for _ in range(50):
        a, b = rng.normal(10, 1, 5), rng.normal(10.2, 1.5, 6)
        j = stats.judge(dict(enumerate(a)), {k + 10: v for k, v in enumerate(b)}, margin=0.8)
        lower = sps.ttest_ind(a + 0.8, b, equal_var=False, alternative="greater").pvalue  # H0: diff <= -0.8
        upper = sps.ttest_ind(a - 0.8, b, equal_var=False, alternative="less").pvalue  # H0: diff >= 0.8
        assert j.tost_p == pytest.approx(max(lower, upper), rel=1e-9)
    same = {s: 95.0 + 0.05 * (s % 3) for s in range(5)}
    near = {s: v + 0.1 + 0.01 * (s % 2) for s, v in same.items()}  # 0.1 points apart, paired by seed
    j = stats.judge_metric(same, near, "accuracy_pct")
    assert j.word == stats.WORSE  # a real 0.1-point difference, told apart: better wins over equivalent
    noisy = {s: v + 0.2 * (-1) ** s for s, v in same.items()}
    eq = stats.judge_metric(same, noisy, "accuracy_pct")
    assert eq.word == stats.EQUIVALENT and eq.tost_p < stats.ALPHA
    wide = stats.judge_metric(same, {s: v + 3.0 * (-1) ** s for s, v in same.items()}, "accuracy_pct")
    assert wide.word == stats.INCONCLUSIVE and wide.detectable > 0.5  # it says what it could have found
    assert stats.Margins.from_config({"verdicts": {"accuracy_margin_pp": 4}}).for_metric("accuracy_pct") == (4.0, False)
    assert stats.judge_metric(same, {s: v + 3.0 * (-1) ** s for s, v in same.items()}, "accuracy_pct",
                              stats.Margins(accuracy_pp=8.0)).word == stats.EQUIVALENT


def test_benjamini_hochberg_is_scipys():
    from scipy import stats as sps

    p = np.random.default_rng(2).uniform(0, 0.2, 300)
    assert stats.benjamini_hochberg(p) == pytest.approx(sps.false_discovery_control(p), rel=1e-12)
    assert math.isnan(stats.benjamini_hochberg([0.01, math.nan])[1])


def test_accuracy_intervals_stay_within_0_and_100_and_times_positive():
    # before: "tensorflow 90.95% [78.56, 103.3], n 2"
    mean, low, high = stats.t_interval([99.0, 99.9], scale="logit%")
    assert mean == pytest.approx(99.45) and 0 < low < mean < high < 100
    mean, low, high = stats.t_interval([0.5, 3.0, 0.2], scale="log")
    assert low > 0 and low < mean < high
    linear = stats.t_interval([99.0, 99.9])
    assert linear[2] > 100  # what the linear interval said


def test_a_contrast_of_two_means_is_welchs_t_and_a_ratio_is_tested_on_its_log():
    from scipy import stats as sps

    a, b = [9.8, 10.0, 10.2], [0.98, 1.0, 1.02, 1.01]
    diff = stats.contrast([(1, a), (-1, b)])
    welch = sps.ttest_ind(a, b, equal_var=False)  # scipy's own Welch test, not dlbench's
    assert diff.estimate == pytest.approx(10.0 - np.mean(b))
    assert diff.test.statistic == pytest.approx(welch.statistic) and diff.test.p == pytest.approx(welch.pvalue)
    assert diff.told
    ratio = stats.contrast([(1, a), (-1, b[:3])], log=True)
    # var(log mean) = var / (n mean^2): 0.04 / 300 and 0.0004 / 3, equal, so 4 degrees of freedom
    se = math.sqrt(0.04 / 300 + 0.0004 / 3)
    half = 2.7764451051977987 * se  # t(0.975, 4)
    assert ratio.estimate == pytest.approx(math.log(10.0))
    assert (ratio.low, ratio.high) == pytest.approx((math.log(10) - half, math.log(10) + half))
    assert ratio.test.df == pytest.approx(4.0)
    single = stats.contrast([(1, a), (-1, [1.0])])
    assert math.isnan(single.low) and "fewer than two" in single.test.why and not single.told


def test_a_judgement_pairs_by_seed_where_both_ran_the_same_seeds():
    from scipy import stats as sps

    a, b = {1: 96.0, 2: 96.8, 3: 96.4}, {1: 95.0, 2: 95.4, 3: 95.2}
    got = stats.judge(a, b)
    # differences 1.0, 1.4, 1.2: mean 1.2, sd 0.2; the t interval on 2 degrees of freedom
    half = 4.302652729749462 * 0.2 / math.sqrt(3)
    assert (got.estimate, got.low, got.high) == pytest.approx((1.2, 1.2 - half, 1.2 + half))
    assert got.test.p == pytest.approx(sps.ttest_rel([96.0, 96.8, 96.4], [95.0, 95.4, 95.2]).pvalue)
    assert got.test.name == "paired t by seed" and got.word == stats.BETTER
    unpaired = stats.judge(a, {4: 95.0, 5: 95.4, 6: 95.2})
    assert unpaired.test.name.startswith("Welch") and unpaired.estimate == pytest.approx(1.2)
    exact = stats.judge({1: 2.0, 2: 4.0, 3: 6.0}, {1: 1.0, 2: 2.0, 3: 3.0}, log=True)  # twice as much each seed
    assert (exact.estimate, exact.low, exact.high) == pytest.approx((math.log(2),) * 3)
    assert exact.word == stats.UNTESTABLE and "no spread" in exact.why  # exact, but no noise to tell it from
