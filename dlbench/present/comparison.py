"""Two result sets side by side: the same settings measured twice (another machine, framework version, dlbench).

    dlbench compare RESULTS_A RESULTS_B --out DIR     (or python -m dlbench.present.comparison ...)

RESULTS_A and RESULTS_B are result folders (holding runs.parquet, or only runs/<framework>/<dataset>/<point>/
metrics.json) or runs.parquet files. Their points are joined on their settings: every point parameter but the
repeat and seed (the record's `setting_id`; older records by their setting columns), so that the repeats of a
setting are its sample. What differs between the sets as a whole (host, CPU, GPU, environment, framework
version, dlbench commit) is named, not joined on. Per setting and metric, DIR/comparison.parquet holds both
sets' means with their intervals, the ratio B / A with its interval and a verdict by a named test, one of four
words each earned: B slower / faster (more / less accurate) where its Benjamini-Hochberg-adjusted p is below
alpha, equivalent within a stated margin (two one-sided tests), inconclusive (with the change it could have
detected), not testable (too few runs, no spread); DIR/comparison.md says it in words and
DIR/comparison_ratios.{html,svg} draws the ratios per framework.

The numbers are dlbench.analysis.comparison's; this module words them, draws the ratios and is the command.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench.aggregate.collect import write_parquet
from dlbench.analysis import comparison_stats, stats
from dlbench.analysis.comparison import (
    ADJUSTMENT,
    ALPHA,
    CONTENDED,
    EQUIVALENT,
    INCONCLUSIVE,
    MD_ROWS,
    METRICS,
    ONLY_A,
    ONLY_B,
    OUTPUTS,
    UNTESTABLE,
    CompareError,
    baseline_runs,
    compare,
    differences,
    per_framework,
    read_set,
)
from dlbench.atomic import atomic_path
from dlbench.node import locks
from dlbench.present.markdown import escape

__all__ = ["CONTENDED", "EQUIVALENT", "INCONCLUSIVE", "METRICS", "OUTPUTS", "UNTESTABLE", "CompareError",
           "baseline_runs", "compare", "per_framework"]  # what the workflow's rules and scripts take from here


# ---------------------------------------------------------------------------------------------- writing


def _fmt(value: float, metric: str) -> str:
    if pd.isna(value):
        return "-"
    return f"{value * 100:.2f}%" if metric == "accuracy" else f"{value:.3g} s"


def _interval(row: pd.Series, side: str) -> str:
    mean = _fmt(row[f"{side}_mean"], row["metric"])
    if pd.isna(row[f"{side}_ci_low"]):
        return f"{mean} (n={row[f'{side}_n']})"
    return (f"{mean} [{_fmt(row[f'{side}_ci_low'], row['metric'])}, {_fmt(row[f'{side}_ci_high'], row['metric'])}]"
            f" (n={row[f'{side}_n']})")


def is_changed(verdict: pd.Series) -> pd.Series:
    base = verdict.str.replace(CONTENDED, "", regex=False)
    return base.isin({w for pair in METRICS.values() for w in pair})


def _points(x: float, sign: bool = True) -> str:
    return f"{x * 100:+.2f} points" if sign else f"{x * 100:.2f} points"


def _change(r: pd.Series) -> str:
    """The tested change with its interval: B / A for a ratio metric, B - A in points for accuracy."""
    if r["test"] == comparison_stats.TEST_DIFFERENCE:
        low, high = r["difference_ci_low"], r["difference_ci_high"]
        return _points(r["difference"]) + ("" if pd.isna(low) else f" [{_points(low)}, {_points(high)}]")
    low, high = r["ratio_ci_low"], r["ratio_ci_high"]
    return f"{r['ratio']:.3f}" + ("" if pd.isna(low) else f" [{low:.3f}, {high:.3f}]")


def _detectable(r: pd.Series) -> str:
    if pd.isna(r["detectable"]):
        return "-"
    if r["test"] == comparison_stats.TEST_DIFFERENCE:
        return _points(r["detectable"], sign=False)
    return f"{r['detectable']:.3g}x"


def _header(table: pd.DataFrame, margins: stats.Margins, alpha: float) -> list[str]:
    """How each verdict is earned, with the numbers this comparison used."""
    tests = int(table["p_value"].notna().sum())
    band = 1 + margins.time_pct / 100
    return [f"Tests: {comparison_stats.TEST_LOG} for times, {comparison_stats.TEST_DIFFERENCE} for accuracy; "
            f"p adjusted by {ADJUSTMENT} over the comparison's {tests} tests (`p_adjusted`), alpha {alpha:g}. "
            "Intervals: 95%. A ratio is B's mean over A's, a difference B's minus A's.", "",
            f"Verdicts: *slower* / *faster*, *more* / *less accurate* where the adjusted p is below {alpha:g}; "
            f"*{EQUIVALENT}* where two one-sided tests at {alpha:g} put the change within the margin: "
            f"times within {margins.text('train_time_s')} (B / A in [{1 / band:.3f}, {band:.3f}]), accuracy within "
            f"{margins.text('accuracy')} (--time-margin-pct, --accuracy-margin-pp); *{INCONCLUSIVE}* otherwise, "
            f"with the smallest change the test would have found at {stats.POWER:.0%} power (`detectable`); "
            f"*{UNTESTABLE}* with fewer than {stats.MIN_RUNS} finished runs on a side or no spread on either."]


def _listed(rows: pd.DataFrame, title: str, detectable: bool = False) -> list[str]:
    """A section of settings, the largest changes first, at most MD_ROWS of them."""
    rows = rows.assign(distance=np.where(rows["test"] == comparison_stats.TEST_DIFFERENCE, rows["difference"].abs(),
                                         np.log(rows["ratio"].where(rows["ratio"] > 0)).abs()))
    rows = rows.sort_values("distance", ascending=False, na_position="last")
    lines = ["", f"## {title}: {len(rows)}", ""]
    if not len(rows):
        return lines + ["None."]
    extra = " could have found |" if detectable else ""
    lines += [f"| framework | dataset | device | settings | metric | A | B | B / A or B - A | verdict |{extra}",
              "| --- " * (10 if detectable else 9) + "|"]
    for _, r in rows.head(MD_ROWS).iterrows():
        tail = f" {_detectable(r)} |" if detectable else ""
        cells = [escape(r[c]) for c in ("framework", "dataset", "device", "label", "metric")]
        lines.append(f"| {' | '.join(cells)} | {_interval(r, 'a')} | {_interval(r, 'b')} | {_change(r)} | "
                     f"{r['verdict']} |{tail}")
    if len(rows) > MD_ROWS:
        lines.append(f"\n{len(rows) - MD_ROWS} more in comparison.parquet.")
    return lines


def _per_framework_lines(table: pd.DataFrame, alpha: float, margins: stats.Margins) -> list[str]:
    lines = ["", "## Per framework", "",
             "Over each framework's settings with a ratio: the geometric mean of their ratios B / A (accuracy: the "
             "mean of their differences B - A) with its 95% interval (the settings as the sample), the one-sample t "
             "against no change, Holm-adjusted over these rows, and the same margins. A shift too small to tell in "
             "a setting of a few repeats shows here.", "",
             "| framework | metric | settings | B / A or B - A | verdict |", "| --- | --- | --- | --- | --- |"]
    for _, r in per_framework(table, alpha, margins).iterrows():
        accuracy = not margins.for_metric(r["metric"])[1]
        show = _points if accuracy else (lambda x: f"{x:.3f}")
        interval = "" if pd.isna(r["change_ci_low"]) else f" [{show(r['change_ci_low'])}, {show(r['change_ci_high'])}]"
        lines.append(f"| {escape(r['framework'])} | {escape(r['metric'])} | {r['settings']} | "
                     f"{show(r['change'])}{interval} | {r['verdict']} |")
    return lines


def _counted(table: pd.DataFrame) -> list[str]:
    lines = ["", "## Counted", "", "| metric | verdict | settings |", "| --- | --- | --- |"]
    for (metric, verdict), n in table.groupby(["metric", "verdict"]).size().items():
        lines.append(f"| {metric} | {verdict} | {n} |")
    why = table.loc[table["why"] != "", "why"].value_counts()
    if len(why):
        lines += ["", "Not testable: " + "; ".join(f"{reason}: {n}" for reason, n in why.items()) + "."]
    return lines


def markdown(table: pd.DataFrame, diff: list[tuple[str, str, str]], name_a: str, name_b: str,
             n_a: int, n_b: int, alpha: float = ALPHA, margins: stats.Margins | None = None) -> str:
    """comparison.md: what differs between the sets, what changed beyond the noise, what could not be told,
    per framework, the verdicts counted, what one set lacks."""
    margins = margins or stats.Margins()
    settings = table.drop_duplicates("setting")
    lines = [f"# {escape(name_b)} (B) against {escape(name_a)} (A)", "",
             f"A: {n_a} runs; B: {n_b} runs; {settings['setting'].nunique()} settings in all "
             "(a setting: every point parameter but the repeat and seed; its repeats are its sample).", "",
             *_header(table, margins, alpha), "", "## What differs between the sets", ""]
    lines += [f"- {what}: A {escape(va)}; B {escape(vb)}" for what, va, vb in diff] or ["- nothing recorded differs"]
    lines += _listed(table[is_changed(table["verdict"])], "Changed beyond the noise")
    inconclusive = table["verdict"].str.replace(CONTENDED, "", regex=False) == INCONCLUSIVE
    lines += _listed(table[inconclusive], "Inconclusive", detectable=True)
    lines += _per_framework_lines(table, alpha, margins)
    lines += _counted(table)
    contended = settings[settings["contended"]]
    lines += ["", f"Settings with contended runs (timed while other work took the machine's CPUs): {len(contended)};"
              " each verdict they enter says so." if len(contended) else
              "No run of either set is marked contended (or the records do not say)."]
    for side, verdict in (("A", ONLY_A), ("B", ONLY_B)):
        only = settings[settings["verdict"].str.startswith(verdict)]
        per = ", ".join(f"{escape(fw)} {n}" for fw, n in only.groupby("framework").size().items())
        lines.append(f"\nIn {side} only: {len(only)} settings" + (f" ({per})" if per else "")
                     + ", not compared.")
    return "\n".join(lines) + "\n"


def chart(table: pd.DataFrame):
    """The ratios B / A per framework, one panel per metric, each with its interval; coloured by verdict."""
    import altair as alt

    from dlbench.present.charts import pieces

    drawn = table[table["ratio"].notna() & (table["ratio"] > 0)].copy()
    if drawn.empty:
        return pieces.no_data("B / A per framework", "no setting has finished runs in both sets")
    keep = pieces.drawn(drawn, pieces.MAX_MARKS, by=("framework", "metric"))
    shown = drawn[keep]
    shown = shown[["framework", "metric", "label", "dataset", "device", "ratio", "ratio_ci_low", "ratio_ci_high",
                   "verdict"]]
    base = alt.Chart().encode(y=alt.Y("framework:N", title=None),
                              tooltip=["framework", "dataset", "device", "label", "metric", "ratio", "verdict"])
    log = alt.Scale(type="log")
    bars = base.mark_rule(opacity=0.4).encode(x=alt.X("ratio_ci_low:Q", title="B / A", scale=log),
                                              x2="ratio_ci_high:Q", color=alt.Color("verdict:N", title="verdict"))
    dots = base.mark_point(filled=True, size=40).encode(x=alt.X("ratio:Q", scale=log), color="verdict:N")
    one = alt.Chart().mark_rule(strokeDash=[4, 4], color="black").encode(x=alt.datum(1.0))
    subtitle = pieces.sample_note(len(shown), len(drawn), "settings")
    return alt.layer(bars, dots, one, data=shown).properties(width=420, height=160).facet(
        row=alt.Row("metric:N", title=None)).properties(title=pieces.titled("B / A per framework", *subtitle))


def write(table: pd.DataFrame, text: str, out_dir: str | Path) -> list[Path]:
    from dlbench.present.charts import draw

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(table, out / "comparison.parquet")
    with atomic_path(out / "comparison.md", suffix=".md") as tmp:
        Path(tmp).write_text(text)
    draw.save(chart(table), out / "comparison_ratios")
    return [out / name for name in OUTPUTS]


def run(path_a: str | Path, path_b: str | Path, out_dir: str | Path, alpha: float = ALPHA,
        name_b: str | None = None, margins: stats.Margins | None = None) -> pd.DataFrame:
    """Compare the result sets at path_a (A) and path_b (B) into out_dir (OUTPUTS)."""
    a, b = read_set(path_a), read_set(path_b)
    table = compare(a, b, alpha, margins)
    text = markdown(table, differences(a, b), str(path_a), name_b or str(path_b), len(a), len(b), alpha, margins)
    write(table, text, out_dir)
    return table


# ---------------------------------------------------------------------------------------------- versions


def _version_order(version: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(version), "")
    except InvalidVersion:
        return (1, None, version)


def version_section(runs: pd.DataFrame, alpha: float = ALPHA, margins: stats.Margins | None = None) -> list[str]:
    """findings.md's lines on what each framework version changed (a study listing several: `versions:`),
    each version against the one before it, over the settings both ran; none where no study did."""
    if "version" not in runs or runs["version"].isna().all():
        return []
    lines = ["## What the framework version changed", "",
             f"Each version against the one before it, on the settings both ran ({comparison_stats.TEST_LOG} for "
             f"times, {comparison_stats.TEST_DIFFERENCE} for accuracy; {ADJUSTMENT} per pair of versions, alpha "
             f"{alpha:g}; {EQUIVALENT} within {(margins or stats.Margins()).text('train_time_s')} for times, "
             f"{(margins or stats.Margins()).text('accuracy')} for accuracy). A ratio is the newer version's mean "
             "over the older one's.", ""]
    versioned = runs[runs["version"].notna()]
    for framework, group in versioned.groupby("framework"):
        order = sorted(group["version"].unique(), key=_version_order)
        for old, new in zip(order, order[1:]):
            a, b = (group[group["version"] == v].drop(columns=["setting_id", "version"], errors="ignore")
                    for v in (old, new))
            table = compare(a, b, alpha, margins)
            for metric, rows in table.groupby("metric", sort=False):
                both = rows[rows["ratio"].notna()]
                counts = ", ".join(f"{n} {verdict}" for verdict, n in rows["verdict"].value_counts().items())
                median = f"median ratio {both['ratio'].median():.3f}" if len(both) else "no setting ran in both"
                lines.append(f"- {framework} {new} against {old}, {metric}: {median} over {len(both)} settings; "
                             f"{counts}")
    return lines + [""]


def _level(text: str) -> float:
    """--alpha: a probability strictly between 0 and 1 (5 % is 0.05, not 5)."""
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a level between 0 and 1 (5 % is 0.05)")
    return value


def _margin(text: str) -> float:
    """An equivalence margin: a finite number above 0 (a margin of 0 or less makes nothing equivalent)."""
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} is not a margin: give a finite number above 0")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench compare",
                                     description="compare two result sets: per setting, B / A with its interval and a "
                                     "verdict")
    parser.add_argument("a", help="result set A (the baseline): a results folder or a runs.parquet")
    parser.add_argument("b", help="result set B, compared with A")
    parser.add_argument("--out", required=True, help="folder for comparison.parquet, comparison.md and the chart")
    parser.add_argument("--alpha", type=_level, default=ALPHA,
                        help=f"the tests' level: the false discovery rate of {ADJUSTMENT}, and each one-sided test's")
    parser.add_argument("--time-margin-pct", type=_margin, default=stats.Margins.time_pct,
                        help="times within this many per cent (B / A) are equivalent (default %(default)g)")
    parser.add_argument("--accuracy-margin-pp", type=_margin, default=stats.Margins.accuracy_pp,
                        help="accuracies within this many points are equivalent (default %(default)g)")
    args = parser.parse_args(argv)
    if Path(args.out).exists() and not Path(args.out).is_dir():
        print(f"dlbench: compare: --out {args.out} is a file, not a folder; name a folder (it is created)",
              file=sys.stderr)
        return 2
    margins = stats.Margins(accuracy_pp=args.accuracy_margin_pp, time_pct=args.time_margin_pct)
    try:
        # heavy work (reading two result sets, its tests, its chart): never beside a measurement on this node
        with locks.heavy_work(locks.node_lock(), "the comparison"):
            table = run(args.a, args.b, args.out, args.alpha, margins=margins)
    except CompareError as exc:
        print(f"dlbench: compare: {exc}", file=sys.stderr)
        return 2
    except (locks.LockTimeout, locks.LockUnusable) as exc:  # the node's locks: held too long, or unusable here
        print(f"dlbench: compare: {exc}", file=sys.stderr)
        return 1
    changed = int(is_changed(table["verdict"]).sum())
    print(f"{args.out}/comparison.md: {changed} of {len(table)} comparisons changed beyond the noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
