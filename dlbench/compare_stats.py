"""The statistics of a comparison of two result sets, vectorised over settings (dlbench.compare).

dlbench.stats holds every test on lists of values; a comparison of two 20,000-record sets would call them
once per setting and metric, about half a millisecond each. These take per-setting summaries (mean, sample
variance, n) as arrays instead, one pass for every setting: the t interval of a mean (stats.t_interval's,
from summaries), and the ratio of two means (B over A), tested with Welch's t on its logarithm, its variance
by the delta method (var(log m) ~ var / (n m^2)), its degrees of freedom by Welch-Satterthwaite. The many
tests of a comparison are adjusted with stats.holm.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from dlbench.stats import CONFIDENCE as LEVEL

TEST = "Welch's t on log(B / A) (delta method)"


def _arrays(*values) -> list[np.ndarray]:
    return [np.asarray(pd.to_numeric(pd.Series(v), errors="coerce"), dtype=float) for v in values]


def mean_interval(mean, var, n, level: float = LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """The t interval of each mean (NaN where n < 2)."""
    mean, var, n = _arrays(mean, var, n)
    with np.errstate(invalid="ignore", divide="ignore"):
        half = stats.t.ppf(0.5 + level / 2, np.where(n >= 2, n - 1, np.nan)) * np.sqrt(var / n)
    return mean - half, mean + half


def ratio_of_means(mean_a, var_a, n_a, mean_b, var_b, n_b, level: float = LEVEL) -> dict[str, np.ndarray]:
    """ratio (B's mean over A's), its interval and the two-sided p of "no change" (NaN where a side has n < 2 or
    a mean is not positive). Where neither side varies at all, the ratio is exact: p 1 if it is 1, else 0."""
    ma, va, na, mb, vb, nb = _arrays(mean_a, var_a, n_a, mean_b, var_b, n_b)
    with np.errstate(invalid="ignore", divide="ignore"):
        testable = (na >= 2) & (nb >= 2) & (ma > 0) & (mb > 0)
        ratio = mb / ma
        log_ratio = np.log(ratio)
        ea, eb = va / (na * ma ** 2), vb / (nb * mb ** 2)  # each mean's share of var(log ratio)
        se = np.sqrt(ea + eb)
        df = (ea + eb) ** 2 / (ea ** 2 / (na - 1) + eb ** 2 / (nb - 1))
        p = 2 * stats.t.sf(np.abs(log_ratio / se), df)
        half = stats.t.ppf(0.5 + level / 2, df) * se
        exact = testable & (se == 0)
        p = np.where(exact, np.where(np.isclose(ratio, 1.0, rtol=0, atol=1e-12), 1.0, 0.0), p)
        low = np.where(exact, ratio, np.exp(log_ratio - half))
        high = np.where(exact, ratio, np.exp(log_ratio + half))
    nan = np.full_like(ratio, np.nan)
    return {"ratio": np.where((ma > 0) & np.isfinite(ratio), ratio, nan), "ratio_ci_low": np.where(testable, low, nan),
            "ratio_ci_high": np.where(testable, high, nan), "p_value": np.where(testable, p, nan)}
