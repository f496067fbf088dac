"""The study's summary with its uncertainty: results/summary.parquet, frameworks compared as far as the data
can tell, the framework effect, and how many repeats a target interval needs.

Every mean here is over a setting's ok runs timed without outside load (frames.ok_points); failed runs and
contended ones are counted apart. Intervals and tests come from dlbench.analysis.stats; dlbench.present.findings words
them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlbench.analysis import stats
from dlbench.analysis.frames import (
    FRAMEWORKS,
    NEAR_BEST_PP,
    PRESET_ORDER,
    READINGS,
    SETTINGS,
    TIE,
    defaults_table,
    group_key,
    points,
    settings_label,
)
from dlbench.analysis.groups import (
    DEFAULT_KNOBS,
    default_points,
    images_trained,
    in_studies_varying,
    ok_points,
    preset_points,
    shared_seeds,
    shortened_lengths,
    unequal_work,
)
from dlbench.frameworks import registry

# The metrics of the summary, where a study has them (the GPU ones on GPU points only).
METRICS = ["train_time_s", "test_time_s", "accuracy", "throughput_img_s", "rss_peak_mb", "cpu_util_mean_pct",
           "compile_time_s", "gpu_util_mean_pct", "gpu_mem_peak_mb", "gpu_power_mean_w"]
SUMMARY_COLUMNS = ["framework", "dataset", "device", *[c for c in SETTINGS if c not in ("framework", "dataset",
                                                                                       "device")],
                   "settings", "metric", "n", "mean", "sd", "ci_low", "ci_high", "min", "max", "n_failed",
                   "n_contended"]
# The half-width a verdict's interval should reach (accuracy in points; times in % of their mean), and which way
# is better for each metric a verdict is taken on.
TARGETS = {"accuracy_pct": ("points", 0.5), "train_time_s": ("percent", 3.0), "test_time_s": ("percent", 3.0)}
LARGER_IS_BETTER = {"accuracy_pct": True, "train_time_s": False, "test_time_s": False, "throughput_img_s": True}


def summary_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per setting (every parameter of a point but its repeat and seed) and metric: n, mean, sd, the
    Student-t 95 % interval of the mean (ci_low, ci_high; on the metric's scale, stats.scale_of: an accuracy's
    within 0-1, a time's positive), min and max over the setting's ok, uncontended runs;
    `n_failed` and `n_contended`: its runs that failed, and ok runs left out for outside load."""
    df = points(runs)
    if df.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    df = df.assign(key=group_key(df, set()), settings=settings_label(df, set()), failed=df["status"] != "ok",
                   busy=(df["status"] == "ok") & df["contended"])
    counted = ok_points(df)
    per = df.groupby("key", sort=False)
    first = per[[c for c in SETTINGS] + ["settings"]].first()
    failed, contended = per["failed"].sum(), per["busy"].sum()
    rows = []
    for metric in METRICS:
        if metric not in counted.columns:
            continue
        values = pd.to_numeric(counted[metric], errors="coerce")
        if values.notna().sum() == 0:
            continue
        present = values.notna()
        agg = stats.scaled_intervals(values[present], counted["key"][present], stats.scale_of(metric))
        agg = agg[agg["count"] > 0]
        rows.append(pd.DataFrame({"key": agg.index, "metric": metric, "n": agg["count"].astype(int).to_numpy(),
                                  "mean": agg["mean"].to_numpy(), "sd": agg["std"].to_numpy(),
                                  "ci_low": agg["ci_low"].to_numpy(), "ci_high": agg["ci_high"].to_numpy(),
                                  "min": agg["min"].to_numpy(), "max": agg["max"].to_numpy()}))
    # A setting whose every run failed (or was contended) still has its rows: n 0, the counts apart.
    keys = pd.DataFrame({"key": first.index})
    table = (pd.concat(rows, ignore_index=True) if rows else  # every run failed, or ran under outside load
             pd.DataFrame(columns=["key", "metric", "n", "mean", "sd", "ci_low", "ci_high", "min", "max"]))
    missing = keys[~keys["key"].isin(set(table["key"]))].assign(metric="train_time_s", n=0)
    table = pd.concat([table, missing], ignore_index=True)
    table = table.join(first, on="key").assign(n_failed=table["key"].map(failed).astype(int),
                                               n_contended=table["key"].map(contended).astype(int))
    table["n"] = table["n"].astype(int)
    return table[SUMMARY_COLUMNS].sort_values(["dataset", "device", "framework", "settings", "metric"],
                                              ignore_index=True)


def framework_means(points_df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per framework, dataset and device: the mean of `metric` over the given (counted) points, its 95 % interval
    (ci_low, ci_high; two or more points; on the metric's scale) and n_ok: the per-framework bars of the charts."""
    cols = ["framework", "dataset", "device", metric, "n_ok", "ci_low", "ci_high"]
    df = points_df[points_df[metric].notna()]
    if df.empty:
        return pd.DataFrame(columns=cols)
    keys = [df["framework"], df["dataset"], df["device"]]
    agg = stats.scaled_intervals(pd.to_numeric(df[metric]), keys, stats.scale_of(metric)).reset_index()
    agg.columns = ["framework", "dataset", "device", *agg.columns[3:]]
    return agg.rename(columns={"mean": metric, "count": "n_ok"})[cols]


# ---------------------------------------------------------------------------------------------
# Frameworks compared: who leads, and can the data tell?
# ---------------------------------------------------------------------------------------------

def _values(g: pd.DataFrame, metric: str) -> dict:
    """{(setting, seed): value}: a framework's runs keyed so that two frameworks that ran the same settings and
    seeds pair up (stats.compare), and others are compared unpaired. The setting: `pair_label` where the frame
    has it (labelled once for many groups), else its settings but whose and how they were applied."""
    label = g["pair_label"] if "pair_label" in g.columns else settings_label(g, {"whose", "reading"})
    seed = g["seed"].where(g["seed"].notna(), pd.Series(range(len(g)), index=g.index).map(lambda i: f"run{i}"))
    return {(lab, s): float(v) for lab, s, v in zip(label, seed, g[metric])}


def comparisons(runs: pd.DataFrame) -> list[tuple[str, str, str, pd.DataFrame]]:
    """The sets of points on which frameworks are compared, per dataset and device: each framework's own
    defaults (its default point, frames.default_points: no swept value; frameworks matched on the machine's
    knobs, "own defaults" for the combination most of them ran, "own defaults (1 threads)" for any other), and
    each preset applied to several frameworks at its own point (groups.preset_points), per reading (that preset's
    owner on its own defaults beside the others under it). Points: ok and uncontended."""
    df = ok_points(points(runs))
    df = df.assign(pair_label=settings_label(df, {"whose", "reading"}))
    out = []
    for (dataset, device), g in df.groupby(["dataset", "device"]):
        out += [(dataset, device, what, own) for what, own in _own_defaults(default_points(g))]
        for whose, w in preset_points(g).groupby("whose"):  # each preset at its own point, not a sweep beside it
            for reading in ("settings", "preset"):
                under = _shared(w[w["reading"].isin(["own", reading])])
                if (under["reading"] == reading).any() and under["framework"].nunique() >= 2:
                    out.append((dataset, device, f"{whose}'s {READINGS[reading]}", under))
    return out


def _own_defaults(defaults: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The default points split by the machine's knobs (threads, inter-op threads, library), where two or more
    frameworks ran a combination: "own defaults" the one most frameworks ran (then the most points, then the
    most threads), the others named by their knobs."""
    if defaults.empty:
        return []
    knobs = defaults[DEFAULT_KNOBS].astype(object).where(defaults[DEFAULT_KNOBS].notna(), "-")
    groups = [(key, defaults.loc[rows]) for key, rows in knobs.groupby(DEFAULT_KNOBS).groups.items()]
    groups = [(key, g) for key, g in groups if g["framework"].nunique() >= 2]
    if not groups:
        return []
    def rank(item):
        key, g = item
        threads = key[0] if isinstance(key[0], (int, float)) else -1
        return (-g["framework"].nunique(), -len(g), -threads)
    groups.sort(key=rank)
    out = [("own defaults", groups[0][1])]
    for (threads, interop, library), g in groups[1:]:
        parts = [f"{threads:g} threads" if threads != "-" else "", f"{interop:g} inter-op" if interop != "-" else "",
                 str(library) if library not in ("-", "default") else ""]
        out.append((f"own defaults ({', '.join(p for p in parts if p)})", g))
    return out


def _shared(g: pd.DataFrame) -> pd.DataFrame:
    """The points of the settings every framework of `g` ran (one preset swept on some frameworks only is
    compared where all ran it), or all of them where the frameworks share none."""
    common = set.intersection(*(set(f["pair_label"]) for _, f in g.groupby("framework"))) if len(g) else set()
    return g[g["pair_label"].isin(common)] if common else g


def framework_leaders(runs: pd.DataFrame, metric: str, margins: stats.Margins | None = None) -> pd.DataFrame:
    """Per comparison (see comparisons) and `metric`: the leading framework, and whether it is told from each
    other one (stats.leader: paired by setting and seed where both ran the same ones, else Welch's t; Holm over
    the rivals; equivalent within `margins`). `result`: the stats.Leader; `settings`: how many settings each
    framework's runs span; `work`: what the frameworks did not do alike (groups.unequal_work), `per_image`: the
    leader per 1,000 images trained where they trained different numbers (training time only); `shortened`:
    {framework: its preset's length} for own defaults run at another length."""
    cols = ["dataset", "device", "comparison", "metric", "frameworks", "leader", "state", "settings", "result",
            "work", "per_image", "shortened"]
    rows = []
    for dataset, device, what, g in comparisons(runs):
        g = g[g[metric].notna()]
        if g["framework"].nunique() < 2:
            continue
        values = {fw: _values(f, metric) for fw, f in g.groupby("framework")}
        result = stats.leader(values, LARGER_IS_BETTER[metric], metric, margins)
        spans = {fw: int(f["pair_label"].nunique()) for fw, f in g.groupby("framework")}
        work = unequal_work(g)
        rows.append({"dataset": dataset, "device": device, "comparison": what, "metric": metric,
                     "frameworks": ", ".join(sorted(values, key=_framework_order)), "leader": result.name,
                     "state": result.state, "settings": spans, "result": result, "work": work,
                     "per_image": _per_image_leader(g, metric, margins) if "images" in work else None,
                     "shortened": shortened_lengths(g)})
    return pd.DataFrame(rows, columns=cols)


PER_IMAGES = 1000  # a time per image is stated per 1,000 images trained (or tested)


def _per_image_leader(g: pd.DataFrame, metric: str, margins: stats.Margins | None) -> stats.Leader | None:
    """The leader on `metric` per 1,000 images trained, where the frameworks compared trained different numbers of
    images (a training time only: an accuracy has no per-image reading)."""
    if metric != "train_time_s":
        return None
    g = g.assign(per_image=g["train_time_s"] / images_trained(g) * PER_IMAGES).dropna(subset=["per_image"])
    if g["framework"].nunique() < 2:
        return None
    values = {fw: _values(f, "per_image") for fw, f in g.groupby("framework")}
    return stats.leader(values, False, "train_time_s", margins)


def _framework_order(name: str) -> int:
    return FRAMEWORKS.index(name) if name in FRAMEWORKS else len(FRAMEWORKS)


def setting_values(df: pd.DataFrame, metric: str, by: str) -> dict[object, dict]:
    """{value of `by`: {seed: metric}} over the points of one settings group (a sweep's; points already counted:
    ok and uncontended), runs without a value left out."""
    df = df[df[metric].notna()]
    seeds = [s if pd.notna(s) else f"run{i}" for i, s in enumerate(df["seed"].to_numpy())]
    out: dict[object, dict] = {}
    for value, seed, v in zip(df[by].to_numpy(), seeds, df[metric].to_numpy(dtype=float)):
        out.setdefault(value, {})[seed] = float(v)
    return out


# ---------------------------------------------------------------------------------------------
# The framework effect: the same network, data and settings on several frameworks
# ---------------------------------------------------------------------------------------------

def framework_effect(runs: pd.DataFrame, min_seeds: int = stats.MIN_RUNS,
                     margins: stats.Margins | None = None) -> pd.DataFrame:
    """Per setting that several frameworks ran with the same network, data and settings (a whole preset), each
    with `min_seeds` or more seeds: does the framework matter?

    The test the design calls for (`test`): the seed is a block, over the seeds every framework ran (the two-way
    ANOVA with the seed as block for three or more frameworks, on log times; the paired t for two); a seed some
    framework lacks is left out of it (`seeds_left_out`: {framework: seeds}); only where fewer than `min_seeds`
    seeds are shared, the one-way ANOVA (on log times; Welch's t for two). `verdict`: "differ" (its p below
    ALPHA), "equivalent" (every two frameworks equivalent within the margin: two one-sided tests each, all of
    which must pass), "inconclusive", or "untestable". The one-way ANOVA and Friedman's rank test are kept beside
    it (`anova`, `friedman`) for the reader."""
    cols = ["dataset", "device", "settings", "network", "metric", "frameworks", "n_per_framework", "means",
            "anova", "anova_p", "friedman", "friedman_p", "test", "test_p", "verdict", "closest", "seeds_left_out"]
    df = ok_points(points(runs))
    if df.empty:
        return pd.DataFrame(columns=cols)
    # The same settings include the same compile mode and precision. A framework with no compile switch (Caffe,
    # Theano) runs as an eager one does; JAX's natural mode is compiled, so its points are compared with the
    # others' compiled ones (a sub-study that runs every framework eager and compiled gets both comparisons).
    compiled = df["compile"].fillna("eager")
    df = df.assign(compile=compiled, natural_compile=compiled == "eager", precision=df["precision"].fillna("fp32"))
    df = df.assign(settings=settings_label(df, {"reading"}))
    df = df.assign(key=group_key(df, {"framework", "reading"}))
    df = df[["key", "framework", "seed", "accuracy_pct", "train_time_s", "dataset", "device", "settings", "network"]]
    rows = []
    for _, g in df.groupby("key"):
        per = {fw: f for fw, f in g.groupby("framework")}
        per = {fw: f for fw, f in per.items() if f["seed"].nunique() >= min_seeds}
        if len(per) < 2:
            continue
        for metric in ("accuracy_pct", "train_time_s"):
            values = {fw: f.dropna(subset=[metric]).drop_duplicates("seed").set_index("seed")[metric]
                      for fw, f in per.items()}
            order = sorted(values, key=_framework_order)
            to_scale = np.log if metric == "train_time_s" else np.asarray  # a framework's effect on time: a factor
            anova = stats.anova([to_scale(values[fw].to_numpy()) for fw in order])
            # the blocked tests on the seeds every framework ran; one framework's missing seed leaves that seed
            # out (and says so), not the blocking
            seeds, left_out = shared_seeds(values)
            blocks = len(seeds) >= min_seeds
            matrix = [[values[fw][s] for fw in order] for s in seeds]
            no_blocks = f"fewer than {min_seeds} seeds every framework ran"
            fried = stats.friedman(matrix) if blocks else stats.Test("Friedman (seed as block)", why=no_blocks)
            blocked = (stats.blocked_anova(to_scale(np.array(matrix))) if blocks
                       else stats.Test("two-way ANOVA (seed as block)", why=no_blocks))
            judged = ({fw: values[fw][seeds].to_dict() for fw in order} if blocks
                      else {fw: values[fw].to_dict() for fw in order})
            test, verdict, closest = _effect_verdict(judged, metric, blocks, anova, blocked, margins)
            first = g.iloc[0]
            rows.append({"dataset": first["dataset"], "device": first["device"], "settings": first["settings"],
                         "network": first["network"], "metric": metric, "frameworks": ", ".join(order),
                         "n_per_framework": ", ".join(f"{fw} {len(values[fw])}" for fw in order),
                         "means": {fw: stats.describe(values[fw], scale=stats.scale_of(metric)) for fw in order},
                         "anova": anova, "anova_p": anova.p, "friedman": fried, "friedman_p": fried.p, "test": test,
                         "test_p": test.p, "verdict": verdict, "closest": closest,
                         "seeds_left_out": left_out if blocks else {}})
    return pd.DataFrame(rows, columns=cols)


def _effect_verdict(values: dict[str, dict], metric: str, paired_by_seed: bool, anova: stats.Test,
                    blocked: stats.Test, margins: stats.Margins | None) -> tuple[stats.Test, str, object]:
    """(the design's test, its verdict, the judgement of the closest two frameworks: what the data could have
    detected or which equivalence held last)."""
    names = list(values)
    pairs = [stats.judge_metric(values[a], values[b], metric, margins) for i, a in enumerate(names)
             for b in names[i + 1:]]
    if len(names) == 2:
        test = pairs[0].test
    else:
        test = blocked if paired_by_seed else anova
    closest = min(pairs, key=lambda j: abs(j.estimate) if np.isfinite(j.estimate) else np.inf)
    if test.why:  # a pair without spread leaves the design's test standing; it only cannot be shown equivalent
        return test, "untestable", closest
    if test.p < stats.ALPHA:
        return test, "differ", closest
    if all(j.word != stats.UNTESTABLE and j.tost_p < stats.ALPHA for j in pairs):
        return test, "equivalent", max(pairs, key=lambda j: j.tost_p)
    return test, "inconclusive", closest


# ---------------------------------------------------------------------------------------------
# How many repeats: the half-width reached, and the runs a target would need
# ---------------------------------------------------------------------------------------------

def repeats_needed(runs: pd.DataFrame) -> pd.DataFrame:
    """Per setting and metric a verdict is taken on (TARGETS): the interval's half-width reached with n runs,
    the target (accuracy: points; times: % of the mean), and about how many runs would bring it under it."""
    cols = ["framework", "dataset", "device", "settings", "metric", "n", "mean", "half_width", "target",
            "target_unit", "reached", "runs_needed"]
    table = summary_table(runs)
    table = table[table["n"] > 0]
    if table.empty:
        return pd.DataFrame(columns=cols)
    scale = {"accuracy": ("accuracy_pct", 100.0), "train_time_s": ("train_time_s", 1.0),
             "test_time_s": ("test_time_s", 1.0)}
    rows = []
    for r in table[table["metric"].isin(scale)].itertuples():
        metric, factor = scale[r.metric]
        unit, target = TARGETS[metric]
        mean, sd = r.mean * factor, r.sd * factor
        limit = target if unit == "points" else abs(mean) * target / 100
        half = stats.half_width(sd, r.n) if r.n >= 2 else np.nan
        rows.append({"framework": r.framework, "dataset": r.dataset, "device": r.device, "settings": r.settings,
                     "metric": metric, "n": r.n, "mean": mean, "half_width": half, "target": target,
                     "target_unit": unit, "reached": bool(np.isfinite(half) and half <= limit),
                     "runs_needed": stats.repeats_for(sd, limit) if r.n >= 2 else None})
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------------------------------------
# Cross-application: does one framework's best preset carry over to another?
# ---------------------------------------------------------------------------------------------

def carry_over(runs: pd.DataFrame, margins: stats.Margins | None = None) -> pd.DataFrame:
    """For every ordered pair of frameworks (A, B), per dataset, device and reading: the preset that served A
    best (highest mean accuracy, ties: faster), applied to B, against the preset that served B best.

    Only the frameworks' own presets count (registry.own_presets(); custom ones are left out), and only
    frameworks that ran at least two of them. A reading's pairs use its cross-applied points and the
    frameworks' own-defaults points. `shortfall_pp`: B's best accuracy minus B's accuracy with A's best
    (points). `told`, an equivalence verdict on B's runs with its best preset against B's runs with A's
    (stats.judge, paired by seed where both ran the same ones): "carries over" (the same preset, or equivalent
    within the accuracy margin by two one-sided tests: a real difference smaller than the margin still carries
    over), "falls short" (B's best told better, beyond the margin's reach), "inconclusive"
    (neither), or "not testable" (a side of fewer than three runs, or no spread). `carries_over` is the
    means' reading (a shortfall of at most NEAR_BEST_PP), kept for the charts.
    """
    cols = ["dataset", "device", "reading", "from_framework", "best_preset", "from_accuracy_pct", "to_framework",
            "accuracy_with_pct", "to_best_preset", "to_best_pct", "shortfall_pp", "carries_over", "told", "test"]
    table = defaults_table(runs)
    table = table[table["accuracy_pct"].notna() & table["whose"].isin(PRESET_ORDER)]
    df = ok_points(preset_points(in_studies_varying(points(runs), "whose")), "accuracy_pct")
    rows = []
    for (dataset, device), g in table.groupby(["dataset", "device"]):
        here = df[(df["dataset"] == dataset) & (df["device"] == device)]
        for reading in ("settings", "preset"):
            r = g[g["reading"].isin(["own", reading])]
            if not (r["reading"] == reading).any():
                continue
            pts = here[here["reading"].isin(["own", reading])]
            per = {fw: f.groupby("whose").agg(acc=("accuracy_pct", "mean"), t=("train_time_s", "mean"))
                   for fw, f in r.groupby("framework")}
            per = {fw: f.sort_values(["acc", "t"], ascending=[False, True]) for fw, f in per.items() if len(f) >= 2}
            for a, fa in per.items():
                best = fa.index[0]
                for b, fb in per.items():
                    if b == a or best not in fb.index:
                        continue
                    shortfall = fb["acc"].iloc[0] - fb.loc[best, "acc"]
                    mine = pts[pts["framework"] == b]
                    test = stats.judge_metric(*(_values(mine[mine["whose"] == w], "accuracy_pct")
                                                for w in (fb.index[0], best)), "accuracy_pct", margins)
                    if best == fb.index[0] or (test.word != stats.UNTESTABLE and test.tost_p < stats.ALPHA):
                        told = "carries over"  # B's best itself, or within the margin of it (even if told apart)
                    else:
                        told = "falls short" if test.word == stats.BETTER else test.word
                    rows.append({"dataset": dataset, "device": device, "reading": reading, "from_framework": a,
                                 "best_preset": best, "from_accuracy_pct": fa["acc"].iloc[0], "to_framework": b,
                                 "accuracy_with_pct": fb.loc[best, "acc"], "to_best_preset": fb.index[0],
                                 "to_best_pct": fb["acc"].iloc[0], "shortfall_pp": shortfall,
                                 "carries_over": bool(shortfall <= NEAR_BEST_PP), "told": told, "test": test})
    return pd.DataFrame(rows, columns=cols)


# ---------------------------------------------------------------------------------------------
# Settings against settings: the best batch size and learning rate, own defaults against others'
# ---------------------------------------------------------------------------------------------

def best_values(runs: pd.DataFrame, param: str, margins: stats.Margins | None = None) -> pd.DataFrame:
    """Per framework, dataset, device and the other settings: the value of `param` with the best mean accuracy,
    and whether it is told from the runner-up (stats.leader over the values; Holm over them).

    Only where `param` took at least two values among ok points (in the sub-studies that vary it).
    """
    cols = ["framework", "dataset", "device", "settings", param, "accuracy_pct", "state", "tried", "result"]
    df = ok_points(in_studies_varying(points(runs), param), "accuracy_pct")
    df = df[df[param].notna()]
    if df.empty:
        return pd.DataFrame(columns=cols)
    df = df.assign(key=group_key(df, {param}), settings=settings_label(df, {param}))
    df = df[["key", param, "seed", "accuracy_pct", "framework", "dataset", "device", "settings"]]
    rows = []
    for _, g in df.groupby("key", sort=True):
        if g[param].nunique() < 2:
            continue
        result = stats.leader(setting_values(g, "accuracy_pct", param), True, "accuracy_pct", margins)
        first = g.iloc[0]
        rows.append({"framework": first["framework"], "dataset": first["dataset"], "device": first["device"],
                     "settings": first["settings"], param: result.name,
                     "accuracy_pct": result.intervals[result.name]["mean"], "state": result.state,
                     "tried": ", ".join(f"{v:g}" for v in sorted(g[param].unique())), "result": result})
    return pd.DataFrame(rows, columns=cols)


def own_vs_cross(runs: pd.DataFrame, margins: stats.Margins | None = None) -> pd.DataFrame:
    """Per framework, dataset, device and reading with both: own-defaults accuracy vs the best cross-applied preset.

    Cross-applied: another framework's own defaults (registry.own_presets()), under the reading in
    `reading` (settings only, or the whole preset); custom presets are left out. `told`: "own better",
    "other better", equivalent, inconclusive or not testable (stats.judge of the two presets' runs, within the
    accuracy margin); `test`: its judgement.
    """
    cols = ["framework", "dataset", "device", "reading", "own_accuracy_pct", "best_cross", "best_cross_accuracy_pct",
            "own_is_best", "told", "test"]
    table = defaults_table(runs)
    table = table[table["accuracy_pct"].notna()]
    df = ok_points(preset_points(in_studies_varying(points(runs), "whose")), "accuracy_pct")
    rows = []
    for (framework, dataset, device), g in table.groupby(["framework", "dataset", "device"]):
        own = g[g["is_own"]]
        here = df[(df["framework"] == framework) & (df["dataset"] == dataset) & (df["device"] == device)]
        for reading, cross in g[~g["is_own"] & g["whose"].isin(registry.own_presets())].groupby("reading"):
            if own.empty:
                continue
            best = cross.sort_values("accuracy_pct", ascending=False).iloc[0]
            own_acc = own["accuracy_pct"].mean()
            test = stats.judge_metric(_values(here[here["is_own"]], "accuracy_pct"),
                                      _values(here[(here["whose"] == best["whose"]) & (here["reading"] == reading)],
                                              "accuracy_pct"), "accuracy_pct", margins)
            told = {"larger": "own better", "smaller": "other better"}.get(test.direction, test.direction)
            rows.append({"framework": framework, "dataset": dataset, "device": device, "reading": READINGS[reading],
                         "own_accuracy_pct": own_acc, "best_cross": best["whose"],
                         "best_cross_accuracy_pct": best["accuracy_pct"],
                         "own_is_best": own_acc >= best["accuracy_pct"] - TIE * 100, "told": told, "test": test})
    return pd.DataFrame(rows, columns=cols)


def cross_effects(runs: pd.DataFrame) -> pd.DataFrame:
    """Each framework under each preset: accuracy and time, and their change against its own defaults."""
    table = defaults_table(runs)
    if table.empty or table["whose"].nunique() < 2:
        return pd.DataFrame()
    own = table[table["is_own"]].groupby(["framework", "dataset", "device"]).agg(
        own_acc=("accuracy_pct", "mean"), own_t=("train_time_s", "mean")).reset_index()
    out = table.merge(own, on=["framework", "dataset", "device"], how="left")
    out["accuracy_change_pp"] = out["accuracy_pct"] - out["own_acc"]
    out["time_ratio_to_own"] = out["train_time_s"] / out["own_t"]
    out["reading"] = out["reading"].map(READINGS)
    return out.drop(columns=["own_acc", "own_t"]).sort_values(["dataset", "device", "framework", "whose", "reading"],
                                                              ignore_index=True)


def readings_ran(runs: pd.DataFrame) -> list[str]:
    """The readings under which other frameworks' presets were applied in this run (settings, preset)."""
    present = set(points(runs)["reading"])
    return [r for r in ("settings", "preset") if r in present]


def failures(runs: pd.DataFrame) -> pd.DataFrame:
    """Failed points (status other than ok) counted by framework and status."""
    df = points(runs)
    bad = df[df["status"] != "ok"]
    if bad.empty:
        return pd.DataFrame(columns=["framework", "status", "n", "example_reason"])
    return bad.groupby(["framework", "status"], as_index=False).agg(
        n=("status", "size"), example_reason=("reason", lambda r: next((str(x) for x in r if pd.notna(x)), "")))


# ---------------------------------------------------------------------------------------------
# The tables findings.md words beside the ones above: repeats per metric, the most throughput
# ---------------------------------------------------------------------------------------------

def repeats_by_metric(table: pd.DataFrame) -> pd.DataFrame:
    """repeats_needed's table per metric: settings with two or more runs (`spread`) and how many of them reach
    the target, their median half-width and n, the widest one's, the runs that would bring every setting under
    the target (NaN: none computed), and the settings that ran once."""
    cols = ["metric", "spread", "reached", "median_half_width", "median_n", "widest_half_width", "widest_framework",
            "widest_settings", "widest_n", "runs_needed", "ran_once"]
    rows = []
    for metric, g in table.groupby("metric", sort=False):
        spread = g[g["n"] >= 2]
        row = {"metric": metric, "spread": len(spread), "ran_once": int((g["n"] < 2).sum())}
        if len(spread):
            worst = spread.sort_values("half_width", ascending=False).iloc[0]
            needed = spread["runs_needed"].dropna()
            row.update(reached=int(spread["reached"].sum()), median_half_width=spread["half_width"].median(),
                       median_n=int(spread["n"].median()), widest_half_width=worst.half_width,
                       widest_framework=worst.framework, widest_settings=worst.settings, widest_n=worst.n,
                       runs_needed=int(needed.max()) if len(needed) else np.nan)
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def top_throughput(df: pd.DataFrame) -> pd.Series | None:
    """The ok point of a framework with the compile and precision switches (registry) with the most achieved
    GFLOP/s, where the machine's float32 peak is known; None where there is none. df: frames.points."""
    ok = ok_points(df, "achieved_gflops", positive=True)
    ok = ok[ok["framework"].map(lambda f: f in registry.FRAMEWORKS and registry.get(f).honours("precision", "bf16"))]
    if ok.empty or "peak_fraction_fp32" not in df.columns or not ok["peak_fraction_fp32"].notna().any():
        return None
    return ok.sort_values("achieved_gflops", ascending=False).iloc[0]
