"""The study's tables, computed from the Parquet tables: what the charts draw and the findings state.

Plain functions on DataFrames (no drawing): the tidy points with derived columns, the Pareto
front, speed-ups against threads, this run next to the published figures, resource
correlations, own vs cross-applied defaults, sweeps, time to accuracy, phase spans.
`dlbench.charts` draws them; `dlbench.findings` puts them into words.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench.datasets import catalog
from dlbench.frameworks import registry

PUBLISHED_CSV = Path(__file__).resolve().parent / "reference" / "gtdlbench_results.csv"

FRAMEWORKS = registry.names()  # the order every chart and table lists frameworks in
OWN_PRESET = {f.name: f.own_preset for f in registry.FRAMEWORKS.values()}
PRESET_ORDER = registry.own_presets()
# The published table names frameworks its own way (Torch for PyTorch), and datasets by family.
PUBLISHED_FRAMEWORK = {f.name: f.published_as for f in registry.FRAMEWORKS.values() if f.published_as}
FAMILY = {name: info["family"] for name, info in catalog.INFO.items()}

STATUSES = ["ok", "diverged", "error", "killed", "timeout", "oom", "unavailable", "cancelled"]
PHASES = ["startup", "import", "data_load", "build", "compile", "train", "test", "other"]

# The hyper-parameters and resource columns of the correlation chart.
HYPER_PARAMETERS = ["batch_size", "learning_rate", "iterations"]
RESOURCES = ["cpu_util_mean_pct", "rss_peak_mb", "rss_mean_mb", "peak_fraction", "gpu_util_mean_pct",
             "gpu_mem_peak_mb", "gpu_power_mean_w"]

# Columns a chart may read; any missing one is added empty, so hand-made frames need only a few.
RUN_COLUMNS = ["run_id", "framework", "dataset", "preset", "network", "optimizer", "momentum", "weight_decay",
               "learning_rate", "batch_size", "iterations", "iterations_planned", "epochs", "device", "threads",
               "library", "repeat", "status", "reason", "train_time_s", "test_time_s", "accuracy",
               "throughput_img_s", "achieved_gflops", "peak_fraction", "cpu_util_mean_pct", "rss_peak_mb",
               "rss_mean_mb", "gpu_util_mean_pct", "gpu_mem_peak_mb", "gpu_power_mean_w", "threads_in_effect",
               "library_in_effect", "studies"]
# What makes two points the same settings, apart from the axis being compared (repeats are averaged).
SETTINGS = ["framework", "dataset", "whose", "network", "optimizer", "momentum", "weight_decay", "learning_rate",
            "batch_size", "length", "length_unit", "device", "threads", "library"]


def points(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs table with every column the charts read, plus derived ones.

    `length`/`length_unit`: the configured length (epochs for epoch-based points, else
    iterations; the `iterations` column holds iterations done, empty for failed points).
    `whose`: whose defaults (`own` resolved to the framework's preset), `is_own`, `accuracy_pct`.
    """
    df = runs.copy()
    for col in RUN_COLUMNS:
        if col not in df.columns:
            df[col] = np.nan
    df["status"] = df["status"].astype(object).fillna("error").astype(str)
    for col in ("learning_rate", "batch_size", "iterations", "iterations_planned", "epochs", "threads",
                "train_time_s", "test_time_s", "accuracy"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    df["accuracy_pct"] = df["accuracy"] * 100
    iterations = df["iterations_planned"].fillna(df["iterations"])
    epoch_based = df["epochs"].notna()
    df["length"] = np.where(epoch_based, df["epochs"], iterations)
    df["length_unit"] = np.where(epoch_based, "epochs", "iterations")
    df["iterations_configured"] = iterations
    preset = df["preset"].astype(object).fillna("own").astype(str)
    own_name = df["framework"].map(OWN_PRESET)
    df["whose"] = np.where(preset == "own", own_name.fillna("own"), preset)
    df["is_own"] = (preset == "own") | (preset == own_name)
    for col in ("network", "optimizer", "library", "device"):
        df[col] = df[col].astype(object).fillna("-" if col != "device" else "cpu")
    return df


def ok_points(df: pd.DataFrame, *metrics: str, positive: bool = False) -> pd.DataFrame:
    keep = df["status"] == "ok"
    for m in metrics:
        keep &= df[m].notna()
        if positive:
            keep &= df[m] > 0
    return df[keep]


def study_names(df: pd.DataFrame) -> pd.Series:
    """Each point's sub-studies as a set (empty sets when the `studies` column is absent)."""
    if "studies" not in df.columns:
        return pd.Series([frozenset()] * len(df), index=df.index)
    return df["studies"].apply(lambda s: frozenset(x.strip() for x in str(s).split(",") if x.strip())
                               if isinstance(s, str) else frozenset())


def in_studies_varying(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """The points of the sub-studies in which `column` varies, when the config has sub-studies.

    A config of several sub-studies (the `studies` column) sweeps each axis in its own
    sub-study around the others' defaults; mixing them would compare unlike points.
    Without sub-studies, or when no sub-study varies `column`, every point is kept.
    """
    names = study_names(df)
    if names.map(len).sum() == 0:
        return df
    varying = set()
    for study in set().union(*names):
        members = df[names.map(lambda s, study=study: study in s)]
        if members[column].nunique(dropna=True) > 1:
            varying.add(study)
    if not varying:
        return df
    return df[names.map(lambda s: bool(s & varying))]


def group_key(df: pd.DataFrame, exclude: set[str]) -> pd.Series:
    cols = [c for c in SETTINGS if c not in exclude]
    if not len(df):
        return pd.Series([], dtype=str)
    return df[cols].astype(object).where(df[cols].notna(), "-").astype(str).agg("|".join, axis=1)


def settings_label(df: pd.DataFrame, exclude: set[str]) -> pd.Series:
    """A readable label of each point's settings, leaving out the axis being compared."""
    def one(r) -> str:
        parts = []
        if "whose" not in exclude:
            parts.append(f"{r['whose']} defaults")
        if "batch_size" not in exclude and pd.notna(r["batch_size"]):
            parts.append(f"bs {r['batch_size']:g}")
        if "learning_rate" not in exclude and pd.notna(r["learning_rate"]):
            parts.append(f"lr {r['learning_rate']:g}")
        if "length" not in exclude and pd.notna(r["length"]):
            parts.append(f"{r['length']:g} {r['length_unit']}")
        if "threads" not in exclude and pd.notna(r["threads"]):
            parts.append(f"{r['threads']:g} threads")
        if "library" not in exclude and r["library"] not in ("default", "-"):
            parts.append(str(r["library"]))
        return ", ".join(parts)
    return df.apply(one, axis=1) if len(df) else pd.Series([], dtype=str)


def pareto_front(df: pd.DataFrame, x: str = "train_time_s", y: str = "accuracy") -> pd.Series:
    """True for the points no other point beats: lower-or-equal `x` and higher-or-equal `y`, one strictly.

    Rows with a missing `x` or `y` are never on the front. Identical points are all kept.
    """
    front = pd.Series(False, index=df.index)
    valid = df[[x, y]].dropna()
    if valid.empty:
        return front
    order = valid.sort_values([x, y], ascending=[True, False], kind="mergesort")
    best_y, best_x = -math.inf, math.inf
    for idx, xv, yv in zip(order.index, order[x], order[y]):
        dominated = best_y > yv or (best_y == yv and best_x < xv)
        if not dominated:
            front[idx] = True
        if yv > best_y:
            best_y, best_x = yv, xv
    return front


def speedups(runs: pd.DataFrame) -> pd.DataFrame:
    """Speed-up of training against threads, per group of points with the same other settings.

    Speed-up = mean train time at the group's smallest thread count / mean train time at
    this thread count (repeats averaged; ok points only). `ideal` is threads / smallest
    threads. Only groups with at least two thread counts are returned.
    """
    df = ok_points(points(runs), "train_time_s", "threads", positive=True)
    cols = ["framework", "dataset", "device", "group", "settings", "threads", "train_time_s", "base_threads",
            "base_time_s", "speedup", "ideal", "n"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(group=group_key(df, {"threads"}), settings=settings_label(df, {"threads"}))
    agg = df.groupby(["framework", "dataset", "device", "group", "settings", "threads"], as_index=False).agg(
        train_time_s=("train_time_s", "mean"), n=("train_time_s", "size"))
    out = []
    for _, g in agg.groupby("group"):
        if g["threads"].nunique() < 2:
            continue
        g = g.sort_values("threads")
        base = g.iloc[0]
        g = g.assign(base_threads=base["threads"], base_time_s=base["train_time_s"])
        g["speedup"] = g["base_time_s"] / g["train_time_s"]
        g["ideal"] = g["threads"] / g["base_threads"]
        out.append(g)
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def read_published(path: str | Path | None = None) -> pd.DataFrame:
    return pd.read_csv(path or PUBLISHED_CSV)


def published_ratios(runs: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """This run's figures next to the study's published ones, per dataset x framework x device.

    Own-preset ok points only (the study ran each framework with its own defaults).
    train_time_ratio = this run's mean train time / published train time (same for test
    time); accuracy_diff_pp = this run's mean accuracy (%) - published accuracy (%).
    digits and fashion_mnist are compared with the published mnist row.
    """
    cols = ["dataset", "published_dataset", "framework", "device", "n", "train_time_s", "published_train_time_s",
            "train_time_ratio", "test_time_s", "published_test_time_s", "test_time_ratio", "accuracy_pct",
            "published_accuracy_pct", "accuracy_diff_pp"]
    df = ok_points(points(runs), "train_time_s")
    df = df[df["is_own"]]
    if df.empty or published is None or published.empty:
        return pd.DataFrame(columns=cols)
    mine = df.groupby(["dataset", "framework", "device"], as_index=False).agg(
        n=("train_time_s", "size"), train_time_s=("train_time_s", "mean"), test_time_s=("test_time_s", "mean"),
        accuracy_pct=("accuracy_pct", "mean"))
    mine["published_dataset"] = mine["dataset"].map(FAMILY)
    mine["published_framework"] = mine["framework"].map(PUBLISHED_FRAMEWORK)
    pub = published.rename(columns={"dataset": "published_dataset", "framework": "published_framework",
                                    "train_time_s": "published_train_time_s",
                                    "test_time_s": "published_test_time_s",
                                    "accuracy_pct": "published_accuracy_pct"})
    both = mine.merge(pub, on=["published_dataset", "published_framework", "device"], how="inner")
    both["train_time_ratio"] = both["train_time_s"] / both["published_train_time_s"]
    both["test_time_ratio"] = both["test_time_s"] / both["published_test_time_s"]
    both["accuracy_diff_pp"] = both["accuracy_pct"] - both["published_accuracy_pct"]
    return both[cols].sort_values(["dataset", "device", "framework"], ignore_index=True)


def _rank(s: pd.Series) -> pd.Series:
    return s.rank(method="average")


def correlation(a: pd.Series, b: pd.Series, method: str = "spearman") -> float:
    """Correlation of two columns over rows where both are present; NaN if fewer than 3 or one is constant."""
    both = pd.concat([a, b], axis=1).dropna()
    if len(both) < 3 or both.iloc[:, 0].nunique() < 2 or both.iloc[:, 1].nunique() < 2:
        return float("nan")
    x, y = both.iloc[:, 0].astype(float), both.iloc[:, 1].astype(float)
    if method == "spearman":
        x, y = _rank(x), _rank(y)
    return float(np.corrcoef(x, y)[0, 1])


def resource_correlations(runs: pd.DataFrame, method: str = "spearman") -> pd.DataFrame:
    """Correlation of each resource column with each hyper-parameter, per framework and dataset (ok points)."""
    df = ok_points(points(runs))
    df = df.assign(iterations=df["iterations_configured"])
    resources = [c for c in RESOURCES if c in runs.columns and df[c].notna().any()]
    rows = []
    for (framework, dataset), g in df.groupby(["framework", "dataset"]):
        for res in resources:
            for hp in HYPER_PARAMETERS:
                r = correlation(pd.to_numeric(g[res], errors="coerce"), pd.to_numeric(g[hp], errors="coerce"),
                                method)
                rows.append({"framework": framework, "dataset": dataset, "resource": res, "hyper_parameter": hp,
                             "r": r, "n": len(g)})
    return pd.DataFrame(rows, columns=["framework", "dataset", "resource", "hyper_parameter", "r", "n"])


def phase_spans(samples: pd.DataFrame) -> pd.DataFrame:
    """Consecutive samples in one phase as spans (start, end) per run; a span ends where the next begins."""
    cols = ["run_id", "phase", "start", "end"]
    if samples.empty or "phase" not in samples.columns:
        return pd.DataFrame(columns=cols)
    out = []
    for run_id, g in samples.sort_values(["run_id", "t"]).groupby("run_id", sort=False):
        t = g["t"].to_numpy(float)
        phase = g["phase"].fillna("other").astype(str).to_numpy()
        start = 0
        for i in range(1, len(g) + 1):
            if i == len(g) or phase[i] != phase[start]:
                end = t[i] if i < len(g) else t[-1] + (t[-1] - t[-2] if len(t) > 1 else 0.1)
                out.append({"run_id": run_id, "phase": phase[start], "start": t[start], "end": end})
                start = i
    return pd.DataFrame(out, columns=cols)


def defaults_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per framework x whose defaults (x dataset x device): mean accuracy and train time of ok points, failures."""
    df = in_studies_varying(points(runs), "whose")
    cols = ["framework", "dataset", "device", "whose", "is_own", "accuracy_pct", "train_time_s", "n_ok", "n_failed"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(ok=df["status"] == "ok")
    okd = df[df["ok"]]
    keys = ["framework", "dataset", "device", "whose"]
    counts = df.groupby(keys, as_index=False).agg(n_ok=("ok", "sum"), n_all=("ok", "size"),
                                                  is_own=("is_own", "max"))
    means = okd.groupby(keys, as_index=False).agg(accuracy_pct=("accuracy_pct", "mean"),
                                                  train_time_s=("train_time_s", "mean"))
    table = counts.merge(means, on=keys, how="left")
    table["n_failed"] = table["n_all"] - table["n_ok"]
    return table[cols]


def sweep_table(runs: pd.DataFrame, param: str, metric: str) -> pd.DataFrame:
    """Mean `metric` of ok points per (settings group, `param` value), groups where `param` takes 2+ values.

    Failed points are kept as rows with `failed` > 0 (and a missing mean when all failed).
    """
    df = points(runs)
    if param == "length" and df["length_unit"].nunique() > 1:  # mixed units: compare in iterations
        df = df.assign(length=df["iterations_configured"], length_unit="iterations")
    df = in_studies_varying(df, param)
    cols = ["framework", "dataset", "device", "group", "settings", param, "length_unit", metric, "n_ok", "failed",
            "statuses"]
    df = df[df[param].notna()]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(group=group_key(df, {param}), settings=settings_label(df, {param}),
                   ok=(df["status"] == "ok") & df[metric].notna())
    df = df.assign(val=df[metric].where(df["ok"]))
    agg = df.groupby(["framework", "dataset", "device", "group", "settings", param, "length_unit"],
                     as_index=False).agg(**{metric: ("val", "mean"), "n_ok": ("ok", "sum"), "n": ("ok", "size"),
                                            "statuses": ("status", lambda s: ",".join(sorted(set(s) - {"ok"})))})
    agg["failed"] = agg["n"] - agg["n_ok"]
    sizes = agg.groupby("group")[param].transform("nunique")
    return agg[sizes > 1][cols].reset_index(drop=True)


def representative_runs(runs: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """One run per framework x dataset x device for the timelines.

    An ok own-preset point if there is one, else an ok point, else any; among those the
    one with the median training time (a typical run, not an outlier).
    """
    df = points(runs)
    df = df[df["run_id"].isin(set(samples["run_id"]))] if "run_id" in samples.columns else df.iloc[0:0]
    if df.empty:
        return df
    df = df.assign(rank_ok=(df["status"] != "ok").astype(int), rank_own=(~df["is_own"]).astype(int))
    keys = ["framework", "dataset", "device", "rank_ok", "rank_own"]
    median = df.groupby(keys)["train_time_s"].transform("median")
    df = df.assign(off_median=(df["train_time_s"] - median).abs().fillna(math.inf))
    df = df.sort_values(["rank_ok", "rank_own", "off_median", "run_id"])
    return df.groupby(["framework", "dataset", "device"], as_index=False).head(1)


def time_to_accuracy_table(runs: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    cols = ["run_id", "framework", "dataset", "device", "status", "settings", "iteration", "train_time_s",
            "accuracy_pct"]
    if curves is None or curves.empty or "kind" not in curves.columns:
        return pd.DataFrame(columns=cols)
    c = curves[(curves["kind"] == "test") & curves["accuracy"].notna() & curves["train_time_s"].notna()]
    if c.empty:
        return pd.DataFrame(columns=cols)
    df = points(runs)
    df = df.assign(settings=settings_label(df, set()))
    c = c[["run_id", "iteration", "train_time_s", "accuracy"]].merge(
        df[["run_id", "framework", "dataset", "device", "status", "settings"]], on="run_id", how="inner")
    c["accuracy_pct"] = c["accuracy"] * 100
    return c[cols].sort_values(["run_id", "train_time_s"], ignore_index=True)


def status_counts(runs: pd.DataFrame) -> pd.DataFrame:
    df = points(runs)
    if df.empty:
        return pd.DataFrame(columns=["framework", "dataset", "device", "status", "n"])
    return df.groupby(["framework", "dataset", "device", "status"], as_index=False).size().rename(
        columns={"size": "n"})
