"""The statistics of a comparison of two result sets, vectorised over settings (dlbench.present.comparison).

dlbench.analysis.stats holds every test on lists of values; a comparison of two 20,000-record sets would call them
once per setting and metric, about half a millisecond each. These take per-setting summaries (mean, sample
variance, n) as arrays instead, one pass for every setting: the t interval of a mean, and Welch's t of B
against A, on the log of the ratio of means (times: its variance by the delta method, var(log m) ~ var / (n m^2))
or on the difference of means (accuracy), degrees of freedom by Welch-Satterthwaite. Each test also gives the
two one-sided tests (TOST) of equivalence within a margin and the smallest difference it could have detected
(stats.POWER). A test needs stats.MIN_RUNS runs a side and some spread on one side: without it, no p at all.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlbench.analysis.stats import ALPHA, CONFIDENCE, MIN_RUNS, NO_SPREAD, POWER, t_quantile, t_sf

TEST_LOG = "Welch's t on log(B / A) (delta method)"
TEST_DIFFERENCE = "Welch's t on B - A"
TOO_FEW = f"fewer than {MIN_RUNS} runs on a side"
NOT_POSITIVE = "a mean is not positive (no ratio)"


def _arrays(*values) -> list[np.ndarray]:
    return [np.asarray(pd.to_numeric(pd.Series(v), errors="coerce"), dtype=float) for v in values]


def mean_interval(mean, var, n, level: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """The t interval of each mean (NaN where n < 2)."""
    mean, var, n = _arrays(mean, var, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = t_quantile(0.5 + level / 2, np.where(n >= 2, n - 1, np.nan)) * np.sqrt(var / n)
    return mean - half, mean + half


def _welch(share_a: np.ndarray, share_b: np.ndarray, n_a: np.ndarray, n_b: np.ndarray):
    """(se, df) of a difference of two independent means, each adding its `share` (its mean's variance)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(share_a + share_b)
        df = (share_a + share_b) ** 2 / (share_a ** 2 / (n_a - 1) + share_b ** 2 / (n_b - 1))
    return se, df


def log_ratio(mean_a, var_a, n_a, mean_b, var_b, n_b):
    """(estimate, se, df) of log(B's mean / A's), by the delta method; NaN where a mean is not positive."""
    ma, va, na, mb, vb, nb = _arrays(mean_a, var_a, n_a, mean_b, var_b, n_b)
    positive = (ma > 0) & (mb > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = np.where(positive, np.log(np.where(positive, mb / ma, 1.0)), np.nan)
        se, df = _welch(va / (na * ma ** 2), vb / (nb * mb ** 2), na, nb)
    return estimate, np.where(positive, se, np.nan), df


def difference(mean_a, var_a, n_a, mean_b, var_b, n_b):
    """(estimate, se, df) of B's mean minus A's."""
    ma, va, na, mb, vb, nb = _arrays(mean_a, var_a, n_a, mean_b, var_b, n_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        se, df = _welch(va / na, vb / nb, na, nb)
    return mb - ma, se, df


def untestable(n_a, n_b, estimate, se) -> np.ndarray:
    """Why each test cannot be run ("" where it can): too few runs, no spread on either side, no ratio. A test
    of no spread would give p = 0 for any difference at all, and a p from one degree of freedom says little."""
    n_a, n_b, estimate, se = _arrays(n_a, n_b, estimate, se)
    # "not at least MIN_RUNS" rather than "< MIN_RUNS": a side with no run at all has n NaN, not 0
    return np.select([~(n_a >= MIN_RUNS) | ~(n_b >= MIN_RUNS), ~np.isfinite(estimate), ~(se > 0)],
                     [TOO_FEW, NOT_POSITIVE, NO_SPREAD], default="")


def two_sided_p(estimate, se, df) -> np.ndarray:
    """The p of "no difference" (Student's t, df degrees of freedom)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return 2 * t_sf(np.abs(estimate / se), df)


def tost(estimate, se, df, margin) -> np.ndarray:
    """The p of equivalence within +/- margin by two one-sided tests: the larger of the p of "the difference is
    at or below -margin" and of "at or above +margin" (equivalent at ALPHA where the 90 % interval lies within)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.maximum(t_sf((estimate + margin) / se, df), t_sf((margin - estimate) / se, df))


def interval(estimate, se, df, level: float = CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(invalid="ignore"):
        half = t_quantile(0.5 + level / 2, df) * se
    return estimate - half, estimate + half


def detectable(se, df, alpha: float = ALPHA, power: float = POWER) -> np.ndarray:
    """The smallest difference the two-sided test at `alpha` would have found with `power`."""
    with np.errstate(invalid="ignore"):
        return (t_quantile(1 - alpha / 2, df) + t_quantile(power, df)) * se


def welch_test(estimate, se, df, margin, why, alpha: float = ALPHA, level: float = CONFIDENCE) -> dict:
    """The numbers of each test (estimate, se, df from log_ratio or difference; `why` from untestable): its
    interval, p, TOST p within `margin` and detectable difference, all NaN where `why` says it cannot be run."""
    ok = np.asarray(why) == ""
    low, high = interval(estimate, se, df, level)
    nan = np.nan
    return {"estimate": np.where(ok, estimate, nan), "low": np.where(ok, low, nan), "high": np.where(ok, high, nan),
            "p_value": np.where(ok, two_sided_p(estimate, se, df), nan),
            "tost_p": np.where(ok, tost(estimate, se, df, margin), nan),
            "detectable": np.where(ok, detectable(se, df, alpha), nan)}
