"""The study's charts, drawn with Altair from the Parquet tables.

Each chart is saved as self-contained HTML (Vega inlined: opens offline) and SVG,
atomically. A chart that has no data in a study (no GPU points, no threads sweep, ...)
is still written, as a chart that says so. Failed points are drawn too (hollow red
marks, or their own bars in the status chart), so a missing bar is never mistaken for
a failure.

The computations behind the charts (Pareto front, speed-up, ratios to the published
figures, correlations, phase spans) are plain functions on DataFrames, so that tests
and `dlbench.findings` can call them.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from dlbench.atomic import atomic_path

FORMATS = ("html", "svg")
NO_DATA = "no data for this chart in this study"
MAX_SAMPLES = 1500  # readings per run drawn in a timeline
PUBLISHED_CSV = Path(__file__).resolve().parent / "reference" / "gtdlbench_results.csv"

FRAMEWORKS = ["pytorch", "tensorflow", "theano", "caffe"]
# Whose defaults each framework's `own` preset is (dlbench/presets.yaml names PyTorch's "torch").
OWN_PRESET = {"pytorch": "torch", "tensorflow": "tensorflow", "theano": "theano", "caffe": "caffe"}
PRESET_ORDER = ["tensorflow", "caffe", "torch", "theano"]
# The published table names frameworks and datasets its own way.
PUBLISHED_FRAMEWORK = {"pytorch": "torch"}
PUBLISHED_DATASET = {"mnist": "mnist", "digits": "mnist", "fashion_mnist": "mnist", "cifar10": "cifar10"}
MNIST_LIKE = ["mnist", "fashion_mnist", "digits"]

STATUSES = ["ok", "diverged", "error", "killed", "timeout", "oom", "unavailable", "cancelled"]
PHASES = ["startup", "import", "data_load", "build", "compile", "train", "test", "other"]

FRAMEWORK_COLORS = alt.Scale(domain=FRAMEWORKS, range=["#ee4c2c", "#ff8f00", "#3d6ab0", "#2ca02c"])
FAILED_SHAPES = alt.Scale(domain=STATUSES[1:], range=["cross", "triangle-down", "triangle-down", "diamond", "square",
                                                     "triangle-up", "triangle-down"])
STATUS_COLORS = alt.Scale(domain=STATUSES, range=["#4c9f38", "#d62728", "#8c1a1a", "#e377c2", "#ff7f0e", "#9467bd",
                                                  "#7f7f7f", "#bcbd22"])
PHASE_COLORS = alt.Scale(domain=PHASES, range=["#d9d9d9", "#c6dbef", "#fdd0a2", "#dadaeb", "#fcbba1", "#c7e9c0",
                                               "#fee391", "#f2f2f2"])

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


# ---------------------------------------------------------------------------------------------
# Tidy helpers and the pure computations
# ---------------------------------------------------------------------------------------------

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


def _group_key(df: pd.DataFrame, exclude: set[str]) -> pd.Series:
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
    df = df.assign(group=_group_key(df, {"threads"}), settings=settings_label(df, {"threads"}))
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
    mine["published_dataset"] = mine["dataset"].map(PUBLISHED_DATASET)
    mine["published_framework"] = mine["framework"].map(lambda f: PUBLISHED_FRAMEWORK.get(f, f))
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


# ---------------------------------------------------------------------------------------------
# Chart pieces
# ---------------------------------------------------------------------------------------------

def _color():
    return alt.Color("framework:N", scale=FRAMEWORK_COLORS, title="framework")


def _failed_shape(df: pd.DataFrame):
    """Shape by status for failed points: the same shape for a status in every chart; legend only if any failed."""
    present = [st for st in STATUSES[1:] if st in set(df["status"])]
    present += sorted(set(df["status"]) - set(STATUSES))
    if not present:
        return alt.Shape("status:N", legend=None)
    shapes = dict(zip(FAILED_SHAPES.domain, FAILED_SHAPES.range))
    return alt.Shape("status:N", title="failed point",
                     scale=alt.Scale(domain=present, range=[shapes.get(st, "circle") for st in present]))


def _title(text: str, *subtitle: str) -> alt.TitleParams:
    return alt.TitleParams(text=text, subtitle=list(subtitle) or alt.Undefined, anchor="start", fontSize=15)


def no_data(title: str, why: str = "") -> alt.Chart:
    """A chart that says it has nothing to show: a valid file in every format."""
    lines = [NO_DATA] + ([why] if why else [])
    return alt.Chart(pd.DataFrame({"text": ["\n".join(lines)]})).mark_text(
        size=14, lineBreak="\n", color="#555555").encode(text="text:N").properties(
        width=520, height=80, title=_title(title))


def _facet(chart, df: pd.DataFrame, row: str | None = "device", column: str | None = "dataset"):
    kw = {}
    if row and row in df.columns:
        kw["row"] = alt.Row(f"{row}:N", title=row)
    if column and column in df.columns:
        kw["column"] = alt.Column(f"{column}:N", title=column.replace("_label", ""))
    return chart.facet(**kw) if kw else chart


def _tooltip(df: pd.DataFrame, *extra: str) -> list[str]:
    wanted = ["run_id", "framework", "status", "reason", "whose", "batch_size", "learning_rate", "length",
              "length_unit", "threads", *extra]
    seen = []
    for c in wanted:
        if c in df.columns and c not in seen and df[c].notna().any():
            seen.append(c)
    return seen


def _slim(df: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    """Only the columns a chart uses (the runs table holds logs and JSON blobs that would bloat the file)."""
    keep = ["run_id", "framework", "dataset", "device", "status", "reason", "whose", "is_own", "batch_size",
            "learning_rate", "length", "length_unit", "threads", *extra]
    keep = [c for c in dict.fromkeys(keep) if c in df.columns]
    out = df[keep].copy()
    if "reason" in out.columns:
        out["reason"] = out["reason"].astype("string").str.slice(0, 160)
    return out


@dataclass(frozen=True)
class Spec:
    make: Callable
    category: str
    title: str


def _per_framework(metric: str, label: str, log: bool):
    what = {"train_time_s": "Training time", "test_time_s": "Testing time", "accuracy_pct": "Test accuracy"}[metric]
    title = f"{what} per framework, by dataset and device"

    def make(runs, curves=None, samples=None, published=None):
        df = points(runs)
        if df.empty:
            return no_data(title)
        good = (df["status"] == "ok") & df[metric].notna() & ((df[metric] > 0) if log else True)
        failed = df["status"] != "ok"
        if not good.any() and not failed.any():
            return no_data(title, f"no point has a {label}")
        bottom = (df.loc[good, metric].min() / 2 if good.any() else 1.0) if log else 0.0
        data = _slim(df, [metric, "peak_fraction"]).assign(good=good, failed_at=bottom)
        scale = alt.Scale(type="log") if log else alt.Scale(zero=True, domain=[0, 100])
        base = alt.Chart().encode(x=alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0)))
        ok = base.transform_filter("datum.good")
        bars = ok.mark_bar(opacity=0.4, width={"band": 0.7}).encode(
            y=alt.Y(f"mean({metric}):Q", title=label, scale=scale), color=_color(),
            tooltip=[alt.Tooltip("framework:N"), alt.Tooltip(f"mean({metric}):Q", format=".4g", title="mean"),
                     alt.Tooltip("count():Q", title="ok points")])
        dots = ok.mark_circle(size=45, opacity=0.9).encode(
            y=alt.Y(f"{metric}:Q", scale=scale), color=_color(), tooltip=_tooltip(data, metric, "peak_fraction"))
        bad = base.transform_filter("datum.status != 'ok'").mark_point(
            color="red", size=110, filled=False, strokeWidth=2).encode(
            y=alt.Y("failed_at:Q", scale=scale), shape=_failed_shape(df), tooltip=_tooltip(data))
        chart = alt.layer(bars, dots, bad, data=data).properties(width=200, height=200)
        return _facet(chart, data).properties(title=_title(
            title, f"bar: mean of ok points; dots: each ok point; {'log scale; ' if log else ''}"
                   "red hollow marks at the bottom: failed points (shape = status)"))
    return make


_AXIS_TITLES = {"batch_size": "batch size", "learning_rate": "learning rate", "length": "training length",
                "threads": "threads"}


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
    df = df.assign(group=_group_key(df, {param}), settings=settings_label(df, {param}),
                   ok=(df["status"] == "ok") & df[metric].notna())
    df = df.assign(val=df[metric].where(df["ok"]))
    agg = df.groupby(["framework", "dataset", "device", "group", "settings", param, "length_unit"],
                     as_index=False).agg(**{metric: ("val", "mean"), "n_ok": ("ok", "sum"), "n": ("ok", "size"),
                                            "statuses": ("status", lambda s: ",".join(sorted(set(s) - {"ok"})))})
    agg["failed"] = agg["n"] - agg["n_ok"]
    sizes = agg.groupby("group")[param].transform("nunique")
    return agg[sizes > 1][cols].reset_index(drop=True)


def _against(param: str, metric: str, label: str, log_x: bool, log_y: bool):
    what = "Training time" if metric == "train_time_s" else "Test accuracy"
    title = f"{what} against {_AXIS_TITLES[param]}"

    def make(runs, curves=None, samples=None, published=None):
        table = sweep_table(runs, param, metric)
        if table.empty:
            return no_data(title, f"this study does not sweep {_AXIS_TITLES[param]} with other settings fixed")
        unit = table["length_unit"].iloc[0] if param == "length" else None
        x_title = f"training length ({unit})" if unit else _AXIS_TITLES[param]
        good = table[metric].notna() & ((table[metric] > 0) if log_y else True)
        if log_y:
            bottom = table.loc[good, metric].min() / 2 if good.any() else 1.0
        elif good.any():  # just below the lowest ok point, so the axis need not stretch down to zero
            lo, hi = table.loc[good, metric].min(), table.loc[good, metric].max()
            bottom = max(0.0, lo - max(1.0, 0.08 * (hi - lo)))
        else:
            bottom = 0.0
        data = table.assign(failed_at=bottom, good=good)
        values = sorted(table[param].unique())
        axis = alt.Axis(values=values, format="~g") if len(values) <= 12 else alt.Axis(format="~g")
        x = alt.X(f"{param}:Q", title=x_title, axis=axis,
                  scale=alt.Scale(type="log" if log_x else "linear", nice=False))
        y_scale = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
        tip = ["framework", "settings", param, alt.Tooltip(f"{metric}:Q", format=".4g"), "n_ok", "failed",
               "statuses"]
        line = alt.Chart().transform_filter("datum.good").mark_line(point=True).encode(
            x=x, y=alt.Y(f"{metric}:Q", title=label, scale=y_scale), color=_color(), detail="group:N",
            tooltip=tip)
        bad = alt.Chart().transform_filter("datum.failed > 0").mark_point(
            color="red", size=110, filled=False, strokeWidth=2, shape="cross").encode(
            x=x, y=alt.Y("failed_at:Q", scale=y_scale), tooltip=tip)
        chart = alt.layer(line, bad, data=data).properties(width=260, height=200)
        return _facet(chart, data).properties(title=_title(
            title, "one line per framework and fixed other settings (hover: which); mean over repeats of ok points",
            "red crosses at the bottom: settings with failed points"))
    return make


def _defaults_matrix(metric: str):
    what = "test accuracy (%)" if metric == "accuracy_pct" else "training time (s)"
    title = f"Own vs cross-applied default settings: {what}"

    def make(runs, curves=None, samples=None, published=None):
        table = defaults_table(runs)
        if table.empty or table["whose"].nunique() < 2:
            return no_data(title, "this study runs every framework with one preset only")
        fmt = "{:.1f}%" if metric == "accuracy_pct" else "{:.3g} s"
        table["label"] = [
            ("\n".join([fmt.format(v)] + ([f"{nf} failed"] if nf else [])) if pd.notna(v) else f"all {nf} failed")
            for v, nf in zip(table[metric], table["n_failed"])]
        vals = table[metric].dropna()
        if metric == "train_time_s":
            logv = np.log(vals.clip(lower=1e-9))
            lo, hi = (logv.min(), logv.max()) if len(vals) else (0, 1)
            rel = (np.log(table[metric].clip(lower=1e-9)) - lo) / ((hi - lo) or 1)
        else:
            lo, hi = (vals.min(), vals.max()) if len(vals) else (0, 1)
            rel = (table[metric] - lo) / ((hi - lo) or 1)
        table["dark"] = (rel > 0.55).fillna(False)
        order = [p for p in PRESET_ORDER if p in set(table["whose"])] + sorted(set(table["whose"]) - set(PRESET_ORDER))
        x = alt.X("whose:N", title="whose default settings", sort=order)
        y = alt.Y("framework:N", title="framework", sort=FRAMEWORKS)
        scale = alt.Scale(type="log", scheme="blues") if metric == "train_time_s" else alt.Scale(scheme="blues")
        cells = alt.Chart().mark_rect().encode(
            x=x, y=y, color=alt.Color(f"{metric}:Q", title=what, scale=scale),
            tooltip=["framework", "whose", alt.Tooltip(f"{metric}:Q", format=".4g"), "n_ok", "n_failed", "is_own"])
        empty = alt.Chart().transform_filter(f"!isValid(datum.{metric})").mark_rect(
            color="#fbe3e3", stroke="#d62728").encode(x=x, y=y)
        own = alt.Chart().transform_filter("datum.is_own").mark_rect(
            fill=None, stroke="black", strokeWidth=2.5).encode(x=x, y=y)
        text = alt.Chart().mark_text(lineBreak="\n", fontSize=11).encode(
            x=x, y=y, text="label:N",
            color=alt.condition("datum.dark", alt.value("white"), alt.value("black")))
        chart = alt.layer(cells, empty, own, text, data=table).properties(width=60 * len(order), height=50 * max(
            1, table["framework"].nunique()))
        return _facet(chart, table).properties(title=_title(
            title, "rows: framework trained; columns: whose defaults it trained with; black frame: its own defaults",
            "cell: mean over ok points; red cells: every point failed"))
    return make


def _speedup_chart(runs, curves=None, samples=None, published=None):
    title = "Training speed-up against threads, per framework"
    table = speedups(runs)
    if table.empty:
        return no_data(title, "this study does not vary threads with other settings fixed")
    values = sorted(table["threads"].unique())
    x = alt.X("threads:Q", title="threads", scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=values, format="~g"))
    tip = ["framework", "settings", "threads", alt.Tooltip("train_time_s:Q", format=".4g"),
           alt.Tooltip("speedup:Q", format=".3g"), "base_threads"]
    lines = alt.Chart().mark_line(point=True).encode(
        x=x, y=alt.Y("speedup:Q", title="speed-up over the fewest threads"), color=_color(), detail="group:N",
        tooltip=tip)
    ideal = alt.Chart().mark_line(strokeDash=[4, 4], color="gray").encode(x=x, y="ideal:Q", detail="group:N")
    chart = alt.layer(ideal, lines, data=table).properties(width=260, height=220)
    return _facet(chart, table).properties(title=_title(
        title, "speed-up = training time at the group's fewest threads / time at this many (same other settings)",
        "dashed grey: linear (ideal) speed-up"))


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


def _timeline(column: str, label: str, what: str):
    title = f"{what} over one run per framework, phases shaded"

    def make(runs, curves=None, samples=None, published=None):
        if samples is None or samples.empty or column not in samples.columns or samples[column].notna().sum() == 0:
            return no_data(title, f"no {label} samples")
        chosen = representative_runs(runs, samples[samples[column].notna()])
        if chosen.empty:
            return no_data(title, f"no {label} samples")
        chosen = chosen.assign(panel=chosen["framework"] + " · " + chosen["dataset"] + " · " + chosen["device"]
                               + " · " + chosen["status"])
        panel = dict(zip(chosen["run_id"], chosen["panel"]))
        s = samples[samples["run_id"].isin(panel)][["run_id", "t", "phase", column]].copy()
        spans = phase_spans(s)
        # Long runs: at most MAX_SAMPLES readings per run drawn (the phase spans keep every boundary).
        s = s.sort_values(["run_id", "t"])
        step = (s.groupby("run_id")["t"].transform("size") // MAX_SAMPLES + 1).astype(int)
        s = s[s.groupby("run_id").cumcount() % step == 0].copy()
        s["layer"], spans["layer"] = "sample", "phase"
        data = pd.concat([s, spans], ignore_index=True)
        data["panel"] = data["run_id"].map(panel)
        data["framework"] = data["run_id"].map(dict(zip(chosen["run_id"], chosen["framework"])))
        x = alt.X("t:Q", title="time since launch (s)")
        rects = alt.Chart().transform_filter("datum.layer == 'phase'").mark_rect(opacity=0.6).encode(
            x=alt.X("start:Q", title="time since launch (s)"), x2="end:Q",
            color=alt.Color("phase:N", scale=PHASE_COLORS, title="phase"),
            tooltip=["phase", alt.Tooltip("start:Q", format=".2f"), alt.Tooltip("end:Q", format=".2f")])
        line = alt.Chart().transform_filter("datum.layer == 'sample'").mark_line(
            color="#222222", strokeWidth=1.5, point=alt.OverlayMarkDef(size=12, color="#222222")).encode(
            x=x, y=alt.Y(f"{column}:Q", title=label), tooltip=["phase", "t", column])
        chart = alt.layer(rects, line, data=data).properties(width=620, height=130)
        return chart.facet(row=alt.Row("panel:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left",
                                                                                 labelOrient="top"))).properties(
            title=_title(title, "framework · dataset · device · status of the run shown (an ok own-defaults run "
                                "where there is one); shading: the phase the trainer reported"))
    return make


def _correlation_chart(runs, curves=None, samples=None, published=None):
    title = "Correlation of resource use with hyper-parameters (Spearman), per framework"
    table = resource_correlations(runs)
    if table.empty or table["r"].notna().sum() == 0:
        return no_data(title, "needs 3+ ok points per framework with a varying hyper-parameter")
    table["label"] = table["r"].map(lambda r: f"{r:+.2f}" if pd.notna(r) else "n/a")
    x = alt.X("hyper_parameter:N", title="hyper-parameter", sort=HYPER_PARAMETERS)
    y = alt.Y("resource:N", title="resource", sort=RESOURCES)
    cells = alt.Chart().mark_rect().encode(
        x=x, y=y, color=alt.Color("r:Q", scale=alt.Scale(scheme="redblue", domain=[-1, 1], reverse=True),
                                  title="Spearman r"),
        tooltip=["framework", "dataset", "resource", "hyper_parameter", alt.Tooltip("r:Q", format=".3f"), "n"])
    blank = alt.Chart().transform_filter("!isValid(datum.r)").mark_rect(color="#eeeeee").encode(x=x, y=y)
    text = alt.Chart().mark_text(fontSize=11).encode(x=x, y=y, text="label:N")
    chart = alt.layer(cells, blank, text, data=table).properties(width=210, height=24 * table["resource"].nunique())
    return chart.facet(column=alt.Column("framework:N", title="framework"),
                       row=alt.Row("dataset:N", title="dataset")).properties(title=_title(
        title, "rank correlation over a framework's ok points on one dataset; +1: more of the hyper-parameter, "
               "more of the resource; n/a: the hyper-parameter (or resource) did not vary"))


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


def _time_to_accuracy(runs, curves=None, samples=None, published=None):
    title = "Time to accuracy: test accuracy against cumulative training time"
    table = time_to_accuracy_table(runs, curves)
    table = table[table["train_time_s"] > 0]
    if table.empty:
        return no_data(title, "no test evaluations in the learning curves")
    x = alt.X("train_time_s:Q", title="cumulative training time (s, log)", scale=alt.Scale(type="log"))
    line = alt.Chart().mark_line(point=True, opacity=0.8).encode(
        x=x, y=alt.Y("accuracy_pct:Q", title="test accuracy (%)", scale=alt.Scale(zero=False)), color=_color(),
        detail="run_id:N", strokeDash=alt.StrokeDash("status:N", title="status"),
        tooltip=["framework", "settings", "status", "iteration", alt.Tooltip("train_time_s:Q", format=".3g"),
                 alt.Tooltip("accuracy_pct:Q", format=".2f")])
    chart = alt.layer(line, data=table).properties(width=300, height=220)
    return _facet(chart, table).properties(title=_title(
        title, "one line per run, one dot per test evaluation; the run reached the accuracy after that much "
               "training time"))


def _pareto_chart(runs, curves=None, samples=None, published=None):
    title = "Training time vs accuracy: the Pareto front per dataset and device"
    df = ok_points(points(runs), "train_time_s", "accuracy_pct", positive=True)
    if df.empty:
        return no_data(title, "no ok point with a training time and an accuracy")
    df = df.assign(settings=settings_label(df, set()))
    df["front"] = False
    for _, g in df.groupby(["dataset", "device"]):
        df.loc[g.index, "front"] = pareto_front(g, "train_time_s", "accuracy_pct")
    data = _slim(df, ["train_time_s", "accuracy_pct", "front", "settings"])
    x = alt.X("train_time_s:Q", title="training time (s, log)", scale=alt.Scale(type="log"))
    y = alt.Y("accuracy_pct:Q", title="test accuracy (%)", scale=alt.Scale(zero=False))
    tip = ["framework", "settings", alt.Tooltip("train_time_s:Q", format=".4g"),
           alt.Tooltip("accuracy_pct:Q", format=".2f"), "front"]
    pts = alt.Chart().mark_circle(size=50, opacity=0.45).encode(x=x, y=y, color=_color(), tooltip=tip)
    line = alt.Chart().transform_filter("datum.front").mark_line(
        interpolate="step-after", color="black", strokeWidth=1.5).encode(x=x, y=y, order="train_time_s:Q")
    front = alt.Chart().transform_filter("datum.front").mark_point(
        size=130, filled=True, stroke="black", strokeWidth=1.5, opacity=1).encode(x=x, y=y, color=_color(),
                                                                                   tooltip=tip)
    chart = alt.layer(pts, line, front, data=data).properties(width=300, height=240)
    return _facet(chart, data).properties(title=_title(
        title, "every ok point; outlined and joined: the front (no other point is both faster and more accurate)"))


def _published_chart(runs, curves=None, samples=None, published=None):
    title = "This machine vs the published study (Wu et al. 2019, GTDLBench), frameworks' own defaults"
    if published is None:
        published = read_published() if PUBLISHED_CSV.exists() else pd.DataFrame()
    table = published_ratios(runs, published)
    if table.empty:
        return no_data(title, "needs ok points with each framework's own defaults (preset `own`) on a published "
                              "dataset and device")
    table["dataset_label"] = [d if d == p else f"{d} (vs published {p})"
                              for d, p in zip(table["dataset"], table["published_dataset"])]
    table["ratio_label"] = table["train_time_ratio"].map(lambda r: f"{r:.3g}x")
    table["diff_label"] = table["accuracy_diff_pp"].map(lambda d: f"{d:+.2f}")
    tip = ["dataset", "published_dataset", "framework", "device", "n", alt.Tooltip("train_time_s:Q", format=".4g"),
           "published_train_time_s", alt.Tooltip("train_time_ratio:Q", format=".3g"),
           alt.Tooltip("test_time_ratio:Q", format=".3g"), alt.Tooltip("accuracy_pct:Q", format=".2f"),
           "published_accuracy_pct", alt.Tooltip("accuracy_diff_pp:Q", format="+.2f")]
    x = alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0))
    ratio_scale = alt.Scale(type="log")
    stick = alt.Chart().mark_rule(strokeWidth=3).encode(
        x=x, y=alt.Y("one:Q", scale=ratio_scale, title="train time: this run / published (log)"),
        y2="train_time_ratio:Q", color=_color())
    head = alt.Chart().mark_circle(size=90, opacity=1).encode(
        x=x, y=alt.Y("train_time_ratio:Q", scale=ratio_scale), color=_color(), tooltip=tip)
    ratio_text = alt.Chart().mark_text(dx=18, fontSize=10, align="left").encode(
        x=x, y=alt.Y("train_time_ratio:Q", scale=ratio_scale), text="ratio_label:N")
    one = alt.Chart().mark_rule(color="gray", strokeDash=[4, 4]).encode(y=alt.datum(1))
    data = table.assign(one=1.0)
    ratio = _facet(alt.layer(one, stick, head, ratio_text, data=data).properties(width=200, height=180), data,
                   column="dataset_label")
    bars = alt.Chart().mark_bar(width={"band": 0.6}).encode(
        x=x, y=alt.Y("accuracy_diff_pp:Q", title="accuracy: this run - published (points)"), color=_color(),
        tooltip=tip)
    diff_text = alt.layer(
        alt.Chart().transform_filter("datum.accuracy_diff_pp >= 0").mark_text(dy=-7, fontSize=10).encode(
            x=x, y="accuracy_diff_pp:Q", text="diff_label:N"),
        alt.Chart().transform_filter("datum.accuracy_diff_pp < 0").mark_text(dy=8, fontSize=10).encode(
            x=x, y="accuracy_diff_pp:Q", text="diff_label:N"))
    zero = alt.Chart().mark_rule(color="gray").encode(y=alt.datum(0))
    diff = _facet(alt.layer(bars, zero, diff_text, data=data).properties(width=200, height=180), data,
                  column="dataset_label")
    mapped = sorted({d for d, p in zip(table["dataset"], table["published_dataset"]) if d != p})
    note = (f"{', '.join(mapped)} compared with the published MNIST row (a different dataset). " if mapped else "")
    return alt.vconcat(ratio, diff).properties(title=_title(
        title, "top: this run's mean training time / the published one (1 = same; below 1 = faster here); "
               "bottom: accuracy difference in percentage points",
        note + "Published: Xeon E5-1620, GTX 1080 Ti, full-length training; lengths and datasets here may differ."))


def status_counts(runs: pd.DataFrame) -> pd.DataFrame:
    df = points(runs)
    if df.empty:
        return pd.DataFrame(columns=["framework", "dataset", "device", "status", "n"])
    return df.groupby(["framework", "dataset", "device", "status"], as_index=False).size().rename(
        columns={"size": "n"})


def _status_chart(runs, curves=None, samples=None, published=None):
    title = "Points per status and framework: what ran and what failed"
    table = status_counts(runs)
    if table.empty:
        return no_data(title)
    table["failed"] = table["status"] != "ok"
    table["order"] = table["status"].map({s: i for i, s in enumerate(STATUSES)}).fillna(len(STATUSES))
    x = alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0))
    bars = alt.Chart().mark_bar().encode(
        x=x, y=alt.Y("sum(n):Q", title="points"), color=alt.Color("status:N", scale=STATUS_COLORS, title="status"),
        order=alt.Order("order:Q"), tooltip=["framework", "dataset", "device", "status", "n"])
    text = alt.Chart().mark_text(color="white", fontSize=11, fontWeight="bold").encode(
        x=x, y=alt.Y("sum(n):Q", stack="zero", bandPosition=0.5), detail="status:N", order=alt.Order("order:Q"),
        text="sum(n):Q")
    chart = alt.layer(bars, text, data=table).properties(width=60 * max(2, table["framework"].nunique()),
                                                        height=200)
    return _facet(chart, table).properties(title=_title(
        title, "bar height: points of the study; green: ok; every other colour is a failed point, with its status"))


CHARTS: dict[str, Spec] = {
    "train_time_by_framework": Spec(_per_framework("train_time_s", "training time (s, log)", log=True),
                                    "Time and accuracy", "Training time per framework"),
    "test_time_by_framework": Spec(_per_framework("test_time_s", "testing time (s, log)", log=True),
                                   "Time and accuracy", "Testing time per framework"),
    "accuracy_by_framework": Spec(_per_framework("accuracy_pct", "test accuracy (%)", log=False),
                                  "Time and accuracy", "Accuracy per framework"),
    "status_by_framework": Spec(_status_chart, "Time and accuracy", "Points per status"),
    "train_time_vs_batch_size": Spec(_against("batch_size", "train_time_s", "training time (s, log)", True, True),
                                     "Hyper-parameters", "Training time vs batch size"),
    "accuracy_vs_batch_size": Spec(_against("batch_size", "accuracy_pct", "test accuracy (%)", True, False),
                                   "Hyper-parameters", "Accuracy vs batch size"),
    "train_time_vs_learning_rate": Spec(_against("learning_rate", "train_time_s", "training time (s, log)", True,
                                                 True), "Hyper-parameters", "Training time vs learning rate"),
    "accuracy_vs_learning_rate": Spec(_against("learning_rate", "accuracy_pct", "test accuracy (%)", True, False),
                                      "Hyper-parameters", "Accuracy vs learning rate"),
    "train_time_vs_length": Spec(_against("length", "train_time_s", "training time (s, log)", True, True),
                                 "Hyper-parameters", "Training time vs length"),
    "accuracy_vs_length": Spec(_against("length", "accuracy_pct", "test accuracy (%)", True, False),
                               "Hyper-parameters", "Accuracy vs length"),
    "defaults_matrix_accuracy": Spec(_defaults_matrix("accuracy_pct"), "Default settings",
                                     "Own vs cross-applied defaults: accuracy"),
    "defaults_matrix_train_time": Spec(_defaults_matrix("train_time_s"), "Default settings",
                                       "Own vs cross-applied defaults: training time"),
    "speedup_vs_threads": Spec(_speedup_chart, "Scaling", "Speed-up against threads"),
    "time_to_accuracy": Spec(_time_to_accuracy, "Time and accuracy", "Time to accuracy"),
    "pareto_front": Spec(_pareto_chart, "Time and accuracy", "Time/accuracy Pareto front"),
    "cpu_timeline": Spec(_timeline("cpu_pct", "CPU (% of one core)", "CPU use"), "Resources", "CPU timeline"),
    "memory_timeline": Spec(_timeline("rss_mb", "resident memory (MB)", "Resident memory"), "Resources",
                            "Memory timeline"),
    "gpu_timeline": Spec(_timeline("gpu_util_pct", "GPU utilisation (%)", "GPU utilisation"), "Resources",
                         "GPU timeline"),
    "resource_correlation": Spec(_correlation_chart, "Resources", "Resource use vs hyper-parameters"),
    "published_comparison": Spec(_published_chart, "Comparison with the paper", "This machine vs the paper"),
}


def chart_files(root: str, cfg: dict | None = None) -> list[str]:
    """Every file the charts rule writes: one HTML and one SVG per chart (a chart without data says so)."""
    return [f"{root}/{name}.{fmt}" for name in CHARTS for fmt in FORMATS]


def chart_name(path: str) -> str:
    return Path(path).stem


def category(path: str) -> str:
    """The Snakemake report category of a chart file."""
    return CHARTS[chart_name(path)].category


def save(chart, stem: Path) -> None:
    for fmt in FORMATS:
        target = stem.with_suffix(f".{fmt}")
        with atomic_path(target, suffix=f".{fmt}") as tmp:
            tmp.chmod(0o644)  # readable like any other output (a temporary file starts private)
            if fmt == "html":  # Vega inlined (opens offline), drawn as SVG so that the page holds the marks
                chart.save(str(tmp), format="html", inline=True, embed_options={"renderer": "svg"})
            else:
                chart.save(str(tmp), format=fmt)


def _frame(obj) -> pd.DataFrame:
    if obj is None:
        return pd.DataFrame()
    return obj if isinstance(obj, pd.DataFrame) else pd.read_parquet(obj)


def draw(name: str, runs: pd.DataFrame, curves: pd.DataFrame, samples: pd.DataFrame,
         published: pd.DataFrame | None = None):
    """The chart `name`; one whose drawing fails becomes a chart that says why (the others still get drawn)."""
    spec = CHARTS[name]
    try:
        chart = spec.make(runs, curves, samples, published)
        chart.to_dict()  # validate now, so that a bad spec is caught here
        return chart
    except Exception as exc:  # noqa: BLE001 - one chart's bug must not lose the study's other charts
        print(f"dlbench: chart {name} could not be drawn: {exc!r}", file=sys.stderr)
        return alt.Chart(pd.DataFrame({"text": [f"this chart could not be drawn: {type(exc).__name__}: {exc}"[:300]]})
                         ).mark_text(size=13, color="#d62728").encode(text="text:N").properties(
            width=520, height=60, title=_title(spec.title))


def draw_all(runs, curves, samples, out_dir, cfg: dict | None = None, published=None) -> list[Path]:
    """Draw every chart of CHARTS into out_dir as <name>.html and <name>.svg; runs/curves/samples: frames or paths."""
    runs, curves, samples = _frame(runs), _frame(curves), _frame(samples)
    if published is None:
        published = read_published() if PUBLISHED_CSV.exists() else pd.DataFrame()
    elif not isinstance(published, pd.DataFrame):
        published = read_published(published)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in CHARTS:
        save(draw(name, runs, curves, samples, published), out / name)
        written.append(out / name)
    return written
