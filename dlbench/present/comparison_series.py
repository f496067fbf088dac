"""A series of result sets against one baseline, in words and as a trend: DIR/series.md and DIR/series_trend.{html,
svg} beside DIR/series.parquet (the numbers: dlbench.analysis.comparison.compare_series; the command:
dlbench.present.comparison).

series.md says per set how many settings each verdict got, what differs from the baseline, every setting a set
changed beyond the noise with each set's ratio and verdict side by side (pyperf's compare_to reads the same way:
a column per set), and per framework the geometric mean change of each set. The trend draws each setting across
the sets: the baseline first, then each set in the order given, each mean with its 95 % interval.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dlbench.aggregate.collect import write_parquet
from dlbench.analysis import comparison_stats, stats
from dlbench.analysis.comparison import (
    ADJUSTMENT,
    CONTENDED,
    EQUIVALENT,
    FAILED_A,
    FAILED_B,
    INCONCLUSIVE,
    MD_ROWS,
    METRICS,
    ONLY_A,
    ONLY_B,
    UNTESTABLE,
    differences,
    per_framework,
)
from dlbench.atomic import atomic_path
from dlbench.present.markdown import escape

# What a series writes into its folder.
SERIES_OUTPUTS = ("series.parquet", "series.md", "series_trend.html", "series_trend.svg")
BASELINE = "baseline"  # the trend's word for the baseline's own point
# series.md's count of verdicts per set: its columns, each the verdicts it counts (a contended one as its word).
COUNTED = {
    "slower": ["slower"], "faster": ["faster"], "less accurate": ["less accurate"],
    "more accurate": ["more accurate"], EQUIVALENT: [EQUIVALENT], INCONCLUSIVE: [INCONCLUSIVE],
    UNTESTABLE: [UNTESTABLE], "not compared": [ONLY_A, ONLY_B, FAILED_A, FAILED_B],
}


def base_verdict(verdict: pd.Series) -> pd.Series:
    """The verdict's word without the mark of contended runs."""
    return verdict.str.replace(CONTENDED, "", regex=False)


def _fmt(value: float, metric: str) -> str:
    if pd.isna(value):
        return "-"
    return f"{value * 100:.2f}%" if metric == "accuracy" else f"{value:.3g} s"


def _change(r: pd.Series) -> str:
    """A set's change from the baseline with its interval: the ratio for a time, points for accuracy."""
    if r["test"] == comparison_stats.TEST_DIFFERENCE and pd.notna(r["difference"]):
        low, high = r["difference_ci_low"], r["difference_ci_high"]
        text = f"{r['difference'] * 100:+.2f} pt"
        return text + ("" if pd.isna(low) else f" [{low * 100:+.2f}, {high * 100:+.2f}]")
    if pd.isna(r["ratio"]):
        return ""
    low, high = r["ratio_ci_low"], r["ratio_ci_high"]
    return f"{r['ratio']:.3f}" + ("" if pd.isna(low) else f" [{low:.3f}, {high:.3f}]")


def _cell(r: pd.Series) -> str:
    change = _change(r)
    return f"{change} {r['verdict']}" if change else str(r["verdict"])


def _header(series: pd.DataFrame, names: list[str], paths: list[str], runs: list[int], alpha: float,
            margins: stats.Margins) -> list[str]:
    tests = int(series["p_value"].notna().sum())
    band = 1 + margins.time_pct / 100
    def described(name: str, path: str, n: int) -> str:
        return f"{escape(name)} ({'' if name == path else escape(path) + ', '}{n} runs)"

    sets = "; ".join(f"{k}. {described(*three)}" for k, three in enumerate(zip(names[1:], paths[1:], runs[1:]), 1))
    return [f"# {len(names) - 1} result sets against {escape(names[0])} (the baseline)", "",
            f"Baseline: {described(names[0], paths[0], runs[0])}. Sets, in order: {sets}. "
            f"{series['setting'].nunique()} settings in all (a setting: every point parameter but the repeat and "
            "seed; its repeats are its sample).", "",
            f"Each set is compared with the baseline setting by setting: {comparison_stats.TEST_LOG} for times, "
            f"{comparison_stats.TEST_DIFFERENCE} for accuracy; p adjusted by {ADJUSTMENT} over the series' {tests} "
            f"tests (every set's together), alpha {alpha:g}. A ratio is the set's mean over the baseline's, a "
            "difference the set's minus the baseline's, each with its 95% interval.", "",
            f"Verdicts: *slower* / *faster*, *more* / *less accurate* where the adjusted p is below {alpha:g}; "
            f"*{EQUIVALENT}* where two one-sided tests put the change within the margin: times within "
            f"{margins.text('train_time_s')} (ratio in [{1 / band:.3f}, {band:.3f}]), accuracy within "
            f"{margins.text('accuracy')}; *{INCONCLUSIVE}* otherwise; *{UNTESTABLE}* with fewer than "
            f"{stats.MIN_RUNS} finished runs on a side or no spread on either."]


def _counts(series: pd.DataFrame, names: list[str]) -> list[str]:
    lines = ["", "## Verdicts per set", "", "Settings and metrics of each set, by verdict (*not compared*: a "
             "setting one side lacks or has no finished run of).", "",
             "| set | " + " | ".join(COUNTED) + " |", "| --- " * (len(COUNTED) + 1) + "|"]
    for name in names[1:]:
        base = base_verdict(series.loc[series["set"] == name, "verdict"])
        cells = [str(int(base.isin(words).sum())) for words in COUNTED.values()]
        lines.append(f"| {escape(name)} | " + " | ".join(cells) + " |")
    return lines


def _changed(series: pd.DataFrame, names: list[str]) -> list[str]:
    """Every setting and metric some set changed beyond the noise, each set's change and verdict side by side."""
    directions = {w for pair in METRICS.values() for w in pair}
    told = series[base_verdict(series["verdict"]).isin(directions)]
    keys = told[["setting", "metric"]].drop_duplicates()
    lines = ["", f"## Changed beyond the noise in some set: {len(keys)}", ""]
    if keys.empty:
        return lines + ["None."]
    rows = series.merge(keys, on=["setting", "metric"])
    lines += ["| framework | dataset | device | settings | metric | " + escape(names[0]) + " (baseline) | "
              + " | ".join(escape(n) for n in names[1:]) + " |", "| --- " * (5 + len(names)) + "|"]
    for (_, metric), group in list(rows.groupby(["setting", "metric"], sort=False))[:MD_ROWS]:
        first = group.iloc[0]
        by_set = group.set_index("set")
        baseline = _fmt(first["a_mean"], metric)
        if pd.notna(first["a_ci_low"]):
            baseline += f" [{_fmt(first['a_ci_low'], metric)}, {_fmt(first['a_ci_high'], metric)}]"
        cells = [_cell(by_set.loc[n]) if n in by_set.index else "-" for n in names[1:]]
        described = [escape(first[c]) for c in ("framework", "dataset", "device", "label")]
        lines.append(f"| {' | '.join(described)} | {metric} | {baseline} (n={first['a_n']}) | {' | '.join(cells)} |")
    if len(keys) > MD_ROWS:
        lines.append(f"\n{len(keys) - MD_ROWS} more in series.parquet.")
    return lines


def _per_framework(series: pd.DataFrame, names: list[str], alpha: float, margins: stats.Margins) -> list[str]:
    lines = ["", "## Per framework", "",
             "Over each framework's settings with a ratio: each set's geometric mean ratio to the baseline (accuracy: "
             "the mean difference in points) with its 95% interval, the settings as the sample, and its verdict "
             "(Holm-adjusted per set).", "",
             "| framework | metric | " + " | ".join(escape(n) for n in names[1:]) + " |",
             "| --- " * (2 + len(names) - 1) + "|"]
    tables = {name: per_framework(series[series["set"] == name], alpha, margins).set_index(["framework", "metric"])
              for name in names[1:]}
    keys = list(dict.fromkeys(k for t in tables.values() for k in t.index))
    for framework, metric in keys:
        cells = []
        for name in names[1:]:
            if (framework, metric) not in tables[name].index:
                cells.append("-")
                continue
            r = tables[name].loc[(framework, metric)]
            show = (lambda x: f"{x * 100:+.2f} pt") if not margins.for_metric(metric)[1] else (lambda x: f"{x:.3f}")
            low, high = r["change_ci_low"], r["change_ci_high"]
            interval = "" if pd.isna(low) else f" [{show(low)}, {show(high)}]"
            cells.append(f"{show(r['change'])}{interval} {r['verdict']}")
        lines.append(f"| {escape(framework)} | {metric} | " + " | ".join(cells) + " |")
    return lines


def markdown(series: pd.DataFrame, sets: list[pd.DataFrame], names: list[str], paths: list[str],
             alpha: float, margins: stats.Margins) -> str:
    """series.md: the sets, how each verdict is earned, the verdicts counted per set, what differs from the
    baseline, what changed beyond the noise, per framework."""
    lines = _header(series, names, paths, [len(s) for s in sets], alpha, margins)
    lines += _counts(series, names)
    lines += ["", "## What differs from the baseline"]
    for name, df in zip(names[1:], sets[1:]):
        diff = differences(sets[0], df)
        lines += ["", f"{escape(name)}:", ""]
        lines += [f"- {what}: baseline {escape(va)}; {escape(name)} {escape(vb)}" for what, va, vb in diff] or [
            "- nothing recorded differs"]
    lines += _changed(series, names)
    lines += _per_framework(series, names, alpha, margins)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------- the trend


def trend_points(series: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """One row per setting, metric and set with a mean: the baseline's (its `set` names[0], order 0, verdict
    BASELINE) and each set's, with their intervals and the set's verdict."""
    describe = ["setting", "label", "framework", "dataset", "device", "metric"]
    first = series.drop_duplicates(["setting", "metric"])
    base = first[describe].assign(set=names[0], order=0, mean=first["a_mean"], ci_low=first["a_ci_low"],
                                  ci_high=first["a_ci_high"], n=first["a_n"], verdict=BASELINE)
    sets = series[describe].assign(set=series["set"], order=series["order"], mean=series["b_mean"],
                                   ci_low=series["b_ci_low"], ci_high=series["b_ci_high"], n=series["b_n"],
                                   verdict=series["verdict"])
    out = pd.concat([base, sets], ignore_index=True)
    out = out[out["mean"].notna()].sort_values(["metric", "setting", "order"], ignore_index=True)
    out["ci_low"] = out["ci_low"].fillna(out["mean"])  # a mean of one run is drawn without an interval
    out["ci_high"] = out["ci_high"].fillna(out["mean"])
    return out


def chart(series: pd.DataFrame, names: list[str]):
    """Each setting across the sets, a panel per metric: the baseline, then each set in order, each mean with its
    interval; a line per setting in its framework's colour, the point's shape its verdict against the baseline."""
    import altair as alt

    from dlbench.present.charts import pieces

    title = "Each setting across the result sets"
    points = trend_points(series, names)
    if points.empty:
        return pieces.no_data(title, "no setting has a finished run in any set")
    drawn, note = pieces.drawn_groups(points, "setting", pieces.MAX_MARKS)
    order = list(names)
    panels = []
    for metric in [m for m in METRICS if m in set(drawn["metric"])]:
        rows = drawn[drawn["metric"] == metric]
        log = stats.scale_of(metric) == "log"
        y_title = f"{metric}: mean, 95% interval"
        if metric == "accuracy":  # in %, as every other chart of dlbench draws it
            rows = rows.assign(**{c: rows[c] * 100 for c in ("mean", "ci_low", "ci_high")})
            y_title = "accuracy (%): mean, 95% interval"
        scale = alt.Scale(type="log") if log else alt.Scale(zero=False)
        base = alt.Chart(rows).encode(
            x=alt.X("set:N", sort=order, title=None, axis=alt.Axis(labelAngle=0, labelLimit=160)),
            color=pieces.framework_color(rows), detail="setting:N",
            tooltip=["set", "framework", "dataset", "device", "label", "mean", "ci_low", "ci_high", "n", "verdict"])
        line = base.mark_line(opacity=0.5).encode(y=alt.Y("mean:Q", scale=scale, title=y_title))
        bars = base.mark_rule().encode(y=alt.Y("ci_low:Q", scale=scale), y2="ci_high:Q")
        dots = base.mark_point(filled=True, size=50).encode(y=alt.Y("mean:Q", scale=scale),
                                                           shape=alt.Shape("verdict:N", title="verdict"))
        panels.append(alt.layer(line, bars, dots).properties(width=max(240, 120 * len(order)), height=200,
                                                             title=metric))
    subtitle = ["the baseline first, then each set in the order given; each mean with its 95% interval",
                *note]
    return alt.vconcat(*panels).resolve_scale(color="shared", shape="shared").properties(
        title=pieces.titled(title, *subtitle))


def write(series: pd.DataFrame, text: str, names: list[str], out_dir: str | Path) -> list[Path]:
    from dlbench.present.charts import draw

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(series.assign(baseline=names[0]), out / "series.parquet")
    with atomic_path(out / "series.md", suffix=".md") as tmp:
        Path(tmp).write_text(text)
    draw.save(chart(series, names), out / "series_trend")
    return [out / name for name in SERIES_OUTPUTS]
