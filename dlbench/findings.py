"""The study's findings in words, computed from the results: results/findings.md.

Which framework is fastest and most accurate, which batch size and learning rate
served each framework best, whether a framework's own defaults are best for it, what
cross-applying settings did, what failed, and, for each of the published study's
observations, whether this run agrees, disagrees or did not test it (and why).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from dlbench import atomic
from dlbench.datasets import catalog
from dlbench.frameworks import registry
from dlbench.tables import (
    PUBLISHED_CSV,
    defaults_table,
    group_key,
    in_studies_varying,
    ok_points,
    points,
    published_ratios,
    settings_label,
)

AGREES, DISAGREES = "agrees", "disagrees"
MNIST_LIKE = catalog.members("mnist")  # the published MNIST figures stand for these
TIE = 1e-6  # accuracies (fractions) closer than this are a tie, broken by training time


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
    """Per framework, dataset and device with both: own-defaults accuracy vs the best cross-applied preset.

    Cross-applied: another framework's own defaults (registry.own_presets()); custom presets are left out.
    """
    cols = ["framework", "dataset", "device", "own_accuracy_pct", "best_cross", "best_cross_accuracy_pct",
            "own_is_best"]
    table = defaults_table(runs)
    table = table[table["accuracy_pct"].notna()]
    rows = []
    for (framework, dataset, device), g in table.groupby(["framework", "dataset", "device"]):
        own = g[g["is_own"]]
        cross = g[~g["is_own"] & g["whose"].isin(registry.own_presets())]
        if own.empty or cross.empty:
            continue
        best = cross.sort_values("accuracy_pct", ascending=False).iloc[0]
        own_acc = own["accuracy_pct"].mean()
        rows.append({"framework": framework, "dataset": dataset, "device": device, "own_accuracy_pct": own_acc,
                     "best_cross": best["whose"], "best_cross_accuracy_pct": best["accuracy_pct"],
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
    return out.drop(columns=["own_acc", "own_t"]).sort_values(["dataset", "device", "framework", "whose"],
                                                              ignore_index=True)


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


def observe_own_not_always_best(runs: pd.DataFrame) -> Verdict:
    table = own_vs_cross(runs)
    if table.empty:
        return Verdict(not_tested("no framework ran both with its own defaults and with another framework's"))
    beaten = table[~table["own_is_best"]]
    if beaten.empty:
        return Verdict(DISAGREES, "own defaults gave the best accuracy in every case tested: " + "; ".join(
            f"{r.framework} on {r.dataset}/{r.device} {r.own_accuracy_pct:.2f}% vs best cross-applied "
            f"({r.best_cross}) {r.best_cross_accuracy_pct:.2f}%" for r in table.itertuples()))
    return Verdict(AGREES, "cross-applied defaults beat own defaults for: " + "; ".join(
        f"{r.framework} on {r.dataset}/{r.device}: {r.best_cross}'s defaults {r.best_cross_accuracy_pct:.2f}% vs "
        f"own {r.own_accuracy_pct:.2f}%" for r in beaten.itertuples()))


def _sweep_groups(runs: pd.DataFrame, param: str, metric_cols=("train_time_s", "accuracy")):
    """Groups of ok points with the same other settings where `param` takes 2+ values; means per value."""
    df = ok_points(in_studies_varying(points(runs), param), *metric_cols)
    df = df[df[param].notna()]
    if df.empty:
        return []
    df = df.assign(key=group_key(df, {param}), settings=settings_label(df, {param}))
    groups = []
    for (_key, framework), g in df.groupby(["key", "framework"]):
        per = g.groupby(param).agg(t=("train_time_s", "mean"), acc=("accuracy", "mean")).sort_index()
        if len(per) >= 2:
            groups.append((framework, g["settings"].iloc[0], g["dataset"].iloc[0], per))
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
    Observation("d", "A framework's own defaults do not always give it the best accuracy: cross-applied settings "
                     "can beat them.", observe_own_not_always_best),
    Observation("e", "Larger batch sizes shorten training time but can lower accuracy at a fixed number of epochs.",
                observe_batch_size),
    Observation("f", "Training time grows with more iterations/epochs while accuracy saturates.", observe_length),
]


def observations(runs: pd.DataFrame, curves: pd.DataFrame | None = None) -> dict[str, Verdict]:
    out = {}
    for obs in OBSERVATIONS:
        out[obs.key] = obs.check(runs, curves) if obs.key == "f" else obs.check(runs)
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
    return str(v).replace("|", "\\|").replace("\n", " ")


def md_table(df: pd.DataFrame, columns: dict[str, str]) -> str:
    cols = [c for c in columns if c in df.columns]
    lines = ["| " + " | ".join(columns[c] for c in cols) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def render(runs: pd.DataFrame, curves: pd.DataFrame | None = None, published: pd.DataFrame | None = None) -> str:
    df = points(runs)
    n_ok = int((df["status"] == "ok").sum())
    out = ["# Findings of this run", ""]
    if df.empty:
        return "\n".join(out + ["No points in results/runs.parquet: nothing to report.", ""])
    out += [f"{len(df)} points ({n_ok} ok, {len(df) - n_ok} failed); frameworks: "
            f"{', '.join(sorted(set(df['framework'])))}; datasets: {', '.join(sorted(set(df['dataset'])))}; "
            f"devices: {', '.join(sorted(set(df['device'])))}; whose defaults: {', '.join(sorted(set(df['whose'])))}."
            " Means are over ok points; times are this machine's.", ""]

    out += ["## Fastest and most accurate framework", ""]
    lead = leaders(runs)
    out += [md_table(lead, {"dataset": "dataset", "device": "device", "fastest": "fastest",
                            "fastest_train_time_s": "its mean train time (s)", "most_accurate": "most accurate",
                            "most_accurate_pct": "its mean accuracy (%)", "frameworks": "frameworks compared"})
            if not lead.empty else "No ok points.", ""]

    out += ["## Best batch size and learning rate per framework", "",
            "By mean accuracy of ok points, ties broken by training time; only where two or more values ran.", ""]
    for param, name in (("batch_size", "batch size"), ("learning_rate", "learning rate")):
        best = best_values(runs, param)
        out += [f"Best {name}:", ""]
        out += [md_table(best, {"framework": "framework", "dataset": "dataset", "device": "device",
                                param: f"best {name}", "accuracy_pct": "accuracy (%)",
                                "train_time_s": "train time (s)", "tried": "values tried"})
                if not best.empty else f"Not swept in this run (one {name} per framework).", ""]

    out += ["## Are a framework's own defaults best for it?", ""]
    ovc = own_vs_cross(runs)
    out += [md_table(ovc, {"framework": "framework", "dataset": "dataset", "device": "device",
                           "own_accuracy_pct": "own defaults: accuracy (%)", "best_cross": "best other defaults",
                           "best_cross_accuracy_pct": "their accuracy (%)", "own_is_best": "own is best"})
            if not ovc.empty else "Not tested: no framework ran both with its own defaults and another's.", ""]

    out += ["## What cross-applying settings did", ""]
    cross = cross_effects(runs)
    out += [md_table(cross, {"framework": "framework", "dataset": "dataset", "device": "device",
                             "whose": "whose defaults", "n_ok": "ok", "n_failed": "failed",
                             "accuracy_pct": "accuracy (%)", "accuracy_change_pp": "vs own (points)",
                             "train_time_s": "train time (s)", "time_ratio_to_own": "time / own"})
            if not cross.empty else "Not tested: every framework ran with one preset only.", ""]

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

    out += ["## The study's observations", ""]
    verdicts = observations(runs, curves)
    for obs in OBSERVATIONS:
        v = verdicts[obs.key]
        out.append(f"- ({obs.key}) {obs.text} **{v.verdict}**" + (f". {v.evidence}" if v.evidence else ""))
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
