"""The study's findings in words, computed from the results: results/findings.md.

Which framework is fastest and most accurate, which batch size and learning rate
served each framework best, whether a framework's own defaults are best for it, what
cross-applying settings did (and under which reading), whether one framework's best
settings carry over to another, what tuning around the defaults gained, what failed,
for each of the published study's observations whether this run agrees, disagrees or
did not test it (and why), and guidance for a service provider and a consumer.
The numbers come from dlbench.tables; this module words them.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dlbench import atomic
from dlbench.datasets import catalog
from dlbench.frameworks import registry
from dlbench.tables import (
    AXIS_PAIRS,
    NEAR_BEST_PP,
    PUBLISHED_CSV,
    READING_TEXT,
    READINGS,
    TIE,
    axis_speedups,
    carry_over,
    defaults_table,
    device_pairs,
    efficiency,
    fastest_configurations,
    group_key,
    in_studies_varying,
    leaders_vs_published,
    ok_points,
    points,
    published_device_ratios,
    published_ratios,
    read_published,
    settings_label,
    speedups_vs_published,
    time_to_target,
    tuning_table,
)

AGREES, DISAGREES = "agrees", "disagrees"
MNIST_LIKE = catalog.members("mnist")  # the published MNIST figures stand for these
CIFAR_LIKE = catalog.members("cifar10")


def not_tested(why: str) -> str:
    return f"not tested in this run ({why})"


@dataclass(frozen=True)
class Verdict:
    verdict: str  # "agrees", "disagrees" or "not tested in this run (why)"
    evidence: str = ""


def _frame(obj) -> pd.DataFrame:
    if obj is None:
        return pd.DataFrame()
    return obj if isinstance(obj, pd.DataFrame) else pd.read_parquet(obj)


def _stand_in(dataset: str) -> str:
    return dataset if dataset == "mnist" else f"{dataset} (standing in for MNIST)"


# ---------------------------------------------------------------------------------------------
# The tables
# ---------------------------------------------------------------------------------------------

def leaders(runs: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and device: the fastest framework (lowest mean train time of its ok points) and the most accurate."""
    cols = ["dataset", "device", "fastest", "fastest_train_time_s", "most_accurate", "most_accurate_pct",
            "frameworks"]
    df = ok_points(points(runs))
    rows = []
    for (dataset, device), g in df.groupby(["dataset", "device"]):
        t = g[g["train_time_s"].notna()].groupby("framework")["train_time_s"].mean()
        a = g[g["accuracy"].notna()].groupby("framework").agg(acc=("accuracy", "mean"), t=("train_time_s", "mean"))
        row = {"dataset": dataset, "device": device, "frameworks": ", ".join(sorted(set(g["framework"])))}
        if len(t):
            row.update(fastest=t.idxmin(), fastest_train_time_s=t.min())
        if len(a):
            best = a.sort_values(["acc", "t"], ascending=[False, True])
            best = best[best["acc"] >= best["acc"].iloc[0] - TIE].sort_values("t")
            row.update(most_accurate=best.index[0], most_accurate_pct=best["acc"].iloc[0] * 100)
        rows.append(row)
    return pd.DataFrame(rows, columns=cols)


def best_values(runs: pd.DataFrame, param: str) -> pd.DataFrame:
    """Per framework, dataset and device: the value of `param` with the best mean accuracy (ties: faster).

    Only where `param` took at least two values among ok points (in the sub-studies that vary it).
    """
    cols = ["framework", "dataset", "device", param, "accuracy_pct", "train_time_s", "tried"]
    df = ok_points(in_studies_varying(points(runs), param), "accuracy")
    rows = []
    for (framework, dataset, device), g in df.groupby(["framework", "dataset", "device"]):
        per = g.groupby(param).agg(acc=("accuracy", "mean"), t=("train_time_s", "mean"))
        if len(per) < 2:
            continue
        top = per[per["acc"] >= per["acc"].max() - TIE].sort_values("t", na_position="last")
        rows.append({"framework": framework, "dataset": dataset, "device": device, param: top.index[0],
                     "accuracy_pct": top["acc"].iloc[0] * 100, "train_time_s": top["t"].iloc[0],
                     "tried": ", ".join(f"{v:g}" for v in per.index)})
    return pd.DataFrame(rows, columns=cols)


def own_vs_cross(runs: pd.DataFrame) -> pd.DataFrame:
    """Per framework, dataset, device and reading with both: own-defaults accuracy vs the best cross-applied preset.

    Cross-applied: another framework's own defaults (registry.own_presets()), under the reading in
    `reading` (settings only, or the whole preset); custom presets are left out.
    """
    cols = ["framework", "dataset", "device", "reading", "own_accuracy_pct", "best_cross", "best_cross_accuracy_pct",
            "own_is_best"]
    table = defaults_table(runs)
    table = table[table["accuracy_pct"].notna()]
    rows = []
    for (framework, dataset, device), g in table.groupby(["framework", "dataset", "device"]):
        own = g[g["is_own"]]
        for reading, cross in g[~g["is_own"] & g["whose"].isin(registry.own_presets())].groupby("reading"):
            if own.empty:
                continue
            best = cross.sort_values("accuracy_pct", ascending=False).iloc[0]
            own_acc = own["accuracy_pct"].mean()
            rows.append({"framework": framework, "dataset": dataset, "device": device, "reading": READINGS[reading],
                         "own_accuracy_pct": own_acc, "best_cross": best["whose"],
                         "best_cross_accuracy_pct": best["accuracy_pct"],
                         "own_is_best": own_acc >= best["accuracy_pct"] - TIE * 100})
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
# The published observations
# ---------------------------------------------------------------------------------------------

def _fmt_means(means: pd.Series, unit: str, scale: float = 1.0) -> str:
    return ", ".join(f"{fw} {v * scale:.4g}{unit}" for fw, v in means.sort_values().items())


def observe_caffe_fastest_on_cpu(runs: pd.DataFrame) -> Verdict:
    df = ok_points(points(runs), "train_time_s")
    df = df[df["is_own"] & (df["device"] == "cpu") & df["dataset"].isin(MNIST_LIKE)]
    if df.empty:
        return Verdict(not_tested("no ok CPU point with the frameworks' own defaults on an MNIST-like dataset"))
    for dataset in MNIST_LIKE:
        means = df[df["dataset"] == dataset].groupby("framework")["train_time_s"].mean()
        if "caffe" in means.index and len(means) >= 2:
            fastest = means.idxmin()
            return Verdict(AGREES if fastest == "caffe" else DISAGREES,
                           f"{_stand_in(dataset)}, own defaults, CPU, mean training time: {_fmt_means(means, ' s')}")
    if "caffe" not in set(df["framework"]):
        return Verdict(not_tested("Caffe has no ok own-defaults CPU point on an MNIST-like dataset"))
    return Verdict(not_tested("no other framework ran with its own defaults on CPU beside Caffe"))


def observe_tensorflow_most_accurate(runs: pd.DataFrame) -> Verdict:
    df = ok_points(points(runs), "accuracy")
    df = df[df["is_own"] & df["dataset"].isin(MNIST_LIKE)]
    if df.empty:
        return Verdict(not_tested("no ok point with the frameworks' own defaults on an MNIST-like dataset"))
    for dataset in MNIST_LIKE:
        means = df[df["dataset"] == dataset].groupby("framework")["accuracy"].mean()
        if "tensorflow" in means.index and len(means) >= 2:
            top = means.max()
            agrees = means["tensorflow"] >= top - TIE
            return Verdict(AGREES if agrees else DISAGREES,
                           f"{_stand_in(dataset)}, own defaults, mean test accuracy: "
                           + ", ".join(f"{fw} {v * 100:.2f}%" for fw, v in means.sort_values(ascending=False).items()))
    if "tensorflow" not in set(df["framework"]):
        return Verdict(not_tested("TensorFlow has no ok own-defaults point on an MNIST-like dataset"))
    return Verdict(not_tested("no other framework ran with its own defaults beside TensorFlow"))


def observe_gpu_faster(runs: pd.DataFrame) -> Verdict:
    df = ok_points(points(runs), "train_time_s", positive=True)
    if not (df["device"] == "gpu").any():
        return Verdict(not_tested("no ok GPU point"))
    df = df.assign(key=group_key(df, {"device", "threads", "library"}))
    faster, slower = {}, {}
    for framework, g in df.groupby("framework"):
        means = g.groupby(["key", "device"])["train_time_s"].mean().unstack()
        if not {"cpu", "gpu"} <= set(means.columns):
            continue
        pairs = means[["cpu", "gpu"]].dropna()
        if pairs.empty:
            continue
        ratio = float((pairs["cpu"] / pairs["gpu"]).median())
        (faster if ratio > 1 else slower)[framework] = ratio
    if not faster and not slower:
        return Verdict(not_tested("no framework has ok CPU and GPU points with the same settings"))
    evidence = "median CPU time / GPU time over matched settings: " + ", ".join(
        f"{fw} {r:.3g}x" for fw, r in sorted({**faster, **slower}.items()))
    untested = sorted(set(df["framework"]) - set(faster) - set(slower))
    if untested:
        evidence += f"; not compared (no matched CPU and GPU points): {', '.join(untested)}"
    return Verdict(DISAGREES if slower else AGREES, evidence)


def observe_best_does_not_carry_over(runs: pd.DataFrame) -> Verdict:
    """The study's claim: the best settings of one framework often do not work as well for another.

    Tested per pair: the preset that served A best, applied to B, against B's best (tables.carry_over);
    it does not carry over when B loses more than NEAR_BEST_PP points with it. Agrees when that happens in
    more than half of the pairs, under the study's reading (settings only) where it ran, else the whole preset.
    """
    table = carry_over(runs)
    if table.empty:
        return Verdict(not_tested("no two frameworks each ran at least two frameworks' presets, among them "
                                  "the one that served the other best"))
    reading = "settings" if (table["reading"] == "settings").any() else "preset"
    pairs = table[table["reading"] == reading]
    misses = pairs[~pairs["carries_over"]]
    what = (f"under the {READINGS[reading]} reading" + (" (the study's)" if reading == "settings" else
                                                         " (not the study's reading: settings only did not run)"))
    evidence = (f"{what}, the preset that served framework A best, applied to framework B, fell more than "
                f"{NEAR_BEST_PP:g} points short of B's best in {len(misses)} of {len(pairs)} pairs: " + "; ".join(
                    f"{r.from_framework}'s best ({r.best_preset}'s) on {r.to_framework} ({r.dataset}/{r.device}): "
                    f"{r.accuracy_with_pct:.2f}% vs its best ({r.to_best_preset}'s) {r.to_best_pct:.2f}%"
                    for r in pairs.itertuples()))
    other = table[table["reading"] != reading]
    if not other.empty:
        evidence += (f". Under the {READINGS[other['reading'].iloc[0]]} reading: {int((~other['carries_over']).sum())}"
                     f" of {len(other)} pairs fell short")
    return Verdict(AGREES if len(misses) * 2 > len(pairs) else DISAGREES, evidence)


def _published_leaders_text(column: str, largest: bool) -> str:
    """The published leader per dataset and device, in words, from the published table."""
    if not PUBLISHED_CSV.exists():
        return "as published"
    pub = read_published()
    parts = []
    for dataset in ("mnist", "cifar10"):
        per = []
        for device in ("cpu", "gpu"):
            g = pub[(pub["dataset"] == dataset) & (pub["device"] == device)].set_index("framework")[column]
            if g.empty:
                continue
            best = g.max() if largest else g.min()
            top = sorted(g[(g - best).abs() < 0.005].index)
            per.append(f"{device.upper()} {' and '.join(top)}" + (" (tied)" if len(top) > 1 else ""))
        parts.append(f"{dataset}: {', '.join(per)}")
    return "; ".join(parts)


def _leaders_verdict(runs: pd.DataFrame, published: pd.DataFrame | None, what: str) -> Verdict:
    if published is None or published.empty:
        return Verdict(not_tested("the published table is missing"))
    table = leaders_vs_published(runs, published)
    if table.empty:
        return Verdict(not_tested("no dataset and device with ok own-defaults points of two or more frameworks of "
                                  "the published table"))
    agrees = table[f"{what}_agrees"]
    if what == "fastest":
        rows = [f"{r.dataset}/{r.device} among {r.frameworks}: {r.fastest} ({r.fastest_train_time_s:.4g} s); "
                f"published {r.published_fastest} ({r.published_fastest_train_time_s:.4g} s on "
                f"{r.published_dataset})" for r in table.itertuples()]
    else:
        rows = [f"{r.dataset}/{r.device} among {r.frameworks}: {r.most_accurate} ({r.most_accurate_pct:.2f}%); "
                f"published {r.published_most_accurate} ({r.published_most_accurate_pct:.2f}% on "
                f"{r.published_dataset})" for r in table.itertuples()]
    summary = f"own defaults, mean of ok points; same as published in {int(agrees.sum())} of {len(table)}: "
    return Verdict(AGREES if agrees.all() else DISAGREES, summary + "; ".join(rows))


def observe_fastest_per_dataset_device(runs: pd.DataFrame, published: pd.DataFrame | None = None) -> Verdict:
    return _leaders_verdict(runs, published, "fastest")


def observe_most_accurate_per_dataset_device(runs: pd.DataFrame, published: pd.DataFrame | None = None) -> Verdict:
    return _leaders_verdict(runs, published, "most_accurate")


def _published_speedups_text() -> str:
    if not PUBLISHED_CSV.exists():
        return "as published"
    ratios = published_device_ratios(read_published())
    return "; ".join(f"{dataset}: " + ", ".join(f"{r.framework} {r.published_cpu_over_gpu:.3g}x" for r in
                                                g.itertuples())
                     for dataset, g in ratios.groupby("dataset", sort=False))


def observe_gpu_speedup_order(runs: pd.DataFrame, published: pd.DataFrame | None = None) -> Verdict:
    """The frameworks rank by GPU speed-up of training (CPU time / GPU time, own defaults) as published.

    The ratios themselves depend on the CPU and the GPU (the study's: a 4-core Xeon E5-1620 and a GTX 1080
    Ti), so the order is what is compared, per dataset, among the frameworks with both devices here.
    """
    if published is None or published.empty:
        return Verdict(not_tested("the published table is missing"))
    table = speedups_vs_published(runs, published).dropna(subset=["published_cpu_over_gpu"])
    if table.empty:
        return Verdict(not_tested("no framework has ok own-defaults points on CPU and GPU with the same settings"))
    tested, same, words = 0, 0, []
    for dataset, g in table.groupby("dataset"):
        mine = list(g.sort_values("cpu_over_gpu", ascending=False)["framework"])
        theirs = list(g.sort_values("published_cpu_over_gpu", ascending=False)["framework"])
        ratios = ", ".join(f"{r.framework} {r.cpu_over_gpu:.3g}x (published {r.published_cpu_over_gpu:.3g}x)"
                           for r in g.itertuples())
        if len(g) < 2:
            words.append(f"{dataset}: only {ratios}, nothing to rank")
            continue
        tested += 1
        same += mine == theirs
        words.append(f"{dataset}: {ratios}; order here {' > '.join(mine)}, published {' > '.join(theirs)}")
    if not tested:
        return Verdict(not_tested("one framework per dataset has CPU and GPU points: " + "; ".join(words)))
    return Verdict(AGREES if same == tested else DISAGREES,
                   f"own defaults, CPU time / GPU time of training; same order as published on {same} of {tested} "
                   "datasets: " + "; ".join(words))


def observe_tensorflow_cifar_testing(runs: pd.DataFrame, published: pd.DataFrame | None = None) -> Verdict:
    """TensorFlow tests CIFAR-10 more slowly on GPU than on CPU (published: 5.76 s against 2.69 s)."""
    pairs = device_pairs(runs, "test_time_s")
    pairs = pairs[(pairs["framework"] == "tensorflow") & pairs["dataset"].isin(CIFAR_LIKE)]
    if pairs.empty:
        return Verdict(not_tested("no ok TensorFlow own-defaults points on a CIFAR-10 dataset on both CPU and GPU"))
    pub = ""
    if published is not None and not published.empty:
        tf = published[(published["framework"] == "tensorflow") & (published["dataset"] == "cifar10")]
        t = tf.set_index("device")["test_time_s"]
        if {"cpu", "gpu"} <= set(t.index):
            pub = f" (published: CPU {t['cpu']:.3g} s, GPU {t['gpu']:.3g} s)"
    slower = pairs["gpu_s"] > pairs["cpu_s"]
    evidence = "; ".join(f"{r.dataset}, own defaults, mean test time: CPU {r.cpu_s:.3g} s, GPU {r.gpu_s:.3g} s"
                         for r in pairs.itertuples()) + pub
    return Verdict(AGREES if slower.all() else DISAGREES, evidence)


def _sweep_groups(runs: pd.DataFrame, param: str, metric_cols=("train_time_s", "accuracy")):
    """Groups of ok points with the same other settings where `param` takes 2+ values; means per value."""
    df = ok_points(in_studies_varying(points(runs), param), *metric_cols)
    df = df[df[param].notna()]
    if df.empty:
        return []
    df = df.assign(key=group_key(df, {param}), settings=settings_label(df, {param}))
    # one groupby for every group (a large sweep has thousands), then each group's rows
    means = df.groupby(["key", "framework", param]).agg(t=("train_time_s", "mean"), acc=("accuracy", "mean"))
    first = df.groupby(["key", "framework"]).agg(settings=("settings", "first"), dataset=("dataset", "first"))
    groups = []
    for (key, framework), per in means.groupby(level=["key", "framework"], sort=True):
        if len(per) >= 2:
            groups.append((framework, first.at[(key, framework), "settings"], first.at[(key, framework), "dataset"],
                           per.droplevel(["key", "framework"])))
    return groups


def observe_batch_size(runs: pd.DataFrame) -> Verdict:
    df = points(runs)
    epoch_based = df[df["length_unit"] == "epochs"]
    groups = _sweep_groups(epoch_based, "batch_size")
    if not groups:
        if _sweep_groups(df, "batch_size"):
            return Verdict(not_tested("batch sizes were swept at a fixed number of iterations, not epochs"))
        return Verdict(not_tested("no batch-size sweep at a fixed number of epochs with ok points"))
    shorter = sum(per["t"].iloc[-1] < per["t"].iloc[0] for *_, per in groups)
    lower = [(fw, s, d, per) for fw, s, d, per in groups if per["acc"].iloc[-1] < per["acc"].iloc[0] - TIE]
    evidence = "; ".join(
        f"{fw} on {d} ({s}): batch {per.index[0]:g} -> {per.index[-1]:g}: time {per['t'].iloc[0]:.3g} -> "
        f"{per['t'].iloc[-1]:.3g} s, accuracy {per['acc'].iloc[0] * 100:.2f} -> {per['acc'].iloc[-1] * 100:.2f}%"
        for fw, s, d, per in groups)
    time_holds = shorter * 2 > len(groups)
    summary = (f"largest batch trained faster in {shorter} of {len(groups)} sweeps; it lowered accuracy in "
               f"{len(lower)} of them. ")
    return Verdict(AGREES if time_holds and lower else DISAGREES, summary + evidence)


def _saturates(lengths, acc) -> bool:
    """Accuracy gains less per unit of length in the last step than in the first."""
    first = (acc[1] - acc[0]) / (lengths[1] - lengths[0])
    last = (acc[-1] - acc[-2]) / (lengths[-1] - lengths[-2])
    return last <= first + TIE


def observe_length(runs: pd.DataFrame, curves: pd.DataFrame | None = None) -> Verdict:
    groups = _sweep_groups(points(runs), "length")
    if groups:
        grows = sum(per["t"].iloc[-1] > per["t"].iloc[0] for *_, per in groups)
        long_groups = [g for g in groups if len(g[3]) >= 3]
        if not long_groups:
            return Verdict(not_tested(f"lengths swept with only two values (time grew in {grows} of {len(groups)} "
                                      "sweeps), and saturation needs at least three"))
        sat = sum(_saturates(per.index.to_numpy(float), per["acc"].to_numpy(float)) for *_, per in long_groups)
        evidence = (f"training time grew with length in {grows} of {len(groups)} sweeps; accuracy gained less per "
                    f"unit of length at the end than at the start in {sat} of {len(long_groups)}. " + "; ".join(
                        f"{fw} on {d} ({s}): " + ", ".join(f"{i:g}: {r.t:.3g} s {r.acc * 100:.2f}%"
                                                          for i, r in per.iterrows())
                        for fw, s, d, per in long_groups))
        holds = grows * 2 > len(groups) and sat * 2 > len(long_groups)
        return Verdict(AGREES if holds else DISAGREES, evidence)
    # No length sweep: the learning curves show accuracy against iterations within each run.
    if curves is None or curves.empty or "kind" not in curves.columns:
        return Verdict(not_tested("no sweep over iterations/epochs and no learning curves"))
    ok_ids = set(points(runs).query("status == 'ok'")["run_id"])
    tests = curves[(curves["kind"] == "test") & curves["accuracy"].notna() & curves["run_id"].isin(ok_ids)]
    runs_sat, tested = 0, 0
    for _, g in tests.sort_values("iteration").groupby("run_id"):
        g = g.drop_duplicates("iteration")
        if len(g) < 3:
            continue
        tested += 1
        runs_sat += _saturates(g["iteration"].to_numpy(float), g["accuracy"].to_numpy(float))
    if not tested:
        return Verdict(not_tested("no sweep over iterations/epochs, and no run was tested 3+ times during training"))
    return Verdict(AGREES if runs_sat * 2 > tested else DISAGREES,
                   f"no length sweep; from the learning curves: accuracy gained less per iteration at the end than "
                   f"at the start in {runs_sat} of {tested} runs (training time grows with iterations within a run)")


@dataclass(frozen=True)
class Observation:
    key: str
    text: str
    check: Callable[..., Verdict]


OBSERVATIONS = [
    Observation("a", "On CPU, Caffe trains fastest on MNIST (each framework with its own defaults).",
                observe_caffe_fastest_on_cpu),
    Observation("b", "TensorFlow reaches the highest MNIST accuracy with its own defaults.",
                observe_tensorflow_most_accurate),
    Observation("c", "GPU training is faster than CPU training for every framework.", observe_gpu_faster),
    Observation("d", "The best settings of one framework often do not work as well for another: the preset that "
                     f"serves framework A best, applied to framework B, falls more than {NEAR_BEST_PP:g} points "
                     "short of B's best.", observe_best_does_not_carry_over),
    Observation("e", "Larger batch sizes shorten training time but can lower accuracy at a fixed number of epochs.",
                observe_batch_size),
    Observation("f", "Training time grows with more iterations/epochs while accuracy saturates.", observe_length),
    Observation("g", "The fastest framework with its own defaults, per dataset and device, is the published one ("
                + _published_leaders_text("train_time_s", largest=False) + ").",
                observe_fastest_per_dataset_device),
    Observation("h", "The most accurate framework with its own defaults, per dataset and device, is the published "
                     "one (" + _published_leaders_text("accuracy_pct", largest=True) + ").",
                observe_most_accurate_per_dataset_device),
    Observation("i", "The frameworks gain from the GPU in the published order (CPU / GPU training time: "
                + _published_speedups_text() + ").", observe_gpu_speedup_order),
    Observation("j", "TensorFlow tests CIFAR-10 more slowly on GPU than on CPU (published: 5.76 s against 2.69 s).",
                observe_tensorflow_cifar_testing),
]
# What each check reads beside the runs table.
_NEEDS_CURVES = {"f"}
_NEEDS_PUBLISHED = {"g", "h", "i", "j"}


def observations(runs: pd.DataFrame, curves: pd.DataFrame | None = None,
                 published: pd.DataFrame | None = None) -> dict[str, Verdict]:
    """Every observation's verdict; `published`: the published table (read from the package when None)."""
    if published is None and PUBLISHED_CSV.exists():
        published = read_published()
    out = {}
    for obs in OBSERVATIONS:
        if obs.key in _NEEDS_CURVES:
            out[obs.key] = obs.check(runs, curves)
        elif obs.key in _NEEDS_PUBLISHED:
            out[obs.key] = obs.check(runs, published)
        else:
            out[obs.key] = obs.check(runs)
    return out


# ---------------------------------------------------------------------------------------------
# Guidance for the study's two readers
# ---------------------------------------------------------------------------------------------

def provider_guidance(runs: pd.DataFrame) -> list[str]:
    """For a service provider: which framework and library settings give the most training throughput per core
    and per GB of memory (tables.efficiency); each sentence with its numbers, or what is missing."""
    eff = efficiency(runs)
    if eff.empty:
        return ["No ok point measured its training throughput: what serves a provider best cannot be said from "
                "this run."]
    out = []
    for (dataset, device), g in eff.groupby(["dataset", "device"]):
        for column, per in (("img_s_per_core", "per core (CPU thread allotted)"),
                            ("img_s_per_gb", "per GB of peak resident memory")):
            ranked = g[g[column].notna()].sort_values(column, ascending=False)
            if ranked.empty:
                out.append(f"On {dataset}/{device}, no point measured its memory: throughput {per} is missing.")
                continue
            best = ranked.drop_duplicates("framework")  # each framework's best settings, best first
            top = best.iloc[0]
            whole = (f"{top.throughput_img_s:.4g} img/s on {top.threads:g} threads" if column == "img_s_per_core"
                     else f"{top.throughput_img_s:.4g} img/s at {top.throughput_img_s / top[column]:.3g} GB")
            line = (f"On {dataset}/{device}, the most training throughput {per}: {top.framework} with "
                    f"{top.settings}, {top[column]:.4g} img/s ({whole})")
            if len(best) > 1:
                line += "; the best of the others: " + "; ".join(
                    f"{r.framework} {getattr(r, column):.4g} img/s ({r.settings})" for r in best.iloc[1:].itertuples())
            out.append(line + f" ({len(ranked)} settings of {len(best)} frameworks compared).")
    knobs_compared = False
    for (framework, dataset, device), g in eff.groupby(["framework", "dataset", "device"]):
        groups = [k for _, k in g.groupby("base") if k["knobs"].nunique() > 1]
        if not groups:
            continue
        knobs_compared = True
        wins = pd.Series([k.sort_values("img_s_per_core", ascending=False)["knobs"].iloc[0] for k in groups])
        winner, n = wins.value_counts().index[0], int(wins.value_counts().iloc[0])
        example = max(groups, key=len).sort_values("img_s_per_core", ascending=False)
        out.append(f"{framework} on {dataset}/{device}: {winner} gave the most throughput per core in {n} of "
                   f"{len(groups)} settings where the library knobs varied alone; e.g. with "
                   f"{example['base_settings'].iloc[0]}: " + ", ".join(
                       f"{r.knobs} {r.img_s_per_core:.4g} img/s per core ({r.img_s_per_gb:.4g} per GB)"
                       for r in example.itertuples()) + ".")
    if not knobs_compared:
        out.append("No library, thread or inter-op setting was varied with the other settings fixed: which library "
                   "settings serve a provider best cannot be said from this run (sweep `library`, `threads` or "
                   "`interop_threads`).")
    if not (eff["device"] == "gpu").any():
        out.append("No GPU point ran ok: what a GPU gives per core or per GB cannot be said from this run.")
    return out


def consumer_guidance(runs: pd.DataFrame, curves: pd.DataFrame | None) -> list[str]:
    """For a consumer: which framework and settings reach a target accuracy soonest (tables.time_to_target)."""
    ttt = time_to_target(runs, curves)
    if ttt.empty:
        return ["No ok point left a learning curve with test accuracies: how soon a framework reaches a target "
                "accuracy cannot be said from this run."]
    out = []
    for (dataset, device), g in ttt.groupby(["dataset", "device"]):
        first = g.iloc[0]
        line = (f"To reach {first.target_pct:.1f}% test accuracy on {dataset}/{device} (the best accuracy every "
                f"framework here reached), the soonest was {first.framework} with {first.settings}: "
                f"{first.time_to_target_s:.4g} s of training (test at iteration {first.iteration:g}; "
                f"{first.runs_reaching} of its {first.runs} ok runs reached it)")
        if len(g) > 1:
            line += "; then " + "; ".join(f"{r.framework} {r.time_to_target_s:.4g} s with {r.settings}"
                                           for r in g.iloc[1:].itertuples())
        else:
            line += "; no other framework ran ok here to compare"
        out.append(line + ".")
    return out


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------

def _cell(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.4g}"
    # Escaped: a cell may hold text from the data (a failure reason) that Markdown would pass on as HTML.
    return html.escape(str(v), quote=False).replace("|", "\\|").replace("\n", " ")


def md_table(df: pd.DataFrame, columns: dict[str, str]) -> str:
    cols = [c for c in columns if c in df.columns]
    lines = ["| " + " | ".join(columns[c] for c in cols) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def _tuning_section(runs: pd.DataFrame) -> list[str]:
    table = tuning_table(runs)
    out = ["## Tuned against own defaults", ""]
    if table.empty:
        return out + ["Not tested in this run: no sub-study tunes (`tune:` in the config).", ""]
    grids = table.drop_duplicates("tuning_grid")
    out += [f"{len(grids)} tuning grids ({', '.join(f'{int(n)} settings' for n in sorted(set(grids['tried'])))} "
            "each; mean over ok repeats). Per grid: its defaults, the setting with the best accuracy (ties: faster), "
            f"and the fastest setting within {NEAR_BEST_PP:g} points of the best accuracy; gain: accuracy points "
            "over the defaults, and training time saved in % of the defaults' (negative: longer).", "",
            md_table(table, {"framework": "framework", "dataset": "dataset", "device": "device",
                             "whose": "whose defaults", "choice": "setting", "batch_size": "batch size",
                             "learning_rate": "learning rate", "length": "length", "length_unit": "unit",
                             "accuracy_pct": "accuracy (%)", "train_time_s": "train time (s)",
                             "accuracy_gain_pp": "gain (points)", "time_saved_pct": "time saved (%)",
                             "failed": "cells with failures"}), ""]
    return out


def _config_name(r) -> str:
    return f"{r.framework} {r.compile}, {r.precision}"


def modern_section(runs: pd.DataFrame, curves: pd.DataFrame | None) -> list[str]:
    """Which framework, compiled or not, in which precision, is fastest to a target accuracy on this machine; what
    compiling and bfloat16 each bought per framework, and what they cost in accuracy."""
    out = ["## Compiled or not, and in which precision", ""]
    fast = fastest_configurations(runs, curves)
    speed = {axis: axis_speedups(runs, axis) for axis in AXIS_PAIRS}
    if fast.empty and all(t.empty for t in speed.values()):
        return out + ["Not tested in this run: no framework ran both eager and compiled, or both fp32 and bf16, "
                      "with its other settings the same (sweep `compile` and `precision`, as config/modern.yaml "
                      "does).", ""]
    df = points(runs)
    if "cpu_bf16" in runs.columns:
        flags = sorted({str(v) for v in runs["cpu_bf16"].dropna()})
        out += [f"This CPU's native bfloat16 instructions: {', '.join(flags) if flags else 'none'} (/proc/cpuinfo).",
                ""]
    for (dataset, device), g in fast.groupby(["dataset", "device"]):
        first = g.iloc[0]
        line = (f"**Fastest to {first.target_pct:.1f}% test accuracy on {dataset}/{device}** (the best accuracy every "
                f"configuration reached): {_config_name(first)} on {first.threads:g} thread(s) with "
                f"{first.whose} defaults, {first.time_to_target_s:.4g} s ({first.compile_time_s:.3g} s of it "
                "compiling)")
        if len(g) > 1:
            second = g.iloc[1]
            line += (f"; next {_config_name(second)}, {second.time_to_target_s:.4g} s "
                     f"({second.time_to_target_s / first.time_to_target_s:.2f}x as long)")
        out += [line + ".", "", md_table(g.assign(configuration=[_config_name(r) for r in g.itertuples()]),
                                         {"configuration": "framework, compile, precision", "threads": "threads",
                                          "whose": "defaults", "time_to_target_s": "to target (s)",
                                          "compile_time_s": "of it compiling (s)", "iteration": "at iteration",
                                          "runs_reaching": "runs reaching it", "runs": "runs"}), ""]
    for axis, (base, other) in AXIS_PAIRS.items():
        table = speed[axis]
        what = "Compiling" if axis == "compile" else "bfloat16 (mixed precision)"
        if table.empty:
            out += [f"{what}: not tested ({base} and {other} never both ran ok with the other settings the same).",
                    ""]
            continue
        lines = []
        for framework, f in table.groupby("framework", sort=False):
            text = (f"{framework}: {other} trained {f['speedup'].median():.2f}x as fast as {base} (median of "
                    f"{len(f)} pairs, {f['speedup'].min():.2f}-{f['speedup'].max():.2f}x), accuracy "
                    f"{f['accuracy_change_pp'].median():+.2f} points (median; {f['accuracy_change_pp'].min():+.2f} "
                    f"to {f['accuracy_change_pp'].max():+.2f})")
            if axis == "compile":
                text += f", compiling took {f['compile_time_s'].median():.3g} s (median)"
            lines.append(text)
        out += [f"{what}, against {base} with everything else the same (training time alone; the compile phase "
                "apart):", "", *[f"- {line}." for line in lines], ""]
    ok = ok_points(df, "achieved_gflops", positive=True)
    ok = ok[ok["framework"].map(lambda f: f in registry.FRAMEWORKS and registry.get(f).honours("precision", "bf16"))]
    if not ok.empty and "peak_fraction_fp32" in runs.columns and ok["peak_fraction_fp32"].notna().any():
        best = ok.sort_values("achieved_gflops", ascending=False).iloc[0]
        bf16 = pd.to_numeric(pd.Series([best.get("peak_gflops_bf16")]), errors="coerce").iloc[0]
        line = (f"The highest training throughput of these frameworks: {best.framework} {best.compile}, "
                f"{best.precision} on {best.threads:g} thread(s) ({best.whose} defaults), {best.achieved_gflops:.4g} "
                f"GFLOP/s, {100 * best.peak_fraction_fp32:.1f}% of this machine's float32 GEMM peak")
        if pd.notna(bf16) and bf16 > 0:
            line += f" and {100 * best.achieved_gflops / bf16:.1f}% of its bfloat16 GEMM peak"
        out += [line + ".", ""]
    return out


def render(runs: pd.DataFrame, curves: pd.DataFrame | None = None, published: pd.DataFrame | None = None) -> str:
    df = points(runs)
    n_ok = int((df["status"] == "ok").sum())
    out = ["# Findings of this run", ""]
    if df.empty:
        return "\n".join(out + ["No points in results/runs.parquet: nothing to report.", ""])
    readings = readings_ran(runs)
    out += [f"{len(df)} points ({n_ok} ok, {len(df) - n_ok} failed); frameworks: "
            f"{', '.join(sorted(set(df['framework'])))}; datasets: {', '.join(sorted(set(df['dataset'])))}; "
            f"devices: {', '.join(sorted(set(df['device'])))}; whose defaults: {', '.join(sorted(set(df['whose'])))}"
            + (f"; other frameworks' presets applied as: {', '.join(READINGS[r] for r in readings)}" if readings
               else "") + ". Means are over ok points; times are this machine's.", ""]

    out += ["## Fastest and most accurate framework", ""]
    lead = leaders(runs)
    out += [md_table(lead, {"dataset": "dataset", "device": "device", "fastest": "fastest",
                            "fastest_train_time_s": "its mean train time (s)", "most_accurate": "most accurate",
                            "most_accurate_pct": "its mean accuracy (%)", "frameworks": "frameworks compared"})
            if not lead.empty else "No ok points.", ""]
    vs = leaders_vs_published(runs, published)
    out += ["With their own defaults, next to the published table (among the same frameworks):", "",
            md_table(vs, {"dataset": "dataset", "device": "device", "frameworks": "frameworks compared",
                          "fastest": "fastest here", "published_fastest": "published fastest",
                          "fastest_agrees": "same", "most_accurate": "most accurate here",
                          "published_most_accurate": "published most accurate", "most_accurate_agrees": "same"})
            if not vs.empty else "Not compared: no dataset and device with own-defaults points of two frameworks "
                                 "of the published table.", ""]

    out += ["## Best batch size and learning rate per framework", "",
            "By mean accuracy of ok points, ties broken by training time; only where two or more values ran.", ""]
    for param, name in (("batch_size", "batch size"), ("learning_rate", "learning rate")):
        best = best_values(runs, param)
        out += [f"Best {name}:", ""]
        out += [md_table(best, {"framework": "framework", "dataset": "dataset", "device": "device",
                                param: f"best {name}", "accuracy_pct": "accuracy (%)",
                                "train_time_s": "train time (s)", "tried": "values tried"})
                if not best.empty else f"Not swept in this run (one {name} per framework).", ""]

    out += _tuning_section(runs)

    out += ["## Are a framework's own defaults best for it?", ""]
    ovc = own_vs_cross(runs)
    out += [md_table(ovc, {"framework": "framework", "dataset": "dataset", "device": "device",
                           "reading": "applied as", "own_accuracy_pct": "own defaults: accuracy (%)",
                           "best_cross": "best other defaults", "best_cross_accuracy_pct": "their accuracy (%)",
                           "own_is_best": "own is best"})
            if not ovc.empty else "Not tested: no framework ran both with its own defaults and another's.", ""]

    out += ["## What cross-applying settings did", ""]
    cross = cross_effects(runs)
    if readings:
        out += ["Other frameworks' presets were applied as " + "; and as ".join(READING_TEXT[r] for r in readings)
                + ".", ""]
    out += [md_table(cross, {"framework": "framework", "dataset": "dataset", "device": "device",
                             "whose": "whose defaults", "reading": "applied as", "n_ok": "ok", "n_failed": "failed",
                             "accuracy_pct": "accuracy (%)", "accuracy_change_pp": "vs own (points)",
                             "train_time_s": "train time (s)", "time_ratio_to_own": "time / own"})
            if not cross.empty else "Not tested: every framework ran with one preset only.", ""]

    out += ["## Do one framework's best settings carry over to another?", ""]
    carry = carry_over(runs)
    out += [f"The preset that served framework A best, applied to framework B, against B's best; it carries over "
            f"when B loses at most {NEAR_BEST_PP:g} points with it.", "",
            md_table(carry.assign(reading=carry["reading"].map(READINGS)),
                     {"dataset": "dataset", "device": "device", "reading": "applied as",
                      "from_framework": "A", "best_preset": "A's best preset", "to_framework": "B",
                      "accuracy_with_pct": "B with it (%)", "to_best_preset": "B's best preset",
                      "to_best_pct": "B's best (%)", "shortfall_pp": "shortfall (points)",
                      "carries_over": "carries over"})
            if not carry.empty else "Not tested: no two frameworks each ran two or more frameworks' presets.", ""]

    out += modern_section(runs, curves)

    out += ["## Failed points", ""]
    fails = failures(runs)
    if fails.empty:
        out += ["None: every point finished ok.", ""]
    else:
        by_status = ", ".join(f"{s} {n}" for s, n in fails.groupby("status")["n"].sum().items())
        out += [f"{int(fails['n'].sum())} of {len(df)} points failed ({by_status}).", "",
                md_table(fails, {"framework": "framework", "status": "status", "n": "points",
                                 "example_reason": "a reason"}), ""]

    ratios = published_ratios(runs, published) if published is not None else pd.DataFrame()
    out += ["## This machine next to the published figures", ""]
    if ratios.empty:
        out += ["Not compared: no ok point with the frameworks' own defaults on a dataset and device of the "
                "published table.", ""]
    else:
        out += ["Own-defaults points only; digits and fashion_mnist are compared with the published MNIST row.", "",
                md_table(ratios, {"dataset": "dataset", "published_dataset": "published", "framework": "framework",
                                  "device": "device", "train_time_s": "train time (s)",
                                  "published_train_time_s": "published (s)", "train_time_ratio": "ratio",
                                  "accuracy_pct": "accuracy (%)", "published_accuracy_pct": "published (%)",
                                  "accuracy_diff_pp": "difference (points)"}), ""]
    gpu = speedups_vs_published(runs, published)
    if not gpu.empty:
        out += ["GPU speed-up of training (CPU time / GPU time, own defaults, same settings on both):", "",
                md_table(gpu, {"dataset": "dataset", "framework": "framework", "cpu_s": "CPU (s)", "gpu_s": "GPU (s)",
                               "cpu_over_gpu": "speed-up", "published_cpu_over_gpu": "published speed-up"}), ""]

    out += ["## The study's observations", ""]
    verdicts = observations(runs, curves, published)
    for obs in OBSERVATIONS:
        v = verdicts[obs.key]
        out.append(f"- ({obs.key}) {obs.text} **{v.verdict}**" + (f". {v.evidence}" if v.evidence else ""))
    out.append("")

    out += ["## Guidance", "", "### For a service provider: throughput per core and per GB", "",
            "Training throughput in images per second (means over ok repeats), per core: divided by the threads "
            "a point was given; per GB: divided by its peak resident memory.", ""]
    out += [f"- {line}" for line in provider_guidance(runs)]
    out += ["", "### For a consumer: the soonest to a target accuracy", "",
            "From the learning curves: a run is timed at its first test at or above the target, so a run tested "
            "only at its end counts its whole training time.", ""]
    out += [f"- {line}" for line in consumer_guidance(runs, curves)]
    out.append("")
    return "\n".join(out)


def write_findings(runs_df, curves_df, path, published_csv=None) -> str:
    """Write the findings as Markdown to `path` (atomically); runs/curves: DataFrames or Parquet paths."""
    runs = _frame(runs_df)
    curves = _frame(curves_df)
    pub_path = Path(published_csv) if published_csv else PUBLISHED_CSV
    published = pd.read_csv(pub_path) if pub_path.exists() else None
    text = render(runs, curves, published)
    with atomic.atomic_path(path, suffix=".md") as tmp:
        tmp.chmod(0o644)
        tmp.write_text(text)
    return text
