"""How each kind of chart is drawn: a drawing takes its arguments (dlbench.present.charts.catalog registers each chart
with a
drawing and the arguments) and gives the function that draws the chart from the runs, curves, samples and
published tables. What a chart draws is computed in dlbench.analysis.frames; a drawing only draws."""

from __future__ import annotations

from collections.abc import Callable

import altair as alt
import numpy as np
import pandas as pd

from dlbench.analysis.frames import (
    FRAMEWORKS,
    HYPER_PARAMETERS,
    NEAR_BEST_PP,
    PRESET_ORDER,
    READING_TEXT,
    READINGS,
    RESOURCES,
    STATUSES,
    defaults_table,
    pareto_front,
    phase_spans,
    points,
    representative_runs,
    resource_correlations,
    settings_label,
    status_counts,
    sweep_table,
    thin,
    time_to_accuracy_table,
)
from dlbench.analysis.groups import load_bound, ok_points, preset_points
from dlbench.analysis.joint_grids import TUNED, tuning_cells, tuning_table
from dlbench.analysis.published import PUBLISHED_CSV, published_ratios, read_published
from dlbench.analysis.summary import framework_means
from dlbench.present.charts.pieces import (
    CONTENDED_COLOR,
    MAX_MARKS,
    MAX_SAMPLES,
    PHASE_COLORS,
    STATUS_COLORS,
    NoData,
    drawn,
    drawn_groups,
    faceted,
    failed_shape,
    framework_color,
    log_scale,
    sample_note,
    slim,
    titled,
    tooltip_columns,
)
from dlbench.present.charts.speedups import axis_speedup, speedup_chart


def per_framework(metric: str, label: str, log: bool):
    what = {"train_time_s": "Training time", "test_time_s": "Testing time", "accuracy_pct": "Test accuracy"}[metric]
    title = f"{what} per framework, at each framework's default point and each preset applied to it"

    def make(runs, curves=None, samples=None, published=None):
        # The points of one setting each (groups.preset_points: a preset at its own values, never a sweep beside
        # it), in a panel per setting: a mean that pooled settings would stand for none of them.
        df = preset_points(points(runs))
        if df.empty:
            raise NoData("no framework's default point")
        df = _with_owners(df.assign(where=df["dataset"] + "/" + df["device"]))
        shown = (df["status"] == "ok") & df[metric].notna() & ((df[metric] > 0) if log else True)
        # what the means count; points timed under load are drawn, marked, apart (a time's only: groups.load_bound)
        good = shown & ~(df["contended"] & load_bound(metric))
        failed = df["status"] != "ok"
        if not shown.any() and not failed.any():
            raise NoData(f"no point has a {what.lower()}")
        lo, hi = (df.loc[shown, metric].min(), df.loc[shown, metric].max()) if shown.any() else (1.0, 1.0)
        # failed points sit just below the lowest ok one: the scale shows the points, not the way down to zero
        bottom = lo / 1.5 if log else max(0.0, lo - max(0.5, 0.1 * (hi - lo)))
        means = _setting_means(df[good], metric).assign(layer="mean")
        dots = df[shown & drawn(df[shown], MAX_MARKS)]
        dots = dots.assign(contended=dots["contended"] & load_bound(metric))  # drawn apart where they are left out
        bad_rows = df[failed & drawn(df[failed], MAX_MARKS // 4)]
        extra = ["defaults", "where", "peak_fraction"]
        data = pd.concat([slim(dots, [metric, "contended", *extra]).assign(layer="point"),
                          slim(bad_rows, [metric, *extra]).assign(layer="failed"), means],
                         ignore_index=True).assign(failed_at=bottom)
        # padding: a mark at the lowest or highest value is drawn whole, not cut in half by the axis
        drawn_values = pd.concat([data[c] for c in (metric, "ci_low", "ci_high", "failed_at") if c in data]).dropna()
        scale, axis = (log_scale(drawn_values, padding=12) if log
                       else (alt.Scale(zero=False, nice=False, padding=12), alt.Undefined))
        colour = framework_color(data)
        base = alt.Chart().encode(x=alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0)))
        ticks = base.transform_filter("datum.layer == 'mean'").mark_tick(thickness=3, size=34, opacity=1).encode(
            y=alt.Y(f"{metric}:Q", title=label, scale=scale, axis=axis), color=colour,
            tooltip=[alt.Tooltip("framework:N"), alt.Tooltip("defaults:N"),
                     alt.Tooltip(f"{metric}:Q", format=".4g", title="mean"),
                     alt.Tooltip("ci_low:Q", format=".4g", title="95 % interval from"),
                     alt.Tooltip("ci_high:Q", format=".4g", title="to"), alt.Tooltip("n_ok:Q", title="counted runs")])
        whiskers = base.transform_filter("datum.layer == 'mean' && datum.n_ok >= 2").mark_rule(
            color="black", strokeWidth=1.5).encode(y=alt.Y("ci_low:Q", scale=scale), y2="ci_high:Q")
        points_ = base.transform_filter("datum.layer == 'point' && !datum.contended").mark_circle(
            size=45, opacity=1).encode(y=alt.Y(f"{metric}:Q", scale=scale), color=colour,
                                       xOffset=alt.XOffset("run_id:N"),
                                       tooltip=tooltip_columns(dots, metric, "peak_fraction"))
        busy = base.transform_filter("datum.layer == 'point' && datum.contended").mark_point(
            size=70, shape="diamond", filled=False, strokeWidth=2, color=CONTENDED_COLOR).encode(
            y=alt.Y(f"{metric}:Q", scale=scale), tooltip=tooltip_columns(dots, metric, "contended"))
        bad = base.transform_filter("datum.layer == 'failed'").mark_point(
            color="red", size=110, filled=False, strokeWidth=2).encode(
            y=alt.Y("failed_at:Q", scale=scale), shape=failed_shape(bad_rows), tooltip=tooltip_columns(bad_rows))
        chart = alt.layer(ticks, whiskers, points_, busy, bad, data=data).properties(width=400, height=240)
        n_busy = int((shown & df["contended"]).sum()) if load_bound(metric) else 0
        counted_runs = "ok, timed without outside load" if load_bound(metric) else "ok"
        return faceted(chart, data, row="where", column="defaults").properties(title=titled(
            title, f"tick: mean of the counted runs ({counted_runs}), black line: its 95 % Student-t "
                   f"interval (two or more runs); dots: each ok run; {'log scale; ' if log else ''}red hollow "
                   "marks at the bottom: failed runs (shape = status); one panel per setting",
            *([f"grey diamonds: {n_busy} run(s) timed under outside load, left out of the means"]
              if n_busy else []),
            *sample_note(len(dots), int(good.sum()), "ok points (dots)", "the ticks are means of all"),
            *sample_note(len(bad_rows), int(failed.sum()), "failed points (red marks)")))
    return make


# The machine's knobs: a panel per value where a study varied them (a mean over 1 and 2 threads stands for neither).
_KNOBS = ("threads", "interop_threads", "library")


def _panel_exclude(df: pd.DataFrame) -> set[str]:
    """What a per-framework panel's label leaves out: a preset's hyper-parameters (one value each at its point,
    groups.preset_points), compile mode and precision (the natural and float32 ones), and the machine's knobs
    wherever they do not vary among the points drawn."""
    steady = {k for k in _KNOBS if k not in df.columns or df[k].astype(object).fillna("-").nunique() <= 1}
    return {"batch_size", "learning_rate", "length", "compile", "precision"} | steady


def _with_owners(df: pd.DataFrame) -> pd.DataFrame:
    """Each preset point labelled with its panel (`defaults`: "own defaults", "caffe's preset", its layout where
    not the default, the knobs where they vary), and each preset's owner drawn in that preset's panel too:
    Caffe's own defaults are Caffe's preset, so "caffe's preset" shows Caffe beside the frameworks it was
    applied to, as the leaders compare them (summary.comparisons)."""
    exclude = _panel_exclude(df)
    df = df.assign(defaults=settings_label(df, exclude))
    panels = set(zip(df["defaults"], df["where"]))
    own = df[df["reading"] == "own"]
    copies = []
    for reading in ("preset", "settings"):
        if own.empty:
            break
        as_applied = own.assign(reading=reading)
        as_applied = as_applied.assign(defaults=settings_label(as_applied, exclude))
        copies.append(as_applied[[(d, w) in panels for d, w in zip(as_applied["defaults"], as_applied["where"])]])
    return pd.concat([df, *copies], ignore_index=True)


def _setting_means(counted: pd.DataFrame, metric: str) -> pd.DataFrame:
    """framework_means per setting panel: the mean of each framework under each setting, with its interval."""
    parts = [framework_means(g, metric).assign(defaults=defaults, where=where)
             for (defaults, where), g in counted.groupby(["defaults", "where"])]
    # no counted run (every one failed or contended): the columns the layers read still exist
    return (pd.concat(parts, ignore_index=True) if parts
            else framework_means(counted, metric).assign(defaults=pd.Series(dtype=str), where=pd.Series(dtype=str)))


_AXIS_TITLES = {"batch_size": "batch size", "learning_rate": "learning rate", "length": "training length",
                "threads": "threads"}


def against(param: str, metric: str, label: str, log_x: bool, log_y: bool):
    what = "Training time" if metric == "train_time_s" else "Test accuracy"
    title = f"{what} against {_AXIS_TITLES[param]}"

    def make(runs, curves=None, samples=None, published=None):
        table = sweep_table(runs, param, metric)
        if table.empty:
            raise NoData(f"{_AXIS_TITLES[param]} not swept with the other settings fixed")
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
        # padding: the first and last values' marks and intervals drawn whole, inside the plot area
        x = alt.X(f"{param}:Q", title=x_title, axis=axis,
                  scale=alt.Scale(type="log" if log_x else "linear", nice=False, padding=14))
        if log_y:  # over what is drawn: the means, their intervals, load's diamonds, failures' crosses
            y_scale, y_axis = log_scale(pd.concat([data.loc[data["good"], metric], data["ci_low"], data["ci_high"],
                                                   data.get("contended_mean", pd.Series(dtype=float)),
                                                   data.loc[data["failed"] > 0, "failed_at"]]), padding=10)
        else:
            y_scale, y_axis = alt.Scale(zero=False, padding=10), alt.Undefined
        tip = ["framework", "settings", param, alt.Tooltip(f"{metric}:Q", format=".4g"), "n_ok", "failed",
               "statuses"]
        line = alt.Chart().transform_filter("datum.good").mark_line(point=True).encode(
            x=x, y=alt.Y(f"{metric}:Q", title=label, scale=y_scale, axis=y_axis), color=framework_color(data),
            detail="group:N",
            tooltip=tip + [alt.Tooltip("ci_low:Q", format=".4g"), alt.Tooltip("ci_high:Q", format=".4g"),
                           "contended"])
        bars = alt.Chart().transform_filter("datum.good && datum.n_ok >= 2").mark_rule(strokeWidth=1.5).encode(
            x=x, y=alt.Y("ci_low:Q", scale=y_scale), y2="ci_high:Q", color=framework_color(data), detail="group:N")
        busy = alt.Chart().transform_filter("datum.contended > 0 && isValid(datum.contended_mean)").mark_point(
            shape="diamond", size=90, filled=False, strokeWidth=2, color=CONTENDED_COLOR).encode(
            x=x, y=alt.Y("contended_mean:Q", scale=y_scale),
            tooltip=tip + ["contended", alt.Tooltip("contended_mean:Q", format=".4g", title="their mean")])
        bad = alt.Chart().transform_filter("datum.failed > 0").mark_point(
            color="red", size=110, filled=False, strokeWidth=2, shape="cross").encode(
            x=x, y=alt.Y("failed_at:Q", scale=y_scale), tooltip=tip)
        chart = alt.layer(line, bars, busy, bad, data=data).properties(width=400, height=200)
        return faceted(chart, data).properties(title=titled(
            title, "one line per framework and fixed other settings (hover: which); mean over repeats of ok points, "
                   "with its 95 % interval where two or more ran",
            "red crosses at the bottom: settings with failed points" + (
                "; grey diamonds: the mean of a setting's runs timed under outside load (left out of the lines and "
                "means)" if load_bound(metric) else ""), *note))
    return make


def defaults_matrix(metric: str):
    what = "test accuracy (%)" if metric == "accuracy_pct" else "training time (s)"
    title = f"Own vs cross-applied default settings: {what}"

    def make(runs, curves=None, samples=None, published=None):
        table = defaults_table(runs)
        if table.empty or table["whose"].nunique() < 2:
            raise NoData("one preset per framework")
        # A column per preset, and per reading where other frameworks' presets ran under both.
        readings = [r for r in ("settings", "preset") if r in set(table["reading"])]
        both = len(readings) > 1
        table["column"] = [w if r == "own" or not both else f"{w} ({READINGS[r]})"
                           for w, r in zip(table["whose"], table["reading"])]
        fmt = "{:.1f}%" if metric == "accuracy_pct" else "{:.3g} s"
        table["label"] = [_cell_label(fmt, v, nf, nc if load_bound(metric) else 0)
                          for v, nf, nc in zip(table[metric], table["n_failed"], table["n_contended"])]
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
        cells = alt.Chart().transform_filter(f"isValid(datum.{metric})").mark_rect().encode(
            x=x, y=y, color=alt.Color(f"{metric}:Q", title=what, scale=scale,
                                      legend=alt.Undefined if len(vals) else None),  # no scale of no value
            tooltip=["framework", "whose", "reading", alt.Tooltip(f"{metric}:Q", format=".4g"), "n_ok", "n_failed",
                     "is_own"])
        # no counted run: red where every run failed, grey where the ok ones ran under outside load
        empty = alt.Chart().transform_filter(f"!isValid(datum.{metric}) && datum.n_contended == 0").mark_rect(
            color="#fbe3e3", stroke="#d62728").encode(x=x, y=y)
        busy = alt.Chart().transform_filter(f"!isValid(datum.{metric}) && datum.n_contended > 0").mark_rect(
            color="#eeeeee", stroke=CONTENDED_COLOR).encode(x=x, y=y)
        own = alt.Chart().transform_filter("datum.is_own").mark_rect(
            fill=None, stroke="black", strokeWidth=2.5).encode(x=x, y=y)
        text = alt.Chart().mark_text(lineBreak="\n", fontSize=11).encode(
            x=x, y=y, text="label:N",
            color=alt.condition("datum.dark", alt.value("white"), alt.value("black")))
        chart = alt.layer(cells, empty, busy, own, text, data=table).properties(width=80 * len(order), height=50 * max(
            1, table["framework"].nunique()))
        applied = ("other frameworks' defaults applied as " + "; and as ".join(READING_TEXT[r] for r in readings)
                   if readings else "no other framework's defaults applied")
        return faceted(chart, table).properties(title=titled(
            title, "rows: framework trained; columns: whose defaults it trained with; black frame: its own defaults",
            applied, "cell: mean over the counted runs (ok; a time's timed without outside load); red cells: every run "
                     "failed; grey cells framed dark grey: no run counted, those that finished ran under outside load"))
    return make


def _cell_label(fmt: str, mean: float, failed: int, contended: int) -> str:
    """A defaults matrix cell's text: its mean, then what was left out of it ("2 failed", "1 under load"); where
    nothing was counted, why ("all 3 failed", "3 under load" above "1 failed")."""
    apart = [f"{n} {what}" for n, what in ((failed, "failed"), (contended, "under load")) if n]
    if pd.notna(mean):
        return "\n".join([fmt.format(mean), *apart])
    return f"all {failed} failed" if not contended else "\n".join(apart[::-1])


def tuning_chart(runs, curves=None, samples=None, published=None):
    title = "Tuning around the defaults: accuracy and time over batch size x learning rate"
    cells = tuning_cells(runs)
    if cells.empty:
        raise NoData("no tuning grid: `tune:` in a sub-study")
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
        x="independent", y="independent").properties(title=titled(
            title, "one grid per framework, dataset, device and fixed settings, around the defaults (black frame); "
                   "cell: mean test accuracy and training time over ok repeats",
            f"best: the most accurate setting; fast: the fastest within {NEAR_BEST_PP:g} points of it; red cells: "
            "every point failed"))


def timeline(column: str, label: str, what: str):
    title = f"{what} over one run per framework, phases shaded"
    reading = label.split(" (")[0]  # "GPU utilisation"

    def nothing(runs) -> NoData:
        if column.startswith("gpu_") and "device" in runs.columns and not (runs["device"] == "gpu").any():
            return NoData("no GPU point")
        return NoData(f"no {reading} samples")

    def make(runs, curves=None, samples=None, published=None):
        if samples is None or samples.empty or column not in samples.columns or samples[column].notna().sum() == 0:
            raise nothing(runs)
        chosen = representative_runs(runs, samples[samples[column].notna()])
        if chosen.empty:
            raise nothing(runs)
        chosen = chosen.assign(panel=chosen["framework"] + " · " + chosen["dataset"] + " · " + chosen["device"]
                               + " · " + chosen["status"])
        panel = dict(zip(chosen["run_id"], chosen["panel"]))
        s = samples[samples["run_id"].isin(panel)][["run_id", "t", "phase", column]].copy()
        spans = phase_spans(s)
        # Long runs: about MAX_SAMPLES readings per run drawn, each bucket's lowest and highest (frames.thin: the
        # peak is kept); the phase spans keep every boundary.
        s = thin(s, column, MAX_SAMPLES).copy()
        s["layer"], spans["layer"] = "sample", "phase"
        data = pd.concat([s, spans], ignore_index=True)
        data["panel"] = data["run_id"].map(panel)
        data["framework"] = data["run_id"].map(dict(zip(chosen["run_id"], chosen["framework"])))
        # From the launch (padding ran the axis from -2 s) to a little after the last moment, so that a reading
        # there is drawn whole; a reading at 0 on the y axis is kept whole by padding.
        end = float(pd.concat([s["t"], spans["end"]]).max())
        time_scale = alt.Scale(domain=[0, end * 1.02], nice=False)
        x = alt.X("t:Q", title="time since launch (s)", scale=time_scale)
        rects = alt.Chart().transform_filter("datum.layer == 'phase'").mark_rect(opacity=0.6).encode(
            x=alt.X("start:Q", title="time since launch (s)", scale=time_scale), x2="end:Q",
            color=alt.Color("phase:N", scale=PHASE_COLORS, title="phase"),
            tooltip=["phase", alt.Tooltip("start:Q", format=".2f"), alt.Tooltip("end:Q", format=".2f")])
        line = alt.Chart().transform_filter("datum.layer == 'sample'").mark_line(
            color="#222222", strokeWidth=1.5, point=alt.OverlayMarkDef(size=12, color="#222222")).encode(
            x=x, y=alt.Y(f"{column}:Q", title=label, scale=alt.Scale(padding=4)), tooltip=["phase", "t", column])
        chart = alt.layer(rects, line, data=data).properties(width=620, height=130)
        return chart.facet(row=alt.Row("panel:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left",
                                                                                 labelOrient="top"))).properties(
            title=titled(title, "framework · dataset · device · status of the run shown (an ok own-defaults run "
                                "where there is one); shading: the phase the trainer reported"))
    return make


def correlation_chart(runs, curves=None, samples=None, published=None):
    title = "Correlation of resource use with hyper-parameters (Spearman), per framework"
    table = resource_correlations(runs)
    if table.empty or table["r"].notna().sum() == 0:
        raise NoData("no hyper-parameter varied alone over 3 or more ok points of a framework")
    # only what varied: a framework none of whose hyper-parameters varied alone, and a hyper-parameter that
    # varied alone for no framework, would be panels and columns of "n/a" and nothing else
    told = table[table["r"].notna()]
    table = table[table.set_index(["framework", "dataset"]).index.isin(told.set_index(["framework", "dataset"]).index)
                  & table["hyper_parameter"].isin(set(told["hyper_parameter"]))].copy()
    table["label"] = table["r"].map(lambda r: f"{r:+.2f}" if pd.notna(r) else "n/a")
    x = alt.X("hyper_parameter:N", title="hyper-parameter", sort=HYPER_PARAMETERS)
    y = alt.Y("resource:N", title="resource", sort=RESOURCES)
    cells = alt.Chart().mark_rect().encode(
        x=x, y=y, color=alt.Color("r:Q", scale=alt.Scale(scheme="redblue", domain=[-1, 1], reverse=True),
                                  title="Spearman r"),
        tooltip=["framework", "dataset", "resource", "hyper_parameter", alt.Tooltip("r:Q", format=".3f"), "n",
                 alt.Tooltip("groups:Q", title="settings groups")])
    blank = alt.Chart().transform_filter("!isValid(datum.r)").mark_rect(color="#eeeeee").encode(x=x, y=y)
    text = alt.Chart().mark_text(fontSize=11).encode(x=x, y=y, text="label:N")
    chart = alt.layer(cells, blank, text, data=table).properties(width=90 * table["hyper_parameter"].nunique(),
                                                                 height=24 * table["resource"].nunique())
    # the framework's header stays where one framework is drawn: it says whose correlations these are
    by = {"column": alt.Column("framework:N", title="framework")}
    if table["dataset"].nunique() > 1:
        by["row"] = alt.Row("dataset:N", title="dataset")
    return chart.facet(**by).properties(title=titled(
        title, "rank correlation within the settings groups in which the hyper-parameter varied alone (every other "
               "setting fixed), over a framework's counted points on one dataset; +1: more of the hyper-parameter, "
               "more of the resource; n/a: the hyper-parameter (or resource) did not vary alone"))


def time_to_accuracy(runs, curves=None, samples=None, published=None):
    title = "Time to accuracy: test accuracy against cumulative training time"
    table = time_to_accuracy_table(runs, curves)
    table = table[table["train_time_s"] > 0]
    if table.empty:
        raise NoData("no test evaluations in the learning curves")
    table, note = drawn_groups(table, "run_id", MAX_MARKS)  # whole runs: about MAX_MARKS dots in all
    note = [n.replace(" lines", " runs with test evaluations") for n in note]
    # the data's own range (Vega's nice log domain runs to whole decades: 0.5-12 s drew 0.1-100 s, half empty)
    x_scale, x_axis = log_scale(table["train_time_s"], padding=12)
    x = alt.X("train_time_s:Q", title="compile + cumulative training time (s, log)", scale=x_scale, axis=x_axis)
    line = alt.Chart().mark_line(point=True, opacity=0.8).encode(
        x=x, y=alt.Y("accuracy_pct:Q", title="test accuracy (%)", scale=alt.Scale(zero=False)),
        color=framework_color(table),
        detail="run_id:N", strokeDash=alt.StrokeDash("timing:N", title="timed", scale=alt.Scale(
            domain=["quiet", "under outside load"], range=[[1, 0], [4, 3]])),
        tooltip=["framework", "settings", "status", "timing", "iteration", alt.Tooltip("train_time_s:Q", format=".3g"),
                 alt.Tooltip("compile_time_s:Q", format=".3g"), alt.Tooltip("accuracy_pct:Q", format=".2f")])
    chart = alt.layer(line, data=table).properties(width=400, height=220)
    return faceted(chart, table).properties(title=titled(
        title, "one line per run, one dot per test evaluation; the run reached the accuracy after that much "
               "training time, its compile phase (where it has one) included; dashed: a run timed under outside "
               "load (its times are not this machine's own)", *note))


def pareto_chart(runs, curves=None, samples=None, published=None):
    title = "Training time vs accuracy: the Pareto front per dataset and device"
    df = ok_points(points(runs), "train_time_s", "accuracy_pct", positive=True)
    if df.empty:
        raise NoData("no ok point with a training time and an accuracy")
    df["front"] = False
    for _, g in df.groupby(["dataset", "device"]):
        df.loc[g.index, "front"] = pareto_front(g, "train_time_s", "accuracy_pct")
    # The front from every ok point; the front always drawn, the others (or a sample of them) behind it.
    rest = df[~df["front"]]
    shown = df[df["front"] | drawn(rest, MAX_MARKS).reindex(df.index, fill_value=False)]
    note = sample_note(int((~shown["front"]).sum()), len(rest), "points off the front",
                       "the front is drawn whole, from all of them")
    shown = shown.assign(settings=settings_label(shown, set()))
    data = slim(shown, ["train_time_s", "accuracy_pct", "front", "settings"])
    x_scale, x_axis = log_scale(data["train_time_s"], padding=10)
    x = alt.X("train_time_s:Q", title="training time (s, log)", scale=x_scale, axis=x_axis)
    y = alt.Y("accuracy_pct:Q", title="test accuracy (%)", scale=alt.Scale(zero=False, padding=10))
    tip = ["framework", "settings", alt.Tooltip("train_time_s:Q", format=".4g"),
           alt.Tooltip("accuracy_pct:Q", format=".2f"), "front"]
    pts = alt.Chart().mark_circle(size=50, opacity=0.45).encode(x=x, y=y, color=framework_color(data), tooltip=tip)
    line = alt.Chart().transform_filter("datum.front").mark_line(
        interpolate="step-after", color="black", strokeWidth=1.5).encode(x=x, y=y, order="train_time_s:Q")
    front = alt.Chart().transform_filter("datum.front").mark_point(
        size=130, filled=True, stroke="black", strokeWidth=1.5, opacity=1).encode(x=x, y=y, color=framework_color(data),
                                                                                   tooltip=tip)
    chart = alt.layer(pts, line, front, data=data).properties(width=420, height=240)
    return faceted(chart, data).properties(title=titled(
        title, "every counted point (ok, timed without outside load); outlined and joined: the front (no other "
               "point is both faster and more accurate)",
        *note))


def published_chart(runs, curves=None, samples=None, published=None):
    title = "This machine vs the published study (Wu et al. 2019, GTDLBench), frameworks' own defaults"
    if published is None:
        published = read_published() if PUBLISHED_CSV.exists() else pd.DataFrame()
    table = published_ratios(runs, published)
    if table.empty:
        raise NoData("no own-defaults point on a published dataset and device")
    table["dataset_label"] = [d if d == p else f"{d} (vs published {p})"
                              for d, p in zip(table["dataset"], table["published_dataset"])]
    table["ratio_label"] = table["train_time_ratio"].map(lambda r: f"{r:.3g}x")
    table["diff_label"] = table["accuracy_diff_pp"].map(lambda d: f"{d:+.2f}")
    tip = ["dataset", "published_dataset", "framework", "device", "n", alt.Tooltip("train_time_s:Q", format=".4g"),
           "published_train_time_s", alt.Tooltip("train_time_ratio:Q", format=".3g"),
           alt.Tooltip("test_time_ratio:Q", format=".3g"), alt.Tooltip("accuracy_pct:Q", format=".2f"),
           "published_accuracy_pct", alt.Tooltip("accuracy_diff_pp:Q", format="+.2f")]
    x = alt.X("framework:N", title=None, sort=FRAMEWORKS, axis=alt.Axis(labelAngle=0))
    ratio_scale = alt.Scale(type="log", padding=16)  # room for the ratio's label above its mark
    stick = alt.Chart().mark_rule(strokeWidth=3).encode(
        x=x, y=alt.Y("one:Q", scale=ratio_scale, title="train time: this run / published (log)"),
        y2="train_time_ratio:Q", color=framework_color(table))
    head = alt.Chart().mark_circle(size=90, opacity=1).encode(
        x=x, y=alt.Y("train_time_ratio:Q", scale=ratio_scale), color=framework_color(table), tooltip=tip)
    ratio_text = alt.Chart().mark_text(dy=-12, fontSize=10, align="center").encode(
        x=x, y=alt.Y("train_time_ratio:Q", scale=ratio_scale), text="ratio_label:N")
    one = alt.Chart().mark_rule(color="gray", strokeDash=[4, 4]).encode(y=alt.datum(1))
    data = table.assign(one=1.0)
    ratio = faceted(alt.layer(one, stick, head, ratio_text, data=data).properties(width=400, height=180), data,
                   column="dataset_label")
    bars = alt.Chart().mark_bar(width={"band": 0.6}).encode(
        x=x, y=alt.Y("accuracy_diff_pp:Q", title="accuracy: this run - published (points)"),
        color=framework_color(data), tooltip=tip)
    diff_text = alt.layer(
        alt.Chart().transform_filter("datum.accuracy_diff_pp >= 0").mark_text(dy=-7, fontSize=10).encode(
            x=x, y="accuracy_diff_pp:Q", text="diff_label:N"),
        alt.Chart().transform_filter("datum.accuracy_diff_pp < 0").mark_text(dy=8, fontSize=10).encode(
            x=x, y="accuracy_diff_pp:Q", text="diff_label:N"))
    zero = alt.Chart().mark_rule(color="gray").encode(y=alt.datum(0))
    diff = faceted(alt.layer(bars, zero, diff_text, data=data).properties(width=400, height=180), data,
                  column="dataset_label")
    mapped = sorted({d for d, p in zip(table["dataset"], table["published_dataset"]) if d != p})
    note = (f"{', '.join(mapped)} compared with the published MNIST row (a different dataset). " if mapped else "")
    return alt.vconcat(ratio, diff).properties(title=titled(
        title, "top: this run's mean training time / the published one (1 = same; below 1 = faster here); "
               "bottom: accuracy difference in percentage points",
        note + "Published: Xeon E5-1620, GTX 1080 Ti, full-length training; lengths and datasets here may differ."))


def status_chart(runs, curves=None, samples=None, published=None):
    title = "Points per status and framework: what ran and what failed"
    table = status_counts(runs)
    if table.empty:
        raise NoData("no points")
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
    return faceted(chart, table).properties(title=titled(
        title, "bar height: points of the study; green: ok; every other colour is a failed point, with its status"))


# Each drawing by the name dlbench.present.charts.catalog gives it: called with the chart's arguments, it gives the
# function
# that draws the chart (those of one chart only take none).
DRAWINGS: dict[str, Callable[..., Callable]] = {
    "per_framework": per_framework, "against": against, "defaults_matrix": defaults_matrix,
    "timeline": timeline, "axis_speedup": axis_speedup,
    "status": lambda: status_chart, "tuning": lambda: tuning_chart, "speedup": lambda: speedup_chart,
    "time_to_accuracy": lambda: time_to_accuracy, "pareto": lambda: pareto_chart,
    "correlation": lambda: correlation_chart, "published": lambda: published_chart,
}
