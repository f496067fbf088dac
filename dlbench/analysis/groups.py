"""What a verdict compares: the one definition every table, sentence, chart and guidance line reads its groups from.

A setting's group is one of
- a framework's default point: its own preset at the preset's own value of every hyper-parameter (default_points);
- a preset applied to a framework at that preset's own values, per reading (preset_points; the own preset's is the
  default point): a sweep run beside it (batch 256 under Caffe's preset) is never pooled into it;
- a sweep's values with the rest fixed (frames.group_key over the settings but the swept one).
The runs that count are ok; their times count where no outside load ran beside them (ok_points, counted: a
contended run counts for its accuracy, never its times; contended_count says how many were timed under load), and
a blocked test pairs the seeds every framework ran (shared_seeds, which names the ones left out).
Work is compared as work: images_trained says how many images a point trained, so that frameworks that trained
different numbers are also compared per image (per_image_time) and a verdict says so (unequal_work).

Every function takes a frame frames.points made (this module sits below frames: it imports none of it).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlbench.datasets import catalog
from dlbench.frameworks import registry
from dlbench.study import presets

# What a preset holds fixed: its hyper-parameters (one value each at its point; the swept ones first) and the
# machine's knobs (kept as they ran: a comparison matches them across frameworks).
DEFAULT_HYPER = ["batch_size", "learning_rate", "length", "length_unit", "network", "optimizer", "momentum",
                 "weight_decay"]
DEFAULT_KNOBS = ["threads", "interop_threads", "library"]
PRESET_KEYS = ["framework", "dataset", "device", "whose", "reading"]


# What outside load changes in a run: its times and what is made of them (throughput, the share of the peak, the CPU
# it got). What it learned (accuracy, losses) and the memory it held are its own whatever else ran, so a run timed
# under load still counts for them: leaving them out would throw away a measurement load cannot touch.
LOAD_BOUND = frozenset({"throughput_img_s", "test_throughput_img_s", "achieved_gflops", "peak_fraction",
                        "peak_fraction_fp32", "cpu_util_mean_pct", "cpu_util_peak_pct", "per_image"})


def load_bound(metric: str) -> bool:
    """Whether outside load changes `metric` (a time, or a figure made of one): a contended run does not count."""
    return metric in LOAD_BOUND or metric.endswith("_time_s")


def counted(df: pd.DataFrame, metric: str) -> pd.Series:
    """Which points count for `metric`: ok, with a value, and timed without outside load where load changes it."""
    keep = (df["status"] == "ok") & df[metric].notna()
    return keep & ~df["contended"] if load_bound(metric) else keep


def ok_points(df: pd.DataFrame, *metrics: str, positive: bool = False) -> pd.DataFrame:
    """The points a summary or a verdict counts: ok, with every one of `metrics` (positive ones, if asked). A run
    timed under outside load (`contended`; contended_count) counts with its times, and what is made of them,
    blanked (load_bound): it is left out of every time, and counts for its accuracy."""
    keep = df["status"] == "ok"
    out = df[keep]
    busy = out["contended"].astype(bool)
    if busy.any():
        out = out.copy()
        out.loc[busy, [c for c in out.columns if load_bound(c) and pd.api.types.is_numeric_dtype(out[c])]] = np.nan
    keep = pd.Series(True, index=out.index)
    for m in metrics:
        keep &= out[m].notna()
        if positive:
            keep &= out[m] > 0
    return out[keep]


def contended_count(df: pd.DataFrame) -> int:
    """How many ok points were timed under outside load (their times left out of every summary and verdict)."""
    return int(((df["status"] == "ok") & df["contended"]).sum())


def study_names(df: pd.DataFrame) -> pd.Series:
    """Each point's sub-studies as a set (empty sets when the `studies` column is absent)."""
    if "studies" not in df.columns:
        return pd.Series([frozenset()] * len(df), index=df.index)
    return df["studies"].apply(lambda s: frozenset(x.strip() for x in str(s).split(",") if x.strip())
                               if isinstance(s, str) else frozenset())


def in_studies_varying(df: pd.DataFrame, column: str) -> pd.DataFrame:
    """The points of the sub-studies in which `column` varies, when the config has sub-studies.

    A config of several sub-studies (the `studies` column) sweeps each axis in its own
    sub-study around the others' defaults; mixing them would compare unlike points. A
    sub-study varies `column` when it takes two or more values for one framework on one
    dataset and device (the frameworks' own defaults differ from each other, which is no sweep).
    Without sub-studies, or when no sub-study varies `column`, every point is kept.
    """
    names = study_names(df)
    if names.map(len).sum() == 0:
        return df
    varying = set()
    for study in set().union(*names):
        members = df[names.map(lambda s, study=study: study in s)]
        per_run = members.groupby(["framework", "dataset", "device"], dropna=False)[column].nunique(dropna=True)
        if (per_run > 1).any():
            varying.add(study)
    if not varying:
        return df
    return df[names.map(lambda s: bool(s & varying))]


def preset_points(df: pd.DataFrame, precision: str = "usual") -> pd.DataFrame:
    """Each preset as applied to each framework, at that preset's own point: per framework, dataset, device, whose
    defaults and reading, the points at the preset's own value of every hyper-parameter (DEFAULT_HYPER;
    _default_rows), never a sweep's other values run beside it. A framework's own preset gives its default point.

    Not a tuning grid's other cells; compile mode the framework's natural one. The machine's knobs
    (DEFAULT_KNOBS) are kept as they ran: a comparison matches them across frameworks. `precision`: "usual"
    (float32: like with like), or "study": the precision the study's scripts ran the framework in (registry
    `study_precision`: Theano and Torch's CIFAR-10 in float64) for its own defaults where this run has points at
    it, else float32; the `precision` column says which."""
    pts = df[df["natural_compile"] | df["compile"].isna()]  # Caffe, Theano: no compile switch
    if "tuning_grid" in pts.columns and "tuning_is_default" in pts.columns:
        in_grid = pts["tuning_grid"].notna() & ~pts["tuning_is_default"].map(lambda v: v is True or v == 1)
        pts = pts[~in_grid]
    if pts.empty:
        return pts
    pts = pts[pts["precision"].fillna("fp32") == _wanted_precision(pts, precision)]
    # by position: a frame put together from others may repeat index labels
    kept = [rows[_default_rows(pts.iloc[rows], _preset_values(whose, dataset))]
            for (_, dataset, _, whose, _), rows in pts.groupby(PRESET_KEYS).indices.items()]
    return pts.iloc[np.sort(np.concatenate(kept))] if kept else pts.iloc[:0]


def default_points(df: pd.DataFrame, precision: str = "usual") -> pd.DataFrame:
    """Each framework's own defaults: the points of its default setting, per dataset and device (preset_points of
    its own preset): a study sweeps one axis at a time around the defaults, so that no swept value enters
    "own defaults"."""
    return preset_points(df[df["is_own"]], precision)


def _wanted_precision(pts: pd.DataFrame, precision: str) -> pd.Series:
    wanted = pd.Series("fp32", index=pts.index, dtype=object)
    if precision != "study":
        return wanted
    family = pts["dataset"].map(_family)
    study = pd.Series([registry.FRAMEWORKS[f].study_precision.get(fam, "fp32")
                       if f in registry.FRAMEWORKS and own else "fp32"
                       for f, fam, own in zip(pts["framework"], family, pts["is_own"])], index=pts.index, dtype=object)
    has = pts[pts["precision"].fillna("fp32") == study]
    ran = set(zip(has["framework"], has["dataset"], has["device"]))
    at_study = [(f, d, v) in ran for f, d, v in zip(pts["framework"], pts["dataset"], pts["device"])]
    return study.where(at_study, "fp32")


def _preset_values(whose: str, dataset: str) -> dict:
    """A preset's batch size and learning rate (what a sweep around it holds): `whose` a preset of
    dlbench/study/presets.yaml (a framework's own, resolved), or a custom one (then the points alone decide)."""
    try:
        preset = presets.study_presets()[_family(dataset)][whose]
    except KeyError:
        return {}
    return {k: preset.get(k) for k in ("batch_size", "learning_rate") if preset.get(k) is not None}


def _default_rows(g: pd.DataFrame, preferred: dict) -> np.ndarray:
    """Which rows of one preset on one framework, dataset and device are at its value of each hyper-parameter: the
    preset's where the points have it (a sweep around it), else the value most of them share (every sweep but the
    axis' own runs at it; a config may set every point's length); none where two values tie: a study swept
    without a default there."""
    keep = np.ones(len(g), dtype=bool)
    for axis in DEFAULT_HYPER:
        values = g[axis].astype(object).where(g[axis].notna(), "-")[keep]
        counts = values.value_counts()
        if axis in preferred and preferred[axis] in set(values):
            value = preferred[axis]
        elif len(counts) == 1 or counts.iloc[0] > counts.iloc[1]:
            value = counts.index[0]
        else:
            return np.zeros(len(g), dtype=bool)
        keep[np.flatnonzero(keep)[(values != value).to_numpy()]] = False
    return keep


def _family(dataset: str) -> str:
    return catalog.family(dataset) if dataset in catalog.INFO else dataset


def shared_seeds(values: dict[str, pd.Series]) -> tuple[list, dict[str, list]]:
    """The seeds every group ran ({group: Series indexed by seed}), sorted, and per group the seeds it ran that
    others did not (what a blocked test leaves out, and says it left out)."""
    if not values:
        return [], {}
    common = set.intersection(*(set(v.index) for v in values.values()))
    left_out = {name: sorted(set(v.index) - common, key=str) for name, v in values.items()}
    return sorted(common, key=str), {name: seeds for name, seeds in left_out.items() if seeds}


def images_trained(df: pd.DataFrame) -> pd.Series:
    """The images each point trained: the record's `images_trained` (iterations done times the batch size), else
    iterations times batch size (records made before it was recorded)."""
    recorded = pd.to_numeric(df["images_trained"], errors="coerce") if "images_trained" in df.columns else None
    product = pd.to_numeric(df["iterations"], errors="coerce") * pd.to_numeric(df["batch_size"], errors="coerce")
    return product if recorded is None else recorded.fillna(product)


def unequal_work(g: pd.DataFrame) -> dict:
    """What differs in the work of the frameworks compared in `g` (counted points of one comparison): {"images":
    {framework: mean images trained}} where they trained different numbers of images (more than 1 % apart), and
    {"length": {framework: "4 epochs"}} where they ran different lengths. Empty where the work was the same."""
    out: dict = {}
    images = g.assign(images=images_trained(g)).groupby("framework")["images"].mean().dropna()
    if len(images) >= 2 and images.max() > images.min() * 1.01:
        out["images"] = {fw: float(v) for fw, v in images.items()}
    lengths = g.groupby("framework").apply(
        lambda f: ", ".join(sorted({f"{length:g} {unit}" for length, unit in zip(f["length"], f["length_unit"])
                                    if pd.notna(length)})), include_groups=False)
    if lengths.nunique() >= 2:
        out["length"] = lengths.to_dict()
    return out


def preset_length(framework: str, dataset: str) -> tuple[float, str] | None:
    """A framework's own preset's length: (value, "iterations" or "epochs"); None where it has no own preset."""
    try:
        preset = presets.resolve("own", framework, dataset)
    except (KeyError, ValueError):
        return None
    for unit in ("iterations", "epochs"):
        if preset.get(unit) is not None:
            return float(preset[unit]), unit
    return None


def shortened(df: pd.DataFrame) -> pd.Series:
    """True for an own-defaults point run at a length other than its preset's own (the default study runs every
    framework at 4 epochs; the published lengths are hours on MNIST)."""
    def one(framework, dataset, length, unit, iterations) -> bool:
        own = preset_length(framework, dataset)
        if own is None or pd.isna(length):
            return False
        value, own_unit = own
        ran = float(length) if unit == own_unit else (float(iterations) if own_unit == "iterations" else None)
        return ran is None or pd.isna(ran) or ran != value
    return pd.Series([bool(own) and one(f, d, length, unit, it) for f, d, length, unit, it, own in
                      zip(df["framework"], df["dataset"], df["length"], df["length_unit"], df["iterations_configured"],
                          df["is_own"])], index=df.index, dtype=bool)


def shortened_lengths(g: pd.DataFrame) -> dict[str, str]:
    """{framework: its preset's own length in words} for the frameworks whose own-defaults points in `g` ran
    shortened (see shortened)."""
    short = g[shortened(g)]
    out = {}
    for framework, dataset in short[["framework", "dataset"]].drop_duplicates().itertuples(index=False):
        value, unit = preset_length(framework, dataset)
        out[framework] = f"{value:,.0f} {unit}"
    return out
