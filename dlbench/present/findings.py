"""The study's findings in words, computed from the results: results/findings.md.

Which framework is fastest and most accurate and whether the data can tell, whether the framework matters at
all (ANOVA, Friedman), how many repeats a tighter interval needs, which batch size and learning rate served
each framework best, whether a framework's own defaults are best for it, what cross-applying settings did (and
under which reading), whether one framework's best settings carry over to another, what tuning around the
defaults gained, what failed, the published study's observations (dlbench.analysis.observations), and guidance for a
service provider and a consumer. Every comparison states its interval and test (dlbench.analysis.verdicts); the
numbers come from dlbench.analysis.frames, dlbench.analysis.summary and dlbench.analysis.published; this module words
them.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from dlbench import atomic
from dlbench.analysis import stats
from dlbench.analysis.frames import AXIS_PAIRS, NEAR_BEST_PP, READING_TEXT, READINGS, axis_speedups, points
from dlbench.analysis.groups import contended_count
from dlbench.analysis.guidance import efficiency, fastest_configurations, knob_wins, time_to_target
from dlbench.analysis.joint_grids import tuning_table
from dlbench.analysis.observations import OBSERVATIONS, Verdict, observations  # noqa: F401 - Verdict: the findings' type
from dlbench.analysis.published import PUBLISHED_CSV, leaders_vs_published, published_ratios, speedups_vs_published
from dlbench.analysis.sentences import metric_words
from dlbench.analysis.summary import (
    TARGETS,
    best_values,
    carry_over,
    cross_effects,
    failures,
    framework_effect,
    framework_leaders,
    own_vs_cross,
    readings_ran,
    repeats_by_metric,
    repeats_needed,
    top_throughput,
)
from dlbench.analysis.verdicts import (
    UNITS,
    answered,
    headline,
    judgement_text,
    leader_text,
    number,
    shortened_text,
    state,
    value,
    work_text,
)
from dlbench.present import comparison, markdown
from dlbench.present.calibrated import Power, power_of
from dlbench.present.charts import catalog
from dlbench.record import statuses

LISTED = 20  # sweeps worded one by one in a section (the rest counted)
EXAMPLES = 3  # settings worded in full per framework (the rest are in the chart)


def _frame(obj) -> pd.DataFrame:
    if obj is None:
        return pd.DataFrame()
    return obj if isinstance(obj, pd.DataFrame) else pd.read_parquet(obj)


# ---------------------------------------------------------------------------------------------
# Guidance for the study's two readers
# ---------------------------------------------------------------------------------------------

def provider_guidance(runs: pd.DataFrame) -> list[str]:
    """For a service provider: which framework and library settings give the most training throughput per core
    and per GB of memory (dlbench.analysis.guidance: efficiency, knob_wins); each sentence with its numbers, or what is
    missing."""
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
            whole = (f"{number(top.throughput_img_s)} img/s on {top.threads:g} threads" if column == "img_s_per_core"
                     else f"{number(top.throughput_img_s)} img/s at {top.throughput_img_s / top[column]:.3g} GB")
            line = (f"On {dataset}/{device}, the most training throughput {per}: {top.framework} with "
                    f"{top.settings}, {number(top[column])} img/s ({whole})")
            if len(best) > 1:
                seeds = "per_core_by_seed" if column == "img_s_per_core" else "per_gb_by_seed"
                result = stats.leader({r.framework: getattr(r, seeds) for r in best.itertuples()}, True,
                                      "throughput_img_s")
                line += (f"; each framework's best setting, mean [95 % interval]: "
                         f"{leader_text(result, 'throughput_img_s')}; the best of the others: " + "; ".join(
                             f"{r.framework} {number(getattr(r, column))} img/s ({r.settings})"
                             for r in best.iloc[1:].itertuples()))
            out.append(line + f" ({len(ranked)} settings of {len(best)} frameworks compared).")
    knobs = knob_wins(eff)
    for r in knobs.itertuples():
        out.append(f"{r.framework} on {r.dataset}/{r.device}: {r.winner} gave the most throughput per core in {r.wins} "
                   f"of {r.groups} settings where the library knobs varied alone, told apart from every other "
                   f"knob setting in {r.told} of them; e.g. with {r.example['base_settings'].iloc[0]}: " + ", ".join(
                       f"{e.knobs} {number(e.img_s_per_core)} img/s per core ({number(e.img_s_per_gb)} per GB)"
                       for e in r.example.itertuples())
                   + f": {r.example_leader.name} leads, {state(r.example_leader)}.")
    if knobs.empty:
        out.append("No library, thread or inter-op setting was varied with the other settings fixed: which library "
                   "settings serve a provider best cannot be said from this run (sweep `library`, `threads` or "
                   "`interop_threads`).")
    if not (eff["device"] == "gpu").any():
        out.append("No GPU point ran ok: what a GPU gives per core or per GB cannot be said from this run.")
    return out


def _compile_part(row) -> str:
    """"3.31 s of it compiling; " where the time to a target holds a compile phase worth saying (a framework
    without one reports a few microseconds between its phase marks)."""
    c = row.compile_time_s
    return f"{c:.3g} s of it compiling; " if c is not None and not pd.isna(c) and c >= 0.01 else ""


def _reaching(row) -> str:
    """How many of the soonest setting's counted runs reached the target."""
    return f"{row.runs_reaching} of that setting's {row.runs} counted runs reached it"


def consumer_guidance(runs: pd.DataFrame, curves: pd.DataFrame | None) -> list[str]:
    """For a consumer: which framework and settings reach a target accuracy soonest (guidance.time_to_target)."""
    ttt = time_to_target(runs, curves)
    if ttt.empty:
        return ["No ok point left a learning curve with test accuracies: how soon a framework reaches a target "
                "accuracy cannot be said from this run."]
    out = []
    for (dataset, device), g in ttt.groupby(["dataset", "device"]):
        first = g.iloc[0]
        line = (f"To reach {first.target_pct:.1f}% test accuracy on {dataset}/{device} (the best accuracy every "
                f"framework here reached in at least one run), the soonest was {first.framework} with "
                f"{first.settings}: {first.time_to_target_s:.4g} s (test at iteration {first.iteration:g}; "
                f"{_compile_part(first)}{_reaching(first)})")
        if len(g) > 1:
            line += "; then " + "; ".join(f"{r.framework} with {r.settings}: {r.time_to_target_s:.4g} s "
                                           f"({_compile_part(r)}{_reaching(r)})" for r in g.iloc[1:].itertuples())
            result = stats.leader({r.framework: r.setting_by_seed for r in g.itertuples()}, False, "train_time_s")
            line += (". Each framework's soonest setting, mean time to the target over its runs that reached it "
                     f"[95 % interval]: {leader_text(result, 'train_time_s')}")
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
    return markdown.escape(v)  # a cell may hold text from the data (a failure reason)


def md_table(df: pd.DataFrame, columns: dict[str, str]) -> str:
    cols = [c for c in columns if c in df.columns]
    lines = ["| " + " | ".join(columns[c] for c in cols) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        lines.append("| " + " | ".join(_cell(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def _with_interval(estimate, low, high, told, digits: str = "+.3g", unit: str = "") -> str:
    """"+2 [+1.1, +2.9], higher"; "+2, single run: no interval"; "-" where nothing was compared."""
    if pd.isna(estimate):
        return "-"
    text = f"{estimate:{digits}}{unit}"
    if told == "-":
        return text
    if pd.notna(low):
        text += f" [{low:{digits}}, {high:{digits}}]"
    return f"{text}, {told}"


def _tuning_section(runs: pd.DataFrame) -> list[str]:
    table = tuning_table(runs)
    out = ["## Tuned against own defaults", ""]
    if table.empty:
        return out + ["Not tested in this run: no sub-study tunes (`tune:` in the config).", ""]
    grids = table.drop_duplicates("tuning_grid")
    table = table.assign(
        gain=[_with_interval(r.accuracy_gain_pp, r.gain_ci_low, r.gain_ci_high, r.gain_told)
              for r in table.itertuples()],
        saved=[_with_interval(r.time_saved_pct, r.saved_ci_low, r.saved_ci_high, r.time_told)
               for r in table.itertuples()],
        best=table["best_told"].fillna(""))
    out += [f"{len(grids)} tuning grids ({', '.join(f'{int(n)} settings' for n in sorted(set(grids['tried'])))} "
            "each; mean over ok repeats). Per grid: its defaults, the setting with the best accuracy (ties: faster), "
            f"and the fastest setting within {NEAR_BEST_PP:g} points of the best accuracy; gain: accuracy points "
            "over the defaults, and training time saved in % of the defaults' (negative: longer), each with its "
            "95 % interval and what the test tells (paired t by seed where both ran the same seeds, else Welch's t; "
            "time on the log of the ratio); the best setting against the grid's other cells (Holm over them).", "",
            md_table(table, {"framework": "framework", "dataset": "dataset", "device": "device",
                             "whose": "whose defaults", "choice": "setting", "batch_size": "batch size",
                             "learning_rate": "learning rate", "length": "length", "length_unit": "unit",
                             "accuracy_pct": "accuracy (%)", "train_time_s": "train time (s)",
                             "gain": "gain (points)", "saved": "time saved (%)", "best": "best against the rest",
                             "failed": "cells with failures"}), ""]
    return out


# What each switch axis's other value is called in the findings (frames.AXIS_PAIRS).
SWITCH_NAMES = {"compile": "Compiling", "precision": "bfloat16 (mixed precision)",
                "memory_format": "PyTorch's channels-last layout (torch.channels_last)"}


def _config_name(r) -> str:
    return f"{r.framework} {r.compile}, {r.precision}"


def modern_section(runs: pd.DataFrame, curves: pd.DataFrame | None, margins: stats.Margins | None = None) -> list[str]:
    """Which framework, compiled or not, in which precision, is fastest to a target accuracy on this machine; what
    compiling, bfloat16 and PyTorch's channels-last layout each bought per framework, and what they cost in
    accuracy. runs: frames.points."""
    out = ["## Compiled or not, and in which precision", ""]
    fast = fastest_configurations(runs, curves)
    speed = {axis: axis_speedups(runs, axis, margins) for axis in AXIS_PAIRS}
    if fast.empty and all(t.empty for t in speed.values()):
        return out + ["Not tested in this run: no framework ran both eager and compiled, or both fp32 and bf16, "
                      "or both memory layouts, with its other settings the same (sweep `compile`, `precision` and "
                      "`memory_format`, as config/modern.yaml does).", ""]
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
        what = SWITCH_NAMES[axis]
        if table.empty:
            out += [f"{what}: not tested ({base} and {other} never both ran ok with the other settings the same).",
                    ""]
            continue
        lines = []
        for framework, f in table.groupby("framework", sort=False):
            counts = f["speedup_told"].value_counts()
            text = (f"{framework}: {other} trained {f['speedup'].min():.2f}-{f['speedup'].max():.2f}x as fast as "
                    f"{base} over {len(f)} setting(s), told faster in {counts.get('faster', 0)}, slower in "
                    f"{counts.get('slower', 0)}; " + "; ".join(
                        f"{r.settings}, {r.threads:g} thread(s): "
                        f"{_with_interval(r.speedup, r.speedup_low, r.speedup_high, r.speedup_told, '.3g', 'x')}, "
                        f"accuracy {_with_interval(r.accuracy_change_pp, r.change_low, r.change_high, r.change_told)} "
                        "points" for r in f.head(EXAMPLES).itertuples()))
            if len(f) > EXAMPLES:
                text += f"; {len(f) - EXAMPLES} more in the chart"
            if axis == "compile":
                text += f"; compiling took {f['compile_time_s'].median():.3g} s (median)"
            lines.append(text)
        out += [f"{what}, against {base} with everything else the same (training throughput alone, the compile "
                "phase apart; each with its 95 % interval, paired t by seed where both ran the same seeds, else "
                "Welch's t):", "", *[f"- {line}." for line in lines], ""]
    best = top_throughput(runs)
    if best is not None:
        bf16 = pd.to_numeric(pd.Series([best.get("peak_gflops_bf16")]), errors="coerce").iloc[0]
        line = (f"The highest training throughput of these frameworks: {best.framework} {best.compile}, "
                f"{best.precision} on {best.threads:g} thread(s) ({best.whose} defaults), {best.achieved_gflops:.4g} "
                f"GFLOP/s, {100 * best.peak_fraction_fp32:.1f}% of this machine's float32 GEMM peak")
        if pd.notna(bf16) and bf16 > 0:
            line += f" and {100 * best.achieved_gflops / bf16:.1f}% of its bfloat16 GEMM peak"
        out += [line + ".", ""]
    return out


def _contended_line(df: pd.DataFrame, contended: int) -> str:
    if not contended:
        measured = "host_cpu_other_pct_mean" in df.columns and df["host_cpu_other_pct_mean"].notna().any()
        return ("No ok point was timed under outside load." if measured else
                "No record says whether others loaded the machine while it trained (records made before that was "
                "measured count as uncontended).")
    return (f"{contended} ok point(s) trained while others loaded the machine (`contended` in the record): their "
            "times, and what is made of them (throughput, CPU use), are left out of every mean, interval, test and "
            "verdict below, and the charts mark them; their accuracy counts (load changes when a run ends, not what "
            "it learns).")


def _leaders_section(runs: pd.DataFrame, published: pd.DataFrame | None, margins: stats.Margins,
                     power: Power) -> list[str]:
    out = ["## Fastest and most accurate framework", "",
           "Per dataset and device, among each framework's own defaults (its default point: no swept value; the "
           "frameworks matched on threads and library) and among the frameworks that ran one preset (at that "
           "preset's own batch size and learning rate; a sweep beside it is not pooled in), over the runs timed "
           "without outside load: the leader, "
           "its mean [95 % interval], and what a named test tells of it against each rival (paired by setting "
           "and seed where both ran the same ones, else Welch's t; Holm over the rivals): better, equivalent "
           f"within the margin ({margins.time_pct:g} % of time, {margins.accuracy_pp:g} "
           "points of accuracy; two one-sided tests), inconclusive (with the smallest difference the data could "
           "have detected, at the level the corrected p is read at), or not testable (fewer than three runs a "
           "side, or no spread). Where the frameworks trained different numbers of images, their times are also "
           "compared per 1,000 images; where own defaults ran at a length other than their presets' own, it says "
           "so.", ""]
    for metric in ("train_time_s", "accuracy_pct"):
        table = framework_leaders(runs, metric, margins)
        for r in table.itertuples():
            where = f"{r.dataset}/{r.device}" + ("" if r.comparison == "own defaults" else f", {r.comparison}")
            where += ", own defaults" if r.comparison == "own defaults" else ""
            notes = "".join(f" {text[0].upper()}{text[1:]}." for text in
                            (work_text(r.work, r.per_image), shortened_text(r.shortened)) if text)
            said = power.note(f"leader, {r.comparison}, {metric_words(metric)}",
                              f"leader, {r.comparison}, {r.dataset}/{r.device}, {metric_words(metric)}")
            out.append(f"- {headline(r.result, metric, where)}{said}. {leader_text(r.result, metric)}.{notes}")
    if len(out) == 4:
        out.append("No dataset and device where two frameworks ran ok with the same defaults.")
    vs = leaders_vs_published(runs, published)
    out += ["", "With their own defaults, next to the published table (among the same frameworks; by means: the "
            "study's observations (g) and (h) below say whether the data can tell):", "",
            md_table(vs, {"dataset": "dataset", "device": "device", "frameworks": "frameworks compared",
                          "fastest": "fastest here", "published_fastest": "published fastest",
                          "fastest_agrees": "same", "most_accurate": "most accurate here",
                          "published_most_accurate": "published most accurate", "most_accurate_agrees": "same"})
            if not vs.empty else "Not compared: no dataset and device with own-defaults points of two frameworks "
                                 "of the published table.", ""]
    return out


def _framework_effect_section(runs: pd.DataFrame, margins: stats.Margins, power: Power) -> list[str]:
    out = ["## Does the framework matter? (the same network, data and settings)", ""]
    effect = framework_effect(runs, margins=margins)
    if effect.empty:
        return out + ["Not tested in this run: no whole preset ran on two or more frameworks with three or more "
                      "seeds each (cross_apply: preset, repeats: 3).", ""]
    out += ["Where several frameworks trained the same network on the same data with the same settings, three "
            "or more seeds each: the test the design calls for (the seed as block, over the seeds every framework "
            "ran: the two-way ANOVA with the seed as block, times on their logarithms, or the paired t for two; a "
            "seed one framework lacks is left out of it, and said; the one-way ANOVA, or Welch's t, only where "
            "fewer than three seeds are shared), and equivalence where every two frameworks lie within the margin "
            "(two one-sided tests each). Friedman's rank test is shown beside it.", ""]
    words = {"differ": "the frameworks differ", "equivalent": "the frameworks are equivalent within the margin",
             "inconclusive": "inconclusive", "untestable": "not testable"}
    for r in effect.itertuples():
        unit = UNITS[r.metric]
        means = "; ".join(f"{fw} {value(d, unit)}" for fw, d in r.means.items())
        what = "test accuracy" if r.metric == "accuracy_pct" else "training time"
        shown = [r.test] + [t for t in (r.anova, r.friedman) if t is not r.test and t.name != r.test.name]
        tests = "; ".join(t.text() for t in shown)
        detail = ""
        if r.verdict == "inconclusive":
            detail = f" (the closest two: {judgement_text(r.closest, unit.strip() and unit)})"
        elif r.verdict == "equivalent":
            detail = f" ({r.closest.tost_text(unit)}, the widest pair)"
        left = "; ".join(f"{fw}'s seed(s) {', '.join(f'{s:g}' if isinstance(s, float) else str(s) for s in seeds)}"
                         for fw, seeds in r.seeds_left_out.items())
        blocked = (f" (left out of the blocked test, which not every framework has among its counted runs: {left})"
                   if left else "")
        out.append(f"- {r.dataset}/{r.device}, {r.settings}, {what}: {means}. {tests}{blocked}: "
                   f"**{words[r.verdict]}**{detail}{power.note(f'framework effect, {metric_words(r.metric)}')}.")
    return out + [""]


def _repeats_section(runs: pd.DataFrame) -> list[str]:
    out = ["## How many repeats", ""]
    table = repeats_needed(runs)
    if table.empty:
        return out + ["No ok points.", ""]
    targets = ", ".join(f"{m.replace('_pct', '').replace('_s', '').replace('_', ' ')} {t:g} "
                        f"{'points' if u == 'points' else '% of its mean'}" for m, (u, t) in TARGETS.items())
    out += [f"The half-width of each setting's 95 % interval, against a target ({targets}), and about how many "
            "runs would bring it under the target (from the spread seen; a setting of one run has no spread).", ""]
    for r in repeats_by_metric(table).itertuples():
        unit = UNITS[r.metric]
        if not r.spread:
            out.append(f"- {r.metric}: every setting ran once: no interval, and no spread to size the repeats from.")
            continue
        out.append(f"- {r.metric}: {int(r.reached)} of {r.spread} settings with two or more runs reach "
                   f"the target; median half-width {r.median_half_width:.3g}{unit} (n {int(r.median_n)}); "
                   f"the widest {r.widest_half_width:.3g}{unit} ({r.widest_framework}, {r.widest_settings}, "
                   f"n {int(r.widest_n)})"
                   + (f"; about {int(r.runs_needed)} runs would bring every setting under the target"
                      if pd.notna(r.runs_needed) else "")
                   + (f"; {r.ran_once} setting(s) ran once" if r.ran_once else "") + ".")
    return out + [""]


def not_drawn_line(not_drawn: dict[str, str]) -> str:
    """The charts a study did not draw, and why, in one line (charts of one reason together, in the charts'
    order); empty where every chart was drawn."""
    by_reason: dict[str, list[str]] = {}
    for name in sorted(not_drawn, key=lambda n: list(catalog.CHARTS).index(n) if n in catalog.CHARTS else 99):
        title = catalog.CHARTS[name].title if name in catalog.CHARTS else name
        by_reason.setdefault(not_drawn[name], []).append(title if title[:2].isupper() else title[0].lower() + title[1:])
    if not by_reason:
        return ""
    return "Charts not drawn (no data in this study): " + "; ".join(
        f"{' and '.join(titles)} ({markdown.escape(why)})" for why, titles in by_reason.items()) + "."


def render(runs: pd.DataFrame, curves: pd.DataFrame | None = None, published: pd.DataFrame | None = None,
           margins: stats.Margins | None = None, not_drawn: dict[str, str] | None = None,
           study_file: str | Path | None = None) -> str:
    """The findings in Markdown. `not_drawn`: the charts the study did not draw and why (their folder's index,
    catalog.read_index), said in a line under the study's counts; None: not said. `study_file`: the config file
    the study ran as it is (none where --config changed it): a calibrated design's sentences quote their power
    (present.calibrated)."""
    margins = margins or stats.Margins()
    # The points once, handed to every table (each one's own points() is then a copy, not a recomputation).
    df = points(runs)
    power = power_of(df, study_file)
    n_ok = int((df["status"] == "ok").sum())
    out = ["# Findings of this run", ""]
    if df.empty:
        return "\n".join(out + ["No points in results/runs.parquet: nothing to report.", ""])
    readings = readings_ran(df)
    contended = contended_count(df)
    out += [f"{len(df)} points ({n_ok} ok, {len(df) - n_ok} failed); frameworks: "
            f"{', '.join(sorted(set(df['framework'])))}; datasets: {', '.join(sorted(set(df['dataset'])))}; "
            f"devices: {', '.join(sorted(set(df['device'])))}; whose defaults: {', '.join(sorted(set(df['whose'])))}"
            + (f"; other frameworks' presets applied as: {', '.join(READINGS[r] for r in readings)}" if readings
               else "") + ". Means are over ok points, each with its 95 % Student-t interval [low, high] and n; "
            "failed points are counted apart; times are this machine's.", "",
            _contended_line(df, contended), ""]
    if not_drawn:
        out += [not_drawn_line(not_drawn), ""]
    out += _leaders_section(df, published, margins, power)
    out += _framework_effect_section(df, margins, power)
    out += _repeats_section(df)

    out += ["## Best batch size and learning rate per framework", "",
            "By mean test accuracy of ok points, per framework and fixed other settings, where two or more values "
            "ran; the best against the runner-up by a named test (Holm over the values tried).", ""]
    for param, name in (("batch_size", "batch size"), ("learning_rate", "learning rate")):
        best = best_values(df, param, margins)
        out += [f"Best {name}:", ""]
        if best.empty:
            out += [f"Not swept in this run (one {name} per framework).", ""]
            continue
        counts = best["state"].value_counts()
        out += [f"{len(best)} sweeps: the best told apart from every other value in "
                f"{int(counts.get('distinct', 0))}, equivalent within the margin to one or more in "
                f"{int(counts.get('equivalent', 0))}, inconclusive in {int(counts.get('inconclusive', 0))}, not "
                f"testable in {int(counts.get('untestable', 0))}"
                + (f"; the first {LISTED} of them:" if len(best) > LISTED else ":"), ""]
        out += [f"- {r.framework} on {r.dataset}/{r.device} ({r.settings}; tried {r.tried}): best {name} "
                f"{getattr(r, param):g}, {state(r.result)}. {leader_text(r.result, 'accuracy_pct')}"
                for r in best.head(LISTED).itertuples()]
        out.append("")

    out += _tuning_section(df)

    out += ["## Are a framework's own defaults best for it?", ""]
    ovc = own_vs_cross(df, margins)
    ovc = ovc.assign(test_text=[judgement_text(t, " points") for t in ovc["test"]])
    out += [md_table(ovc, {"framework": "framework", "dataset": "dataset", "device": "device",
                           "reading": "applied as", "own_accuracy_pct": "own defaults: accuracy (%)",
                           "best_cross": "best other defaults", "best_cross_accuracy_pct": "their accuracy (%)",
                           "own_is_best": "own is best (means)", "told": "as far as the data can tell",
                           "test_text": "test"})
            if not ovc.empty else "Not tested: no framework ran both with its own defaults and another's.", ""]

    out += ["## What cross-applying settings did", ""]
    cross = cross_effects(df)
    if readings:
        out += ["Other frameworks' presets were applied as " + "; and as ".join(READING_TEXT[r] for r in readings)
                + ".", ""]
    out += [md_table(cross, {"framework": "framework", "dataset": "dataset", "device": "device",
                             "whose": "whose defaults", "reading": "applied as", "settings": "at",
                             "n_ok": "counted", "n_contended": "under load (time left out)", "n_failed": "failed",
                             "accuracy_pct": "accuracy (%)", "accuracy_change_pp": "vs own (points)",
                             "train_time_s": "train time (s)", "time_ratio_to_own": "time / own"})
            if not cross.empty else "Not tested: every framework ran with one preset only.", ""]

    out += ["## Do one framework's best settings carry over to another?", ""]
    carry = carry_over(df, margins)
    out += [f"The preset that served framework A best, applied to framework B, against B's best: it carries over "
            f"where B's accuracy with it is equivalent to B's best within {margins.accuracy_pp:g} points (two "
            "one-sided tests) or is B's best itself, and falls short where B's best is told better (else "
            "inconclusive, or not testable below three runs a side).", "",
            md_table(carry.assign(reading=carry["reading"].map(READINGS),
                                  test_text=[judgement_text(t, " points") if a != b else "none needed: B's best itself"
                                             for t, a, b in zip(carry["test"], carry["best_preset"],
                                                                carry["to_best_preset"])]),
                     {"dataset": "dataset", "device": "device", "reading": "applied as",
                      "from_framework": "A", "best_preset": "A's best preset", "to_framework": "B",
                      "accuracy_with_pct": "B with it (%)", "to_best_preset": "B's best preset",
                      "to_best_pct": "B's best (%)", "shortfall_pp": "shortfall (points)",
                      "told": "as far as the data can tell", "test_text": "test"})
            if not carry.empty else "Not tested: no two frameworks each ran two or more frameworks' presets.", ""]

    out += modern_section(df, curves, margins)
    out += comparison.version_section(runs)  # the records as they are: it sets two result sets side by side

    out += ["## Failed points", ""]
    fails = failures(df)
    if fails.empty:
        out += ["None: every point finished ok.", ""]
    else:
        by_status = ", ".join(f"{s} {n}" for s, n in fails.groupby("status")["n"].sum().items())
        out += [f"{int(fails['n'].sum())} of {len(df)} points failed ({by_status}).", ""]
        unread = int(fails.loc[fails["status"] == statuses.DAMAGED, "n"].sum())
        if unread:  # planned and run, but no record the tables can trust: said apart, with the fix
            out += [f"{unread} of the {len(df)} planned points {'has' if unread == 1 else 'have'} no readable record "
                    "(`damaged`: its metrics.json cannot be read, or its files disagree with it); `snakemake "
                    "--forcerun records` makes each one again from its raw measurement, as its reason says.", ""]
        out += [md_table(fails, {"framework": "framework", "status": "status", "n": "points",
                                 "example_reason": "a reason"}), ""]

    ratios = published_ratios(df, published) if published is not None else pd.DataFrame()
    out += ["## This machine next to the published figures", ""]
    if ratios.empty:
        out += ["Not compared: no ok point with the frameworks' own defaults on a dataset of the published "
                "table's shape and size (MNIST, or Fashion-MNIST standing in for it; CIFAR-10) and device.", ""]
    else:
        fp64 = sorted(set(ratios.loc[ratios["precision"] == "fp64", "framework"]))
        out += ["Each framework's default point, like with like: fashion_mnist stands in for MNIST (its shape and "
                "size) beside the published MNIST row; the embedded digits are never set beside published figures. "
                "Each in the precision the study's scripts ran it where this run has it (Theano in float64, its "
                "floatX default; Torch7's CIFAR-10 script in double)"
                + (f": {', '.join(fp64)} here in float64" if fp64 else ": none ran in float64 here, so every row is "
                   "float32") + ".", "",
                md_table(ratios, {"dataset": "dataset", "published_dataset": "published", "framework": "framework",
                                  "device": "device", "precision": "precision", "train_time_s": "train time (s)",
                                  "published_train_time_s": "published (s)", "train_time_ratio": "ratio",
                                  "accuracy_pct": "accuracy (%)", "published_accuracy_pct": "published (%)",
                                  "accuracy_diff_pp": "difference (points)"}), ""]
    gpu = speedups_vs_published(df, published)
    if not gpu.empty:
        out += ["GPU speed-up of training (CPU time / GPU time, own defaults, same settings on both):", "",
                md_table(gpu, {"dataset": "dataset", "framework": "framework", "cpu_s": "CPU (s)", "gpu_s": "GPU (s)",
                               "cpu_over_gpu": "speed-up", "published_cpu_over_gpu": "published speed-up"}), ""]

    out += ["## The study's observations", ""]
    verdicts = observations(df, curves, published, margins)
    told = sum(answered(v.verdict) for v in verdicts.values())
    out += [f"Answered (agrees, disagrees or equivalent within the margin) for {told} of {len(OBSERVATIONS)} "
            "observations; an observation agrees or disagrees only where a named test tells the frameworks or "
            "settings apart, and is equivalent only where two one-sided tests place them within the margin; "
            "inconclusive and not testable are no answer. " + power.intro(), ""]
    for obs in OBSERVATIONS:
        v = verdicts[obs.key]
        out.append(f"- ({obs.key}) {obs.text} **{v.verdict}**{power.note(f'({obs.key})')}"
                   + (f". {v.evidence}" if v.evidence else ""))
    out.append("")

    out += ["## Guidance", "", "### For a service provider: throughput per core and per GB", "",
            "Training throughput in images per second (means over ok repeats), per core: divided by the threads "
            "a point was given; per GB: divided by its peak resident memory.", ""]
    out += [f"- {line}" for line in provider_guidance(df)]
    out += ["", "### For a consumer: the soonest to a target accuracy", "",
            "From the learning curves: a run is timed at its first test at or above the target, its compile phase "
            "included where it has one, so a run tested only at its end counts its whole training time.", ""]
    out += [f"- {line}" for line in consumer_guidance(df, curves)]
    out.append("")
    return "\n".join(out)


def write_findings(runs_df, curves_df, path, published_csv=None, margins: stats.Margins | None = None,
                   not_drawn: dict[str, str] | None = None, study_file: str | Path | None = None) -> str:
    """Write the findings as Markdown to `path` (atomically); runs/curves: DataFrames or Parquet paths; `margins`:
    the equivalence margins (config `verdicts`); `not_drawn`: the charts not drawn and why (render)."""
    runs = _frame(runs_df)
    curves = _frame(curves_df)
    pub_path = Path(published_csv) if published_csv else PUBLISHED_CSV
    published = pd.read_csv(pub_path) if pub_path.exists() else None
    text = render(runs, curves, published, margins, not_drawn, study_file)
    with atomic.atomic_path(path, suffix=".md") as tmp:
        tmp.chmod(0o644)
        tmp.write_text(text)
    return text

