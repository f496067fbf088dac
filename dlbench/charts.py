"""The study's charts, drawn with Altair from the Parquet tables.

Each chart is saved as self-contained HTML (Vega inlined: opens offline) and SVG,
atomically. A chart that has no data in a study (no GPU points, no threads sweep, ...)
is still written, as a chart that says so. Failed points are drawn too (hollow red
marks, or their own bars in the status chart), so a missing bar is never mistaken for
a failure. What the charts draw is computed in `dlbench.tables`; this module only draws.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd

from dlbench import chartlist
from dlbench.atomic import atomic_path
from dlbench.chartlist import category, chart_files, chart_name  # noqa: F401 - the rules' names, here too
from dlbench.frameworks import registry
from dlbench.published import PUBLISHED_CSV, published_ratios, read_published
from dlbench.summary import framework_means
from dlbench.tables import (
    AXIS_PAIRS,
    FRAMEWORKS,
    HYPER_PARAMETERS,
    NEAR_BEST_PP,
    PHASES,
    PRESET_ORDER,
    READING_TEXT,
    READINGS,
    RESOURCES,
    STATUSES,
    axis_speedups,
    defaults_table,
    ok_points,
    pareto_front,
    phase_spans,
    points,
    representative_runs,
    resource_correlations,
    settings_label,
    speedups,
    status_counts,
    sweep_table,
    thin,
    time_to_accuracy_table,
)
from dlbench.tuning import TUNED, tuning_cells, tuning_table

FORMATS = chartlist.FORMATS
NO_DATA = "no data for this chart in this study"
MAX_SAMPLES = 1500  # readings per run drawn in a timeline
# Marks of one kind a chart draws (an SVG of much more than this is slow to open and to move in): past it a
# chart draws a random sample of its points or runs, fixed by SEED, says so in its subtitle, and computes
# every mean, front and count from all of them. The same in every study, so a chart's data never depends on
# anything but the points.
MAX_MARKS = 4000
SEED = 0

# Saving uses VegaFusion's data transformer: it evaluates the charts' remaining transforms (means, counts,
# filters) in Python, and lifts Altair's 5,000-row limit on inline data. A faceted chart still inlines its
# whole source, which is why the charts pass only the rows they draw.
SAVE_TRANSFORMER = "vegafusion"

FRAMEWORK_COLORS = alt.Scale(domain=FRAMEWORKS, range=[registry.get(f).color for f in FRAMEWORKS])
FAILED_SHAPES = alt.Scale(domain=STATUSES[1:], range=["cross", "triangle-down", "triangle-down", "diamond", "square",
                                                     "triangle-up", "triangle-down"])
STATUS_COLORS = alt.Scale(domain=STATUSES, range=["#4c9f38", "#d62728", "#8c1a1a", "#e377c2", "#ff7f0e", "#9467bd",
                                                  "#7f7f7f", "#bcbd22"])
CONTENDED_COLOR = "#ff7f0e"  # points timed while others loaded the machine
PHASE_COLORS = alt.Scale(domain=PHASES, range=["#d9d9d9", "#c6dbef", "#fdd0a2", "#dadaeb", "#fcbba1", "#c7e9c0",
                                               "#fee391", "#f2f2f2"])


# ---------------------------------------------------------------------------------------------
# Chart pieces
# ---------------------------------------------------------------------------------------------

def _color():
    return alt.Color("framework:N", scale=FRAMEWORK_COLORS, title="framework")


def _failed_shape(df: pd.DataFrame):
    """Shape by status for failed points: the same shape for a status in every chart; legend only if any failed."""
    present = [st for st in STATUSES[1:] if st in set(df["status"])]
    present += sorted(set(df["status"]) - set(STATUSES))
    if not present:
        return alt.Shape("status:N", legend=None)
    shapes = dict(zip(FAILED_SHAPES.domain, FAILED_SHAPES.range))
    return alt.Shape("status:N", title="failed point",
                     scale=alt.Scale(domain=present, range=[shapes.get(st, "circle") for st in present]))


def _title(text: str, *subtitle: str) -> alt.TitleParams:
    return alt.TitleParams(text=text, subtitle=list(subtitle) or alt.Undefined, anchor="start", fontSize=15)


def no_data(title: str, why: str = "") -> alt.Chart:
    """A chart that says it has nothing to show: a valid file in every format."""
    lines = [NO_DATA] + ([why] if why else [])
    return alt.Chart(pd.DataFrame({"text": ["\n".join(lines)]})).mark_text(
        size=14, lineBreak="\n", color="#555555").encode(text="text:N").properties(
        width=520, height=80, title=_title(title))


def _facet(chart, df: pd.DataFrame, row: str | None = "device", column: str | None = "dataset"):
    kw = {}
    if row and row in df.columns:
        kw["row"] = alt.Row(f"{row}:N", title=row)
    if column and column in df.columns:
        kw["column"] = alt.Column(f"{column}:N", title=column.replace("_label", ""))
    return chart.facet(**kw) if kw else chart


def _tooltip(df: pd.DataFrame, *extra: str) -> list[str]:
    wanted = ["run_id", "framework", "status", "reason", "whose", "batch_size", "learning_rate", "length",
              "length_unit", "threads", *extra]
    seen = []
    for c in wanted:
        if c in df.columns and c not in seen and df[c].notna().any():
            seen.append(c)
    return seen


def _slim(df: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    """Only the columns a chart uses (the runs table holds logs and JSON blobs that would bloat the file)."""
    keep = ["run_id", "framework", "dataset", "device", "status", "reason", "whose", "is_own", "batch_size",
            "learning_rate", "length", "length_unit", "threads", *extra]
    keep = [c for c in dict.fromkeys(keep) if c in df.columns]
    out = df[keep].copy()
    if "reason" in out.columns:
        out["reason"] = out["reason"].astype("string").str.slice(0, 160)
    return out


def drawn(df: pd.DataFrame, limit: int, by=("framework", "dataset", "device")) -> pd.Series:
    """Which rows a chart draws: all of them up to `limit`, else a random sample of about `limit` (seed SEED)
    taking the same share of every framework, dataset and device, at least one row of each."""
    if len(df) <= limit:
        return pd.Series(True, index=df.index)
    rng = np.random.default_rng(SEED)
    score = pd.Series(rng.random(len(df)), index=df.index)
    rank = score.groupby([df[c].astype(str) for c in by if c in df.columns]).rank(method="first")
    size = score.groupby([df[c].astype(str) for c in by if c in df.columns]).transform("size")
    return rank <= np.maximum(1, np.floor(size * limit / len(df)))


def drawn_groups(table: pd.DataFrame, group: str, limit: int) -> tuple[pd.DataFrame, list[str]]:
    """The rows of whole groups (a line, a run) a chart draws, about `limit` rows in all, and its subtitle note."""
    per_group = table.groupby(group, sort=False).first().reset_index()
    if len(table) <= limit:
        return table, []
    keep = per_group[drawn(per_group, max(1, limit * len(per_group) // len(table)))][group]
    return table[table[group].isin(set(keep))], sample_note(len(keep), len(per_group), "lines")


def sample_note(shown: int, total: int, what: str, *extra: str) -> list[str]:
    """The subtitle line of a chart that draws a sample (none when it draws everything)."""
    if shown >= total:
        return []
    return [f"drawn: a random sample of {shown:,} of the {total:,} {what}" + "".join(f"; {e}" for e in extra)]


@dataclass(frozen=True)
class Spec:
    make: Callable
    category: str
    title: str


def _per_framework(metric: str, label: str, log: bool):
    what = {"train_time_s": "Training time", "test_time_s": "Testing time", "accuracy_pct": "Test accuracy"}[metric]
    title = f"{what} per framework, by dataset and device"

    def make(runs, curves=None, samples=None, published=None):
        df = points(runs)
        if df.empty:
            return no_data(title)
        shown = (df["status"] == "ok") & df[metric].notna() & ((df[metric] > 0) if log else True)
        good = shown & ~df["contended"]  # what the means count; contended points are drawn, marked, apart
        failed = df["status"] != "ok"
        if not shown.any() and not failed.any():
            return no_data(title, f"no point has a {label}")
        bottom = (df.loc[shown, metric].min() / 2 if shown.any() else 1.0) if log else 0.0
        # The bars: means over every ok, uncontended point with their 95 % interval (n >= 2); the dots and failed
        # marks: every point, or a sample of them.
        means = framework_means(df[good], metric).assign(layer="mean")
        dots = df[shown & drawn(df[shown], MAX_MARKS)]
        bad_rows = df[failed & drawn(df[failed], MAX_MARKS // 4)]
        data = pd.concat([_slim(dots, [metric, "peak_fraction", "contended"]).assign(layer="point"),
                          _slim(bad_rows, [metric, "peak_fraction"]).assign(layer="failed"), means],
                         ignore_index=True).assign(failed_at=bottom)
        scale = alt.Scale(type="log") if log else alt.Scale(zero=True, domain=[0, 100])
        base = alt.Chart().encode(x=alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0)))
        bars = base.transform_filter("datum.layer == 'mean'").mark_bar(opacity=0.4, width={"band": 0.7}).encode(
            y=alt.Y(f"{metric}:Q", title=label, scale=scale), color=_color(),
            tooltip=[alt.Tooltip("framework:N"), alt.Tooltip(f"{metric}:Q", format=".4g", title="mean"),
                     alt.Tooltip("ci_low:Q", format=".4g", title="95 % interval from"),
                     alt.Tooltip("ci_high:Q", format=".4g", title="to"), alt.Tooltip("n_ok:Q", title="ok points")])
        whiskers = base.transform_filter("datum.layer == 'mean' && datum.n_ok >= 2").mark_rule(
            color="black", strokeWidth=1.5).encode(y=alt.Y("ci_low:Q", scale=scale), y2="ci_high:Q")
        points_ = base.transform_filter("datum.layer == 'point' && !datum.contended").mark_circle(
            size=45, opacity=0.9).encode(y=alt.Y(f"{metric}:Q", scale=scale), color=_color(),
                                         tooltip=_tooltip(dots, metric, "peak_fraction"))
        busy = base.transform_filter("datum.layer == 'point' && datum.contended").mark_point(
            size=70, shape="diamond", filled=False, strokeWidth=2, color=CONTENDED_COLOR).encode(
            y=alt.Y(f"{metric}:Q", scale=scale), tooltip=_tooltip(dots, metric, "contended"))
        bad = base.transform_filter("datum.layer == 'failed'").mark_point(
            color="red", size=110, filled=False, strokeWidth=2).encode(
            y=alt.Y("failed_at:Q", scale=scale), shape=_failed_shape(bad_rows), tooltip=_tooltip(bad_rows))
        chart = alt.layer(bars, whiskers, points_, busy, bad, data=data).properties(width=200, height=200)
        n_busy = int((shown & df["contended"]).sum())
        return _facet(chart, data).properties(title=_title(
            title, "bar: mean of ok points, black line: its 95 % Student-t interval (two or more points); dots: each "
                   f"ok point; {'log scale; ' if log else ''}red hollow marks at the bottom: failed points (shape = "
                   "status)", *([f"orange diamonds: {n_busy} point(s) timed under outside load, left out of the "
                                 "means"] if n_busy else []),
            *sample_note(len(dots), int(good.sum()), "ok points (dots)", "the bars are means of all"),
            *sample_note(len(bad_rows), int(failed.sum()), "failed points (red marks)")))
    return make


_AXIS_TITLES = {"batch_size": "batch size", "learning_rate": "learning rate", "length": "training length",
                "threads": "threads"}


def _against(param: str, metric: str, label: str, log_x: bool, log_y: bool):
    what = "Training time" if metric == "train_time_s" else "Test accuracy"
    title = f"{what} against {_AXIS_TITLES[param]}"

    def make(runs, curves=None, samples=None, published=None):
        table = sweep_table(runs, param, metric)
        if table.empty:
            return no_data(title, f"this study does not sweep {_AXIS_TITLES[param]} with other settings fixed")
        unit = table["length_unit"].iloc[0] if param == "length" else None
        x_title = f"training length ({unit})" if unit else _AXIS_TITLES[param]
        good = table[metric].notna() & ((table[metric] > 0) if log_y else True)
        if log_y:
            bottom = table.loc[good, metric].min() / 2 if good.any() else 1.0
        elif good.any():  # just below the lowest ok point, so the axis need not stretch down to zero
            lo, hi = table.loc[good, metric].min(), table.loc[good, metric].max()
            bottom = max(0.0, lo - max(1.0, 0.08 * (hi - lo)))
        else:
            bottom = 0.0
        data, note = drawn_groups(table.assign(failed_at=bottom, good=good), "group", MAX_MARKS)
        values = sorted(table[param].unique())
        axis = alt.Axis(values=values, format="~g") if len(values) <= 12 else alt.Axis(format="~g")
        x = alt.X(f"{param}:Q", title=x_title, axis=axis,
                  scale=alt.Scale(type="log" if log_x else "linear", nice=False))
        y_scale = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
        tip = ["framework", "settings", param, alt.Tooltip(f"{metric}:Q", format=".4g"), "n_ok", "failed",
               "statuses"]
        line = alt.Chart().transform_filter("datum.good").mark_line(point=True).encode(
            x=x, y=alt.Y(f"{metric}:Q", title=label, scale=y_scale), color=_color(), detail="group:N",
            tooltip=tip + [alt.Tooltip("ci_low:Q", format=".4g"), alt.Tooltip("ci_high:Q", format=".4g"),
                           "contended"])
        bars = alt.Chart().transform_filter("datum.good && datum.n_ok >= 2").mark_rule(strokeWidth=1.5).encode(
            x=x, y=alt.Y("ci_low:Q", scale=y_scale), y2="ci_high:Q", color=_color(), detail="group:N")
        busy = alt.Chart().transform_filter("datum.contended > 0").mark_point(
            shape="diamond", size=90, filled=False, strokeWidth=2, color=CONTENDED_COLOR).encode(
            x=x, y=alt.Y(f"{metric}:Q", scale=y_scale), tooltip=tip + ["contended"])
        bad = alt.Chart().transform_filter("datum.failed > 0").mark_point(
            color="red", size=110, filled=False, strokeWidth=2, shape="cross").encode(
            x=x, y=alt.Y("failed_at:Q", scale=y_scale), tooltip=tip)
        chart = alt.layer(line, bars, busy, bad, data=data).properties(width=260, height=200)
        return _facet(chart, data).properties(title=_title(
            title, "one line per framework and fixed other settings (hover: which); mean over repeats of ok points, "
                   "with its 95 % interval where two or more ran",
            "red crosses at the bottom: settings with failed points; orange diamonds: settings with points timed "
            "under outside load (left out of the means)", *note))
    return make


def _defaults_matrix(metric: str):
    what = "test accuracy (%)" if metric == "accuracy_pct" else "training time (s)"
    title = f"Own vs cross-applied default settings: {what}"

    def make(runs, curves=None, samples=None, published=None):
        table = defaults_table(runs)
        if table.empty or table["whose"].nunique() < 2:
            return no_data(title, "this study runs every framework with one preset only")
        # A column per preset, and per reading where other frameworks' presets ran under both.
        readings = [r for r in ("settings", "preset") if r in set(table["reading"])]
        both = len(readings) > 1
        table["column"] = [w if r == "own" or not both else f"{w} ({READINGS[r]})"
                           for w, r in zip(table["whose"], table["reading"])]
        fmt = "{:.1f}%" if metric == "accuracy_pct" else "{:.3g} s"
        table["label"] = [
            ("\n".join([fmt.format(v)] + ([f"{nf} failed"] if nf else [])) if pd.notna(v) else f"all {nf} failed")
            for v, nf in zip(table[metric], table["n_failed"])]
        vals = table[metric].dropna()
        if metric == "train_time_s":
            logv = np.log(vals.clip(lower=1e-9))
            lo, hi = (logv.min(), logv.max()) if len(vals) else (0, 1)
            rel = (np.log(table[metric].clip(lower=1e-9)) - lo) / ((hi - lo) or 1)
        else:
            lo, hi = (vals.min(), vals.max()) if len(vals) else (0, 1)
            rel = (table[metric] - lo) / ((hi - lo) or 1)
        table["dark"] = (rel > 0.55).fillna(False)
        whose = [p for p in PRESET_ORDER if p in set(table["whose"])] + sorted(set(table["whose"]) - set(PRESET_ORDER))
        order = sorted(set(table["column"]), key=lambda c: (whose.index(c.split(" (")[0]), c))
        x = alt.X("column:N", title="whose default settings", sort=order)
        y = alt.Y("framework:N", title="framework", sort=FRAMEWORKS)
        scale = alt.Scale(type="log", scheme="blues") if metric == "train_time_s" else alt.Scale(scheme="blues")
        cells = alt.Chart().mark_rect().encode(
            x=x, y=y, color=alt.Color(f"{metric}:Q", title=what, scale=scale),
            tooltip=["framework", "whose", "reading", alt.Tooltip(f"{metric}:Q", format=".4g"), "n_ok", "n_failed",
                     "is_own"])
        empty = alt.Chart().transform_filter(f"!isValid(datum.{metric})").mark_rect(
            color="#fbe3e3", stroke="#d62728").encode(x=x, y=y)
        own = alt.Chart().transform_filter("datum.is_own").mark_rect(
            fill=None, stroke="black", strokeWidth=2.5).encode(x=x, y=y)
        text = alt.Chart().mark_text(lineBreak="\n", fontSize=11).encode(
            x=x, y=y, text="label:N",
            color=alt.condition("datum.dark", alt.value("white"), alt.value("black")))
        chart = alt.layer(cells, empty, own, text, data=table).properties(width=60 * len(order), height=50 * max(
            1, table["framework"].nunique()))
        applied = ("other frameworks' defaults applied as " + "; and as ".join(READING_TEXT[r] for r in readings)
                   if readings else "no other framework's defaults applied")
        return _facet(chart, table).properties(title=_title(
            title, "rows: framework trained; columns: whose defaults it trained with; black frame: its own defaults",
            applied, "cell: mean over ok points; red cells: every point failed"))
    return make


def _tuning_chart(runs, curves=None, samples=None, published=None):
    title = "Tuning around the defaults: accuracy and time over batch size x learning rate"
    cells = tuning_cells(runs)
    if cells.empty:
        return no_data(title, "this study has no tuning grid (`tune:` in a sub-study)")
    picks = tuning_table(runs)
    marks: dict[tuple, list[str]] = {}
    for r in picks.itertuples():
        if r.choice != "defaults" and pd.notna(r.accuracy_pct):
            key = (r.tuning_grid, r.batch_size, r.learning_rate, r.length)
            marks.setdefault(key, []).append("best" if r.choice == "best accuracy" else "fast")
    cells["mark"] = [" + ".join(marks.get((g, b, lr, n), [])) for g, b, lr, n in
                     zip(cells["tuning_grid"], cells["batch_size"], cells["learning_rate"], cells["length"])]
    # One panel per grid (and per length where the grid tunes it), named by what it holds fixed.
    cells["panel"] = [" · ".join(x for x in (fw, d, dev, f"{n:g} {u}", fixed) if x) for fw, d, dev, n, u, fixed in
                      zip(cells["framework"], cells["dataset"], cells["device"], cells["length"],
                          cells["length_unit"], cells["grid_settings"])]
    cells["label"] = [("\n".join([f"{a:.1f}%", f"{t:.3g} s"] + ([m] if m else [])) if pd.notna(a)
                       else f"all {nf} failed") for a, t, m, nf in
                      zip(cells["accuracy_pct"], cells["train_time_s"], cells["mark"], cells["n_failed"])]
    acc = cells["accuracy_pct"]  # white text on the darker half of the (shared) colour scale
    cells["dark"] = ((acc - acc.min()) / ((acc.max() - acc.min()) or 1) > 0.55).fillna(False)
    x = alt.X("learning_rate:O", title="learning rate", axis=alt.Axis(labelAngle=0, format="~g"))
    y = alt.Y("batch_size:O", title="batch size", sort="descending")
    tip = ["framework", "dataset", "device", "whose", *TUNED, "length_unit",
           alt.Tooltip("accuracy_pct:Q", format=".2f"), alt.Tooltip("train_time_s:Q", format=".4g"), "n_ok",
           "n_failed", "mark"]
    rect = alt.Chart().mark_rect().encode(
        x=x, y=y, color=alt.Color("accuracy_pct:Q", title="test accuracy (%)", scale=alt.Scale(scheme="greens")),
        tooltip=tip)
    failed = alt.Chart().transform_filter("!isValid(datum.accuracy_pct)").mark_rect(
        color="#fbe3e3", stroke="#d62728").encode(x=x, y=y)
    default = alt.Chart().transform_filter("datum.is_default").mark_rect(
        fill=None, stroke="black", strokeWidth=2.5).encode(x=x, y=y)
    text = alt.Chart().mark_text(lineBreak="\n", fontSize=10).encode(
        x=x, y=y, text="label:N", color=alt.condition("datum.dark", alt.value("white"), alt.value("black")))
    per_grid = cells.groupby("panel")
    chart = alt.layer(rect, failed, default, text, data=cells).properties(
        width=70 * int(per_grid["learning_rate"].nunique().max()),
        height=60 * int(per_grid["batch_size"].nunique().max()))
    panels = sorted(set(cells["panel"]), key=lambda p: (FRAMEWORKS.index(p.split(" · ")[0])
                                                        if p.split(" · ")[0] in FRAMEWORKS else 99, p))
    return chart.facet(facet=alt.Facet("panel:N", title=None, sort=panels), columns=4).resolve_scale(
        x="independent", y="independent").properties(title=_title(
            title, "one grid per framework, dataset, device and fixed settings, around the defaults (black frame); "
                   "cell: mean test accuracy and training time over ok repeats",
            f"best: the most accurate setting; fast: the fastest within {NEAR_BEST_PP:g} points of it; red cells: "
            "every point failed"))


def _speedup_chart(runs, curves=None, samples=None, published=None):
    title = "Training speed-up against threads, per framework"
    table = speedups(runs)
    if table.empty:
        return no_data(title, "this study does not vary threads with other settings fixed")
    table, note = drawn_groups(table, "group", MAX_MARKS)
    values = sorted(table["threads"].unique())
    x = alt.X("threads:Q", title="threads", scale=alt.Scale(type="log", base=2, nice=False),
              axis=alt.Axis(values=values, format="~g"))
    tip = ["framework", "settings", "threads", alt.Tooltip("train_time_s:Q", format=".4g"),
           alt.Tooltip("speedup:Q", format=".3g"), "base_threads"]
    lines = alt.Chart().mark_line(point=True).encode(
        x=x, y=alt.Y("speedup:Q", title="speed-up over the fewest threads"), color=_color(), detail="group:N",
        tooltip=tip)
    ideal = alt.Chart().mark_line(strokeDash=[4, 4], color="gray").encode(x=x, y="ideal:Q", detail="group:N")
    bars = alt.Chart().transform_filter("isValid(datum.speedup_low)").mark_rule(strokeWidth=1.5).encode(
        x=x, y="speedup_low:Q", y2="speedup_high:Q", color=_color(), detail="group:N")
    chart = alt.layer(ideal, lines, bars, data=table).properties(width=260, height=220)
    return _facet(chart, table).properties(title=_title(
        title, "speed-up = training time at the group's fewest threads / time at this many (same other settings)",
        "dashed grey: linear (ideal) speed-up; vertical lines: approximate 95 % interval of the ratio where both "
        "thread counts ran twice or more", *note))


def _timeline(column: str, label: str, what: str):
    title = f"{what} over one run per framework, phases shaded"

    def make(runs, curves=None, samples=None, published=None):
        if samples is None or samples.empty or column not in samples.columns or samples[column].notna().sum() == 0:
            return no_data(title, f"no {label} samples")
        chosen = representative_runs(runs, samples[samples[column].notna()])
        if chosen.empty:
            return no_data(title, f"no {label} samples")
        chosen = chosen.assign(panel=chosen["framework"] + " · " + chosen["dataset"] + " · " + chosen["device"]
                               + " · " + chosen["status"])
        panel = dict(zip(chosen["run_id"], chosen["panel"]))
        s = samples[samples["run_id"].isin(panel)][["run_id", "t", "phase", column]].copy()
        spans = phase_spans(s)
        # Long runs: about MAX_SAMPLES readings per run drawn, each bucket's lowest and highest (tables.thin: the
        # peak is kept); the phase spans keep every boundary.
        s = thin(s, column, MAX_SAMPLES).copy()
        s["layer"], spans["layer"] = "sample", "phase"
        data = pd.concat([s, spans], ignore_index=True)
        data["panel"] = data["run_id"].map(panel)
        data["framework"] = data["run_id"].map(dict(zip(chosen["run_id"], chosen["framework"])))
        x = alt.X("t:Q", title="time since launch (s)")
        rects = alt.Chart().transform_filter("datum.layer == 'phase'").mark_rect(opacity=0.6).encode(
            x=alt.X("start:Q", title="time since launch (s)"), x2="end:Q",
            color=alt.Color("phase:N", scale=PHASE_COLORS, title="phase"),
            tooltip=["phase", alt.Tooltip("start:Q", format=".2f"), alt.Tooltip("end:Q", format=".2f")])
        line = alt.Chart().transform_filter("datum.layer == 'sample'").mark_line(
            color="#222222", strokeWidth=1.5, point=alt.OverlayMarkDef(size=12, color="#222222")).encode(
            x=x, y=alt.Y(f"{column}:Q", title=label), tooltip=["phase", "t", column])
        chart = alt.layer(rects, line, data=data).properties(width=620, height=130)
        return chart.facet(row=alt.Row("panel:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left",
                                                                                 labelOrient="top"))).properties(
            title=_title(title, "framework · dataset · device · status of the run shown (an ok own-defaults run "
                                "where there is one); shading: the phase the trainer reported"))
    return make


def _correlation_chart(runs, curves=None, samples=None, published=None):
    title = "Correlation of resource use with hyper-parameters (Spearman), per framework"
    table = resource_correlations(runs)
    if table.empty or table["r"].notna().sum() == 0:
        return no_data(title, "needs 3+ ok points per framework with a varying hyper-parameter")
    table["label"] = table["r"].map(lambda r: f"{r:+.2f}" if pd.notna(r) else "n/a")
    x = alt.X("hyper_parameter:N", title="hyper-parameter", sort=HYPER_PARAMETERS)
    y = alt.Y("resource:N", title="resource", sort=RESOURCES)
    cells = alt.Chart().mark_rect().encode(
        x=x, y=y, color=alt.Color("r:Q", scale=alt.Scale(scheme="redblue", domain=[-1, 1], reverse=True),
                                  title="Spearman r"),
        tooltip=["framework", "dataset", "resource", "hyper_parameter", alt.Tooltip("r:Q", format=".3f"), "n"])
    blank = alt.Chart().transform_filter("!isValid(datum.r)").mark_rect(color="#eeeeee").encode(x=x, y=y)
    text = alt.Chart().mark_text(fontSize=11).encode(x=x, y=y, text="label:N")
    chart = alt.layer(cells, blank, text, data=table).properties(width=210, height=24 * table["resource"].nunique())
    return chart.facet(column=alt.Column("framework:N", title="framework"),
                       row=alt.Row("dataset:N", title="dataset")).properties(title=_title(
        title, "rank correlation over a framework's ok points on one dataset; +1: more of the hyper-parameter, "
               "more of the resource; n/a: the hyper-parameter (or resource) did not vary"))


def _time_to_accuracy(runs, curves=None, samples=None, published=None):
    title = "Time to accuracy: test accuracy against cumulative training time"
    table = time_to_accuracy_table(runs, curves)
    table = table[table["train_time_s"] > 0]
    if table.empty:
        return no_data(title, "no test evaluations in the learning curves")
    table, note = drawn_groups(table, "run_id", MAX_MARKS)  # whole runs: about MAX_MARKS dots in all
    note = [n.replace(" lines", " runs with test evaluations") for n in note]
    x = alt.X("train_time_s:Q", title="compile + cumulative training time (s, log)", scale=alt.Scale(type="log"))
    line = alt.Chart().mark_line(point=True, opacity=0.8).encode(
        x=x, y=alt.Y("accuracy_pct:Q", title="test accuracy (%)", scale=alt.Scale(zero=False)), color=_color(),
        detail="run_id:N", strokeDash=alt.StrokeDash("status:N", title="status"),
        tooltip=["framework", "settings", "status", "iteration", alt.Tooltip("train_time_s:Q", format=".3g"),
                 alt.Tooltip("compile_time_s:Q", format=".3g"), alt.Tooltip("accuracy_pct:Q", format=".2f")])
    chart = alt.layer(line, data=table).properties(width=300, height=220)
    return _facet(chart, table).properties(title=_title(
        title, "one line per run, one dot per test evaluation; the run reached the accuracy after that much "
               "training time, its compile phase (where it has one) included", *note))


def _pareto_chart(runs, curves=None, samples=None, published=None):
    title = "Training time vs accuracy: the Pareto front per dataset and device"
    df = ok_points(points(runs), "train_time_s", "accuracy_pct", positive=True)
    if df.empty:
        return no_data(title, "no ok point with a training time and an accuracy")
    df["front"] = False
    for _, g in df.groupby(["dataset", "device"]):
        df.loc[g.index, "front"] = pareto_front(g, "train_time_s", "accuracy_pct")
    # The front from every ok point; the front always drawn, the others (or a sample of them) behind it.
    rest = df[~df["front"]]
    shown = df[df["front"] | drawn(rest, MAX_MARKS).reindex(df.index, fill_value=False)]
    note = sample_note(int((~shown["front"]).sum()), len(rest), "points off the front",
                       "the front is drawn whole, from all of them")
    shown = shown.assign(settings=settings_label(shown, set()))
    data = _slim(shown, ["train_time_s", "accuracy_pct", "front", "settings"])
    x = alt.X("train_time_s:Q", title="training time (s, log)", scale=alt.Scale(type="log"))
    y = alt.Y("accuracy_pct:Q", title="test accuracy (%)", scale=alt.Scale(zero=False))
    tip = ["framework", "settings", alt.Tooltip("train_time_s:Q", format=".4g"),
           alt.Tooltip("accuracy_pct:Q", format=".2f"), "front"]
    pts = alt.Chart().mark_circle(size=50, opacity=0.45).encode(x=x, y=y, color=_color(), tooltip=tip)
    line = alt.Chart().transform_filter("datum.front").mark_line(
        interpolate="step-after", color="black", strokeWidth=1.5).encode(x=x, y=y, order="train_time_s:Q")
    front = alt.Chart().transform_filter("datum.front").mark_point(
        size=130, filled=True, stroke="black", strokeWidth=1.5, opacity=1).encode(x=x, y=y, color=_color(),
                                                                                   tooltip=tip)
    chart = alt.layer(pts, line, front, data=data).properties(width=300, height=240)
    return _facet(chart, data).properties(title=_title(
        title, "every ok point; outlined and joined: the front (no other point is both faster and more accurate)",
        *note))


def _published_chart(runs, curves=None, samples=None, published=None):
    title = "This machine vs the published study (Wu et al. 2019, GTDLBench), frameworks' own defaults"
    if published is None:
        published = read_published() if PUBLISHED_CSV.exists() else pd.DataFrame()
    table = published_ratios(runs, published)
    if table.empty:
        return no_data(title, "needs ok points with each framework's own defaults (preset `own`) on a published "
                              "dataset and device")
    table["dataset_label"] = [d if d == p else f"{d} (vs published {p})"
                              for d, p in zip(table["dataset"], table["published_dataset"])]
    table["ratio_label"] = table["train_time_ratio"].map(lambda r: f"{r:.3g}x")
    table["diff_label"] = table["accuracy_diff_pp"].map(lambda d: f"{d:+.2f}")
    tip = ["dataset", "published_dataset", "framework", "device", "n", alt.Tooltip("train_time_s:Q", format=".4g"),
           "published_train_time_s", alt.Tooltip("train_time_ratio:Q", format=".3g"),
           alt.Tooltip("test_time_ratio:Q", format=".3g"), alt.Tooltip("accuracy_pct:Q", format=".2f"),
           "published_accuracy_pct", alt.Tooltip("accuracy_diff_pp:Q", format="+.2f")]
    x = alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0))
    ratio_scale = alt.Scale(type="log")
    stick = alt.Chart().mark_rule(strokeWidth=3).encode(
        x=x, y=alt.Y("one:Q", scale=ratio_scale, title="train time: this run / published (log)"),
        y2="train_time_ratio:Q", color=_color())
    head = alt.Chart().mark_circle(size=90, opacity=1).encode(
        x=x, y=alt.Y("train_time_ratio:Q", scale=ratio_scale), color=_color(), tooltip=tip)
    ratio_text = alt.Chart().mark_text(dx=18, fontSize=10, align="left").encode(
        x=x, y=alt.Y("train_time_ratio:Q", scale=ratio_scale), text="ratio_label:N")
    one = alt.Chart().mark_rule(color="gray", strokeDash=[4, 4]).encode(y=alt.datum(1))
    data = table.assign(one=1.0)
    ratio = _facet(alt.layer(one, stick, head, ratio_text, data=data).properties(width=200, height=180), data,
                   column="dataset_label")
    bars = alt.Chart().mark_bar(width={"band": 0.6}).encode(
        x=x, y=alt.Y("accuracy_diff_pp:Q", title="accuracy: this run - published (points)"), color=_color(),
        tooltip=tip)
    diff_text = alt.layer(
        alt.Chart().transform_filter("datum.accuracy_diff_pp >= 0").mark_text(dy=-7, fontSize=10).encode(
            x=x, y="accuracy_diff_pp:Q", text="diff_label:N"),
        alt.Chart().transform_filter("datum.accuracy_diff_pp < 0").mark_text(dy=8, fontSize=10).encode(
            x=x, y="accuracy_diff_pp:Q", text="diff_label:N"))
    zero = alt.Chart().mark_rule(color="gray").encode(y=alt.datum(0))
    diff = _facet(alt.layer(bars, zero, diff_text, data=data).properties(width=200, height=180), data,
                  column="dataset_label")
    mapped = sorted({d for d, p in zip(table["dataset"], table["published_dataset"]) if d != p})
    note = (f"{', '.join(mapped)} compared with the published MNIST row (a different dataset). " if mapped else "")
    return alt.vconcat(ratio, diff).properties(title=_title(
        title, "top: this run's mean training time / the published one (1 = same; below 1 = faster here); "
               "bottom: accuracy difference in percentage points",
        note + "Published: Xeon E5-1620, GTX 1080 Ti, full-length training; lengths and datasets here may differ."))


def _axis_speedup(axis: str):
    base, other = AXIS_PAIRS[axis]
    what = {"compile": "Compiling", "precision": "bfloat16 (mixed precision)"}[axis]
    rest = "precision" if axis == "compile" else "compile"
    title = f"{what}: training speed-up per framework, and what it does to accuracy"

    def make(runs, curves=None, samples=None, published=None):
        table = axis_speedups(runs, axis)
        if table.empty:
            return no_data(title, f"this study does not run {base} and {other} points of one framework with the "
                                  f"other settings fixed (sweep `{axis}: [{base}, {other}]`)")
        table["variant"] = [f"{t:g} thread{'s' if t != 1 else ''}, {w}, {who}" for t, w, who in
                            zip(table["threads"], table["with"], table["whose"])]
        table["speedup_label"] = table["speedup"].map(lambda v: f"{v:.2g}x")
        table["change_label"] = table["accuracy_change_pp"].map(lambda v: f"{v:+.2f}")
        table["one"] = 1.0
        x = alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0))
        offset = alt.XOffset("variant:N", title=None)
        tip = ["framework", "dataset", "device", "whose", "threads", "with", "settings",
               alt.Tooltip("speedup:Q", format=".3g"), alt.Tooltip("speedup_low:Q", format=".3g"),
               alt.Tooltip("speedup_high:Q", format=".3g"), "speedup_told", "change_told",
               alt.Tooltip("base_throughput_img_s:Q", format=".4g"),
               alt.Tooltip("throughput_img_s:Q", format=".4g"), alt.Tooltip("accuracy_change_pp:Q", format="+.2f"),
               alt.Tooltip("base_accuracy_pct:Q", format=".2f"), alt.Tooltip("accuracy_pct:Q", format=".2f"),
               alt.Tooltip("compile_time_s:Q", format=".3g"), "n"]
        scale = alt.Scale(type="log")
        stick = alt.Chart().mark_rule(strokeWidth=3, opacity=0.6).encode(
            x=x, xOffset=offset, y=alt.Y("one:Q", scale=scale, title=f"speed-up: {other} / {base} (log)"),
            y2="speedup:Q", color=_color())
        head = alt.Chart().mark_point(size=80, filled=True, opacity=1).encode(
            x=x, xOffset=offset, y=alt.Y("speedup:Q", scale=scale), color=_color(),
            shape=alt.Shape("with:N", title=rest), tooltip=tip)
        # the 95 % interval of the speed-up where both sides ran twice or more (a thin black whisker)
        whisker = alt.Chart().transform_filter("isValid(datum.speedup_low)").mark_rule(
            strokeWidth=1.2, color="black").encode(x=x, xOffset=offset, y=alt.Y("speedup_low:Q", scale=scale),
                                                    y2="speedup_high:Q")
        text = alt.Chart().mark_text(dy=-9, fontSize=8).encode(
            x=x, xOffset=offset, y=alt.Y("speedup:Q", scale=scale), text="speedup_label:N")
        one = alt.Chart().mark_rule(color="gray", strokeDash=[4, 4]).encode(y=alt.datum(1))
        top = _facet(alt.layer(one, stick, whisker, head, text, data=table).properties(width=260, height=200), table)
        bars = alt.Chart().mark_bar().encode(
            x=x, xOffset=offset, y=alt.Y("accuracy_change_pp:Q", title=f"accuracy: {other} - {base} (points)"),
            color=_color(), tooltip=tip)
        change_bars = alt.Chart().transform_filter("isValid(datum.change_low)").mark_rule(
            strokeWidth=1.2, color="black").encode(x=x, xOffset=offset, y="change_low:Q", y2="change_high:Q")
        zero = alt.Chart().mark_rule(color="gray").encode(y=alt.datum(0))
        bottom = _facet(alt.layer(bars, change_bars, zero, data=table).properties(width=260, height=140), table)
        note = ("the compile phase is apart (hover: compile_time_s); time to accuracy counts it"
                if axis == "compile" else "bf16: bfloat16 compute on float32 master weights")
        return alt.vconcat(top, bottom).properties(title=_title(
            title, f"top: training throughput with {other} / with {base}, other settings the same (means over ok "
                   "repeats), one mark per thread count, "
                   f"{rest} and preset (hover); above 1: {other} is faster; black whiskers: 95 % intervals "
                   "(paired by seed where both ran the same seeds; none for a single run)",
            f"bottom: test accuracy with {other} minus with {base}, in points; {note}"))
    return make


def _status_chart(runs, curves=None, samples=None, published=None):
    title = "Points per status and framework: what ran and what failed"
    table = status_counts(runs)
    if table.empty:
        return no_data(title)
    table["failed"] = table["status"] != "ok"
    table["order"] = table["status"].map({s: i for i, s in enumerate(STATUSES)}).fillna(len(STATUSES))
    x = alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0))
    bars = alt.Chart().mark_bar().encode(
        x=x, y=alt.Y("sum(n):Q", title="points"), color=alt.Color("status:N", scale=STATUS_COLORS, title="status"),
        order=alt.Order("order:Q"), tooltip=["framework", "dataset", "device", "status", "n"])
    text = alt.Chart().mark_text(color="white", fontSize=11, fontWeight="bold").encode(
        x=x, y=alt.Y("sum(n):Q", stack="zero", bandPosition=0.5), detail="status:N", order=alt.Order("order:Q"),
        text="sum(n):Q")
    chart = alt.layer(bars, text, data=table).properties(width=60 * max(2, table["framework"].nunique()),
                                                        height=200)
    return _facet(chart, table).properties(title=_title(
        title, "bar height: points of the study; green: ok; every other colour is a failed point, with its status"))


# How each chart of dlbench.chartlist is drawn.
MAKERS: dict[str, Callable] = {
    "train_time_by_framework": _per_framework("train_time_s", "training time (s, log)", log=True),
    "test_time_by_framework": _per_framework("test_time_s", "testing time (s, log)", log=True),
    "accuracy_by_framework": _per_framework("accuracy_pct", "test accuracy (%)", log=False),
    "status_by_framework": _status_chart,
    "train_time_vs_batch_size": _against("batch_size", "train_time_s", "training time (s, log)", True, True),
    "accuracy_vs_batch_size": _against("batch_size", "accuracy_pct", "test accuracy (%)", True, False),
    "train_time_vs_learning_rate": _against("learning_rate", "train_time_s", "training time (s, log)", True, True),
    "accuracy_vs_learning_rate": _against("learning_rate", "accuracy_pct", "test accuracy (%)", True, False),
    "train_time_vs_length": _against("length", "train_time_s", "training time (s, log)", True, True),
    "accuracy_vs_length": _against("length", "accuracy_pct", "test accuracy (%)", True, False),
    "defaults_matrix_accuracy": _defaults_matrix("accuracy_pct"),
    "defaults_matrix_train_time": _defaults_matrix("train_time_s"),
    "tuning_grid": _tuning_chart,
    "speedup_vs_threads": _speedup_chart,
    "time_to_accuracy": _time_to_accuracy,
    "pareto_front": _pareto_chart,
    "cpu_timeline": _timeline("cpu_pct", "CPU (% of one core)", "CPU use"),
    "memory_timeline": _timeline("rss_mb", "resident memory (MB)", "Resident memory"),
    "gpu_timeline": _timeline("gpu_util_pct", "GPU utilisation (%)", "GPU utilisation"),
    "resource_correlation": _correlation_chart,
    "published_comparison": _published_chart,
    "compile_speedup": _axis_speedup("compile"),
    "bf16_speedup": _axis_speedup("precision"),
}
CHARTS: dict[str, Spec] = {name: Spec(MAKERS[name], group, title)
                           for name, (group, title) in chartlist.CHARTS.items()}


def save(chart, stem: Path) -> None:
    with alt.data_transformers.enable(SAVE_TRANSFORMER):
        _save(chart, stem)


class ScriptSafeJson(json.JSONEncoder):
    """JSON that can stand inside an HTML <script> block: `<`, `>` and `&` as \\u escapes, the same values to a
    JSON reader. Altair writes the chart's data there raw, and a failure reason holding `</script>` would
    otherwise end the block and run as the page's own markup."""

    def encode(self, o) -> str:
        return super().encode(o).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _save(chart, stem: Path) -> None:
    for fmt in FORMATS:
        target = stem.with_suffix(f".{fmt}")
        with atomic_path(target, suffix=f".{fmt}") as tmp:
            tmp.chmod(0o644)  # readable like any other output (a temporary file starts private)
            if fmt == "html":  # Vega inlined (opens offline), drawn as SVG so that the page holds the marks
                chart.save(str(tmp), format="html", inline=True, embed_options={"renderer": "svg"},
                           json_kwds={"cls": ScriptSafeJson})
            else:
                chart.save(str(tmp), format=fmt)


def _frame(obj) -> pd.DataFrame:
    if obj is None:
        return pd.DataFrame()
    return obj if isinstance(obj, pd.DataFrame) else pd.read_parquet(obj)


def draw(name: str, runs: pd.DataFrame, curves: pd.DataFrame, samples: pd.DataFrame,
         published: pd.DataFrame | None = None):
    """The chart `name`; one whose drawing fails becomes a chart that says why (the others still get drawn)."""
    spec = CHARTS[name]
    try:
        chart = spec.make(runs, curves, samples, published)
        chart.to_dict()  # validate now, so that a bad spec is caught here
        return chart
    except Exception as exc:  # noqa: BLE001 - one chart's bug must not lose the study's other charts
        print(f"dlbench: chart {name} could not be drawn: {exc!r}", file=sys.stderr)
        return alt.Chart(pd.DataFrame({"text": [f"this chart could not be drawn: {type(exc).__name__}: {exc}"[:300]]})
                         ).mark_text(size=13, color="#d62728").encode(text="text:N").properties(
            width=520, height=60, title=_title(spec.title))


def with_subtitle(chart, line: str):
    """The chart with one more subtitle line under its title (a partial study's "k of N points")."""
    title = chart.title
    if isinstance(title, alt.TitleParams):
        old = title.subtitle
        subtitle = [] if old is alt.Undefined else [old] if isinstance(old, str) else list(old)
        return chart.properties(title=alt.TitleParams(**{**title.to_dict(), "subtitle": [*subtitle, line]}))
    return chart.properties(title=_title("" if title is alt.Undefined else str(title), line))


def draw_all(runs, curves, samples, out_dir, cfg: dict | None = None, published=None,
             subtitle: str | None = None) -> list[Path]:
    """Draw every chart of CHARTS into out_dir as <name>.html and <name>.svg; runs/curves/samples: frames or paths.
    subtitle: a line added under every chart's title."""
    runs, curves, samples = _frame(runs), _frame(curves), _frame(samples)
    if published is None:
        published = read_published() if PUBLISHED_CSV.exists() else pd.DataFrame()
    elif not isinstance(published, pd.DataFrame):
        published = read_published(published)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in CHARTS:
        chart = draw(name, runs, curves, samples, published)
        save(with_subtitle(chart, subtitle) if subtitle else chart, out / name)
        written.append(out / name)
    return written
