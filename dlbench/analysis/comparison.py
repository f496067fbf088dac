"""Result sets side by side, in numbers: each set read, their settings joined, what differs between them as
a whole named, and per setting and metric both means, the ratio B / A and a verdict by a named test (the
statistics, vectorised: dlbench.analysis.comparison_stats). dlbench.present.comparison words and draws it.

A series (a baseline A and several sets B1, B2, ...: a framework's releases, a cluster's nodes, a project's
commits) is each set compared with the baseline on the settings all of them are keyed by, the p of every test of
every set adjusted together (compare_series). offending() is the gate: the settings whose verdict a CI job fails on.

RESULTS_A and RESULTS_B are result folders (holding runs.parquet, or only runs/<framework>/<dataset>/<point>/
metrics.json) or runs.parquet files. Their points are joined on their settings: every point parameter but the
repeat and seed (the record's `setting_id`; older records by their setting columns), so that the repeats of a
setting are its sample. What differs between the sets as a whole (host, CPU, GPU, environment, framework
version, dlbench commit) is named, not joined on. Per setting and metric: both sets' means with their
intervals, the ratio B / A with its interval and a verdict, one of four words each earned: B slower / faster
(more / less accurate) where its Benjamini-Hochberg-adjusted p is below alpha, equivalent within a stated
margin (two one-sided tests), inconclusive (with the change it could have detected), not testable (too few
runs, no spread).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench.analysis import comparison_stats, frames, stats
from dlbench.record import store

# Each metric compared, and the words of its verdict when B's mean is above / below A's beyond the noise.
METRICS = {
    "train_time_s": ("slower", "faster"),
    "test_time_s": ("slower", "faster"),
    "accuracy": ("more accurate", "less accurate"),
}
# Where no direction is told: stats' words (equivalent within a margin, inconclusive, not testable).
EQUIVALENT, INCONCLUSIVE, UNTESTABLE = stats.EQUIVALENT, stats.INCONCLUSIVE, stats.UNTESTABLE
ADJUSTMENT = "Benjamini-Hochberg (false discovery rate)"
ONLY_A, ONLY_B = "only in A", "only in B"
FAILED_A, FAILED_B = "no finished run in A", "no finished run in B"
CONTENDED = " (contended runs)"
ALPHA = stats.ALPHA
# The settings of a point, for records made before `setting_id` (frames.SETTINGS, plus what it leaves implied).
EXTRA_SETTINGS = ["init", "lr_policy_json", "input_json", "validation_json", "test_batch_size", "test_interval",
                  "shuffle", "ema_decay", "version"]
# What a result set holds that is not a setting: compared as a whole, per framework where it is the framework's.
MACHINE_FACTS = ["host", "cpu_model", "cpu_cores_logical", "cpu_cores_usable", "memory_total_mb", "cpu_governor",
                 "cpu_boost", "gpu_model", "gpu_driver", "os", "python_runner", "dlbench_version", "dlbench_commit",
                 "dlbench_dirty"]
FRAMEWORK_FACTS = ["env_name", "env_kind", "env_key", "framework_version", "framework_numpy_version",
                   "framework_python_version", "cuda_version", "cudnn_version", "blas"]
# What a comparison writes into its folder.
OUTPUTS = ("comparison.parquet", "comparison.md", "comparison_ratios.html", "comparison_ratios.svg")
# Settings listed in comparison.md at most; the parquet holds every one.
MD_ROWS = 200
# What describes a setting in a comparison's rows, beside its readable `label`.
LABEL_COLUMNS = ["framework", "dataset", "device", "whose", "reading", "network", "batch_size", "learning_rate",
                 "length", "length_unit", "threads", "library", "compile", "precision"]
# A comparison's columns, in order (comparison.parquet; a series adds `set` and `order` before them).
KEEP = ["setting", "label", *LABEL_COLUMNS, "metric", "a_n", "a_mean", "a_ci_low", "a_ci_high", "a_failed",
        "a_contended", "b_n", "b_mean", "b_ci_low", "b_ci_high", "b_failed", "b_contended", "ratio", "ratio_ci_low",
        "ratio_ci_high", "difference", "difference_ci_low", "difference_ci_high", "test", "p_value", "p_adjusted",
        "tost_p", "margin", "beyond_margin", "detectable", "contended", "verdict", "why"]
# The gate's names (`--fail-on`) for the verdicts a CI job may fail on.
GATE_WORDS = {"slower": "slower", "faster": "faster", "less-accurate": "less accurate",
              "more-accurate": "more accurate", "inconclusive": INCONCLUSIVE, "untestable": UNTESTABLE,
              "failed": FAILED_B}


class CompareError(ValueError):
    """Result sets that cannot be compared; the message is one line for the user."""


# ---------------------------------------------------------------------------------------------- reading


def baseline_runs(path: str | Path, own: str | Path = "results/runs.parquet") -> str:
    """The runs.parquet of a config's `compare.baseline` (the file, or in the folder or its results/)."""
    path = Path(path).expanduser()
    found = next((c for c in (path, path / "runs.parquet", path / "results" / "runs.parquet")
                  if c.is_file() and c.suffix == ".parquet"), None)
    if found is None:
        raise CompareError(f"{path} holds no runs.parquet; give a results folder of another run (its aggregation "
                           "wrote runs.parquet there) or the file itself")
    if found.resolve() == Path(own).resolve():
        raise CompareError(f"{path} is this study's own results; give another run's")
    return str(found)


def find_set(path: str | Path) -> Path:
    """Where a result set's runs are: its runs.parquet (the file, or in the folder or its results/; its schema
    read, so that a file that is not a table of runs is said here), else the folder of its records
    (runs/<framework>/<dataset>/<point>/metrics.json). Cheap: a command says what is wrong before any work."""
    import pyarrow.parquet as pq

    path = Path(path)
    for candidate in (path, path / "runs.parquet", path / "results" / "runs.parquet"):
        if candidate.is_file() and candidate.suffix == ".parquet":
            try:
                columns = set(pq.read_schema(candidate).names)
            except (OSError, ValueError) as exc:  # pyarrow's errors are both
                raise CompareError(f"{candidate} is not a Parquet table ({str(exc).splitlines()[0][:160]}); give a "
                                   "study's runs.parquet") from None
            missing = [c for c in ("framework", "status") if c not in columns]
            if missing:
                raise CompareError(f"{candidate} is not a table of runs (no {' or '.join(missing)} column); give a "
                                   "study's results/runs.parquet")
            return candidate
    for runs in (path / "runs", path / "results" / "runs"):
        if runs.is_dir() and next(runs.glob("*/*/*/metrics.json"), None) is not None:
            return runs
    raise CompareError(f"{path} holds no results: give a results folder (runs.parquet, or runs/.../metrics.json) "
                       "or a runs.parquet file")


def read_set(path: str | Path) -> pd.DataFrame:
    """One result set's runs: runs.parquet (the file, or in the folder or its results/), else its records."""
    found = find_set(path)
    if found.is_dir():
        records = [r for p in sorted(found.glob("*/*/*/metrics.json")) if (r := store.read_or_skip(p))]
        if not records:
            raise CompareError(f"{path}: no record under {found} can be read; give another result set")
        return pd.DataFrame(records).rename(columns={"id": "run_id"})
    return pd.read_parquet(found)


def settings_key(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each run's setting: its `setting_id` where every record of both sets has one, else its setting columns."""
    key_a, key_b = settings_keys(a, b)
    return key_a, key_b


def settings_keys(*sets: pd.DataFrame) -> list[pd.Series]:
    """settings_key of any number of sets, one key for all of them: the same setting has the same key in each."""
    if all("setting_id" in df and df["setting_id"].notna().all() for df in sets):
        return [df["setting_id"].astype(str) for df in sets]
    columns = [c for c in dict.fromkeys(frames.SETTINGS + EXTRA_SETTINGS) if any(c in df for df in sets)]

    def key(df: pd.DataFrame) -> pd.Series:
        frame = df.reindex(columns=columns).astype(object).where(lambda x: x.notna(), None).astype(str)
        return frame.agg("|".join, axis=1) if len(frame) else pd.Series([], index=df.index, dtype=str)

    return [key(df) for df in sets]


def _with_settings(df: pd.DataFrame, key: pd.Series) -> pd.DataFrame:
    out = frames.points(df)
    out["setting"] = key.to_numpy()
    if "contended" in df:  # issue 21's flag: a run timed while other work took the machine's CPUs
        out["contended"] = df["contended"].fillna(False).astype(bool).to_numpy()
    else:
        out["contended"] = False
    return out


# ---------------------------------------------------------------------------------------------- what differs


def differences(a: pd.DataFrame, b: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(what, A's values, B's values) of every machine, environment and dlbench fact the two sets differ in."""
    def values(df: pd.DataFrame, column: str, framework: str | None = None) -> str:
        rows = df if framework is None else df[df["framework"] == framework]
        if column not in rows:
            return "not recorded"
        found = sorted(set(rows[column].dropna().unique().astype(str)))
        return ", ".join(found) if found else "not recorded"

    out = [(c, values(a, c), values(b, c)) for c in MACHINE_FACTS]
    shared = sorted(set(a["framework"]) & set(b["framework"]))
    out += [(f"{c} ({fw})", values(a, c, fw), values(b, c, fw)) for c in FRAMEWORK_FACTS for fw in shared]
    return [(what, va, vb) for what, va, vb in out if va != vb]


# ---------------------------------------------------------------------------------------------- the comparison


def _summary(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per setting: finished runs of the metric (n, mean, variance), failed runs, contended runs."""
    ok = df["status"].eq("ok") & df[metric].notna()
    values = df[ok][metric].astype(float)
    logs = np.log(values.where(values > 0))  # a time's interval is taken on its logarithm
    finished = values.groupby(df[ok]["setting"]).agg(n="count", mean="mean", var="var").join(
        logs.groupby(df[ok]["setting"]).agg(log_mean="mean", log_var="var"))
    every = df.assign(failed=df["status"].ne("ok")).groupby("setting").agg(failed=("failed", "sum"),
                                                                          contended=("contended", "sum"))
    return every.join(finished, how="left").fillna({"n": 0}).astype({"n": int, "contended": int})


def _joined(pa: pd.DataFrame, pb: pd.DataFrame) -> pd.DataFrame:
    """One row per setting and metric: both sets' summaries side by side, with the metric's verdict words."""
    rows = []
    for metric, words in METRICS.items():
        both = _summary(pa, metric).add_prefix("a_").join(_summary(pb, metric).add_prefix("b_"), how="outer")
        both["metric"] = metric
        both["more"], both["less"] = words
        rows.append(both)
    return pd.concat(rows).reset_index(names="setting")


def _tested(out: pd.DataFrame, margins: stats.Margins) -> pd.DataFrame:
    """Each row's test: Welch's t on log(B / A) for a ratio metric, on B - A for accuracy (Margins.for_metric). Its
    se and df are kept (`_se`, `_df`, `_log`) for the change it could have detected, sized once the whole family
    of tests is known (_adjusted)."""
    scales = {m: margins.for_metric(m) for m in METRICS}
    log = out["metric"].map({m: s[1] for m, s in scales.items()}).to_numpy(dtype=bool)
    margin = out["metric"].map({m: s[0] for m, s in scales.items()}).to_numpy(dtype=float)
    sides = [out[c] for c in ("a_mean", "a_var", "a_n", "b_mean", "b_var", "b_n")]
    on_log, on_diff = comparison_stats.log_ratio(*sides), comparison_stats.difference(*sides)
    estimate, se, df = (np.where(log, x, y) for x, y in zip(on_log, on_diff))
    why = comparison_stats.untestable(out["a_n"], out["b_n"], estimate, se)
    test = comparison_stats.welch_test(estimate, se, df, margin, why)
    ratio_low, ratio_high = comparison_stats.interval(*on_log)  # every metric's ratio, for the chart
    testable = why == ""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = out["b_mean"].to_numpy(dtype=float) / out["a_mean"].to_numpy(dtype=float)
    return pd.DataFrame({
        "ratio": np.where(out["a_mean"].to_numpy(dtype=float) > 0, ratio, np.nan),
        "ratio_ci_low": np.where(testable & np.isfinite(on_log[1]), np.exp(ratio_low), np.nan),
        "ratio_ci_high": np.where(testable & np.isfinite(on_log[1]), np.exp(ratio_high), np.nan),
        "difference": np.where(log, np.nan, on_diff[0]),
        "difference_ci_low": np.where(log, np.nan, test["low"]),
        "difference_ci_high": np.where(log, np.nan, test["high"]),
        "test": np.where(log, comparison_stats.TEST_LOG, comparison_stats.TEST_DIFFERENCE),
        "p_value": test["p_value"], "tost_p": test["tost_p"],
        # the margin on the metric's own scale: a ratio for times, a difference else
        "margin": np.where(log, np.exp(margin), margin),
        # the tested change lies outside the margin (the gate fails a told change only where it does)
        "beyond_margin": testable & (np.abs(np.nan_to_num(test["estimate"])) > margin),
        "estimate": test["estimate"], "why": why,
        "_se": np.where(testable, se, np.nan), "_df": df, "_log": log}, index=out.index)


def _pair(a: pd.DataFrame, b: pd.DataFrame, key_a: pd.Series, key_b: pd.Series,
          margins: stats.Margins) -> pd.DataFrame:
    """One comparison's rows before the family's adjustment: per setting and metric both sides and the test."""
    pa, pb = _with_settings(a, key_a), _with_settings(b, key_b)
    describe = pd.concat([pa, pb]).drop_duplicates("setting").set_index("setting")
    labels = describe[LABEL_COLUMNS].copy()
    labels["label"] = frames.settings_label(describe, set())
    out = _joined(pa, pb)
    for side in "ab":
        out[f"{side}_n"] = out[f"{side}_n"].fillna(0).astype(int)
        out[f"{side}_present"] = out[f"{side}_failed"].notna()
        low, high = comparison_stats.mean_interval(out[f"{side}_mean"], out[f"{side}_var"], out[f"{side}_n"])
        # times, rates, memory: on the log scale (means of 1, 1 and 5 s have no interval below zero)
        log_low, log_high = comparison_stats.mean_interval(out[f"{side}_log_mean"], out[f"{side}_log_var"],
                                                           out[f"{side}_n"])
        on_log = out["metric"].map(lambda m: stats.scale_of(m) == "log").to_numpy(dtype=bool)
        mean = out[f"{side}_mean"].to_numpy(dtype=float)
        out[f"{side}_ci_low"] = np.where(on_log, np.fmin(np.exp(log_low), mean), low)
        out[f"{side}_ci_high"] = np.where(on_log, np.fmax(np.exp(log_high), mean), high)
    out = out.join(_tested(out, margins))
    out["contended"] = (out["a_contended"].fillna(0) + out["b_contended"].fillna(0)) > 0
    return out.join(labels, on="setting")


def _adjusted(tables: list[pd.DataFrame], alpha: float) -> list[pd.DataFrame]:
    """Every comparison of a run as one family: p adjusted by Benjamini-Hochberg over all their tests, the change
    each test could have detected sized at the level the smallest adjusted p is read at (alpha / m over the m
    tests: sized at alpha itself it would promise changes the adjusted verdict cannot find), the verdicts."""
    family = max(sum(int(t["p_value"].notna().sum()) for t in tables), 1)
    adjusted = stats.benjamini_hochberg(pd.concat([t["p_value"] for t in tables], ignore_index=True))
    done, start = [], 0
    for out in tables:
        out = out.copy()
        out["p_adjusted"] = np.asarray(adjusted, dtype=float)[start:start + len(out)]
        start += len(out)
        found = comparison_stats.detectable(out["_se"].to_numpy(), out["_df"].to_numpy(), alpha / family)
        out["detectable"] = np.where(out["_log"], np.exp(found), found)
        out["verdict"] = _verdicts(out, alpha)
        compared = out["a_present"] & out["b_present"] & (out["a_n"] > 0) & (out["b_n"] > 0)
        out["why"] = out["why"].where(compared, "")  # a setting one set lacks says so in its verdict
        done.append(out[KEEP].sort_values(["metric", "framework", "dataset", "device", "label"], kind="stable",
                                          ignore_index=True))
    return done


def compare(a: pd.DataFrame, b: pd.DataFrame, alpha: float = ALPHA,
            margins: stats.Margins | None = None) -> pd.DataFrame:
    """One row per setting and metric: both sets' n, mean and interval, the ratio B / A with its interval (and
    for accuracy the difference B - A), the test's p (Benjamini-Hochberg-adjusted over every test of the
    comparison: `p_adjusted`), its TOST p within the metric's margin, the change it could have detected, and
    the verdict."""
    key_a, key_b = settings_key(a, b)
    return _adjusted([_pair(a, b, key_a, key_b, margins or stats.Margins())], alpha)[0]


def compare_series(baseline: pd.DataFrame, sets: list[tuple[str, pd.DataFrame]], alpha: float = ALPHA,
                   margins: stats.Margins | None = None) -> pd.DataFrame:
    """Each named set (in the order given) compared with the baseline, as compare() does, in one table: its
    `set` and `order` (1, 2, ...) on every row; the p of every test of every set adjusted together, so that a
    longer series does not find more changes by chance."""
    keys = settings_keys(baseline, *(df for _, df in sets))
    margins = margins or stats.Margins()
    pairs = [_pair(baseline, df, keys[0], key, margins) for (_, df), key in zip(sets, keys[1:])]
    tables = _adjusted(pairs, alpha)
    return pd.concat([t.assign(set=name, order=k) for k, ((name, _), t) in enumerate(zip(sets, tables), start=1)],
                     ignore_index=True)[["set", "order", *KEEP]]


def _verdicts(out: pd.DataFrame, alpha: float) -> pd.Series:
    """The four words, each earned: told apart (adjusted p), equivalent (TOST), inconclusive, not testable."""
    told = out["p_adjusted"] < alpha
    verdict = np.select(
        [~out["a_present"], ~out["b_present"], out["a_n"] == 0, out["b_n"] == 0, out["why"] != "",
         told & (out["estimate"] > 0), told, out["tost_p"] < alpha],
        [ONLY_B, ONLY_A, FAILED_A, FAILED_B, UNTESTABLE, out["more"], out["less"], EQUIVALENT], default=INCONCLUSIVE)
    verdict = pd.Series(verdict, index=out.index, dtype=object)
    return verdict.where(~out["contended"], verdict + CONTENDED)


# ---------------------------------------------------------------------------------------------- the gate


def offending(table: pd.DataFrame, fail_on: Iterable[str]) -> pd.DataFrame:
    """The rows a gate fails on (`fail_on`: names of GATE_WORDS): a verdict of a direction named (slower, less
    accurate, ...) whose tested change lies beyond the margin, not a point estimate alone; and a verdict named
    that tells no direction (inconclusive, not testable, no finished run in B), whatever the change."""
    words = {GATE_WORDS[name] for name in fail_on}
    base = table["verdict"].str.replace(CONTENDED, "", regex=False)
    directions = {w for pair in METRICS.values() for w in pair}
    hit = base.isin(words) & (~base.isin(directions) | table["beyond_margin"].astype(bool))
    return table[hit]


def per_framework(table: pd.DataFrame, alpha: float = ALPHA, margins: stats.Margins | None = None) -> pd.DataFrame:
    """Per framework and metric, over its settings with a ratio: the `change`, the geometric mean ratio B / A
    (accuracy: the mean difference B - A) with its t interval (the settings its sample), the one-sample t of "no
    change" (Holm-adjusted over these few rows), the TOST within the metric's margin and a verdict. A shift too
    small to tell in one setting of a few repeats shows here."""
    margins = margins or stats.Margins()
    usable = table[table["ratio"].notna() & (table["ratio"] > 0)].copy()
    log = usable["metric"].map(lambda m: margins.for_metric(m)[1]).astype(bool)
    usable["effect"] = np.where(log, np.log(usable["ratio"]), usable["b_mean"] - usable["a_mean"])
    out = (usable.groupby(["framework", "metric"], sort=False)["effect"].agg(settings="count", mean="mean", sd="std")
           .reset_index())
    scale = out["metric"].map(lambda m: margins.for_metric(m))
    margin, log = scale.str[0].to_numpy(dtype=float), scale.str[1].to_numpy(dtype=bool)
    se, df = out["sd"].to_numpy() / np.sqrt(out["settings"].to_numpy()), out["settings"].to_numpy() - 1.0
    why = comparison_stats.untestable(out["settings"], out["settings"], out["mean"], se)
    why = np.where(why == comparison_stats.TOO_FEW, f"fewer than {stats.MIN_RUNS} settings", why)
    test = comparison_stats.welch_test(out["mean"].to_numpy(), se, df, margin, why, alpha)
    back = lambda x: np.where(log, np.exp(x), x)  # noqa: E731 - the effect's own scale: a ratio for times
    out["change"] = back(out["mean"])
    out["change_ci_low"], out["change_ci_high"] = back(test["low"]), back(test["high"])
    out["p_value"], out["tost_p"], out["why"] = test["p_value"], test["tost_p"], why
    out["p_adjusted"] = stats.holm(out["p_value"])
    more, less = out["metric"].map(lambda m: METRICS[m][0]), out["metric"].map(lambda m: METRICS[m][1])
    told = out["p_adjusted"] < alpha
    out["verdict"] = np.select([out["why"] != "", told & (out["mean"] > 0), told, out["tost_p"] < alpha],
                               [UNTESTABLE, more, less, EQUIVALENT], default=INCONCLUSIVE)
    return out.drop(columns=["mean", "sd"])


