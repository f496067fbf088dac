"""The published study's observations, each tested on this run: agrees, disagrees, tied (within noise), a
single run (no interval), or not tested (and why). An observation counts as agreeing or disagreeing only where
the data can tell: the leaders and differences are tested (dlbench.summary, dlbench.stats), not read off means.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from dlbench import stats
from dlbench.datasets import catalog
from dlbench.published import (
    PUBLISHED_CSV,
    device_pairs,
    leaders_vs_published,
    published_device_ratios,
    read_published,
    speedups_vs_published,
    stand_in,
)
from dlbench.summary import carry_over, framework_leaders, setting_values
from dlbench.tables import NEAR_BEST_PP, READINGS, TIE, group_key, in_studies_varying, ok_points, points, settings_label
from dlbench.verdicts import AGREES, DISAGREES, SINGLE, TIED, claim, combine, leader_text, not_tested, value

MNIST_LIKE = catalog.members("mnist")  # the datasets the MNIST observations are tested on, MNIST first
CIFAR_LIKE = catalog.members("cifar10")
EXAMPLES = 6  # sweeps worded in full in an observation's evidence (the rest counted)


@dataclass(frozen=True)
class Verdict:
    verdict: str  # agrees, disagrees, tied (within noise), single run: no interval, or not tested in this run (why)
    evidence: str = ""


def _own_claim(runs: pd.DataFrame, metric: str, claimed: str, cpu_only: bool) -> Verdict:
    """`claimed` leads on `metric` among the frameworks' own defaults, on the first MNIST-like dataset where it
    ran beside another framework (tested: summary.framework_leaders)."""
    table = framework_leaders(runs, metric)
    table = table[(table["comparison"] == "own defaults") & table["dataset"].isin(MNIST_LIKE)]
    if cpu_only:
        table = table[table["device"] == "cpu"]
    where = "CPU " if cpu_only else ""
    if table.empty:
        return Verdict(not_tested(f"no two frameworks have ok {where}points with their own defaults on an "
                                  "MNIST-like dataset"))
    table = table[table["result"].map(lambda r: claimed in r.intervals)]
    if table.empty:
        return Verdict(not_tested(f"{claimed} has no ok own-defaults {where}point beside another framework on an "
                                  "MNIST-like dataset"))
    order = {d: i for i, d in enumerate(MNIST_LIKE)}
    row = table.sort_values("dataset", key=lambda c: c.map(order)).iloc[0]
    what = "training time" if metric == "train_time_s" else "test accuracy"
    return Verdict(claim(row["result"], claimed), f"{stand_in(row['dataset'])}, {row['device']}, own defaults, "
                   f"{what} (mean [95 % interval]): {leader_text(row['result'], metric)}")


def observe_caffe_fastest_on_cpu(runs: pd.DataFrame) -> Verdict:
    return _own_claim(runs, "train_time_s", "caffe", cpu_only=True)


def observe_tensorflow_most_accurate(runs: pd.DataFrame) -> Verdict:
    return _own_claim(runs, "accuracy_pct", "tensorflow", cpu_only=False)


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

    Tested per pair: the preset that served A best, applied to B, against B's best (summary.carry_over); it
    falls short when B loses more than NEAR_BEST_PP points with it and B's two presets are told apart (the test
    in the table). Agrees when more than half of the pairs fall short, disagrees when more than half carry over,
    else tied; under the study's reading (settings only) where it ran, else the whole preset.
    """
    table = carry_over(runs)
    if table.empty:
        return Verdict(not_tested("no two frameworks each ran at least two frameworks' presets, among them "
                                  "the one that served the other best"))
    reading = "settings" if (table["reading"] == "settings").any() else "preset"
    pairs = table[table["reading"] == reading]
    counts = pairs["told"].value_counts()
    short, carries = int(counts.get("falls short", 0)), int(counts.get("carries over", 0))
    what = (f"under the {READINGS[reading]} reading" + (" (the study's)" if reading == "settings" else
                                                         " (not the study's reading: settings only did not run)"))
    evidence = (f"{what}, the preset that served framework A best, applied to framework B, fell more than "
                f"{NEAR_BEST_PP:g} points short of B's best, told apart, in {short} of {len(pairs)} pairs, carried "
                f"over in {carries}, and could not be told in {len(pairs) - short - carries}: " + "; ".join(
                    f"{r.from_framework}'s best ({r.best_preset}'s) on {r.to_framework} ({r.dataset}/{r.device}): "
                    f"{r.accuracy_with_pct:.2f}% vs its best ({r.to_best_preset}'s) {r.to_best_pct:.2f}%: {r.told}"
                    + (f" ({r.test.text()})" if r.told in ("falls short", "tied") else "")
                    for r in pairs.itertuples()))
    other = table[table["reading"] != reading]
    if not other.empty:
        evidence += (f". Under the {READINGS[other['reading'].iloc[0]]} reading: "
                     f"{int((other['told'] == 'falls short').sum())} of {len(other)} pairs fell short")
    if short * 2 > len(pairs):
        return Verdict(AGREES, evidence)
    if carries * 2 > len(pairs):
        return Verdict(DISAGREES, evidence)
    if (pairs["told"] == "single").all():
        return Verdict(SINGLE, evidence)
    return Verdict(TIED, evidence)


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
    """Per dataset and device: is the published leader (among the same frameworks) the leader here, told apart?
    Digits are compared by order only: no published figure is set beside them."""
    if published is None or published.empty:
        return Verdict(not_tested("the published table is missing"))
    table = leaders_vs_published(runs, published)
    if table.empty:
        return Verdict(not_tested("no dataset and device with ok own-defaults points of two or more frameworks of "
                                  "the published table"))
    metric = "train_time_s" if what == "fastest" else "accuracy_pct"
    tested = framework_leaders(runs, metric)
    tested = tested[tested["comparison"] == "own defaults"].set_index(["dataset", "device"])
    states, rows = [], []
    for r in table.itertuples():
        if (r.dataset, r.device) not in tested.index:
            continue
        result = tested.loc[(r.dataset, r.device), "result"]
        published_leader = getattr(r, f"published_{what}").split(" and ")
        state = combine([claim(result, p) for p in published_leader if p in result.intervals])
        states.append(state)
        figure = ""
        if r.figures_comparable:  # digits: the order only, no published figure beside them
            figure = (f" ({r.published_fastest_train_time_s:.4g} s on {r.published_dataset})" if what == "fastest"
                      else f" ({r.published_most_accurate_pct:.2f}% on {r.published_dataset})")
        rows.append(f"{stand_in(r.dataset)}/{r.device}: published {' and '.join(published_leader)}{figure}; here "
                    f"{leader_text(result, metric)}: {state}")
    if not states:
        return Verdict(not_tested("no dataset and device where the frameworks' own defaults could be compared"))
    return Verdict(combine(states), "own defaults, ok points, mean [95 % interval]: " + "; ".join(rows))


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


def _sweeps(runs: pd.DataFrame, param: str) -> list[tuple[str, str, str, pd.DataFrame]]:
    """Groups of ok, uncontended points with the same other settings where `param` took two or more values."""
    df = ok_points(in_studies_varying(points(runs), param), "train_time_s", "accuracy")
    df = df[df[param].notna()]
    if df.empty:
        return []
    df = df.assign(key=group_key(df, {param}), settings=settings_label(df, {param}))
    return [(g["framework"].iloc[0], g["settings"].iloc[0], g["dataset"].iloc[0], g)
            for _, g in df.groupby("key", sort=True) if g[param].nunique() >= 2]


def _ends(g: pd.DataFrame, param: str, metric: str):
    """The smallest and the largest value of `param`: their runs' {seed: metric}, and the test between them."""
    values = setting_values(g, metric, param)
    low, high = min(values), max(values)
    change, test = stats.difference(values[high], values[low])
    return values[low], values[high], change, test


def observe_batch_size(runs: pd.DataFrame) -> Verdict:
    """Larger batches train faster and can lower accuracy at a fixed number of epochs: per sweep, the largest
    batch against the smallest (paired by seed, or Welch's t). Agrees when the largest is told faster in more
    than half of the sweeps and told less accurate in one or more; disagrees when it is told slower in more than
    half, or faster but never told less accurate while told more accurate in every sweep; else tied."""
    df = points(runs)
    groups = _sweeps(df[df["length_unit"] == "epochs"], "batch_size")
    if not groups:
        if _sweeps(df, "batch_size"):
            return Verdict(not_tested("batch sizes were swept at a fixed number of iterations, not epochs"))
        return Verdict(not_tested("no batch-size sweep at a fixed number of epochs with ok points"))
    time_change, acc_change, words = [], [], []
    for fw, settings, dataset, g in groups:
        t0, t1, tc, tt = _ends(g, "batch_size", "train_time_s")
        a0, a1, ac, at = _ends(g, "batch_size", "accuracy_pct")
        time_change.append(tc)
        acc_change.append(ac)
        b0, b1 = g["batch_size"].min(), g["batch_size"].max()
        words.append(f"{fw} on {dataset} ({settings}): batch {b0:g} -> {b1:g}: time "
                     f"{value(stats.describe(t0.values()), ' s')} -> {value(stats.describe(t1.values()), ' s')} "
                     f"({_change(tc, 'shorter', 'longer')}; {tt.text()}), accuracy "
                     f"{value(stats.describe(a0.values()), '%')} -> {value(stats.describe(a1.values()), '%')} "
                     f"({_change(ac, 'higher', 'lower')}; {at.text()})")
    n = len(groups)
    faster, slower = time_change.count("smaller"), time_change.count("larger")
    lower, higher = acc_change.count("smaller"), acc_change.count("larger")
    summary = (f"the largest batch against the smallest, told apart by the test: faster in {faster} of {n} sweeps "
               f"(slower in {slower}), less accurate in {lower} (more accurate in {higher}); the rest within noise or "
               f"single runs. " + (f"The first {EXAMPLES} of the sweeps: " if n > EXAMPLES else ""))
    if time_change.count("single") == n:
        verdict = SINGLE
    elif faster * 2 > n and lower:
        verdict = AGREES
    elif slower * 2 > n or (faster * 2 > n and higher == n):
        verdict = DISAGREES
    else:
        verdict = TIED
    return Verdict(verdict, summary + "; ".join(words[:EXAMPLES]))


def _change(change: str, smaller: str, larger: str) -> str:
    return {"smaller": smaller, "larger": larger, "tied": TIED, "single": SINGLE}[change]


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


