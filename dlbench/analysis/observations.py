"""The published study's observations, each tested on this run: agrees, disagrees, equivalent within the margin,
inconclusive, not testable (fewer than three runs a side, or no spread) or not tested (and why). An observation
counts as answered only where the data can tell: the leaders and differences are tested (dlbench.analysis.summary,
dlbench.analysis.stats), not read off means; an observation that pools several sweeps corrects their tests (Holm).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from dlbench.analysis import stats
from dlbench.analysis.frames import NEAR_BEST_PP, READINGS, group_key, points, settings_label
from dlbench.analysis.groups import in_studies_varying, ok_points
from dlbench.analysis.published import (
    CPU_FASTER,
    GPU_FASTER,
    PUBLISHED_CSV,
    device_pairs,
    leaders_vs_published,
    published_device_ratios,
    ratio_text,
    read_published,
    speedups_vs_published,
    stand_in,
)
from dlbench.analysis.summary import carry_over, framework_leaders, setting_values
from dlbench.analysis.verdicts import (
    AGREES,
    DISAGREES,
    INCONCLUSIVE,
    claim,
    claim_any,
    combine,
    judgement_text,
    leader_text,
    not_tested,
    shortened_text,
    untestable,
    value,
    work_text,
)
from dlbench.datasets import catalog

MNIST_LIKE = catalog.members("mnist")  # the datasets the MNIST observations are tested on, MNIST first
CIFAR_LIKE = catalog.members("cifar10")
EXAMPLES = 6  # sweeps worded in full in an observation's evidence (the rest counted)


@dataclass(frozen=True)
class Verdict:
    verdict: str  # agrees, disagrees, equivalent within the margin, inconclusive, not testable or not tested (why)
    evidence: str = ""


def _own_claim(runs: pd.DataFrame, metric: str, claimed: str, cpu_only: bool,
               margins: stats.Margins | None = None) -> Verdict:
    """`claimed` leads on `metric` among the frameworks' own defaults, on the first MNIST-like dataset where it
    ran beside another framework (tested: summary.framework_leaders)."""
    table = framework_leaders(runs, metric, margins)
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
    notes = "".join(f". {text[0].upper()}{text[1:]}" for text in
                    (work_text(row["work"], row["per_image"]), shortened_text(row["shortened"])) if text)
    return Verdict(claim(row["result"], claimed), f"{stand_in(row['dataset'])}, {row['device']}, own defaults, "
                   f"{what} (mean [95 % interval]): {leader_text(row['result'], metric)}{notes}")


def observe_caffe_fastest_on_cpu(runs: pd.DataFrame, margins: stats.Margins | None = None) -> Verdict:
    return _own_claim(runs, "train_time_s", "caffe", cpu_only=True, margins=margins)


def observe_tensorflow_most_accurate(runs: pd.DataFrame, margins: stats.Margins | None = None) -> Verdict:
    return _own_claim(runs, "accuracy_pct", "tensorflow", cpu_only=False, margins=margins)


def observe_gpu_faster(runs: pd.DataFrame, margins: stats.Margins | None = None) -> Verdict:
    """Per framework and dataset, CPU against GPU training time over the settings both ran (published.device_pairs:
    the ratio's interval and test). Agrees when the GPU is told faster everywhere; disagrees where the CPU is told
    faster; else inconclusive, or not testable."""
    pairs = device_pairs(runs, "train_time_s", own_only=False)
    if pairs.empty:
        if not (points(runs)["device"] == "gpu").any():
            return Verdict(not_tested("no ok GPU point"))
        return Verdict(not_tested("no framework has ok CPU and GPU points with the same settings"))
    # every framework and dataset a test of its own: read at Holm's p over them, or one pair of many told apart
    # by chance would make the claim about every framework disagree
    told = [_holm_told(r.test, p, r.cpu_over_gpu) for r, p in
            zip(pairs.itertuples(), stats.holm([r.test.p for r in pairs.itertuples()]))]
    states = [_device_state(t, r.test, GPU_FASTER, CPU_FASTER) for t, r in zip(told, pairs.itertuples())]
    evidence = "CPU time / GPU time of training over matched settings (geometric mean [95 % interval]; " + \
        pairs["test"].iloc[0].name + f", Holm over the {len(pairs)} pairs): " + "; ".join(
            f"{r.framework} on {r.dataset} {ratio_text(r)}, {t}" for t, r in zip(told, pairs.itertuples()))
    untested = sorted(set(ok_points(points(runs))["framework"]) - set(pairs["framework"]))
    if untested:
        evidence += f"; not compared (no matched CPU and GPU points): {', '.join(untested)}"
    return Verdict(combine(states), evidence)


def _holm_told(test: stats.Test, adjusted_p: float, cpu_over_gpu: float) -> str:
    """A device pair's word at its Holm-corrected p: GPU_FASTER or CPU_FASTER where told apart."""
    if test.why:
        return stats.UNTESTABLE
    if not adjusted_p < stats.ALPHA:
        return stats.INCONCLUSIVE
    return GPU_FASTER if cpu_over_gpu > 1 else CPU_FASTER


def _device_state(told: str, test: stats.Test, claimed: str, other: str) -> str:
    """A device pair's word as an observation's: the claimed device told faster agrees, the other disagrees, a
    pair without a test says why."""
    if told == stats.UNTESTABLE:
        return untestable(test.why or "no interval")
    return {claimed: AGREES, other: DISAGREES}.get(told, told)


def observe_best_does_not_carry_over(runs: pd.DataFrame, margins: stats.Margins | None = None) -> Verdict:
    """The study's claim: the best settings of one framework often do not work as well for another.

    Tested per pair: the preset that served A best, applied to B, against B's best (summary.carry_over): it
    falls short where B's best is told better, carries over where the two are equivalent within the accuracy
    margin (two one-sided tests). Agrees when more than half of the pairs fall short, disagrees when more than
    half carry over, else inconclusive; under the study's reading (settings only) where it ran, else the whole
    preset.
    """
    table = carry_over(runs, margins)
    if table.empty:
        return Verdict(not_tested("no two frameworks each ran at least two frameworks' presets, among them "
                                  "the one that served the other best"))
    reading = "settings" if (table["reading"] == "settings").any() else "preset"
    pairs = table[table["reading"] == reading]
    counts = pairs["told"].value_counts()
    short, carries = int(counts.get("falls short", 0)), int(counts.get("carries over", 0))
    what = (f"under the {READINGS[reading]} reading" + (" (the study's)" if reading == "settings" else
                                                         " (not the study's reading: settings only did not run)"))
    margin = (margins or stats.Margins()).text("accuracy_pct")
    evidence = (f"{what}, the preset that served framework A best, applied to framework B, fell short of B's "
                f"best, told apart, in {short} of {len(pairs)} pairs, carried over (equivalent within {margin}, "
                f"or B's best itself) in {carries}, and could not be told in {len(pairs) - short - carries}: "
                + "; ".join(
                    f"{r.from_framework}'s best ({r.best_preset}'s) on {r.to_framework} ({r.dataset}/{r.device}): "
                    f"{r.accuracy_with_pct:.2f}% vs its best ({r.to_best_preset}'s) {r.to_best_pct:.2f}%: {r.told}"
                    + (f" ({judgement_text(r.test, ' points')})" if r.best_preset != r.to_best_preset else "")
                    for r in pairs.itertuples()))
    other = table[table["reading"] != reading]
    if not other.empty:
        evidence += (f". Under the {READINGS[other['reading'].iloc[0]]} reading: "
                     f"{int((other['told'] == 'falls short').sum())} of {len(other)} pairs fell short")
    if short * 2 > len(pairs):
        return Verdict(AGREES, evidence)
    if carries * 2 > len(pairs):
        return Verdict(DISAGREES, evidence)
    if (pairs["told"] == stats.UNTESTABLE).all():
        return Verdict(untestable("fewer than three runs, or no spread, on a side of every pair"), evidence)
    return Verdict(INCONCLUSIVE, evidence)


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


def _leaders_verdict(runs: pd.DataFrame, published: pd.DataFrame | None, what: str,
                     margins: stats.Margins | None = None) -> Verdict:
    """Per dataset and device: is the published leader (among the same frameworks) the leader here, told apart?
    Digits are compared by order only: no published figure is set beside them."""
    if published is None or published.empty:
        return Verdict(not_tested("the published table is missing"))
    table = leaders_vs_published(runs, published)
    if table.empty:
        return Verdict(not_tested("no dataset and device with ok own-defaults points of two or more frameworks of "
                                  "the published table"))
    metric = "train_time_s" if what == "fastest" else "accuracy_pct"
    tested = framework_leaders(runs, metric, margins)
    tested = tested[tested["comparison"] == "own defaults"].set_index(["dataset", "device"])
    states, rows = [], []
    for r in table.itertuples():
        if (r.dataset, r.device) not in tested.index:
            continue
        result = tested.loc[(r.dataset, r.device), "result"]
        published_leader = getattr(r, f"published_{what}").split(" and ")
        state = claim_any(result, [p for p in published_leader if p in result.intervals])
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


def observe_fastest_per_dataset_device(runs: pd.DataFrame, published: pd.DataFrame | None = None,
                                       margins: stats.Margins | None = None) -> Verdict:
    return _leaders_verdict(runs, published, "fastest", margins)


def observe_most_accurate_per_dataset_device(runs: pd.DataFrame, published: pd.DataFrame | None = None,
                                             margins: stats.Margins | None = None) -> Verdict:
    return _leaders_verdict(runs, published, "most_accurate", margins)


def _published_speedups_text() -> str:
    if not PUBLISHED_CSV.exists():
        return "as published"
    ratios = published_device_ratios(read_published())
    return "; ".join(f"{dataset}: " + ", ".join(f"{r.framework} {r.published_cpu_over_gpu:.3g}x" for r in
                                                g.itertuples())
                     for dataset, g in ratios.groupby("dataset", sort=False))


def _speedup_pairs(g: pd.DataFrame) -> list[tuple[str, str, str]]:
    """Every two frameworks of one dataset, the one published to gain more first: (more, less, state), where the
    state says whether this run's speed-ups (their log ratio, stats.contrast, Holm over the pairs) agree."""
    order = list(g.sort_values("published_cpu_over_gpu", ascending=False)["framework"])
    rows = g.set_index("framework")
    pairs = [(a, b) for i, a in enumerate(order) for b in order[i + 1:]]
    results = [stats.contrast(rows.at[a, "parts"] + [(-w, v) for w, v in rows.at[b, "parts"]], log=True)
               for a, b in pairs]
    adjusted = stats.holm([r.test.p for r in results])
    out = []
    for (a, b), r, p in zip(pairs, results, adjusted):
        if any(len(v) < stats.MIN_RUNS for _, v in rows.at[a, "parts"] + rows.at[b, "parts"]):
            state = untestable(f"fewer than {stats.MIN_RUNS} runs on a side")
        elif r.test.why:
            state = untestable(r.test.why)
        elif p < stats.ALPHA:
            state = AGREES if r.estimate > 0 else DISAGREES
        else:
            state = INCONCLUSIVE
        out.append((a, b, state))
    return out


def observe_gpu_speedup_order(runs: pd.DataFrame, published: pd.DataFrame | None = None,
                              margins: stats.Margins | None = None) -> Verdict:
    """The frameworks rank by GPU speed-up of training (CPU time / GPU time, own defaults) as published.

    The ratios themselves depend on the CPU and the GPU (the study's: a 4-core Xeon E5-1620 and a GTX 1080
    Ti), so the order is what is compared, per dataset, among the frameworks with both devices here: each two
    frameworks' speed-ups are tested against each other (Welch's t of the log ratios, Holm over the pairs), and
    a pair counts for or against the published order only where the test tells them apart.
    """
    if published is None or published.empty:
        return Verdict(not_tested("the published table is missing"))
    table = speedups_vs_published(runs, published).dropna(subset=["published_cpu_over_gpu"])
    if table.empty:
        return Verdict(not_tested("no framework has ok own-defaults points on CPU and GPU with the same settings"))
    states, words = [], []
    for dataset, g in table.groupby("dataset"):
        ratios = ", ".join(f"{r.framework} {ratio_text(r)} (published {r.published_cpu_over_gpu:.3g}x)"
                           for r in g.itertuples())
        if len(g) < 2:
            words.append(f"{dataset}: only {ratios}, nothing to rank")
            continue
        pairs = _speedup_pairs(g)
        states += [state for *_, state in pairs]
        words.append(f"{dataset}: {ratios}; published order against this run's, pair by pair: " + ", ".join(
            f"{a} > {b} {state}" for a, b, state in pairs))
    if not states:
        return Verdict(not_tested("one framework per dataset has CPU and GPU points: " + "; ".join(words)))
    return Verdict(combine(states), "own defaults, CPU time / GPU time of training (geometric mean over matched "
                   "settings [95 % interval]): " + "; ".join(words))


def observe_tensorflow_cifar_testing(runs: pd.DataFrame, published: pd.DataFrame | None = None,
                                     margins: stats.Margins | None = None) -> Verdict:
    """TensorFlow tests CIFAR-10 more slowly on GPU than on CPU (published: 5.76 s against 2.69 s): told by the
    test of the CPU / GPU ratio of test time (published.device_pairs)."""
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
    states = [_device_state(r.told, r.test, CPU_FASTER, GPU_FASTER) for r in pairs.itertuples()]
    evidence = "; ".join(f"{r.dataset}, own defaults, mean test time: CPU {r.cpu_s:.3g} s, GPU {r.gpu_s:.3g} s, "
                         f"CPU / GPU {ratio_text(r)} ({r.test.text()}): {r.told}" for r in pairs.itertuples()) + pub
    return Verdict(combine(states), evidence)


def _sweeps(runs: pd.DataFrame, param: str) -> list[tuple[str, str, str, pd.DataFrame]]:
    """Groups of ok, uncontended points with the same other settings where `param` took two or more values."""
    df = ok_points(in_studies_varying(points(runs), param), "train_time_s", "accuracy")
    df = df[df[param].notna()]
    if df.empty:
        return []
    df = df.assign(key=group_key(df, {param}), settings=settings_label(df, {param}))
    # the columns the observations read of a sweep, not the whole table (a large study has many sweeps)
    df = df[["key", "framework", "settings", "dataset", param, "seed", "train_time_s", "accuracy_pct"]]
    varied = df.groupby("key")[param].nunique()
    df = df[df["key"].isin(varied.index[varied >= 2])]
    return [(g["framework"].iloc[0], g["settings"].iloc[0], g["dataset"].iloc[0], g)
            for _, g in df.groupby("key", sort=True)]


def _ends(g: pd.DataFrame, param: str, metric: str, margins: stats.Margins | None):
    """The smallest and the largest value of `param`: their runs' {seed: metric}, and the judgement of the largest
    against the smallest (stats.judge on the metric's scale and margin; its `direction` says larger or smaller)."""
    values = setting_values(g, metric, param)
    low, high = min(values), max(values)
    return values[low], values[high], stats.judge_metric(values[high], values[low], metric, margins)


def _holm(judgements: list[stats.Judgement]) -> list[stats.Judgement]:
    """The judgements of the sweeps an observation pools, each read at its Holm-corrected p: one of many sweeps
    told apart by chance is not evidence."""
    return [j.reread(p, len(judgements)) for j, p in zip(judgements, stats.holm([j.p for j in judgements]))]


def observe_batch_size(runs: pd.DataFrame, margins: stats.Margins | None = None) -> Verdict:
    """Larger batches train faster and can lower accuracy at a fixed number of epochs: per sweep, the largest
    batch against the smallest (paired by seed, or Welch's t), Holm-corrected over the sweeps (time and accuracy
    apart). Agrees when the largest is told faster in more than half of the sweeps and told less accurate in one
    or more; disagrees when it is told slower in more than half, or faster but told more accurate in every sweep;
    not testable when no sweep could be tested; else inconclusive."""
    df = points(runs)
    groups = _sweeps(df[df["length_unit"] == "epochs"], "batch_size")
    if not groups:
        if _sweeps(df, "batch_size"):
            return Verdict(not_tested("batch sizes were swept at a fixed number of iterations, not epochs"))
        return Verdict(not_tested("no batch-size sweep at a fixed number of epochs with ok points"))
    ends = [(_ends(g, "batch_size", "train_time_s", margins), _ends(g, "batch_size", "accuracy_pct", margins))
            for *_, g in groups]
    times = _holm([t[2] for t, _ in ends])
    accs = _holm([a[2] for _, a in ends])
    words = []
    for (fw, settings, dataset, g), ((t0, t1, _), (a0, a1, _)), tj, aj in zip(groups, ends, times, accs):
        b0, b1 = g["batch_size"].min(), g["batch_size"].max()
        words.append(f"{fw} on {dataset} ({settings}): batch {b0:g} -> {b1:g}: time "
                     f"{value(stats.describe(t0.values(), scale='log'), ' s')} -> "
                     f"{value(stats.describe(t1.values(), scale='log'), ' s')} "
                     f"({_change(tj, 'shorter', 'longer')}; {judgement_text(tj, ' s', 'Holm')}), accuracy "
                     f"{value(stats.describe(a0.values(), scale='logit%'), '%')} -> "
                     f"{value(stats.describe(a1.values(), scale='logit%'), '%')} "
                     f"({_change(aj, 'lower', 'higher')}; {judgement_text(aj, ' points', 'Holm')})")
    n = len(groups)
    time_change, acc_change = [j.direction for j in times], [j.direction for j in accs]
    faster, slower = time_change.count("smaller"), time_change.count("larger")
    lower, higher = acc_change.count("smaller"), acc_change.count("larger")
    summary = (f"the largest batch against the smallest, told apart by the test (Holm over the {n} sweeps): faster "
               f"in {faster} of {n} sweeps (slower in {slower}), less accurate in {lower} (more accurate in "
               f"{higher}); the rest equivalent, inconclusive or not testable. "
               + (f"The first {EXAMPLES} of the sweeps: " if n > EXAMPLES else ""))
    if time_change.count(stats.UNTESTABLE) == n:
        verdict = untestable(times[0].why)
    elif faster * 2 > n and lower:
        verdict = AGREES
    elif slower * 2 > n or (faster * 2 > n and higher == n):
        verdict = DISAGREES
    else:
        verdict = INCONCLUSIVE
    return Verdict(verdict, summary + "; ".join(words[:EXAMPLES]))


def _change(j: stats.Judgement, smaller: str, larger: str) -> str:
    return {"smaller": smaller, "larger": larger}.get(j.direction, j.direction)


SATURATES, KEEPS_GAINING = "saturates", "keeps gaining"


def _slope_change(lengths, values) -> tuple[str, stats.Contrast]:
    """Does accuracy gain less per unit of length in the last step than in the first? `values`: each length's
    accuracies (one per seed). The first step's slope minus the last step's, tested by Welch's t of that
    contrast of means (its p read by the caller, corrected over the settings an observation pools)."""
    first, last = lengths[1] - lengths[0], lengths[-1] - lengths[-2]
    parts = [(1 / first, values[1]), (-1 / first, values[0]), (-1 / last, values[-1]), (1 / last, values[-2])]
    if len(lengths) == 3:  # the middle length is in both steps: one group, weights summed
        parts = [(1 / first + 1 / last, values[1]), (-1 / first, values[0]), (-1 / last, values[2])]
    result = stats.contrast(parts)
    if not result.test.why and any(len(stats._clean(v)) < stats.MIN_RUNS for _, v in parts):
        result = stats.Contrast(result.estimate, result.low, result.high,
                                stats.Test(result.test.name, why=f"fewer than {stats.MIN_RUNS} runs at a length"))
    return result


def _saturation(results: list[stats.Contrast]) -> list[str]:
    """Each slope contrast's word, Holm-corrected over the settings an observation pools: SATURATES or
    KEEPS_GAINING where told, else inconclusive or not testable."""
    adjusted = stats.holm([r.test.p for r in results])
    out = []
    for r, p in zip(results, adjusted):
        if r.test.why:
            out.append(stats.UNTESTABLE)
        elif p < stats.ALPHA:
            out.append(SATURATES if r.estimate > 0 else KEEPS_GAINING)
        else:
            out.append(stats.INCONCLUSIVE)
    return out


def _length_verdict(grows: list[str], saturation: list[str]) -> str:
    """Agrees when time is told longer in more than half the sweeps and accuracy told to saturate in more than
    half; disagrees when time is told shorter in more than half, or accuracy told to keep gaining in more than
    half; not testable when nothing could be tested; else inconclusive."""
    if all(g == stats.UNTESTABLE for g in grows) and all(x == stats.UNTESTABLE for x in saturation):
        return untestable("fewer than three runs, or no spread, at every length")
    longer, shorter = grows.count("larger"), grows.count("smaller")
    sat, gaining = saturation.count(SATURATES), saturation.count(KEEPS_GAINING)
    if (grows and shorter * 2 > len(grows)) or (saturation and gaining * 2 > len(saturation)):
        return DISAGREES
    if (not grows or longer * 2 > len(grows)) and saturation and sat * 2 > len(saturation):
        return AGREES
    return INCONCLUSIVE


def observe_length(runs: pd.DataFrame, curves: pd.DataFrame | None = None,
                   margins: stats.Margins | None = None) -> Verdict:
    """Training time grows with the length of training while accuracy saturates. Per length sweep: the longest
    against the shortest training time (paired by seed, or Welch's t), and the first step's accuracy gain per
    unit of length against the last step's (_slope_change), each Holm-corrected over the sweeps. Without a length
    sweep, the same slope test on the learning curves of each setting, its seeds the repeats."""
    df = points(runs)
    groups = _sweeps(df, "length")
    if groups:
        times = _holm([_ends(g, "length", "train_time_s", margins)[2] for *_, g in groups])
        grows = [j.direction for j in times]
        slopes, texts = [], []
        for (fw, settings, dataset, g), tj in zip(groups, times):
            t0, t1, _ = _ends(g, "length", "train_time_s", margins)
            acc = setting_values(g, "accuracy_pct", "length")
            lengths = sorted(acc)
            texts.append(f"{fw} on {dataset} ({settings}): time {value(stats.describe(t0.values(), scale='log'), ' s')}"
                         f" -> {value(stats.describe(t1.values(), scale='log'), ' s')} "
                         f"({_change(tj, 'shorter', 'longer')}; {judgement_text(tj, ' s', 'Holm')})")
            slopes.append((lengths, acc, _slope_change(lengths, [list(acc[n].values()) for n in lengths]))
                          if len(lengths) >= 3 else None)
        saturation = _saturation([x[2] for x in slopes if x])
        states = iter(saturation)
        words = []
        for text, slope in zip(texts, slopes):
            if slope:
                lengths, acc, result = slope
                text += ("; accuracy " + ", ".join(
                    f"{n:g}: {value(stats.describe(acc[n].values(), scale='logit%'), '%')}" for n in lengths)
                    + f", first step's gain per unit minus the last's {result.estimate:+.3g} points "
                    f"({result.test.text()}, Holm over the sweeps): {next(states)}")
            words.append(text)
        if not saturation:
            return Verdict(not_tested(f"lengths swept with only two values (time longer, told apart, in "
                                      f"{grows.count('larger')} of {len(grows)} sweeps), and saturation needs at "
                                      "least three"))
        summary = (f"training time told longer at the longest length in {grows.count('larger')} of {len(grows)} "
                   f"sweeps; accuracy told to saturate in {saturation.count(SATURATES)} of {len(saturation)} sweeps of "
                   f"three or more lengths (kept gaining in {saturation.count(KEEPS_GAINING)}). ")
        return Verdict(_length_verdict(grows, saturation), summary + "; ".join(words[:EXAMPLES]))
    # No length sweep: the learning curves show accuracy against iterations within each run; a setting's seeds
    # are its repeats.
    if curves is None or curves.empty or "kind" not in curves.columns:
        return Verdict(not_tested("no sweep over iterations/epochs and no learning curves"))
    ok = ok_points(df)
    ok = ok.assign(key=group_key(ok, set()), settings=settings_label(ok, set()))
    tests = curves[(curves["kind"] == "test") & curves["accuracy"].notna() & curves["run_id"].isin(set(ok["run_id"]))]
    tests = tests[["run_id", "iteration", "accuracy"]].drop_duplicates(["run_id", "iteration"]).merge(
        ok[["run_id", "key", "framework", "settings"]], on="run_id")  # the curves' own columns left behind
    results, words = [], []
    for _, g in tests.groupby("key", sort=True):
        per_run = g.groupby("run_id")["iteration"].agg(set)
        common = sorted(set.intersection(*per_run))  # the checkpoints every seed of the setting was tested at
        if len(common) < 3:
            continue
        picked = common[:2] + common[-2:] if len(common) > 3 else common
        values = [list(g.loc[g["iteration"] == i, "accuracy"] * 100) for i in picked]
        result = _slope_change([float(i) for i in picked], values)
        results.append(result)
        words.append(f"{g['framework'].iloc[0]} ({g['settings'].iloc[0]}, {len(per_run)} run(s)): first step's "
                     f"gain per iteration minus the last's {result.estimate:+.3g} points ({result.test.text()})")
    saturation = _saturation(results)
    words = [f"{w}: {state}" for w, state in zip(words, saturation)]
    if not saturation:
        return Verdict(not_tested("no sweep over iterations/epochs, and no setting was tested 3+ times during "
                                  "training"))
    verdict = _length_verdict([], saturation)
    return Verdict(verdict, f"no length sweep; from the learning curves (training time grows with iterations within "
                   f"a run): accuracy told to saturate in {saturation.count(SATURATES)} of {len(saturation)} "
                   f"settings (kept gaining in {saturation.count(KEEPS_GAINING)}). " + "; ".join(words[:EXAMPLES]))


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
                 published: pd.DataFrame | None = None, margins: stats.Margins | None = None) -> dict[str, Verdict]:
    """Every observation's verdict; `published`: the published table (read from the package when None)."""
    if published is None and PUBLISHED_CSV.exists():
        published = read_published()
    out = {}
    for obs in OBSERVATIONS:
        if obs.key in _NEEDS_CURVES:
            out[obs.key] = obs.check(runs, curves, margins=margins)
        elif obs.key in _NEEDS_PUBLISHED:
            out[obs.key] = obs.check(runs, published, margins=margins)
        else:
            out[obs.key] = obs.check(runs, margins=margins)
    return out


