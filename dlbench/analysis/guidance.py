"""The tables of the guidance for the study's two readers, and of its fastest configuration: training throughput
per core and per GB (a service provider), the soonest run to a target accuracy (a consumer), the library knobs
that served best, and the fastest framework, compiled or not, in either precision, to a target.

Plain functions on DataFrames, on dlbench.analysis.frames' points; dlbench.present.findings words them.
"""

from __future__ import annotations

import math

import pandas as pd

from dlbench.analysis import stats
from dlbench.analysis.frames import AXIS_PAIRS, by_seed, group_key, points, settings_label, time_to_accuracy_table
from dlbench.analysis.groups import ok_points
from dlbench.frameworks import registry


def efficiency(runs: pd.DataFrame) -> pd.DataFrame:
    """Training throughput per CPU thread allotted and per GB of peak resident memory, per settings group.

    Means over ok repeats of images per second (`throughput_img_s`), divided by the point's threads
    (the cores it was given) and by its peak resident memory (GB, the trainer's process tree); each repeat's
    value by seed in `per_core_by_seed` / `per_gb_by_seed`, for the tests (stats.leader).
    `base`/`base_settings`: the settings apart from the library knobs (`knobs`: library, threads, inter-op
    threads), so that the knobs can be compared with everything else fixed.
    """
    cols = ["framework", "dataset", "device", "settings", "base", "base_settings", "knobs", "library", "threads",
            "interop_threads", "throughput_img_s", "img_s_per_core", "img_s_per_gb", "n", "per_core_by_seed",
            "per_gb_by_seed"]
    df = ok_points(points(runs), "throughput_img_s", positive=True)
    if df.empty:
        return pd.DataFrame(columns=cols)
    knobs = {"library", "threads", "interop_threads"}
    df = df.assign(group=group_key(df, set()), settings=settings_label(df, set()), base=group_key(df, knobs),
                   base_settings=settings_label(df, knobs),
                   knobs=[f"{'default' if lib == '-' else lib} library, {t:g} threads"
                          + (f", {io:g} inter-op" if pd.notna(io) else "")
                          for lib, t, io in zip(df["library"], df["threads"], df["interop_threads"])],
                   img_s_per_core=df["throughput_img_s"] / df["threads"],
                   img_s_per_gb=df["throughput_img_s"] / (df["rss_peak_mb"] / 1024))
    df = df.assign(per_core_seed=list(zip(df["seed"], df["img_s_per_core"])),
                   per_gb_seed=list(zip(df["seed"], df["img_s_per_gb"])))
    out = df.groupby(["group"], as_index=False).agg(
        framework=("framework", "first"), dataset=("dataset", "first"), device=("device", "first"),
        settings=("settings", "first"), base=("base", "first"), base_settings=("base_settings", "first"),
        knobs=("knobs", "first"), library=("library", "first"), threads=("threads", "first"),
        interop_threads=("interop_threads", "first"), throughput_img_s=("throughput_img_s", "mean"),
        img_s_per_core=("img_s_per_core", "mean"), img_s_per_gb=("img_s_per_gb", "mean"),
        n=("throughput_img_s", "size"), per_core_by_seed=("per_core_seed", by_seed),
        per_gb_by_seed=("per_gb_seed", by_seed))
    return out[cols].sort_values(["dataset", "device", "framework", "settings"], ignore_index=True)


def time_to_target(runs: pd.DataFrame, curves: pd.DataFrame | None, by: tuple[str, ...] = ("framework",)
                   ) -> pd.DataFrame:
    """Per dataset and device: a target accuracy every framework (every `by` configuration) reached, and the soonest
    run of each to it.

    The target is the lowest of their best test accuracies in the learning curves (floored to 0.1 points): the
    best level all of them reached. A run's time to it is its compile time plus the cumulative training time at
    its first test at or above the target (time_to_accuracy_table). One row per framework (per `by`
    configuration, e.g. framework, compile, precision): its soonest run, with the compile time it includes;
    `setting_by_seed`: {seed: time to the target} of every run of the soonest run's setting that reached it (the
    repeats the tests compare: stats.leader); `runs_reaching` of its `runs`: that setting's runs. Only counted
    runs (ok, timed without outside load) set the target or are timed to it.
    """
    by = list(by)
    cols = ["dataset", "device", "target_pct", *by, "run_id", "settings", "time_to_target_s", "compile_time_s",
            "threads", "whose", "iteration", "runs_reaching", "runs", "setting_by_seed"]
    table = time_to_accuracy_table(runs, curves)
    counted = set(ok_points(points(runs), "train_time_s")["run_id"])  # timed without outside load: the target too
    table = table[table["run_id"].isin(counted)]
    if table.empty:
        return pd.DataFrame(columns=cols)
    table = table.assign(**{c: table[c].astype(object).fillna("-") for c in by})
    rows = []
    for (dataset, device), g in table.groupby(["dataset", "device"]):
        best = g.groupby(by)["accuracy_pct"].max()
        target = math.floor(best.min() * 10 + 1e-9) / 10
        for key, f in g.groupby(by):
            reached = f[f["accuracy_pct"] >= target - 1e-9].sort_values("train_time_s")
            first = reached.groupby("run_id", as_index=False).first().sort_values("train_time_s")
            soonest = first.iloc[0]
            mine = first[first["settings"] == soonest["settings"]]  # the soonest setting's runs, not all of them
            rows.append({"dataset": dataset, "device": device, "target_pct": target,
                         **dict(zip(by, key if isinstance(key, tuple) else (key,))),
                         "run_id": soonest["run_id"], "settings": soonest["settings"],
                         "time_to_target_s": soonest["train_time_s"], "compile_time_s": soonest["compile_time_s"],
                         "threads": soonest["threads"], "whose": soonest["whose"], "iteration": soonest["iteration"],
                         "runs_reaching": len(mine),
                         "runs": f.loc[f["settings"] == soonest["settings"], "run_id"].nunique(),
                         "setting_by_seed": by_seed(mine[["seed", "train_time_s"]].itertuples(index=False))})
    return pd.DataFrame(rows, columns=cols).sort_values(["dataset", "device", "time_to_target_s"], ignore_index=True)


def knob_wins(eff: pd.DataFrame) -> pd.DataFrame:
    """Per framework, dataset and device, over the settings groups of `efficiency` in which the library
    knobs (library, threads, inter-op threads) varied alone: each group's leader in throughput per core by seed
    (stats.leader), the knobs that led most groups (`winner`, in `wins` of `groups`) and in how many of them it
    was told apart from every other knob setting (`told`), and the largest group, best first (`example`), with
    its leader (`example_leader`)."""
    cols = ["framework", "dataset", "device", "winner", "wins", "told", "groups", "example", "example_leader"]
    rows = []
    for (framework, dataset, device), g in eff.groupby(["framework", "dataset", "device"]):
        varied = g.groupby("base")["knobs"].nunique()
        g = g[g["base"].isin(varied.index[varied > 1])]
        if g.empty:
            continue
        # each group's rows by position, read from arrays (a frame per group is what made large studies slow)
        where = g.groupby("base").indices
        groups = [where[base] for base in sorted(where)]
        knobs, per_core = g["knobs"].to_numpy(), g["per_core_by_seed"].to_numpy()
        leads = [stats.leader({knobs[i]: per_core[i] for i in rows}, True) for rows in groups]
        counts = pd.Series([r.name for r in leads]).value_counts()
        winner = counts.index[0]
        i = max(range(len(groups)), key=lambda j: len(groups[j]))  # the largest group, worded as the example
        told = sum(r.name == winner and r.state == "distinct" for r in leads)
        rows.append({"framework": framework, "dataset": dataset, "device": device, "winner": winner,
                     "wins": int(counts.iloc[0]), "told": told,
                     "groups": len(groups), "example": g.iloc[groups[i]].sort_values("img_s_per_core", ascending=False),
                     "example_leader": leads[i]})
    return pd.DataFrame(rows, columns=cols)


def fastest_configurations(runs: pd.DataFrame, curves: pd.DataFrame | None) -> pd.DataFrame:
    """Per dataset and device where the study varied compile or precision: every (framework, compile, precision)
    configuration's soonest run to the best accuracy all of them reached, compile time included (time_to_target
    by configuration), soonest first. Only frameworks with such a switch (registry: Caffe and Theano have none)."""
    df = points(runs)
    df = df[df["framework"].map(lambda f: f in registry.FRAMEWORKS and registry.get(f).honours("precision", "bf16"))]
    varied = df.groupby(["dataset", "device"])[list(AXIS_PAIRS)].nunique().max(axis=1) > 1
    keep = set(varied[varied].index)
    # a boolean Series, not a list: an empty list would select no columns instead of no rows
    df = df[pd.Series([(d, dev) in keep for d, dev in zip(df["dataset"], df["device"])], index=df.index, dtype=bool)]
    if curves is not None and "run_id" in curves.columns:
        curves = curves[curves["run_id"].isin(set(df["run_id"]))]
    return time_to_target(runs[runs["run_id"].isin(set(df["run_id"]))] if len(df) else runs.iloc[0:0], curves,
                          by=("framework", "compile", "precision"))
