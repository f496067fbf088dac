"""How sure a comparison is: intervals of a mean, tests of a difference, and what the data can tell.

Plain functions on lists of numbers (scipy's distributions, no DataFrames), the one home of every
interval and test dlbench states: the Student-t interval of a mean, Welch's t, the paired t by seed,
Holm's correction for many pairs, Welch's t of a contrast of means (a ratio, a change of slope), the
one-way ANOVA and Friedman's test with the seed as block, the repeats a target half-width needs, and
`leader`: which of several groups leads, and whether the data can tell it from the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import special
from scipy import stats as sps

CONFIDENCE = 0.95  # every interval dlbench states
ALPHA = 0.05  # a difference is told from noise when its (corrected) p is below this


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


def t_interval(values, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, low, high): the Student-t interval of the mean; low and high are NaN for fewer than two values."""
    a = _clean(values)
    if len(a) == 0:
        return math.nan, math.nan, math.nan
    mean = float(a.mean())
    if len(a) < 2:
        return mean, math.nan, math.nan
    half = half_width(a.std(ddof=1), len(a), confidence)
    return mean, mean - half, mean + half


def describe(values, confidence: float = CONFIDENCE) -> dict:
    """n, mean, sd (n - 1), the t interval (ci_low, ci_high), its half-width, min and max of the finite values."""
    a = _clean(values)
    mean, low, high = t_interval(a, confidence)
    return {"n": len(a), "mean": mean, "sd": float(a.std(ddof=1)) if len(a) >= 2 else math.nan,
            "ci_low": low, "ci_high": high, "half_width": (high - low) / 2 if len(a) >= 2 else math.nan,
            "min": float(a.min()) if len(a) else math.nan, "max": float(a.max()) if len(a) else math.nan}


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
            return f"{self.name}: F({self.df:g}, {self.df2:g}) = {self.statistic:.3g}, {format_p(self.p)}"
        symbol = "chi2" if self.name.startswith("Friedman") else "t"
        df = f"({self.df:.3g})" if not math.isnan(self.df) else ""
        return f"{self.name}: {symbol}{df} = {self.statistic:.3g}, {format_p(self.p)}"


def format_p(p: float) -> str:
    """"p = 0.0419", "p < 0.001" or "p n/a"."""
    if math.isnan(p):
        return "p n/a"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3g}"


def welch(a, b) -> Test:
    """Welch's t test of two means (unequal variances); needs two or more values on each side."""
    x, y = _clean(a), _clean(b)
    name = "Welch's t"
    if len(x) < 2 or len(y) < 2:
        return Test(name, why="fewer than two runs on a side")
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if vx + vy == 0:
        same = float(x.mean() == y.mean())
        return Test(name, 0.0 if same else math.copysign(math.inf, x.mean() - y.mean()), 1.0 if same else 0.0)
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
        same = float(d.mean() == 0)
        return Test(name, 0.0 if same else math.copysign(math.inf, d.mean()), 1.0 if same else 0.0, len(d) - 1.0)
    t = d.mean() / (sd / math.sqrt(len(d)))
    return Test(name, float(t), float(2 * t_sf(abs(t), len(d) - 1)), len(d) - 1.0)


def compare(a: Mapping, b: Mapping) -> Test:
    """The test of a against b, each {seed: value}: paired by seed where both ran the same seeds (two or more),
    else Welch's t."""
    a = {k: v for k, v in a.items() if np.isfinite(v)}
    b = {k: v for k, v in b.items() if np.isfinite(v)}
    if set(a) == set(b) and len(a) >= 2:
        seeds = sorted(a)
        return paired([a[s] for s in seeds], [b[s] for s in seeds])
    return welch(list(a.values()), list(b.values()))


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
        exact = Test(name, 0.0 if estimate == 0 else math.copysign(math.inf, estimate), float(estimate == 0))
        return Contrast(estimate, estimate, estimate, exact)
    df = var ** 2 / float(sum(s * s / (len(v) - 1) for s, (_, v) in zip(shares, groups)))
    t = estimate / math.sqrt(var)
    half = float(t_quantile(0.5 + confidence / 2, df)) * math.sqrt(var)
    return Contrast(estimate, estimate - half, estimate + half, Test(name, t, float(2 * t_sf(abs(t), df)), df))


def change(a: Mapping, b: Mapping, log: bool = False) -> Contrast:
    """a's mean minus b's (`log`: log of a's mean over b's), each {seed: value}, with its 95 % interval and test:
    paired by seed where both ran the same two or more seeds (the t interval of the per-seed differences, the
    paired t), else Welch's (contrast)."""
    a = {k: float(v) for k, v in a.items() if np.isfinite(v) and (v > 0 or not log)}
    b = {k: float(v) for k, v in b.items() if np.isfinite(v) and (v > 0 or not log)}
    if set(a) == set(b) and len(a) >= 2:
        seeds = sorted(a, key=str)
        f = math.log if log else float
        diffs = [f(a[k]) - f(b[k]) for k in seeds]
        mean, low, high = t_interval(diffs)
        test = paired([f(a[k]) for k in seeds], [f(b[k]) for k in seeds])
        if not np.isfinite(low):  # no spread: exact
            low = high = mean
        return Contrast(mean, low, high, test)
    return contrast([(1, list(a.values())), (-1, list(b.values()))], log=log)


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
class Rival:
    """One group against the leader: its test (paired or Welch), the Holm-adjusted p over every rival."""
    name: str
    mean: float
    n: int
    test: Test
    p_holm: float

    @property
    def distinct(self) -> bool:
        return np.isfinite(self.p_holm) and self.p_holm < ALPHA


@dataclass(frozen=True)
class Leader:
    """Which group leads (highest mean, or lowest), each group's interval, and what the data can tell.

    `state`: "distinct" (the leader is told from every other group), "tied" (one or more rivals cannot be
    told from it: `tied_with`), "single" (a group has one run: no interval, no test), or "alone".
    """
    name: str
    state: str
    intervals: dict = field(default_factory=dict)  # group -> describe()
    rivals: tuple = ()

    @property
    def tied_with(self) -> list[str]:
        return [r.name for r in self.rivals if not r.distinct]

    @property
    def runner_up(self) -> Rival | None:
        return self.rivals[0] if self.rivals else None


def leader(groups: Mapping[str, Mapping], larger_is_better: bool) -> Leader | None:
    """The leading group of `groups` ({name: {seed: value}}), tested against each other group (compare), the p
    values Holm-corrected over the rivals. Groups without a finite value are left out; None if none is left."""
    clean = {g: {k: float(v) for k, v in vals.items() if np.isfinite(v)} for g, vals in groups.items()}
    clean = {g: v for g, v in clean.items() if v}
    if not clean:
        return None
    intervals = {g: describe(v.values()) for g, v in clean.items()}
    sign = -1 if larger_is_better else 1
    order = sorted(clean, key=lambda g: (sign * intervals[g]["mean"], g))
    top = order[0]
    if len(order) == 1:
        return Leader(top, "alone", intervals)
    tests = [compare(clean[top], clean[g]) for g in order[1:]]
    adjusted = holm([t.p for t in tests])
    rivals = tuple(Rival(g, intervals[g]["mean"], intervals[g]["n"], t, p)
                   for g, t, p in zip(order[1:], tests, adjusted))
    if any(intervals[g]["n"] < 2 for g in order):
        state = "single"
    else:
        state = "distinct" if all(r.distinct for r in rivals) else "tied"
    return Leader(top, state, intervals, rivals)


def difference(a: Mapping, b: Mapping) -> tuple[str, Test]:
    """Is a larger than b, smaller, tied, or untestable? ("larger" / "smaller" / "tied" / "single", its test)."""
    test = compare(a, b)
    if min(len(a), len(b)) < 2:
        return "single", test
    if not (np.isfinite(test.p) and test.p < ALPHA):
        return "tied", test
    mean_a, mean_b = np.mean(list(a.values())), np.mean(list(b.values()))
    return ("larger" if mean_a > mean_b else "smaller"), test
