"""This run next to the published study (Wu et al. 2019): times, accuracies, leaders and GPU speed-ups.

Like with like: a dataset's figures stand beside the published ones only where it has the published
dataset's shape and size (Fashion-MNIST for MNIST, labelled a stand-in); the embedded digits (1,797 small
images) are never timed or accuracy-compared against MNIST: only the frameworks' order on them is set
beside the published order.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench.analysis import frames, stats
from dlbench.analysis.frames import TIE, group_key, points
from dlbench.analysis.groups import default_points, ok_points
from dlbench.datasets import catalog
from dlbench.frameworks import registry
from dlbench.paths import PUBLISHED_CSV

# The published table names frameworks its own way (Torch for PyTorch).
PUBLISHED_FRAMEWORK = {f.name: f.published_as for f in registry.FRAMEWORKS.values() if f.published_as}
# Each dataset's family: whose published order it is set beside.
ORDER_FAMILY = {name: info["family"] for name, info in catalog.INFO.items()}


def _comparable(dataset: str) -> bool:
    """The dataset has its family's shape, classes and split sizes: its figures may stand beside the family's."""
    info, own = catalog.INFO[dataset], catalog.INFO[catalog.family(dataset)]
    return all(info[k] == own[k] for k in ("shape", "classes", "train_count", "test_count"))


# Each dataset whose times and accuracies stand beside the published ones, and the published dataset's name.
FAMILY = {name: ORDER_FAMILY[name] for name in catalog.INFO if _comparable(name)}


def stand_in(dataset: str) -> str:
    """How the findings and charts name a dataset beside the published figures."""
    family = ORDER_FAMILY.get(dataset, dataset)
    if dataset == family:
        return dataset
    if dataset in FAMILY:
        return f"{dataset} (a stand-in for {family}: its shape and size)"
    return f"{dataset} (not {family}: only the frameworks' order is compared)"


def read_published(path: str | Path | None = None) -> pd.DataFrame:
    return pd.read_csv(path or PUBLISHED_CSV)


def published_ratios(runs: pd.DataFrame, published: pd.DataFrame) -> pd.DataFrame:
    """This run's figures next to the study's published ones, per dataset x framework x device.

    Each framework's default point (frames.default_points), in the precision the study's scripts ran it where
    this run has it (Theano, and Torch on CIFAR-10, in float64: `precision` says which).
    train_time_ratio = this run's mean train time / published train time (same for test time);
    accuracy_diff_pp = this run's mean accuracy (%) - published accuracy (%).
    Fashion-MNIST is compared with the published MNIST row (a stand-in: MNIST's shape and size); digits
    are not (FAMILY).
    """
    cols = ["dataset", "published_dataset", "framework", "device", "precision", "n", "train_time_s",
            "published_train_time_s",
            "train_time_ratio", "test_time_s", "published_test_time_s", "test_time_ratio", "accuracy_pct",
            "published_accuracy_pct", "accuracy_diff_pp"]
    df = _at_defaults(ok_points(points(runs), "train_time_s"))
    if df.empty or published is None or published.empty:
        return pd.DataFrame(columns=cols)
    mine = df.groupby(["dataset", "framework", "device", "precision"], as_index=False).agg(
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


def _at_defaults(df: pd.DataFrame) -> pd.DataFrame:
    """The default points set beside the published figures: in the study's precision where this run has it, and
    the machine's knobs the most of them ran (one setting per framework: no thread count or library pooled)."""
    df = default_points(df, precision="study")
    if df.empty:
        return df
    knobs = ["threads", "interop_threads", "library"]
    key = df[knobs].astype(object).where(df[knobs].notna(), "-").astype(str).agg("|".join, axis=1)
    counts = key.groupby([df["framework"], df["dataset"], df["device"]]).value_counts()
    best = counts.groupby(level=[0, 1, 2]).idxmax().map(lambda t: t[-1])
    wanted = [best.get((f, d, v)) for f, d, v in zip(df["framework"], df["dataset"], df["device"])]
    return df[key.to_numpy() == np.array(wanted, dtype=object)]


def _top(values: pd.Series, *, largest: bool, tie: float) -> list[str]:
    """The index labels at the top of `values` (all of them within `tie` of the best)."""
    best = values.max() if largest else values.min()
    near = values[(values >= best - tie) if largest else (values <= best + tie)]
    return sorted(near.index)


def leaders_vs_published(runs: pd.DataFrame, published: pd.DataFrame | None) -> pd.DataFrame:
    """Per dataset and device: this run's fastest and most accurate framework (own defaults, ok points, means)
    next to the published ones among the same frameworks.

    Only frameworks with a published figure for the dataset's family and device are compared, and
    only where at least two are. Ties: every framework within TIE of the most accurate (published:
    within 0.005 points, the table's precision) is named; a tie agrees when the two sets share one.
    `figures_comparable`: the dataset may stand beside the published figures (FAMILY); where not (digits),
    only the order is compared and the findings state no published figure beside it.
    """
    cols = ["dataset", "published_dataset", "device", "frameworks", "fastest", "fastest_train_time_s",
            "published_fastest", "published_fastest_train_time_s", "fastest_agrees", "most_accurate",
            "most_accurate_pct", "published_most_accurate", "published_most_accurate_pct", "most_accurate_agrees",
            "figures_comparable"]
    df = _at_defaults(ok_points(points(runs), "train_time_s", "accuracy"))
    df = df[df["framework"].isin(PUBLISHED_FRAMEWORK)]
    if df.empty or published is None or published.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for (dataset, device), g in df.groupby(["dataset", "device"]):
        family = ORDER_FAMILY.get(dataset)
        pub = published[(published["dataset"] == family) & (published["device"] == device)]
        by_pub = {PUBLISHED_FRAMEWORK[f]: f for f in set(g["framework"])}
        pub = pub[pub["framework"].isin(by_pub)]
        pub = pub.assign(framework=pub["framework"].map(by_pub)).set_index("framework")
        mine = g[g["framework"].isin(pub.index)].groupby("framework").agg(
            t=("train_time_s", "mean"), acc=("accuracy_pct", "mean"))
        if len(mine) < 2:
            continue
        pub = pub.loc[mine.index]
        fastest, pub_fastest = mine["t"].idxmin(), pub["train_time_s"].idxmin()
        accurate = _top(mine["acc"], largest=True, tie=TIE * 100)
        pub_accurate = _top(pub["accuracy_pct"], largest=True, tie=0.005)
        rows.append({"dataset": dataset, "published_dataset": family, "device": device,
                     "frameworks": ", ".join(mine.index), "fastest": fastest,
                     "fastest_train_time_s": mine["t"].min(), "published_fastest": pub_fastest,
                     "published_fastest_train_time_s": pub["train_time_s"].min(),
                     "fastest_agrees": fastest == pub_fastest, "most_accurate": " and ".join(accurate),
                     "most_accurate_pct": mine["acc"].max(), "published_most_accurate": " and ".join(pub_accurate),
                     "published_most_accurate_pct": pub["accuracy_pct"].max(),
                     "most_accurate_agrees": bool(set(accurate) & set(pub_accurate)),
                     "figures_comparable": dataset in FAMILY})
    return pd.DataFrame(rows, columns=cols)


GPU_FASTER, CPU_FASTER = "GPU faster", "CPU faster"


def device_pairs(runs: pd.DataFrame, metric: str = "train_time_s", own_only: bool = True) -> pd.DataFrame:
    """Per framework and dataset: `metric` on CPU and on GPU over the same settings, their ratio, and how sure.

    Only settings that ran ok on both devices count, matched on everything but the device (threads, library,
    compile and precision included: a CPU's thread counts are settings, not repeats). `own_only`: each
    framework's default point only. `cpu_over_gpu`: the geometric mean over the matched settings of CPU mean /
    GPU mean (> 1: the GPU is faster), with its 95 % interval and test (stats.contrast of the log means, each
    setting's runs its repeats); `told`: GPU_FASTER or CPU_FASTER where the test tells them apart, else
    inconclusive, or not testable where a side has fewer than three runs or no spread. `parts`: that
    contrast's [(weight, values)], so two frameworks' speed-ups can be tested against each other.
    """
    cols = ["framework", "dataset", "cpu_s", "gpu_s", "cpu_over_gpu", "ratio_ci_low", "ratio_ci_high", "told",
            "test", "n_cpu", "n_gpu", "settings_compared", "parts"]
    df = ok_points(points(runs), metric, positive=True)
    if own_only:
        df = default_points(df)
    if df.empty or not (df["device"] == "gpu").any():
        return pd.DataFrame(columns=cols)
    df = df.assign(key=group_key(df, {"device"}))
    rows = []
    for (framework, dataset), g in df.groupby(["framework", "dataset"]):
        values = g.groupby(["key", "device"])[metric].agg(list).unstack()
        if not {"cpu", "gpu"} <= set(values.columns):
            continue
        matched = values[["cpu", "gpu"]].dropna()
        if matched.empty:
            continue
        k = len(matched)
        parts = [(1 / k, v) for v in matched["cpu"]] + [(-1 / k, v) for v in matched["gpu"]]
        result = stats.contrast(parts, log=True)
        if any(len(v) < stats.MIN_RUNS for v in [*matched["cpu"], *matched["gpu"]]):
            result = stats.Contrast(result.estimate, math.nan, math.nan,
                                    stats.Test(result.test.name, why=f"fewer than {stats.MIN_RUNS} runs on a side"))
        told = frames.told(result, GPU_FASTER, CPU_FASTER)
        rows.append({"framework": framework, "dataset": dataset,
                     "cpu_s": float(np.mean([np.mean(v) for v in matched["cpu"]])),
                     "gpu_s": float(np.mean([np.mean(v) for v in matched["gpu"]])),
                     "cpu_over_gpu": math.exp(result.estimate), "ratio_ci_low": math.exp(result.low),
                     "ratio_ci_high": math.exp(result.high), "told": told, "test": result.test,
                     "n_cpu": sum(map(len, matched["cpu"])), "n_gpu": sum(map(len, matched["gpu"])),
                     "settings_compared": k, "parts": parts})
    return pd.DataFrame(rows, columns=cols)


def ratio_text(r, unit: str = "x") -> str:
    """"4.2x [3.9, 4.6]", or "4.2x (not testable: why)": a device_pairs row's ratio in words."""
    if math.isnan(r.ratio_ci_low):
        return f"{r.cpu_over_gpu:.3g}{unit} ({stats.UNTESTABLE}: {r.test.why or 'no interval'})"
    return f"{r.cpu_over_gpu:.3g}{unit} [{r.ratio_ci_low:.3g}, {r.ratio_ci_high:.3g}]"


def published_device_ratios(published: pd.DataFrame, metric: str = "train_time_s") -> pd.DataFrame:
    """The published CPU / GPU ratio of `metric` per dataset and framework (as the published table names them)."""
    if published is None or published.empty:
        return pd.DataFrame(columns=["dataset", "framework", "published_cpu_over_gpu"])
    wide = published.pivot_table(index=["dataset", "framework"], columns="device", values=metric)
    wide = wide.dropna(subset=[c for c in ("cpu", "gpu") if c in wide.columns])
    return (wide["cpu"] / wide["gpu"]).rename("published_cpu_over_gpu").reset_index()


def speedups_vs_published(runs: pd.DataFrame, published: pd.DataFrame | None) -> pd.DataFrame:
    """This run's GPU speed-up of training (CPU time / GPU time, own defaults) next to the published one."""
    cols = ["dataset", "published_dataset", "framework", "cpu_s", "gpu_s", "cpu_over_gpu", "ratio_ci_low",
            "ratio_ci_high", "told", "test", "published_cpu_over_gpu", "settings_compared", "parts"]
    mine = device_pairs(runs, "train_time_s")
    ratios = published_device_ratios(published)
    if mine.empty or ratios.empty:
        return pd.DataFrame(columns=cols)
    mine = mine.assign(published_dataset=mine["dataset"].map(FAMILY),
                       published_framework=mine["framework"].map(PUBLISHED_FRAMEWORK))
    both = mine.merge(ratios.rename(columns={"dataset": "published_dataset", "framework": "published_framework"}),
                      on=["published_dataset", "published_framework"], how="left")
    return both[cols].sort_values(["dataset", "framework"], ignore_index=True)
