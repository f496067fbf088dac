"""The study's tables, computed from the Parquet tables: what the charts draw and the findings state.

Plain functions on DataFrames (no drawing): the tidy points with derived columns, the Pareto
front, speed-ups against threads, resource correlations, own vs cross-applied defaults, sweeps, the tuning
grids against their defaults, time to accuracy, phase spans, what compiling and bfloat16 buy.
This run next to the published figures is `dlbench.analysis.published`; intervals and tests are
`dlbench.analysis.stats`,
the study's summary and its verdicts `dlbench.analysis.summary`; throughput per core and per GB and the soonest to
a target accuracy `dlbench.analysis.guidance`. `dlbench.present.charts.draw` draws them; `dlbench.present.findings`
puts them into words.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from dlbench.analysis import stats
from dlbench.analysis.groups import counted, in_studies_varying, load_bound, ok_points, preset_points
from dlbench.frameworks import registry

FRAMEWORKS = registry.names()  # the order every chart and table lists frameworks in
OWN_PRESET = {f.name: f.own_preset for f in registry.FRAMEWORKS.values()}
PRESET_ORDER = registry.own_presets()

TIE = 1e-6  # accuracies (fractions) closer than this are a tie, broken by training time
NEAR_BEST_PP = 0.5  # "within 0.5 points of the best accuracy": the fastest tuned setting that is nearly as good

# How a point's preset was applied to its framework (the `reading` column; the record's `cross_apply`).
READINGS = {"own": "own defaults", "settings": "settings only", "preset": "whole preset"}
READING_TEXT = {
    "settings": "settings only: the other framework's hyper-parameters; each framework keeps its own network, "
                "input handling and initialisation",
    "preset": "whole preset: the other framework's hyper-parameters with its network and input handling",
}

STATUSES = ["ok", "diverged", "error", "killed", "timeout", "oom", "unavailable", "cancelled"]
PHASES = ["startup", "import", "data_load", "build", "compile", "train", "test", "other"]

# The hyper-parameters and resource columns of the correlation chart.
HYPER_PARAMETERS = ["batch_size", "learning_rate", "iterations"]
RESOURCES = ["cpu_util_mean_pct", "rss_peak_mb", "rss_mean_mb", "peak_fraction", "gpu_util_mean_pct",
             "gpu_mem_peak_mb", "gpu_power_mean_w"]

# Columns a chart may read; any missing one is added empty, so hand-made frames need only a few.
RUN_COLUMNS = ["run_id", "framework", "dataset", "preset", "network", "optimizer", "momentum", "weight_decay",
               "learning_rate", "batch_size", "iterations", "iterations_planned", "epochs", "device", "threads",
               "interop_threads", "library", "cross_apply", "repeat", "status", "reason", "train_time_s",
               "test_time_s", "accuracy", "throughput_img_s", "achieved_gflops", "peak_fraction",
               "cpu_util_mean_pct", "rss_peak_mb", "rss_mean_mb", "gpu_util_mean_pct", "gpu_mem_peak_mb",
               "gpu_power_mean_w", "threads_in_effect", "interop_threads_in_effect", "library_in_effect", "studies",
               "tuning_grid", "tuning_is_default", "compile", "precision", "compile_time_s", "peak_fraction_fp32",
               "seed", "contended", "host_cpu_other_pct_mean", "host_load_start", "memory_format", "build_json"]
# What makes two points the same settings, apart from the axis being compared (repeats are averaged).
SETTINGS = ["framework", "dataset", "whose", "reading", "network", "optimizer", "momentum", "weight_decay",
            "learning_rate", "batch_size", "length", "length_unit", "device", "threads", "interop_threads", "library",
            "compile", "precision", "memory_format"]
# The switch axes: the value each is compared against (its baseline) and the other one.
AXIS_PAIRS = {"compile": ("eager", "compiled"), "precision": ("fp32", "bf16"),
              "memory_format": ("contiguous", "channels_last")}


def by_seed(pairs) -> dict:
    """{seed: value} from (seed, value) pairs of a group's runs, NaN values left out (a run without a seed keyed by
    its position): the form stats.leader and stats.change pair runs by."""
    return {(seed if pd.notna(seed) else f"run{i}"): float(v) for i, (seed, v) in enumerate(pairs) if pd.notna(v)}


# The columns points() derives: a frame that has them all is one points() made (and is only copied again).
DERIVED = ("accuracy_pct", "length", "length_unit", "iterations_configured", "whose", "is_own", "reading",
           "natural_compile")


def points(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs table with every column the charts read, plus derived ones.

    `length`/`length_unit`: the configured length (epochs for epoch-based points, else
    iterations; the `iterations` column holds iterations done, empty for failed points).
    `whose`: whose defaults (`own` resolved to the framework's preset), `is_own`, `accuracy_pct`.
    `reading`: how `whose` was applied: `own`, `settings` or `preset` (records without `cross_apply`
    were made before the settings reading existed: whole presets).

    Given a frame points() made (or rows of one), a copy of it: a render computes the points once and
    hands them to every table, each of which may call points() again at the cost of a copy.
    """
    if all(col in runs.columns for col in DERIVED):
        return runs.copy()
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
    df["reading"] = np.where(df["is_own"], "own", df["cross_apply"].astype(object).where(
        df["cross_apply"].notna(), "preset"))
    for col in ("interop_threads", "interop_threads_in_effect", "threads_in_effect", "throughput_img_s",
                "rss_peak_mb"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    for col in ("network", "optimizer", "library", "device"):
        df[col] = df[col].astype(object).fillna("-" if col != "device" else "cpu")
    # PyTorch's records made before the memory_format axis say the layout they ran in their build (channels last).
    df["memory_format"] = df["memory_format"].astype(object).where(df["memory_format"].notna(),
                                                                   df["build_json"].map(_built_layout))
    # Records made before the other axes ran as their framework always runs (its natural value).
    for axis in AXIS_PAIRS:
        natural = df["framework"].map(lambda f, a=axis: registry.FRAMEWORKS[f].natural.get(a)
                                      if f in registry.FRAMEWORKS else None)
        df[axis] = df[axis].astype(object).where(df[axis].notna(), natural)
    df["natural_compile"] = df["compile"] == df["framework"].map(
        lambda f: registry.FRAMEWORKS[f].natural.get("compile") if f in registry.FRAMEWORKS else None)
    df["compile_time_s"] = pd.to_numeric(df["compile_time_s"], errors="coerce")
    # Outside load on the record: records made before it was measured (no column, or null) count as quiet.
    df["contended"] = df["contended"].map(lambda v: v is True or v == 1 or v == "True").astype(bool)
    # The seed a point ran (the config's seed + its repeat), what pairs two settings' runs; else its repeat.
    df["seed"] = pd.to_numeric(df["seed"], errors="coerce").fillna(pd.to_numeric(df["repeat"], errors="coerce"))
    return df


def group_key(df: pd.DataFrame, exclude: set[str]) -> pd.Series:
    cols = [c for c in SETTINGS if c not in exclude]
    if not len(df):
        return pd.Series([], dtype=str)
    return _per_distinct(df, cols, lambda u: _joined(_dashed(_opt_ins_only(u))))


def _dashed(u: pd.DataFrame) -> pd.DataFrame:
    return u.astype(object).where(u.notna(), "-").astype(str)


def _opt_ins_only(u: pd.DataFrame) -> pd.DataFrame:
    """The settings with PyTorch's default layout read as no switch: a contiguous PyTorch point and a framework
    without the switch, each in its users' own layout, are alike (the framework effect compares them)."""
    if "memory_format" not in u.columns:
        return u
    layout = u["memory_format"]
    return u.assign(memory_format=layout.where(layout != AXIS_PAIRS["memory_format"][0]))


def _joined(text: pd.DataFrame) -> pd.Series:
    """Each row's cells joined by "|", a column at a time (a join per row is what made large studies slow)."""
    if text.shape[1] == 0:
        return pd.Series("", index=text.index, dtype=object)
    out = text.iloc[:, 0]
    for column in text.columns[1:]:
        out = out + "|" + text[column]
    return out


def _per_distinct(df: pd.DataFrame, cols: list[str], label) -> pd.Series:
    """label(rows) computed once per distinct combination of `cols` (a large sweep repeats them) and spread
    back over every row: the same as label(df[cols]), at the cost of the distinct rows. label sees `cols` only
    (those df has), so that it does not copy the rest of a wide table."""
    cols = [c for c in cols if c in df.columns]
    ids = (df.groupby(cols, dropna=False, sort=False).ngroup().to_numpy() if cols
           else np.zeros(len(df), dtype=np.int64))
    first = ~pd.Series(ids).duplicated().to_numpy()
    labels = np.empty(ids.max() + 1, dtype=object)
    labels[ids[first]] = label(df[cols].iloc[np.flatnonzero(first)]).to_numpy()
    return pd.Series(labels[ids], index=df.index, dtype=object)


def settings_label(df: pd.DataFrame, exclude: set[str]) -> pd.Series:
    """A readable label of each point's settings, leaving out the axis being compared."""
    def one(r) -> str:
        parts = []
        if "whose" not in exclude:
            # "own defaults" for a framework's own preset: "pytorch with torch defaults" reads as another's. Where
            # the reading is left out (a label shared by the owner and the frameworks its preset was applied to),
            # the preset is named by its owner: "own defaults" would be true of the owner's runs alone.
            if r.get("reading") == "own" and "reading" not in exclude:
                parts.append("own defaults")
            elif r.get("reading") == "settings" and "reading" not in exclude:
                parts.append(f"{r['whose']}'s settings on own network")
            else:
                parts.append(f"{r['whose']}'s preset")
        if "batch_size" not in exclude and pd.notna(r["batch_size"]):
            parts.append(f"bs {r['batch_size']:g}")
        if "learning_rate" not in exclude and pd.notna(r["learning_rate"]):
            parts.append(f"lr {r['learning_rate']:g}")
        if "length" not in exclude and pd.notna(r["length"]):
            parts.append(f"{r['length']:g} {r['length_unit']}")
        if "threads" not in exclude and pd.notna(r["threads"]):
            parts.append(f"{r['threads']:g} threads")
        if "interop_threads" not in exclude and pd.notna(r.get("interop_threads")):
            parts.append(f"{r['interop_threads']:g} inter-op")
        if "library" not in exclude and r["library"] not in ("default", "-"):
            parts.append(str(r["library"]))
        if "compile" not in exclude and isinstance(r.get("compile"), str) and not r.get("natural_compile", True):
            parts.append(str(r["compile"]))
        if "precision" not in exclude and isinstance(r.get("precision"), str) and r["precision"] != "fp32":
            parts.append(r["precision"])  # bf16 or fp64: never the label of its float32 twin
        if "memory_format" not in exclude and r.get("memory_format") == "channels_last":
            parts.append("channels last")  # an opt-in layout: never the label of its default twin
        return ", ".join(parts)
    if not len(df):
        return pd.Series([], dtype=str)
    used = ["whose", "reading", "batch_size", "learning_rate", "length", "length_unit", "threads", "interop_threads",
            "library", "compile", "natural_compile", "precision", "memory_format"]
    return _per_distinct(df, used, lambda rows: pd.Series([one(r) for r in rows.to_dict("records")], index=rows.index,
                                                          dtype=object))


def _built_layout(build_json) -> str | None:
    """The memory layout an old record's build says it ran in (`memory_format`), or None."""
    if not isinstance(build_json, str):
        return None
    try:
        return json.loads(build_json).get("memory_format")
    except (ValueError, AttributeError):
        return None


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
    threads; speedup_low/high: its approximate 95 % interval where both counts ran twice or more. Only groups
    with at least two thread counts are returned.
    """
    df = ok_points(points(runs), "train_time_s", "threads", positive=True)
    cols = ["framework", "dataset", "device", "group", "settings", "threads", "train_time_s", "base_threads",
            "base_time_s", "speedup", "speedup_low", "speedup_high", "ideal", "n"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(group=group_key(df, {"threads"}), settings=settings_label(df, {"threads"}))
    agg = df.groupby(["framework", "dataset", "device", "group", "settings", "threads"], as_index=False).agg(
        train_time_s=("train_time_s", "mean"), sd=("train_time_s", "std"), n=("train_time_s", "size"))
    agg["rel_half"] = stats.half_width(agg["sd"].to_numpy(), agg["n"].to_numpy()) / agg["train_time_s"]
    # every group at once (a large sweep has thousands): sorted by group, then threads; the fewest threads first
    agg = agg[agg.groupby("group")["threads"].transform("nunique") >= 2]
    if agg.empty:
        return pd.DataFrame(columns=cols)
    agg = agg.sort_values(["group", "threads"], kind="stable")
    by_group = agg.groupby("group", sort=False)
    agg = agg.assign(base_threads=by_group["threads"].transform("first"),
                     base_time_s=by_group["train_time_s"].transform("first"),
                     base_rel_half=by_group["rel_half"].transform("first"))
    agg["speedup"] = agg["base_time_s"] / agg["train_time_s"]
    agg["ideal"] = agg["threads"] / agg["base_threads"]
    # The ratio's interval from both means' (first order: relative half-widths add in quadrature); NaN where
    # either side ran once. The base point's own speed-up (1) has none.
    rel = np.sqrt(agg["rel_half"] ** 2 + agg["base_rel_half"] ** 2).where(agg["threads"] != agg["base_threads"])
    agg["speedup_low"], agg["speedup_high"] = agg["speedup"] * (1 - rel), agg["speedup"] * (1 + rel)
    return agg.reset_index(drop=True)[cols]


def resource_correlations(runs: pd.DataFrame, method: str = "spearman") -> pd.DataFrame:
    """Correlation of each resource column with each hyper-parameter, per framework and dataset, over counted
    points (ok, uncontended) of the settings groups in which that hyper-parameter varied alone (group_key: every
    other setting fixed): across points that differ in several settings at once, a correlation would credit one
    hyper-parameter with another's effect. Within-group: each group's values (ranks, for Spearman's) less the
    group's mean, pooled over the groups; `n` the points, `groups` the groups; NaN where no group varied it."""
    df = ok_points(points(runs), "train_time_s")  # a run timed under load: its CPU use is not its own either
    df = df.assign(iterations=df["iterations_configured"])
    resources = [c for c in RESOURCES if c in runs.columns and df[c].notna().any()]
    cols = ["framework", "dataset", "resource", "hyper_parameter", "r", "n", "groups"]
    rows = []
    for hp in HYPER_PARAMETERS:
        axis = "length" if hp == "iterations" else hp
        varied = in_studies_varying(df, axis)
        varied = varied.assign(group=group_key(varied, {axis, "length_unit"} if axis == "length" else {axis}))
        for (framework, dataset), g in varied.groupby(["framework", "dataset"]):
            alone = g[g.groupby("group")[hp].transform("nunique") >= 2]
            for res in resources:
                r, n, k = _within_groups(alone, res, hp, method)
                rows.append({"framework": framework, "dataset": dataset, "resource": res, "hyper_parameter": hp,
                             "r": r, "n": n, "groups": k})
    return pd.DataFrame(rows, columns=cols)


def _within_groups(df: pd.DataFrame, a: str, b: str, method: str) -> tuple[float, int, int]:
    """The pooled within-group correlation of columns a and b (each group's values, or ranks, centred on the
    group's mean), the points and the groups it pooled."""
    both = df[["group"]].assign(x=pd.to_numeric(df[a], errors="coerce"), y=pd.to_numeric(df[b], errors="coerce"))
    both = both.dropna()
    if method == "spearman":
        both = both.assign(x=both.groupby("group")["x"].rank(), y=both.groupby("group")["y"].rank())
    centred = both[["x", "y"]] - both.groupby("group")[["x", "y"]].transform("mean")
    n, k = len(both), int(both["group"].nunique())
    if n < 3 or (centred["x"] == 0).all() or (centred["y"] == 0).all():
        return float("nan"), n, k
    return float(np.corrcoef(centred["x"], centred["y"])[0, 1]), n, k


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
    """Per framework x whose defaults x reading (x dataset x device), at each preset's own point
    (groups.preset_points: a sweep run beside it is not pooled in): mean accuracy and train time of its counted
    runs (ok; the time's timed without outside load), `n_ok` of them, `n_contended` ok runs whose times were left
    out for outside load,
    failures, and `settings` (the batch size and learning rate it ran). `reading` says how another framework's
    defaults were applied (own, settings, preset)."""
    df = preset_points(in_studies_varying(points(runs), "whose"))
    cols = ["framework", "dataset", "device", "whose", "reading", "is_own", "settings", "accuracy_pct",
            "train_time_s", "n_ok", "n_contended", "n_failed"]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(counted=df["status"] == "ok", busy=(df["status"] == "ok") & df["contended"],
                   failed=df["status"] != "ok",
                   settings=settings_label(df, {"whose", "reading", "length", "threads", "interop_threads",
                                                "library"}))
    keys = ["framework", "dataset", "device", "whose", "reading"]
    counts = df.groupby(keys, as_index=False).agg(n_ok=("counted", "sum"), n_contended=("busy", "sum"),
                                                  n_failed=("failed", "sum"), is_own=("is_own", "max"),
                                                  settings=("settings", "first"))
    means = ok_points(df).groupby(keys, as_index=False).agg(accuracy_pct=("accuracy_pct", "mean"),
                                                            train_time_s=("train_time_s", "mean"))
    return counts.merge(means, on=keys, how="left")[cols]


def sweep_table(runs: pd.DataFrame, param: str, metric: str) -> pd.DataFrame:
    """Mean `metric` of ok points per (settings group, `param` value), groups where `param` takes 2+ values.

    Failed points are kept as rows with `failed` > 0 (and a missing mean when all failed); ok points timed under
    outside load are counted in `contended` and averaged apart (`contended_mean`), never into the mean of a time
    (groups.load_bound; they count for an accuracy).
    ci_low/ci_high: the mean's 95 % interval (n_ok >= 2).
    """
    df = points(runs)
    if param == "length" and df["length_unit"].nunique() > 1:  # mixed units: compare in iterations
        df = df.assign(length=df["iterations_configured"], length_unit="iterations")
    df = in_studies_varying(df, param)
    cols = ["framework", "dataset", "device", "group", "settings", param, "length_unit", metric, "ci_low", "ci_high",
            "n_ok", "failed", "contended", "contended_mean", "statuses"]
    df = df[df[param].notna()]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(group=group_key(df, {param}), settings=settings_label(df, {param}),
                   ok=counted(df, metric), busy=(df["status"] == "ok") & df["contended"] & load_bound(metric))
    df = df.assign(val=df[metric].where(df["ok"]), busy_val=df[metric].where(df["busy"]))
    agg = df.groupby(["framework", "dataset", "device", "group", "settings", param, "length_unit"],
                     as_index=False).agg(**{metric: ("val", "mean"), "sd": ("val", "std"), "n_ok": ("ok", "sum"),
                                            "n": ("ok", "size"), "contended": ("busy", "sum"),
                                            "contended_mean": ("busy_val", "mean"),
                                            "statuses": ("status", lambda s: ",".join(sorted(set(s) - {"ok"})))})
    agg["failed"] = agg["n"] - agg["n_ok"] - agg["contended"]
    # each mean's interval on its metric's scale (a time's on the log scale, an accuracy's within 0-100 %)
    kept = df[df["ok"]]
    keys = ["framework", "dataset", "device", "group", "settings", param, "length_unit"]
    ci = stats.scaled_intervals(kept["val"], [kept[k] for k in keys], stats.scale_of(metric))
    agg = agg.merge(ci[["ci_low", "ci_high"]].rename_axis(keys).reset_index(), on=keys, how="left")
    sizes = agg.groupby("group")[param].transform("nunique")
    return agg[sizes > 1][cols].reset_index(drop=True)


def thin(samples: pd.DataFrame, column: str, limit: int) -> pd.DataFrame:
    """At most about `limit` readings per run of a long series: the series cut into limit / 2 buckets in time
    order, each keeping its lowest and its highest reading of `column` (the peak a chart exists to show is never
    dropped), and each run's first and last reading. Shorter runs are kept whole."""
    s = samples.sort_values(["run_id", "t"], kind="stable")
    size = s.groupby("run_id")["t"].transform("size")
    long = size > limit
    if not long.any():
        return s
    part = s[long]
    bucket = part.groupby("run_id").cumcount() * (limit // 2) // size[long]
    keys = [part["run_id"], bucket]
    lowest = part[column].fillna(np.inf).groupby(keys).idxmin()  # a missing reading is never an extreme
    highest = part[column].fillna(-np.inf).groupby(keys).idxmax()
    ends = part.groupby("run_id").head(1).index.union(part.groupby("run_id").tail(1).index)
    keep = set(lowest) | set(highest) | set(ends)
    return pd.concat([s[~long], part[part.index.isin(keep)]]).sort_values(["run_id", "t"], kind="stable")


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
    """Every test of every run's learning curve: its accuracy against the run's time to it, which is the training
    time so far plus the run's compile time (`compile_time_s`, the compile phase before training; 0 where none).
    `train_only_s` is the training time alone, as the curve has it."""
    cols = ["run_id", "framework", "dataset", "device", "status", "settings", "compile", "precision", "threads",
            "whose", "seed", "iteration", "train_time_s", "train_only_s", "compile_time_s", "accuracy_pct", "timing"]
    if curves is None or curves.empty or "kind" not in curves.columns:
        return pd.DataFrame(columns=cols)
    c = curves[(curves["kind"] == "test") & curves["accuracy"].notna() & curves["train_time_s"].notna()]
    if c.empty:
        return pd.DataFrame(columns=cols)
    df = points(runs)
    df = df.assign(settings=settings_label(df, set()), compile_time_s=df["compile_time_s"].fillna(0.0))
    c = c[["run_id", "iteration", "train_time_s", "accuracy"]].rename(columns={"train_time_s": "train_only_s"}).merge(
        df[["run_id", "framework", "dataset", "device", "status", "settings", "compile", "precision", "threads",
            "whose", "seed", "compile_time_s", "contended"]], on="run_id", how="inner")
    c["train_time_s"] = c["train_only_s"] + c["compile_time_s"]
    # a run timed under outside load keeps its curve, said as such: its times are not this machine's own
    c["timing"] = np.where(c["contended"].fillna(False).astype(bool), "under outside load", "quiet")
    c["accuracy_pct"] = c["accuracy"] * 100
    return c[cols].sort_values(["run_id", "train_time_s"], ignore_index=True)


def status_counts(runs: pd.DataFrame) -> pd.DataFrame:
    df = points(runs)
    if df.empty:
        return pd.DataFrame(columns=["framework", "dataset", "device", "status", "n"])
    return df.groupby(["framework", "dataset", "device", "status"], as_index=False).size().rename(
        columns={"size": "n"})


# ---------------------------------------------------------------------------------------------
# The compile and precision axes: what compiling and bfloat16 buy, and what they cost in accuracy
# ---------------------------------------------------------------------------------------------

def told(result: stats.Contrast | stats.Judgement, larger: str, smaller: str) -> str:
    """What a change's test tells: `larger` or `smaller` where told from noise; else, for a judgement, equivalent
    (within its margin) or inconclusive; for a contrast (no margin), inconclusive; or not testable."""
    if isinstance(result, stats.Judgement):
        return {"larger": larger, "smaller": smaller}.get(result.direction, result.direction)
    if result.test.why:
        return stats.UNTESTABLE
    if not result.told:
        return stats.INCONCLUSIVE
    return larger if result.estimate > 0 else smaller


def _by_seed(df: pd.DataFrame, keys: list[str], metrics: tuple[str, ...]) -> dict:
    """{group key: {metric: {seed: value}}}, a run without a seed keyed by its place in its group (what
    stats.change pairs by). Arrays a group at a time: a large study has tens of thousands of groups."""
    seeds = df["seed"].to_numpy(dtype=object)
    values = {m: df[m].to_numpy(dtype=float) for m in metrics}
    out = {}
    for key, rows in df.groupby(keys).indices.items():
        seed = [s if pd.notna(s) else i for i, s in enumerate(seeds[rows])]
        out[key] = {m: dict(zip(seed, values[m][rows])) for m in metrics}
    return out


def axis_speedups(runs: pd.DataFrame, axis: str, margins: stats.Margins | None = None) -> pd.DataFrame:
    """Per group of points alike but for `axis` (compile or precision): the training speed-up of its other value
    over its baseline (compiled over eager, bf16 over fp32) and what it did to the accuracy.

    Means over ok repeats. `speedup`: throughput with the other value / with the baseline (training time alone;
    > 1: faster); `accuracy_change_pp`: accuracy with it minus with the baseline (points); `compile_time_s`:
    the compile phase of the points with the other value (what compiling costs once). Only groups where both
    values ran ok. Each with its 95 % interval (`speedup_low`/`_high`, `change_low`/`_high`) and what the test
    tells (`speedup_told`: faster / slower / equivalent / inconclusive / not testable; `change_told`: higher /
    lower / ...), paired by seed where both values ran the same seeds (stats.judge; the speed-up on the log scale,
    equivalent within `margins`).
    """
    base, other = AXIS_PAIRS[axis]
    cols = ["framework", "dataset", "device", "whose", "threads", "settings", "with", axis, "speedup",
            "speedup_low", "speedup_high", "speedup_told", "base_throughput_img_s", "throughput_img_s",
            "base_accuracy_pct", "accuracy_pct", "accuracy_change_pp", "change_low", "change_high", "change_told",
            "base_train_time_s", "train_time_s", "compile_time_s", "n"]
    df = ok_points(points(runs), "throughput_img_s", positive=True)
    df = df[df[axis].isin([base, other])]
    if df.empty:
        return pd.DataFrame(columns=cols)
    # `with`: the other switches' values (the memory layout only where it is itself compared)
    rest = {"compile": ["precision"], "precision": ["compile"], "memory_format": ["compile", "precision"]}[axis]
    df = df.assign(group=group_key(df, {axis}), settings=settings_label(df, {axis, "compile", "precision"}),
                   **{"with": df[rest].astype(object).fillna("-").astype(str).agg(", ".join, axis=1)})
    agg = df.groupby(["group", axis], as_index=False).agg(
        framework=("framework", "first"), dataset=("dataset", "first"), device=("device", "first"),
        whose=("whose", "first"), threads=("threads", "first"), settings=("settings", "first"),
        **{"with": ("with", "first")}, throughput_img_s=("throughput_img_s", "mean"),
        accuracy_pct=("accuracy_pct", "mean"), train_time_s=("train_time_s", "mean"),
        compile_time_s=("compile_time_s", "mean"), n=("throughput_img_s", "size"))
    by_seed = _by_seed(df, ["group", axis], ("throughput_img_s", "accuracy_pct"))
    rows = []
    bases = agg[agg[axis] == base].set_index("group").to_dict("index")
    for o in agg[agg[axis] == other].sort_values("group").to_dict("records"):  # the groups with both values
        group = o["group"]
        if group not in bases:
            continue
        b = bases[group]
        speed = stats.judge_metric(by_seed[(group, other)]["throughput_img_s"],
                                   by_seed[(group, base)]["throughput_img_s"], "throughput_img_s", margins)
        change = stats.judge_metric(by_seed[(group, other)]["accuracy_pct"], by_seed[(group, base)]["accuracy_pct"],
                                    "accuracy_pct", margins)
        rows.append({**{k: o[k] for k in ("framework", "dataset", "device", "whose", "threads", "settings", "with")},
                     axis: other, "speedup": o["throughput_img_s"] / b["throughput_img_s"],
                     "speedup_low": math.exp(speed.low), "speedup_high": math.exp(speed.high),
                     "speedup_told": told(speed, "faster", "slower"), "change_low": change.low,
                     "change_high": change.high, "change_told": told(change, "higher", "lower"),
                     "base_throughput_img_s": b["throughput_img_s"], "throughput_img_s": o["throughput_img_s"],
                     "base_accuracy_pct": b["accuracy_pct"], "accuracy_pct": o["accuracy_pct"],
                     "accuracy_change_pp": o["accuracy_pct"] - b["accuracy_pct"],
                     "base_train_time_s": b["train_time_s"], "train_time_s": o["train_time_s"],
                     "compile_time_s": o["compile_time_s"], "n": int(min(b["n"], o["n"]))})
    order = {f: i for i, f in enumerate(FRAMEWORKS)}
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["dataset", "device", "framework", "whose", "threads", "with"],
                           key=lambda c: c.map(order) if c.name == "framework" else c, ignore_index=True)
