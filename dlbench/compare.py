"""Two result sets side by side: the same settings measured twice (another machine, framework version, dlbench).

    python -m dlbench.compare RESULTS_A RESULTS_B --out DIR

RESULTS_A and RESULTS_B are result folders (holding runs.parquet, or only runs/<framework>/<dataset>/<point>/
metrics.json) or runs.parquet files. Their points are joined on their settings: every point parameter but the
repeat and seed (the record's `setting_id`; older records by their setting columns), so that the repeats of a
setting are its sample. What differs between the sets as a whole (host, CPU, GPU, environment, framework
version, dlbench commit) is named, not joined on. Per setting and metric, DIR/comparison.parquet holds both
sets' means with their intervals, the ratio B / A with its interval and a verdict by a named test;
DIR/comparison.md says it in words and DIR/comparison_ratios.{html,svg} draws the ratios per framework.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench import compare_stats, records, stats, tables
from dlbench.atomic import atomic_path
from dlbench.results import write_parquet

# Each metric compared, and the words of its verdict when B's mean is above / below A's beyond the noise.
METRICS = {
    "train_time_s": ("slower", "faster"),
    "test_time_s": ("slower", "faster"),
    "accuracy": ("more accurate", "less accurate"),
}
SAME = "same (within noise)"
TOO_FEW = "too few runs (fewer than 2 on a side)"
ONLY_A, ONLY_B = "only in A", "only in B"
FAILED_A, FAILED_B = "no finished run in A", "no finished run in B"
CONTENDED = " (contended runs)"
ALPHA = stats.ALPHA
# The settings of a point, for records made before `setting_id` (tables.SETTINGS, plus what it leaves implied).
EXTRA_SETTINGS = ["init", "lr_policy_json", "input_json", "validation_json", "test_batch_size", "test_interval",
                  "shuffle", "ema_decay", "version"]
# What a result set holds that is not a setting: compared as a whole, per framework where it is the framework's.
MACHINE_FACTS = ["host", "cpu_model", "cpu_cores_logical", "cpu_cores_usable", "memory_total_mb", "cpu_governor",
                 "cpu_boost", "gpu_model", "gpu_driver", "os", "python_runner", "dlbench_version", "dlbench_commit",
                 "dlbench_dirty"]
FRAMEWORK_FACTS = ["env_name", "env_kind", "env_key", "framework_version", "framework_numpy_version",
                   "framework_python_version", "cuda_version", "cudnn_version", "blas"]
# What a comparison writes into its folder.
OUTPUTS = ("comparison.parquet", "comparison.md", "comparison_ratios.html", "comparison_ratios.svg")
# Settings listed in comparison.md at most; the parquet holds every one.
MD_ROWS = 200


class CompareError(ValueError):
    """Result sets that cannot be compared; the message is one line for the user."""


# ---------------------------------------------------------------------------------------------- reading


def baseline_runs(path: str | Path, own: str | Path = "results/runs.parquet") -> str:
    """The runs.parquet of a config's `compare.baseline` (the file, or in the folder or its results/)."""
    path = Path(path).expanduser()
    found = next((c for c in (path, path / "runs.parquet", path / "results" / "runs.parquet")
                  if c.is_file() and c.suffix == ".parquet"), None)
    if found is None:
        raise CompareError(f"{path} holds no runs.parquet; give a results folder of another run (its aggregation "
                           "wrote runs.parquet there) or the file itself")
    if found.resolve() == Path(own).resolve():
        raise CompareError(f"{path} is this study's own results; give another run's")
    return str(found)


def read_set(path: str | Path) -> pd.DataFrame:
    """One result set's runs: runs.parquet (the file, or in the folder or its results/), else its records."""
    path = Path(path)
    for candidate in (path, path / "runs.parquet", path / "results" / "runs.parquet"):
        if candidate.is_file() and candidate.suffix == ".parquet":
            return pd.read_parquet(candidate)
    for runs in (path / "runs", path / "results" / "runs"):
        if runs.is_dir():
            found = [r for p in sorted(runs.glob("*/*/*/metrics.json")) if (r := records.read_or_skip(p))]
            if found:
                return pd.DataFrame(found).rename(columns={"id": "run_id"})
    raise CompareError(f"{path} holds no results: give a results folder (runs.parquet, or runs/.../metrics.json) "
                       "or a runs.parquet file")


def settings_key(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each run's setting: its `setting_id` where every record of both sets has one, else its setting columns."""
    if all("setting_id" in df and df["setting_id"].notna().all() for df in (a, b)):
        return a["setting_id"].astype(str), b["setting_id"].astype(str)
    columns = [c for c in dict.fromkeys(tables.SETTINGS + EXTRA_SETTINGS) if c in a or c in b]

    def key(df: pd.DataFrame) -> pd.Series:
        frame = df.reindex(columns=columns).astype(object).where(lambda x: x.notna(), None).astype(str)
        return frame.agg("|".join, axis=1)

    return key(a), key(b)


def _with_settings(df: pd.DataFrame, key: pd.Series) -> pd.DataFrame:
    out = tables.points(df)
    out["setting"] = key.to_numpy()
    if "contended" in df:  # issue 21's flag: a run timed while other work took the machine's CPUs
        out["contended"] = df["contended"].fillna(False).astype(bool).to_numpy()
    else:
        out["contended"] = False
    return out


# ---------------------------------------------------------------------------------------------- what differs


def differences(a: pd.DataFrame, b: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(what, A's values, B's values) of every machine, environment and dlbench fact the two sets differ in."""
    def values(df: pd.DataFrame, column: str, framework: str | None = None) -> str:
        rows = df if framework is None else df[df["framework"] == framework]
        if column not in rows:
            return "not recorded"
        found = sorted(set(rows[column].dropna().unique().astype(str)))
        return ", ".join(found) if found else "not recorded"

    out = [(c, values(a, c), values(b, c)) for c in MACHINE_FACTS]
    shared = sorted(set(a["framework"]) & set(b["framework"]))
    out += [(f"{c} ({fw})", values(a, c, fw), values(b, c, fw)) for c in FRAMEWORK_FACTS for fw in shared]
    return [(what, va, vb) for what, va, vb in out if va != vb]


# ---------------------------------------------------------------------------------------------- the comparison


def _summary(df: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per setting: finished runs of the metric (n, mean, variance), failed runs, contended runs."""
    ok = df["status"].eq("ok") & df[metric].notna()
    finished = df[ok].groupby("setting")[metric].agg(n="count", mean="mean", var="var")
    every = df.assign(failed=df["status"].ne("ok")).groupby("setting").agg(failed=("failed", "sum"),
                                                                          contended=("contended", "sum"))
    return every.join(finished, how="left").fillna({"n": 0}).astype({"n": int, "contended": int})


def compare(a: pd.DataFrame, b: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """One row per setting and metric: both sets' n, mean and interval, the ratio B / A with its interval, the
    test's p (Holm-adjusted over every test of the comparison) and the verdict."""
    key_a, key_b = settings_key(a, b)
    pa, pb = _with_settings(a, key_a), _with_settings(b, key_b)
    describe = pd.concat([pa, pb]).drop_duplicates("setting").set_index("setting")
    label_cols = ["framework", "dataset", "device", "whose", "reading", "network", "batch_size", "learning_rate",
                  "length", "length_unit", "threads", "library", "compile", "precision"]
    labels = describe[label_cols].copy()
    labels["label"] = tables.settings_label(describe, set())
    rows = []
    for metric, words in METRICS.items():
        sa, sb = _summary(pa, metric), _summary(pb, metric)
        both = sa.add_prefix("a_").join(sb.add_prefix("b_"), how="outer")
        both["metric"] = metric
        both["more"], both["less"] = words
        rows.append(both)
    out = pd.concat(rows).reset_index(names="setting")
    for side in "ab":
        out[f"{side}_n"] = out[f"{side}_n"].fillna(0).astype(int)
        out[f"{side}_present"] = out[f"{side}_failed"].notna()
        low, high = compare_stats.mean_interval(out[f"{side}_mean"], out[f"{side}_var"], out[f"{side}_n"])
        out[f"{side}_ci_low"], out[f"{side}_ci_high"] = low, high
    ratio = compare_stats.ratio_of_means(out["a_mean"], out["a_var"], out["a_n"],
                                         out["b_mean"], out["b_var"], out["b_n"])
    for column, values in ratio.items():
        out[column] = values
    out["test"] = compare_stats.TEST
    out["p_holm"] = stats.holm(out["p_value"])
    out["contended"] = (out["a_contended"].fillna(0) + out["b_contended"].fillna(0)) > 0
    out["verdict"] = _verdicts(out, alpha)
    out = out.join(labels, on="setting")
    keep = ["setting", "label", *label_cols, "metric", "a_n", "a_mean", "a_ci_low", "a_ci_high", "a_failed",
            "a_contended", "b_n", "b_mean", "b_ci_low", "b_ci_high", "b_failed", "b_contended", "ratio",
            "ratio_ci_low", "ratio_ci_high", "p_value", "p_holm", "test", "contended", "verdict"]
    return out[keep].sort_values(["metric", "framework", "dataset", "device", "label"], kind="stable",
                                 ignore_index=True)


def per_framework(table: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """Per framework and metric, over its settings with a ratio: the geometric mean ratio B / A with its t
    interval (the settings its sample), the one-sample t of "no change" on the log ratios (Holm-adjusted over
    these rows) and a verdict. A shift too small to tell in one setting of a few repeats shows here."""
    rows = []
    usable = table[table["ratio"].notna() & (table["ratio"] > 0)]
    for (framework, metric), group in usable.groupby(["framework", "metric"], sort=False):
        logs = np.log(group["ratio"].to_numpy())
        mean, low, high = stats.t_interval(logs)
        test = stats.paired(logs, np.zeros(len(logs)))  # one-sample t: the log ratios against 0
        rows.append({"framework": framework, "metric": metric, "settings": len(logs), "ratio": np.exp(mean),
                     "ratio_ci_low": np.exp(low), "ratio_ci_high": np.exp(high), "p_value": test.p})
    out = pd.DataFrame(rows, columns=["framework", "metric", "settings", "ratio", "ratio_ci_low", "ratio_ci_high",
                                      "p_value"])
    out["p_holm"] = stats.holm(out["p_value"])
    more, less = out["metric"].map(lambda m: METRICS[m][0]), out["metric"].map(lambda m: METRICS[m][1])
    out["verdict"] = np.select([out["p_holm"].isna(), (out["p_holm"] < alpha) & (out["ratio"] > 1),
                                out["p_holm"] < alpha], [TOO_FEW.replace("runs", "settings"), more, less],
                               default=SAME)
    return out


def _verdicts(out: pd.DataFrame, alpha: float) -> pd.Series:
    beyond = out["p_holm"] < alpha
    verdict = np.select(
        [~out["a_present"], ~out["b_present"], out["a_n"] == 0, out["b_n"] == 0,
         (out["a_n"] < 2) | (out["b_n"] < 2) | out["p_holm"].isna(), beyond & (out["ratio"] > 1), beyond],
        [ONLY_B, ONLY_A, FAILED_A, FAILED_B, TOO_FEW, out["more"], out["less"]], default=SAME)
    verdict = pd.Series(verdict, index=out.index, dtype=object)
    return verdict.where(~out["contended"], verdict + CONTENDED)


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


def markdown(table: pd.DataFrame, diff: list[tuple[str, str, str]], name_a: str, name_b: str,
             n_a: int, n_b: int, alpha: float = ALPHA) -> str:
    """comparison.md: what differs between the sets, what changed beyond the noise, what did not, what one lacks."""
    settings = table.drop_duplicates("setting")
    lines = [f"# {name_b} (B) against {name_a} (A)", "",
             f"A: {n_a} runs; B: {n_b} runs; {settings['setting'].nunique()} settings in all "
             "(a setting: every point parameter but the repeat and seed; its repeats are its sample).", "",
             f"Test: {compare_stats.TEST}; Holm-adjusted over the comparison's {int(table['p_value'].notna().sum())}"
             f" tests, alpha {alpha:g}. Intervals: 95%. A ratio is B's mean over A's.", "",
             "## What differs between the sets", ""]
    lines += [f"- {what}: A {va}; B {vb}" for what, va, vb in diff] or ["- nothing recorded differs"]
    changed = table[is_changed(table["verdict"])].copy()
    changed["distance"] = np.log(changed["ratio"]).abs()
    changed = changed.sort_values("distance", ascending=False)
    lines += ["", f"## Changed beyond the noise: {len(changed)}", ""]
    if len(changed):
        lines += ["| framework | dataset | device | settings | metric | A | B | B / A | verdict |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for _, r in changed.head(MD_ROWS).iterrows():
            lines.append(f"| {r['framework']} | {r['dataset']} | {r['device']} | {r['label']} | {r['metric']} | "
                         f"{_interval(r, 'a')} | {_interval(r, 'b')} | {r['ratio']:.3f} "
                         f"[{r['ratio_ci_low']:.3f}, {r['ratio_ci_high']:.3f}] | {r['verdict']} |")
        if len(changed) > MD_ROWS:
            lines.append(f"\n{len(changed) - MD_ROWS} more in comparison.parquet.")
    else:
        lines.append("None.")
    lines += ["", "## Per framework", "",
              "Over each framework's settings with a ratio: the geometric mean of their ratios B / A with its 95% "
              "interval (the settings as the sample) and the one-sample t of its logarithm against 0, Holm-adjusted "
              "over these rows. A shift too small to tell in a setting of a few repeats shows here.", "",
              "| framework | metric | settings | B / A | verdict |", "| --- | --- | --- | --- | --- |"]
    for _, r in per_framework(table, alpha).iterrows():
        interval = "" if pd.isna(r["ratio_ci_low"]) else f" [{r['ratio_ci_low']:.3f}, {r['ratio_ci_high']:.3f}]"
        lines.append(f"| {r['framework']} | {r['metric']} | {r['settings']} | {r['ratio']:.3f}{interval} | "
                     f"{r['verdict']} |")
    lines += ["", "## Counted", "", "| metric | verdict | settings |", "| --- | --- | --- |"]
    for (metric, verdict), n in table.groupby(["metric", "verdict"]).size().items():
        lines.append(f"| {metric} | {verdict} | {n} |")
    contended = settings[settings["contended"]]
    lines += ["", f"Settings with contended runs (timed while other work took the machine's CPUs): {len(contended)};"
              " each verdict they enter says so." if len(contended) else
              "No run of either set is marked contended (or the records do not say)."]
    for side, verdict in (("A", ONLY_A), ("B", ONLY_B)):
        only = settings[settings["verdict"].str.startswith(verdict)]
        per = ", ".join(f"{fw} {n}" for fw, n in only.groupby("framework").size().items())
        lines.append(f"\nIn {side} only: {len(only)} settings" + (f" ({per})" if per else "")
                     + ", not compared.")
    return "\n".join(lines) + "\n"


def chart(table: pd.DataFrame):
    """The ratios B / A per framework, one panel per metric, each with its interval; coloured by verdict."""
    import altair as alt

    from dlbench import chart_pieces

    drawn = table[table["ratio"].notna() & (table["ratio"] > 0)].copy()
    if drawn.empty:
        return chart_pieces.no_data("B / A per framework", "no setting has finished runs in both sets")
    keep = chart_pieces.drawn(drawn, chart_pieces.MAX_MARKS, by=("framework", "metric"))
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
    subtitle = chart_pieces.sample_note(len(shown), len(drawn), "settings")
    return alt.layer(bars, dots, one, data=shown).properties(width=420, height=160).facet(
        row=alt.Row("metric:N", title=None)).properties(title=chart_pieces.titled("B / A per framework", *subtitle))


def write(table: pd.DataFrame, text: str, out_dir: str | Path) -> list[Path]:
    from dlbench import charts

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(table, out / "comparison.parquet")
    with atomic_path(out / "comparison.md", suffix=".md") as tmp:
        Path(tmp).write_text(text)
    charts.save(chart(table), out / "comparison_ratios")
    return [out / name for name in OUTPUTS]


def run(path_a: str | Path, path_b: str | Path, out_dir: str | Path, alpha: float = ALPHA,
        name_b: str | None = None) -> pd.DataFrame:
    """Compare the result sets at path_a (A) and path_b (B) into out_dir (OUTPUTS)."""
    a, b = read_set(path_a), read_set(path_b)
    table = compare(a, b, alpha)
    text = markdown(table, differences(a, b), str(path_a), name_b or str(path_b), len(a), len(b), alpha)
    write(table, text, out_dir)
    return table


# ---------------------------------------------------------------------------------------------- versions


def _version_order(version: str):
    from packaging.version import InvalidVersion, Version

    try:
        return (0, Version(version), "")
    except InvalidVersion:
        return (1, None, version)


def version_section(runs: pd.DataFrame, alpha: float = ALPHA) -> list[str]:
    """findings.md's lines on what each framework version changed (a study listing several: `versions:`),
    each version against the one before it, over the settings both ran; none where no study did."""
    if "version" not in runs or runs["version"].isna().all():
        return []
    lines = ["## What the framework version changed", "",
             f"Each version against the one before it, on the settings both ran ({compare_stats.TEST}, "
             f"Holm-adjusted per pair of versions, alpha {alpha:g}). A ratio is the newer version's mean over the "
             "older one's.", ""]
    versioned = runs[runs["version"].notna()]
    for framework, group in versioned.groupby("framework"):
        order = sorted(group["version"].unique(), key=_version_order)
        for old, new in zip(order, order[1:]):
            a, b = (group[group["version"] == v].drop(columns=["setting_id", "version"], errors="ignore")
                    for v in (old, new))
            table = compare(a, b, alpha)
            for metric, rows in table.groupby("metric", sort=False):
                both = rows[rows["ratio"].notna()]
                counts = ", ".join(f"{n} {verdict}" for verdict, n in rows["verdict"].value_counts().items())
                median = f"median ratio {both['ratio'].median():.3f}" if len(both) else "no setting ran in both"
                lines.append(f"- {framework} {new} against {old}, {metric}: {median} over {len(both)} settings; "
                             f"{counts}")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.compare", description=__doc__.split("\n")[0])
    parser.add_argument("a", help="result set A (the baseline): a results folder or a runs.parquet")
    parser.add_argument("b", help="result set B, compared with A")
    parser.add_argument("--out", required=True, help="folder for comparison.parquet, comparison.md and the chart")
    parser.add_argument("--alpha", type=float, default=ALPHA, help="the tests' level after Holm's adjustment")
    args = parser.parse_args(argv)
    try:
        table = run(args.a, args.b, args.out, args.alpha)
    except CompareError as exc:
        print(f"dlbench: compare: {exc}", file=sys.stderr)
        return 2
    changed = int(is_changed(table["verdict"]).sum())
    print(f"{args.out}/comparison.md: {changed} of {len(table)} comparisons changed beyond the noise")
    return 0


if __name__ == "__main__":
    sys.exit(main())
