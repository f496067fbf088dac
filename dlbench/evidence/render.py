"""docs/reproduction.md's evidence tables in Markdown, from a runs table: a pure function of the runs.

Each table is one sub-study of config/evidence.yaml, and its marker in the doc has the sub-study's name. The numbers
are the project's own: means and intervals from dlbench.analysis.summary, the published figures from
dlbench.analysis.published; this
module only lays them out, with the facts of each point (network, length, images) read from its record.
"""

from __future__ import annotations

import math

import pandas as pd

from dlbench.analysis.frames import FRAMEWORKS, points
from dlbench.analysis.groups import study_names
from dlbench.analysis.published import published_ratios
from dlbench.analysis.summary import framework_effect, summary_table
from dlbench.evidence.stamp import stamp
from dlbench.evidence.study import FRAMEWORK_EFFECT, OWN_DEFAULTS
from dlbench.frameworks import registry
from dlbench.present.findings import md_table
from dlbench.study import presets


def counted(df: pd.DataFrame) -> pd.DataFrame:
    """The points with every ok one counted, timed under outside load or not. The summary functions leave contended
    points out of their means; a doc table shows what ran and its stamp says how many ran under load and how much."""
    return df.assign(contended=False)


def in_sub_study(df: pd.DataFrame, name: str) -> pd.DataFrame:
    return df[study_names(df).map(lambda s: name in s)]


def _label(framework: str) -> str:
    return registry.get(framework).label if framework in registry.FRAMEWORKS else framework


def _order(frameworks) -> list[str]:
    return sorted(frameworks, key=lambda f: FRAMEWORKS.index(f) if f in FRAMEWORKS else len(FRAMEWORKS))


def _num(v, spec: str = ",.1f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _first(g: pd.DataFrame, column: str):
    values = g[column].dropna() if column in g.columns else pd.Series(dtype=object)
    return values.iloc[0] if len(values) else None


# ---------------------------------------------------------------------------------------------
# Each framework's own defaults
# ---------------------------------------------------------------------------------------------

def trained(g: pd.DataFrame, scale: float) -> str:
    """"1,000 of 20,000 iterations, batch 50": the length run, and the preset's full length where scaled."""
    r = g.iloc[0]
    length, unit = float(r["length"]), str(r["length_unit"])
    text = f"{length:,g} {unit}"
    if scale != 1:
        try:
            full = presets.resolve(str(r["preset"]), r["framework"], r["dataset"], {},
                                   r["cross_apply"] if isinstance(r["cross_apply"], str) else "preset").get(unit)
        except (KeyError, ValueError):  # a custom preset: its full length is the config's, not at hand here
            full = None
        if full:
            bound = "at most " if _first(g, "validation_json") else ""
            text = f"{length:,g} of {bound}{float(full):,g} {unit}"
    text += f", batch {int(r['batch_size'])}"
    stopped = _first(g, "stopped_early_at")
    return text + (f", stopped early at iteration {int(stopped):,}" if stopped is not None else "")


def images(g: pd.DataFrame) -> str:
    """"50,000 + 10,000 validation": the training images of the point, and those held out to validate."""
    train, held = _first(g, "train_samples"), _first(g, "validation_samples")
    if train is None:
        return "-"
    return f"{int(train):,}" + (f" + {int(held):,} validation" if held else "")


def _metric(summary: pd.DataFrame, metric: str, factor: float = 1.0, spec: str = ",.1f") -> str:
    """A summary_table metric's mean, with its 95 % interval where two or more runs gave one."""
    row = summary[(summary["metric"] == metric) & (summary["n"] > 0)]
    if row.empty:
        return "-"
    r = row.iloc[0]
    text = _num(r["mean"] * factor, spec)
    if r["n"] >= 2 and pd.notna(r["ci_low"]):
        text += f" [{_num(r['ci_low'] * factor, spec)}, {_num(r['ci_high'] * factor, spec)}], n {int(r['n'])}"
    return text


def _published(ratios: pd.DataFrame) -> str:
    if ratios.empty:
        return "-"
    r = ratios.iloc[0]
    return (f"{_num(r['published_accuracy_pct'], '.2f')} %, {_num(r['published_train_time_s'], ',.0f')} s "
            f"({r['published_dataset']})")


def own_defaults_table(df: pd.DataFrame, scale: float, published: pd.DataFrame | None) -> str:
    """One row per framework, dataset and device: its own defaults' accuracy and times beside the published ones."""
    rows = []
    for (framework, dataset, device), g in df.groupby(["framework", "dataset", "device"]):
        ok = g[g["status"] == "ok"]
        summary = summary_table(counted(g))
        ratios = published_ratios(counted(g), published) if published is not None else pd.DataFrame()
        failed = sorted(set(g["status"]) - {"ok"})
        interval_tests = pd.to_numeric(ok.get("interval_test_time_s"), errors="coerce") if len(ok) else None
        rows.append({
            "framework": _label(framework), "dataset": f"{dataset}/{device}",
            "network": f"{_first(g, 'network')}, {_first(g, 'init') or '-'}",
            "trained": trained(g, scale), "images": images(g),
            "accuracy": _metric(summary, "accuracy", 100, ".2f"),
            "train": _metric(summary, "train_time_s"),
            "interval": _num(interval_tests.mean()) if interval_tests is not None and interval_tests.notna().any()
            else "-",
            "test": _metric(summary, "test_time_s", spec=",.2f"),
            "runs": f"{len(ok)} ok" + (f", {len(g) - len(ok)} {'/'.join(failed)}" if failed else "")
            + f"; {int(ok['contended'].sum())} under load",
            "published": _published(ratios), "order": FRAMEWORKS.index(framework) if framework in FRAMEWORKS else 99})
    table = pd.DataFrame(rows).sort_values(["dataset", "order"])
    return md_table(table, {"framework": "framework", "dataset": "dataset/device", "network": "network, init",
                            "trained": "trained", "images": "train images", "accuracy": "accuracy %",
                            "train": "train s", "interval": "tests during training s", "test": "final test s",
                            "runs": "runs", "published": "published: accuracy, train s (data set)"})


def own_defaults(df: pd.DataFrame, scale: float, published: pd.DataFrame | None, cores: int | None = None) -> str:
    if df.empty:
        return f"No point of the `{OWN_DEFAULTS}` sub-study is in this run's runs table."
    return "\n".join([stamp(df, scale, cores), "", own_defaults_table(df, scale, published)])


# ---------------------------------------------------------------------------------------------
# The framework effect: one preset on several frameworks, several seeds
# ---------------------------------------------------------------------------------------------

def seed_table(g: pd.DataFrame, effect: pd.DataFrame) -> str:
    """Test accuracy in % per seed and framework (a failed point: its status), then framework_effect's means with
    their 95 % intervals, of accuracy and of training time."""
    frameworks = _order(set(g["framework"]))
    cells = {}
    for r in g.itertuples():
        text = f"{r.accuracy_pct:.2f}" if r.status == "ok" and pd.notna(r.accuracy_pct) else str(r.status)
        cells.setdefault(int(r.seed), {}).setdefault(r.framework, []).append(text)
    rows = [{"seed": str(seed), **{fw: " / ".join(per.get(fw, ["-"])) for fw in frameworks}}
            for seed, per in sorted(cells.items())]
    for metric, what, spec in (("accuracy_pct", "accuracy %, mean [95 % interval]", ".2f"),
                               ("train_time_s", "train s, mean [95 % interval]", ",.1f")):
        found = effect[effect["metric"] == metric]
        if found.empty:
            continue
        means = found.iloc[0]["means"]
        rows.append({"seed": what, **{fw: (f"{_num(means[fw]['mean'], spec)} [{_num(means[fw]['ci_low'], spec)}, "
                                            f"{_num(means[fw]['ci_high'], spec)}]" if fw in means else "-")
                                       for fw in frameworks}})
    return md_table(pd.DataFrame(rows), {"seed": "seed", **{fw: _label(fw) for fw in frameworks}})


def tests_text(effect: pd.DataFrame) -> list[str]:
    """framework_effect's tests, one line per metric: the test its verdict is read from (the design's), then the
    one-way ANOVA and Friedman's test with the seed as block beside it, and the verdict."""
    what = {"accuracy_pct": "test accuracy", "train_time_s": "training time"}
    return [f"- {what.get(r.metric, r.metric)} ({r.n_per_framework}): "
            + "; ".join(t.text() for t in _tests(r))
            + (f"; verdict: **{r.verdict}**." if isinstance(getattr(r, "verdict", None), str) else ".")
            for r in effect.itertuples()]


def _tests(r) -> list:
    """The design's test first (where framework_effect names one), then the others it computed."""
    design = getattr(r, "test", None)
    shown = [design] if design is not None and hasattr(design, "text") else []
    return shown + [t for t in (r.anova, r.friedman) if not shown or t.name != design.name]


def framework_effect_block(df: pd.DataFrame, scale: float, cores: int | None = None) -> str:
    if df.empty:
        return f"No point of the `{FRAMEWORK_EFFECT}` sub-study is in this run's runs table."
    out = [stamp(df, scale, cores), ""]
    for (dataset, device, whose), g in df.groupby(["dataset", "device", "whose"]):
        effect = framework_effect(counted(g))
        out += [f"The `{whose}` preset on {dataset}/{device}, test accuracy in % per seed:", "", seed_table(g, effect),
                ""]
        out += (["`analysis.summary.framework_effect` on these points:", "", *tests_text(effect), ""] if len(effect)
                else ["`analysis.summary.framework_effect` tests nothing here: it needs two or more frameworks that "
                      "ran three or more seeds each.", ""])
    return "\n".join(out).rstrip("\n")


def render(runs: pd.DataFrame, scale: float, published: pd.DataFrame | None, cores: int | None = None) -> dict:
    """{marker name: Markdown} for each evidence table, from the runs table (results/runs.parquet)."""
    df = points(runs)
    return {OWN_DEFAULTS: own_defaults(in_sub_study(df, OWN_DEFAULTS), scale, published, cores),
            FRAMEWORK_EFFECT: framework_effect_block(in_sub_study(df, FRAMEWORK_EFFECT), scale, cores)}
