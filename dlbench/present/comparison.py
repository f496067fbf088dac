"""Result sets side by side: the same settings measured again (another machine, framework version, dlbench), and
a gate a CI job can fail on.

    dlbench compare BASELINE RESULTS [RESULTS ...] --out DIR [--fail-on slower,less-accurate]
    python -m dlbench.present.comparison ...      the same

BASELINE and each RESULTS are result folders (holding runs.parquet, or only runs/<framework>/<dataset>/<point>/
metrics.json) or runs.parquet files. Their points are joined on their settings: every point parameter but the
repeat and seed (the record's `setting_id`; older records by their setting columns), so that the repeats of a
setting are its sample. What differs between the sets as a whole (host, CPU, GPU, environment, framework
version, dlbench commit) is named, not joined on. Per setting and metric, each set against the baseline: both
means with their intervals, the ratio (set / baseline) with its interval and a verdict by a named test, one of
four words each earned: slower / faster (more / less accurate) where its Benjamini-Hochberg-adjusted p is below
alpha, equivalent within a stated margin (two one-sided tests), inconclusive (with the change it could have
detected), not testable (too few runs, no spread).

Two sets (A, B) write DIR/comparison.parquet, DIR/comparison.md and DIR/comparison_ratios.{html,svg} (the ratios
per framework), as the workflow's rule compare does. Three or more (a framework's releases, a cluster's nodes, a
project's commits) write DIR/series.parquet, DIR/series.md and DIR/series_trend.{html,svg}
(dlbench.present.comparison_series), every test of every set adjusted together.

--fail-on names the verdicts that fail the gate: a direction (slower, less-accurate, ...) counts only where the
tested change lies beyond the margin, never on a point estimate alone. Exit status 0 (compared; the gate, if
any, passed), 1 (the gate failed: one line per setting and metric on stdout), 2 (could not compare: one line on
stderr naming the problem and the fix, before any work where the input is wrong).

The numbers are dlbench.analysis.comparison's; this module words them, draws the ratios and is the command.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench import arguments
from dlbench.aggregate.collect import write_parquet
from dlbench.analysis import comparison_stats, stats
from dlbench.analysis.comparison import (
    ADJUSTMENT,
    ALPHA,
    CONTENDED,
    EQUIVALENT,
    GATE_WORDS,
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
    compare_series,
    differences,
    find_set,
    offending,
    per_framework,
    read_set,
)
from dlbench.atomic import atomic_path
from dlbench.node import locks
from dlbench.present import comparison_series
from dlbench.present.markdown import escape

__all__ = ["CONTENDED", "EQUIVALENT", "GATE_WORDS", "INCONCLUSIVE", "METRICS", "OUTPUTS", "UNTESTABLE",
           "CompareError", "baseline_runs", "compare", "compare_series", "offending",
           "per_framework"]  # what the workflow's rules and scripts take from here


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
        name_b: str | None = None, margins: stats.Margins | None = None, name_a: str | None = None,
        require_common: bool = False) -> pd.DataFrame:
    """Compare the result sets at path_a (A) and path_b (B) into out_dir (OUTPUTS). `require_common`: B sharing
    no setting that has finished runs in both is a CompareError, and nothing is written (the command's rule; the
    workflow's rule writes what one set alone holds)."""
    a, b = read_set(path_a), read_set(path_b)
    table = compare(a, b, alpha, margins)
    if require_common:
        _require_common(table, name_b or str(path_b), name_a or str(path_a))
    text = markdown(table, differences(a, b), name_a or str(path_a), name_b or str(path_b), len(a), len(b), alpha,
                    margins)
    write(table, text, out_dir)
    return table


def _require_common(table: pd.DataFrame, name: str, baseline: str) -> None:
    """A set that shares no setting with finished runs with the baseline cannot be compared with it: a gate would
    pass it having tested nothing."""
    if not ((table["a_n"] > 0) & (table["b_n"] > 0)).any():
        raise CompareError(f"{name} and {baseline} share no setting with finished runs in both; compare result sets "
                           "of the same study (the same points)")


def run_series(paths: list[str], names: list[str], out_dir: str | Path, alpha: float = ALPHA,
               margins: stats.Margins | None = None) -> pd.DataFrame:
    """Each set at paths[1:] against the baseline at paths[0] into out_dir (comparison_series.SERIES_OUTPUTS)."""
    margins = margins or stats.Margins()
    sets = [read_set(p) for p in paths]
    series = compare_series(sets[0], list(zip(names[1:], sets[1:])), alpha, margins)
    for name in names[1:]:
        _require_common(series[series["set"] == name], name, names[0])
    comparison_series.write(series, comparison_series.markdown(series, sets, names, list(map(str, paths)), alpha,
                                                               margins), names, out_dir)
    return series


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


def _gate_words(text: str) -> list[str]:
    """--fail-on: verdicts by their gate names (GATE_WORDS), comma-separated; a near miss is named."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    for word in words:
        if word not in GATE_WORDS:
            near = difflib.get_close_matches(word, GATE_WORDS, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise argparse.ArgumentTypeError(f"{word!r} is not a verdict the gate knows{hint}; give some of "
                                             f"{', '.join(GATE_WORDS)}, comma-separated")
    if not words:
        raise argparse.ArgumentTypeError(f"no verdict given; give some of {', '.join(GATE_WORDS)}, comma-separated")
    return words


def set_names(paths: list[str], given: str | None) -> list[str]:
    """Each result set's name in the outputs: --names (one per set, the baseline first), else the last part of
    its path that is not `results` or `runs.parquet` (the folder of a run); where two would read the same, the
    paths as given."""
    if given is not None:
        names = [n.strip() for n in given.split(",")]
        if len(names) != len(paths) or not all(names) or len(set(names)) != len(names):
            raise CompareError(f"--names gives {len(names)} names for {len(paths)} result sets; give one distinct "
                               "name per set, the baseline first, comma-separated")
        return names
    short = []
    for text in paths:
        parts = [p for p in Path(text).parts if p not in (".", "/")]
        while parts and parts[-1] in ("results", "runs.parquet"):
            parts.pop()
        short.append(parts[-1].removesuffix(".parquet") if parts else text)
    if len(set(short)) == len(short):
        return short
    names = []
    for text in paths:  # the same path twice: numbered, so that the trend draws each
        names.append(text if text not in names else f"{text} ({sum(n.startswith(text) for n in names) + 1})")
    return names


def _gate_lines(table: pd.DataFrame, fail_on: list[str], names: list[str], margins: stats.Margins) -> list[str]:
    """One line per setting and metric the gate fails on: the set, the setting, the metric, the verdict and the
    tested change with its interval, and the margin it lies beyond."""
    lines = []
    for _, r in offending(table, fail_on).iterrows():
        where = r["set"] if "set" in r else names[1]
        told = is_changed(pd.Series([r["verdict"]])).iloc[0]
        change = f", {_change(r)} beyond the margin of {margins.text(r['metric'])}" if told else ""
        lines.append(f"dlbench: compare: gate: {where}: {r['framework']} {r['dataset']} {r['device']} {r['label']}: "
                     f"{r['metric']} {r['verdict']}{change}")
    return lines


# Exit statuses: the gate passed (or none was asked for), the gate failed, and the sets could not be compared.
EXIT_PASSED, EXIT_GATE_FAILED, EXIT_NOT_COMPARED = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dlbench compare",
        description="compare result sets with a baseline, setting by setting, each with a verdict (--fail-on: a CI "
        "gate): per setting and metric, each set's mean over the baseline's with its interval",
        epilog="Exit status: 0 compared (and the gate, if any, passed); 1 the gate failed, one line per setting "
        "on stdout; 2 could not compare (bad input, or the node's measurement lock held too long), one line on "
        "stderr. Two sets write DIR/comparison.{parquet,md} and DIR/comparison_ratios.{html,svg}; three or more "
        "write DIR/series.{parquet,md} and DIR/series_trend.{html,svg}.")
    parser.add_argument("baseline", metavar="BASELINE", help="the baseline (A): a results folder or a runs.parquet")
    parser.add_argument("results", nargs="+", metavar="RESULTS",
                        help="result sets compared with the baseline, in order (releases, nodes, commits)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for the comparison's files (created)")
    parser.add_argument("--names", default=None, metavar="NAME,...",
                        help="each set's name in the outputs, the baseline first (default: from their paths)")
    parser.add_argument("--fail-on", type=_gate_words, default=None, metavar="VERDICT,...",
                        help="exit 1 where a setting of any set gets one of these verdicts: slower, faster, "
                        "less-accurate, more-accurate (only where the tested change lies beyond the margin), "
                        "inconclusive, untestable, failed (no finished run where the baseline has one); "
                        "for CI: --fail-on slower,less-accurate")
    parser.add_argument("--alpha", type=_level, default=ALPHA,
                        help="the tests' level: the false discovery rate of Benjamini-Hochberg's adjustment, and "
                        "each one-sided test's (default %(default)g)")
    parser.add_argument("--time-margin-pct", type=arguments.positive, default=stats.Margins.time_pct,
                        help="times within this many per cent (set / baseline) are equivalent (default %(default)g)")
    parser.add_argument("--accuracy-margin-pp", type=arguments.positive, default=stats.Margins.accuracy_pp,
                        help="accuracies within this many points are equivalent (default %(default)g)")
    args = parser.parse_args(argv)
    paths = [args.baseline, *args.results]
    try:
        if Path(args.out).exists() and not Path(args.out).is_dir():
            raise CompareError(f"--out {args.out} is a file, not a folder; name a folder (it is created)")
        names = set_names(paths, args.names)
        for path in paths:
            find_set(path)  # every set there before any is read
    except CompareError as exc:
        print(f"dlbench: compare: {exc}", file=sys.stderr)
        return EXIT_NOT_COMPARED
    margins = stats.Margins(accuracy_pp=args.accuracy_margin_pp, time_pct=args.time_margin_pct)
    try:
        # heavy work (reading the result sets, their tests, the charts): never beside a measurement on this node
        with locks.heavy_work(locks.node_lock(), "the comparison"):
            if len(paths) == 2:
                table = run(paths[0], paths[1], args.out, args.alpha, name_b=args.names and names[1],
                            margins=margins, name_a=args.names and names[0], require_common=True)
            else:
                table = run_series(paths, names, args.out, args.alpha, margins)
    except CompareError as exc:
        print(f"dlbench: compare: {exc}", file=sys.stderr)
        return EXIT_NOT_COMPARED
    except (locks.LockTimeout, locks.LockUnusable) as exc:  # the node's locks: held too long, or unusable here
        print(f"dlbench: compare: {exc}", file=sys.stderr)
        return EXIT_NOT_COMPARED
    if len(paths) == 2:
        changed = int(is_changed(table["verdict"]).sum())
        print(f"{args.out}/comparison.md: {changed} of {len(table)} comparisons changed beyond the noise")
    else:
        per_set = ", ".join(f"{name} {int(is_changed(rows['verdict']).sum())}"
                            for name, rows in table.groupby("set", sort=False))
        print(f"{args.out}/series.md: comparisons changed beyond the noise, per set: {per_set}")
    if not args.fail_on:
        return EXIT_PASSED
    lines = _gate_lines(table, args.fail_on, names, margins)
    unsure = int(table["verdict"].str.replace(CONTENDED, "", regex=False).isin([INCONCLUSIVE, UNTESTABLE]).sum())
    for line in lines:
        print(line)
    told = f"; {unsure} could not be told ({INCONCLUSIVE} or {UNTESTABLE})" if unsure else ""
    if lines:
        print(f"dlbench: compare: the gate fails: {len(lines)} settings and metrics {' or '.join(args.fail_on)}"
              f"{told}")
        return EXIT_GATE_FAILED
    print(f"dlbench: compare: the gate passes: no setting {' or '.join(args.fail_on)}{told}")
    return EXIT_PASSED


if __name__ == "__main__":
    sys.exit(main())
