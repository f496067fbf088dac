"""How sure a comparison is: intervals of a mean, tests of a difference, and what the data can tell.

Plain functions on lists of numbers (scipy's distributions; `scaled_intervals` alone groups a pandas Series),
the one home of every interval and test dlbench states: the Student-t interval of a mean, Welch's t, the paired
t by seed, Holm's and Benjamini-Hochberg's corrections for many tests, Welch's t of a contrast of means (a
ratio, a change of slope), the one-way ANOVA, the two-way ANOVA and Friedman's test with the seed as block, the
repeats a target half-width needs, `judge`: one group against another, and `leader`: which of several groups
leads, and whether the data can tell it from the others.

A verdict (`judge`, `leader`) ends as one of four words, each earned: one side better (its test's p, corrected
where several were tested, below ALPHA), **equivalent** within a stated margin (two one-sided tests, TOST), or
**inconclusive** (neither; with the smallest difference the data could have detected), and "not testable" where
a side has fewer than MIN_RUNS runs or no run differs from another. Intervals respect their metric's scale
(`scale_of`): times and ratios on the log scale, accuracies on the logit scale (never past 0 or 100 %).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import special
from scipy import stats as sps

CONFIDENCE = 0.95  # every interval dlbench states
ALPHA = 0.05  # a difference is told from noise when its (corrected) p is below this
MIN_RUNS = 3  # fewer runs on a side, and a verdict is "not testable": two runs give one degree of freedom
POWER = 0.80  # the power at which `detectable` sizes the smallest difference a test could have found

BETTER, WORSE, EQUIVALENT, INCONCLUSIVE, UNTESTABLE = "better", "worse", "equivalent", "inconclusive", "not testable"


@dataclass(frozen=True)
class Margins:
    """How close two means must be to be called equivalent (config `verdicts`): accuracy in points, times (and
    every other positive metric, compared as a ratio) in per cent."""
    accuracy_pp: float = 0.5
    time_pct: float = 5.0

    @classmethod
    def from_config(cls, cfg: Mapping | None) -> Margins:
        v = (cfg or {}).get("verdicts") or {}
        return cls(float(v.get("accuracy_margin_pp", cls.accuracy_pp)), float(v.get("time_margin_pct", cls.time_pct)))

    def for_metric(self, metric: str) -> tuple[float, bool]:
        """(margin, log): the margin on the scale a difference of `metric` is tested on; `log`: a ratio, tested
        as a difference of logarithms."""
        if metric == "accuracy_pct":
            return self.accuracy_pp, False
        if metric == "accuracy":
            return self.accuracy_pp / 100, False
        return math.log1p(self.time_pct / 100), True

    def text(self, metric: str) -> str:
        return (f"{self.accuracy_pp:g} points" if metric.startswith("accuracy") else f"{self.time_pct:g} %")


def scale_of(metric: str) -> str:
    """The scale `metric`'s intervals are taken on: "logit" (a fraction in 0-1), "logit%" (a percentage),
    "log" (a positive quantity: times, rates, memory) or "linear"."""
    if metric == "accuracy":
        return "logit"
    if metric == "accuracy_pct":
        return "logit%"
    if metric.endswith(("_s", "_mb", "_img_s", "_gflops", "_w")) or metric in ("throughput_img_s", "achieved_gflops"):
        return "log"
    return "linear"


def t_quantile(q, df):
    """Student's t quantile: scipy.stats.t.ppf's own function without its argument checks, which cost more than
    the function where a large study asks for it a hundred thousand times."""
    return special.stdtrit(df, q)


def t_sf(x, df):
    """Student's t survival function, as t_quantile: scipy.stats.t.sf's own function."""
    return special.stdtr(df, -np.asarray(x, dtype=float))


def _clean(values) -> np.ndarray:
    a = np.asarray(list(values), dtype=float)
    return a[np.isfinite(a)]


def half_width(sd, n, confidence: float = CONFIDENCE):
    """The Student-t interval's half-width for a spread `sd` (n - 1) over `n` values; NaN where n < 2.
    Element-wise on arrays, so a table of many settings takes one call."""
    sd, n = np.asarray(sd, dtype=float), np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(n >= 2, t_quantile(0.5 + confidence / 2, np.maximum(n - 1, 1)) * sd / np.sqrt(n), np.nan)
    return float(out) if out.ndim == 0 else out


def _to_scale(a: np.ndarray, scale: str) -> np.ndarray | None:
    """The values on `scale` (None where they do not fit it: a non-positive value on the log scale)."""
    if scale == "log":
        return np.log(a) if (a > 0).all() else None
    if scale in ("logit", "logit%"):
        top = 100.0 if scale == "logit%" else 1.0
        p = a / top
        step = _boundary_step(p[np.isfinite(p)])
        p = np.clip(p, step, 1 - step)  # an accuracy of exactly 0 or 100 % has no logit
        return np.log(p / (1 - p))
    return a


def _boundary_step(p: np.ndarray) -> float:
    """How far inside (0, 1) a fraction of exactly 0 or 1 is put before its logit is taken: half the finest step
    the values themselves show (between two of them, or from a boundary), as a continuity correction does for a
    count. A fixed tiny clip (1e-6) made one 100 % among 99.7 % runs stretch the interval down to 45 %."""
    steps = []
    inside = p[(p > 0) & (p < 1)]
    if inside.size:
        steps.append(float(np.minimum(inside, 1 - inside).min()))
    gaps = np.diff(np.unique(p))
    if gaps.size:
        steps.append(float(gaps.min()))
    return 0.5 * min(steps) if steps else 5e-4


def _from_scale(x, scale: str):
    if scale == "log":
        return np.exp(x)
    if scale in ("logit", "logit%"):
        return special.expit(x) * (100.0 if scale == "logit%" else 1.0)
    return x


def t_interval(values, confidence: float = CONFIDENCE, scale: str = "linear") -> tuple[float, float, float]:
    """(mean, low, high): the arithmetic mean and the Student-t interval of the mean, taken on `scale` (scale_of)
    and brought back, so that a time's interval stays positive and an accuracy's within 0-100 %; low and high
    are NaN for fewer than two values, and the mean itself where no value differs."""
    a = _clean(values)
    if len(a) == 0:
        return math.nan, math.nan, math.nan
    mean = float(a.mean())
    if len(a) < 2:
        return mean, math.nan, math.nan
    x = _to_scale(a, scale)
    if x is None:
        x, scale = a, "linear"
    sd = x.std(ddof=1)
    if sd == 0:
        return mean, mean, mean
    half = half_width(sd, len(x), confidence)
    low, high = _from_scale(x.mean() - half, scale), _from_scale(x.mean() + half, scale)
    # the interval holds the mean it is printed beside (a log or logit interval is centred on another mean)
    return mean, float(min(low, mean)), float(max(high, mean))


def scaled_intervals(values, keys, scale: str, confidence: float = CONFIDENCE):
    """t_interval's (low, high) for each group of `values` (grouped by `keys`, a pandas grouper), vectorised:
    a large study has tens of thousands of settings. Returns a DataFrame indexed by key: count, mean, std, min,
    max (of the values themselves) and ci_low, ci_high (on `scale`; NaN below two values)."""
    import pandas as pd  # the tables' type; the rest of this module works on plain arrays

    v = pd.Series(np.asarray(values, dtype=float), index=getattr(values, "index", None))
    agg = v.groupby(keys).agg(["count", "mean", "std", "min", "max"])
    x = _to_scale(v.to_numpy(), scale) if scale != "linear" else v.to_numpy()
    if x is None or not np.isfinite(x[np.isfinite(v.to_numpy())]).all():
        x, scale = v.to_numpy(), "linear"
    t = pd.Series(x, index=v.index).groupby(keys).agg(["mean", "std"])
    half = half_width(t["std"].to_numpy(), agg["count"].to_numpy(), confidence)
    with np.errstate(invalid="ignore", over="ignore"):
        low = _from_scale(t["mean"].to_numpy() - half, scale)
        high = _from_scale(t["mean"].to_numpy() + half, scale)
    mean = agg["mean"].to_numpy()
    flat = t["std"].to_numpy() == 0
    agg["ci_low"] = np.where(flat, mean, np.fmin(low, mean))
    agg["ci_high"] = np.where(flat, mean, np.fmax(high, mean))
    agg.loc[agg["count"] < 2, ["ci_low", "ci_high"]] = np.nan
    return agg


def describe(values, confidence: float = CONFIDENCE, scale: str = "linear") -> dict:
    """n, mean, sd (n - 1), the t interval (ci_low, ci_high; on `scale`), its half-width, min and max of the
    finite values."""
    a = _clean(values)
    mean, low, high = t_interval(a, confidence, scale)
    return {"n": len(a), "mean": mean, "sd": float(a.std(ddof=1)) if len(a) >= 2 else math.nan,
            "ci_low": low, "ci_high": high, "half_width": (high - low) / 2 if len(a) >= 2 else math.nan,
            "min": float(a.min()) if len(a) else math.nan, "max": float(a.max()) if len(a) else math.nan}


NO_SPREAD = "no spread: every run gave the same value"


@dataclass(frozen=True)
class Test:
    """A named test's result: `p` is NaN where the data cannot be tested (too few values, no spread)."""
    name: str
    statistic: float = math.nan
    p: float = math.nan
    df: float = math.nan
    why: str = ""  # why it could not be run, when p is NaN
    df2: float = math.nan  # an F test's second degrees of freedom (the ANOVA's within groups)

    def text(self) -> str:
        """The test in words: its name, statistic, degrees of freedom and p."""
        if math.isnan(self.p):
            return f"{self.name}: not run ({self.why})" if self.why else f"{self.name}: not run"
        if not math.isnan(self.df2):
            return f"{self.name}: F({self.df:g}, {self.df2:g}){_is(self.statistic)}, {format_p(self.p)}"
        symbol = "chi2" if self.name.startswith("Friedman") else "t"
        df = f"({self.df:.3g})" if not math.isnan(self.df) else ""
        return f"{self.name}: {symbol}{df}{_is(self.statistic)}, {format_p(self.p)}"


def _statistic(x: float) -> str:
    """A test statistic for a reader: three digits, and "< 0.001" for one that is zero to rounding (an F of
    8.96e-28 says nothing a reader can use that "< 0.001" does not)."""
    return "< 0.001" if abs(x) < 1e-3 else f"{x:.3g}"


def _is(x: float) -> str:
    """" = 8.38" or " < 0.001": a statistic after its symbol."""
    text = _statistic(x)
    return f" {text}" if text.startswith("<") else f" = {text}"


def format_p(p: float) -> str:
    """"p = 0.0419", "p < 0.001", "p > 0.999" or "p n/a"."""
    if math.isnan(p):
        return "p n/a"
    if p > 0.999:
        return "p > 0.999"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3g}"


def welch(a, b) -> Test:
    """Welch's t test of two means (unequal variances); needs two or more values on each side."""
    x, y = _clean(a), _clean(b)
    name = "Welch's t"
    if len(x) < 2 or len(y) < 2:
        return Test(name, why="fewer than two runs on a side")
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if vx + vy == 0:  # no spread to measure noise by: no test can say how sure a difference is
        return Test(name, why=NO_SPREAD)
    t = (x.mean() - y.mean()) / math.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (len(x) - 1) + vy ** 2 / (len(y) - 1))
    return Test(name, float(t), float(2 * t_sf(abs(t), df)), float(df))


def paired(a, b) -> Test:
    """The paired t test (a[i] against b[i], the same seed); needs two or more pairs."""
    x, y = np.asarray(list(a), dtype=float), np.asarray(list(b), dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    d = x[keep] - y[keep]
    name = "paired t by seed"
    if len(d) < 2:
        return Test(name, why="fewer than two seeds in common")
    sd = d.std(ddof=1)
    if sd == 0:
        return Test(name, why=NO_SPREAD)
    t = d.mean() / (sd / math.sqrt(len(d)))
    return Test(name, float(t), float(2 * t_sf(abs(t), len(d) - 1)), len(d) - 1.0)


@dataclass(frozen=True)
class Contrast:
    """A weighted sum of group means (or of their logarithms) with its interval and test of "it is zero"."""
    estimate: float
    low: float
    high: float
    test: Test

    @property
    def told(self) -> bool:
        return np.isfinite(self.test.p) and self.test.p < ALPHA


def contrast(parts: Sequence[tuple[float, Sequence[float]]], log: bool = False,
             confidence: float = CONFIDENCE) -> Contrast:
    """sum(w * mean(values)) over `parts` [(w, values)], tested against zero by Welch's t (each group's variance
    its own, degrees of freedom by Welch-Satterthwaite); `log`: of log(mean) instead, its variance by the delta
    method (var / (n mean^2)), so a ratio of means is contrast([(1, a), (-1, b)], log=True) and exp() of it.
    Every group needs two or more values (else the test is not run: a single run has no interval)."""
    name = "Welch's t of log means (delta method)" if log else "Welch's t of a contrast of means"
    groups = [(float(w), _clean(v)) for w, v in parts]
    if any(len(v) == 0 for _, v in groups) or (log and any((v <= 0).any() for _, v in groups)):
        return Contrast(math.nan, math.nan, math.nan, Test(name, why="a group has no (positive) value"))
    means = np.array([v.mean() for _, v in groups])
    estimate = float(sum(w * (math.log(m) if log else m) for (w, _), m in zip(groups, means)))
    if any(len(v) < 2 for _, v in groups):
        return Contrast(estimate, math.nan, math.nan, Test(name, why="fewer than two runs in a group"))
    shares = np.array([w * w * v.var(ddof=1) / len(v) / (m * m if log else 1.0) for (w, v), m in zip(groups, means)])
    var = float(shares.sum())
    if var == 0:
        return Contrast(estimate, estimate, estimate, Test(name, why=NO_SPREAD))
    df = var ** 2 / float(sum(s * s / (len(v) - 1) for s, (_, v) in zip(shares, groups)))
    t = estimate / math.sqrt(var)
    half = float(t_quantile(0.5 + confidence / 2, df)) * math.sqrt(var)
    return Contrast(estimate, estimate - half, estimate + half, Test(name, t, float(2 * t_sf(abs(t), df)), df))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of p-values for testing many pairs at once (NaNs stay NaN, not counted)."""
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(len(p), math.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = len(idx)
    running = 0.0
    for rank, i in enumerate(idx[np.argsort(p[idx], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out.tolist()


def anova(groups: Sequence) -> Test:
    """One-way ANOVA of two or more groups' means (each group two or more values)."""
    gs = [_clean(g) for g in groups]
    gs = [g for g in gs if len(g)]
    name = "one-way ANOVA"
    if len(gs) < 2 or any(len(g) < 2 for g in gs):
        return Test(name, why="needs two or more groups of two or more runs")
    if all(g.std() == 0 for g in gs):
        return Test(name, why="no spread within any group")
    f, p = sps.f_oneway(*gs)
    n = sum(len(g) for g in gs)
    return Test(name, float(f), float(p), float(len(gs) - 1), df2=float(n - len(gs)))


def friedman(blocks: Sequence[Sequence[float]]) -> Test:
    """Friedman's test: rows are blocks (seeds), columns treatments (frameworks); three or more treatments and
    two or more complete blocks."""
    m = np.asarray(blocks, dtype=float)
    name = "Friedman (seed as block)"
    if m.ndim != 2 or m.shape[1] < 3 or m.shape[0] < 2 or not np.isfinite(m).all():
        return Test(name, why="needs three or more frameworks that ran the same two or more seeds")
    if (m.max(axis=1) == m.min(axis=1)).all():
        return Test(name, why="every seed ties the frameworks")
    stat, p = sps.friedmanchisquare(*m.T)
    return Test(name, float(stat), float(p), float(m.shape[1] - 1))


def blocked_anova(blocks: Sequence[Sequence[float]]) -> Test:
    """The two-way ANOVA of a randomised complete block design: rows are blocks (seeds), columns treatments
    (frameworks), no interaction; F of the treatments against the residual, on (k - 1, (k - 1)(n - 1)) degrees
    of freedom. Where every framework ran the same seeds, it uses the pairing as Friedman's test does, with far
    more power at a few seeds (Friedman's smallest p with three seeds of three frameworks is e^-3 = 0.0498)."""
    m = np.asarray(blocks, dtype=float)
    name = "two-way ANOVA (seed as block)"
    if m.ndim != 2 or m.shape[1] < 2 or m.shape[0] < 2 or not np.isfinite(m).all():
        return Test(name, why="needs two or more frameworks that ran the same two or more seeds")
    n, k = m.shape
    grand = m.mean()
    ss_treat = n * ((m.mean(axis=0) - grand) ** 2).sum()
    ss_block = k * ((m.mean(axis=1) - grand) ** 2).sum()
    ss_error = ((m - grand) ** 2).sum() - ss_treat - ss_block
    df1, df2 = k - 1.0, (k - 1.0) * (n - 1.0)
    if ss_error <= 1e-12 * max(1.0, ((m - grand) ** 2).sum()):
        return Test(name, why=NO_SPREAD)
    f = (ss_treat / df1) / (ss_error / df2)
    return Test(name, float(f), float(special.fdtrc(df1, df2, f)), df1, df2=df2)


def repeats_for(sd: float, target: float, confidence: float = CONFIDENCE, most: int = 1_000_000) -> int | None:
    """The fewest runs whose t interval has a half-width at most `target`, for a spread of `sd` (None: more
    than `most`, or the spread is unknown). Starts from the normal approximation and steps to the exact n."""
    if not (np.isfinite(sd) and np.isfinite(target)) or target <= 0:
        return None
    if sd == 0:
        return 2
    z = special.ndtri(0.5 + confidence / 2)  # the normal quantile
    n = max(2, math.ceil((z * sd / target) ** 2))
    if n > most:
        return None
    while half_width(sd, n, confidence) > target:
        n += 1
    while n > 2 and half_width(sd, n - 1, confidence) <= target:
        n -= 1
    return n


@dataclass(frozen=True)
class Judgement:
    """a against b: the difference a - b (`log`: log(a / b)) with its 95 % interval, the test, and the word it
    earned (`word`): BETTER (a is better, by `larger_is_better`), WORSE, EQUIVALENT (within `margin`, by two
    one-sided tests: `tost_p`), INCONCLUSIVE, or UNTESTABLE (`why`). `p`: the p the word is read from (a
    corrected one where several were tested: `reread`); `detectable`: the smallest difference (same scale) the
    test would have found with POWER."""
    estimate: float
    low: float
    high: float
    test: Test
    p: float
    tost_p: float
    detectable: float
    margin: float
    log: bool
    larger_is_better: bool = True
    why: str = ""
    se: float = math.nan  # the difference's standard error and degrees of freedom: what `detectable` is sized from
    dof: float = math.nan

    @property
    def word(self) -> str:
        if self.why:
            return UNTESTABLE
        if np.isfinite(self.p) and self.p < ALPHA:
            return BETTER if (self.estimate > 0) == self.larger_is_better else WORSE
        if np.isfinite(self.tost_p) and self.tost_p < ALPHA:
            return EQUIVALENT
        return INCONCLUSIVE

    @property
    def direction(self) -> str:
        """"larger" or "smaller" (a against b) where told apart, else the word."""
        word = self.word
        if word in (BETTER, WORSE):
            return "larger" if self.estimate > 0 else "smaller"
        return word

    def reread(self, p: float, family: int = 1) -> Judgement:
        """The same comparison read at a corrected p (Holm's, Benjamini-Hochberg's) among `family` tests: the
        detectable size is then the one at ALPHA / family (the strictest level a correction reads a test at), not
        at the uncorrected ALPHA, which would promise more than the corrected verdict can find."""
        return replace(self, p=p, detectable=detectable_size(self.se, self.dof, ALPHA / max(family, 1)))

    def size(self, unit: str = "", digits: int = 2) -> str:
        """A difference of this judgement's scale in words: "1.4x" (a ratio) or "0.8 points"."""
        return _size(self.detectable, self.log, " points" if unit == "%" else unit, digits)

    def tost_text(self, unit: str = "") -> str:
        unit = " points" if unit == "%" else unit  # a margin of accuracy is in points, not per cent of it
        return f"TOST within +/-{_size(self.margin, self.log, unit, 3)}: {format_p(self.tost_p)}"


def _size(x: float, log: bool, unit: str, digits: int) -> str:
    if not np.isfinite(x):
        return "n/a"
    return f"{math.exp(x):.{digits}g}x" if log else f"{x:.{digits}g}{unit}"


def untestable(why: str, log: bool = False, larger_is_better: bool = True, name: str = "") -> Judgement:
    return Judgement(math.nan, math.nan, math.nan, Test(name or "no test", why=why), math.nan, math.nan, math.nan,
                     math.nan, log, larger_is_better, why)


def judge(a: Mapping, b: Mapping, margin: float = math.nan, log: bool = False, larger_is_better: bool = True,
          confidence: float = CONFIDENCE) -> Judgement:
    """a ({seed: value}) against b: paired by seed where both ran the same seeds (the paired t), else Welch's t;
    `log`: on the logarithms (a ratio of means). Not testable below MIN_RUNS runs a side or with no spread;
    else better or worse where the test tells them apart, equivalent where the difference lies within +/-
    `margin` by two one-sided tests (each at ALPHA: the 90 % interval within the margin), else inconclusive."""
    f = np.log if log else (lambda v: v)
    a = {k: float(v) for k, v in a.items() if np.isfinite(v) and (v > 0 or not log)}
    b = {k: float(v) for k, v in b.items() if np.isfinite(v) and (v > 0 or not log)}
    suffix = " of log values" if log else ""
    if not a or not b:
        return untestable("no run on a side", log, larger_is_better, "t test" + suffix)
    if min(len(a), len(b)) < MIN_RUNS:  # the difference is still stated; no test says how sure it is
        x, y = f(np.array(list(a.values()))), f(np.array(list(b.values())))
        return replace(untestable(f"fewer than {MIN_RUNS} runs on a side", log, larger_is_better,
                                  "t test" + suffix), estimate=float(x.mean() - y.mean()))
    if set(a) == set(b):
        seeds = sorted(a, key=str)
        x, y = f(np.array([a[k] for k in seeds])), f(np.array([b[k] for k in seeds]))
        test = paired(x, y)
        d = x - y
        estimate, se, df = float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d))), len(d) - 1.0
    else:
        x, y = f(np.array(list(a.values()))), f(np.array(list(b.values())))
        test = welch(x, y)
        va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
        estimate, se = float(x.mean() - y.mean()), math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va ** 2 / (len(x) - 1) + vb ** 2 / (len(y) - 1)) if se > 0 else math.nan
    test = replace(test, name=test.name + suffix)
    if se <= 1e-12 * max(1.0, abs(estimate)):  # exact (to rounding), but no noise to judge it against
        return replace(untestable(NO_SPREAD, log, larger_is_better, test.name), estimate=estimate, low=estimate,
                       high=estimate)
    half = float(t_quantile(0.5 + confidence / 2, df)) * se
    tost = (max(float(t_sf((estimate + margin) / se, df)), float(t_sf((margin - estimate) / se, df)))
            if np.isfinite(margin) else math.nan)
    return Judgement(estimate, estimate - half, estimate + half, test, test.p, tost, detectable_size(se, df),
                     margin, log, larger_is_better, se=se, dof=df)


def detectable_size(se: float, df: float, alpha: float = ALPHA) -> float:
    """The smallest true difference a two-sided t test at `alpha` finds with POWER, given the difference's
    standard error and degrees of freedom (NaN where either is unknown)."""
    if not (np.isfinite(se) and np.isfinite(df)):
        return math.nan
    return float(t_quantile(1 - alpha / 2, df) + t_quantile(POWER, df)) * se


def judge_metric(a: Mapping, b: Mapping, metric: str, margins: Margins | None = None,
                 larger_is_better: bool = True) -> Judgement:
    """judge() on `metric`'s scale and margin (Margins.for_metric)."""
    margin, log = (margins or Margins()).for_metric(metric)
    return judge(a, b, margin, log, larger_is_better)


@dataclass(frozen=True)
class Rival:
    """One group against the leader: its judgement (paired or Welch; Holm-corrected over every rival)."""
    name: str
    mean: float
    n: int
    judgement: Judgement
    p_holm: float

    @property
    def test(self) -> Test:
        return self.judgement.test

    @property
    def distinct(self) -> bool:
        return self.judgement.word == BETTER

    @property
    def equivalent(self) -> bool:
        return self.judgement.word == EQUIVALENT


@dataclass(frozen=True)
class Leader:
    """Which group leads (highest mean, or lowest), each group's interval, and what the data can tell.

    `state`: "distinct" (the leader is told better than every other group), "equivalent" (every other group
    is told worse or equivalent within the margin, one or more equivalent), "inconclusive" (one or more rivals
    neither), "untestable" (a group with fewer than MIN_RUNS runs, or no spread), or "alone".
    """
    name: str
    state: str
    intervals: dict = field(default_factory=dict)  # group -> describe()
    rivals: tuple = ()
    margin_text: str = ""  # the equivalence margin, in words

    @property
    def equivalent_to(self) -> list[str]:
        return [r.name for r in self.rivals if r.equivalent]

    @property
    def undecided(self) -> list[str]:
        return [r.name for r in self.rivals if not (r.distinct or r.equivalent)]

    @property
    def runner_up(self) -> Rival | None:
        return self.rivals[0] if self.rivals else None


def leader(groups: Mapping[str, Mapping], larger_is_better: bool, metric: str | None = None,
           margins: Margins | None = None) -> Leader | None:
    """The leading group of `groups` ({name: {seed: value}}), judged against each other group (judge: paired by
    seed where both ran the same seeds, else Welch's t; on `metric`'s scale and with its equivalence margin), the
    p values Holm-corrected over the rivals. Groups without a finite value are left out; None if none is left."""
    clean = {g: {k: float(v) for k, v in vals.items() if np.isfinite(v)} for g, vals in groups.items()}
    clean = {g: v for g, v in clean.items() if v}
    if not clean:
        return None
    scale = scale_of(metric) if metric else "linear"
    margin, log = (margins or Margins()).for_metric(metric) if metric else (math.nan, False)
    intervals = {g: describe(v.values(), scale=scale) for g, v in clean.items()}
    sign = -1 if larger_is_better else 1
    order = sorted(clean, key=lambda g: (sign * intervals[g]["mean"], g))
    top = order[0]
    margin_text = (margins or Margins()).text(metric) if metric else ""
    if len(order) == 1:
        return Leader(top, "alone", intervals, margin_text=margin_text)
    judged = [judge(clean[top], clean[g], margin, log, larger_is_better) for g in order[1:]]
    adjusted = holm([j.p for j in judged])
    rivals = tuple(Rival(g, intervals[g]["mean"], intervals[g]["n"], j.reread(p, len(judged)), p)
                   for g, j, p in zip(order[1:], judged, adjusted))
    words = {r.judgement.word for r in rivals}
    if UNTESTABLE in words:
        state = "untestable"
    elif INCONCLUSIVE in words or WORSE in words:
        state = "inconclusive"
    elif EQUIVALENT in words:
        state = "equivalent"
    else:
        state = "distinct"
    return Leader(top, state, intervals, rivals, margin_text)


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg's step-up adjustment (the false discovery rate) of many p-values at once (NaNs stay
    NaN, not counted): where a comparison tests thousands of settings, Holm's family-wise control would need
    an effect many times the noise to call anything."""
    p = np.asarray(list(pvalues), dtype=float)
    out = np.full(len(p), math.nan)
    idx = np.flatnonzero(np.isfinite(p))
    m = len(idx)
    if not m:
        return out.tolist()
    order = idx[np.argsort(p[idx], kind="stable")]
    ranked = p[order] * m / np.arange(1, m + 1)
    out[order] = np.minimum(1.0, np.minimum.accumulate(ranked[::-1])[::-1])
    return out.tolist()
