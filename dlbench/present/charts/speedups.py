"""The speed-up charts: training time against threads, and what compiling or bfloat16 buy per framework (the numbers
from dlbench.analysis.frames: speedups, axis_speedups; a drawing only draws)."""

from __future__ import annotations

import altair as alt

from dlbench.analysis.frames import AXIS_PAIRS, FRAMEWORKS, axis_speedups, speedups
from dlbench.present.charts.pieces import MAX_MARKS, NoData, drawn_groups, faceted, framework_color, titled


def speedup_chart(runs, curves=None, samples=None, published=None):
    title = "Training speed-up against threads, per framework"
    table = speedups(runs)
    if table.empty:
        raise NoData("one thread count per setting")
    table, note = drawn_groups(table, "group", MAX_MARKS)
    values = sorted(table["threads"].unique())
    x = alt.X("threads:Q", title="threads", scale=alt.Scale(type="log", base=2, nice=False, padding=14),
              axis=alt.Axis(values=values, format="~g"))
    tip = ["framework", "settings", "threads", alt.Tooltip("train_time_s:Q", format=".4g"),
           alt.Tooltip("speedup:Q", format=".3g"), "base_threads"]
    lines = alt.Chart().mark_line(point=True).encode(
        x=x, y=alt.Y("speedup:Q", title="speed-up over the fewest threads", scale=alt.Scale(padding=10)),
        color=framework_color(table),
        detail="group:N", tooltip=tip)
    ideal = alt.Chart().mark_line(strokeDash=[4, 4], color="gray").encode(x=x, y="ideal:Q", detail="group:N")
    bars = alt.Chart().transform_filter("isValid(datum.speedup_low)").mark_rule(strokeWidth=1.5).encode(
        x=x, y="speedup_low:Q", y2="speedup_high:Q", color=framework_color(table), detail="group:N")
    chart = alt.layer(ideal, lines, bars, data=table).properties(width=400, height=220)
    return faceted(chart, table).properties(title=titled(
        title, "speed-up = training time at the group's fewest threads / time at this many (same other settings)",
        "dashed grey: linear (ideal) speed-up; vertical lines: approximate 95 % interval of the ratio where both "
        "thread counts ran twice or more", *note))


def axis_speedup(axis: str):
    base, other = AXIS_PAIRS[axis]
    what = {"compile": "Compiling", "precision": "bfloat16 (mixed precision)"}[axis]
    rest = "precision" if axis == "compile" else "compile"
    title = f"{what}: training speed-up per framework, and what it does to accuracy"

    def make(runs, curves=None, samples=None, published=None):
        table = axis_speedups(runs, axis)
        if table.empty:
            raise NoData(f"no {base}/{other} pair of points: sweep `{axis}: [{base}, {other}]`")
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
            y2="speedup:Q", color=framework_color(table))
        head = alt.Chart().mark_point(size=80, filled=True, opacity=1).encode(
            x=x, xOffset=offset, y=alt.Y("speedup:Q", scale=scale), color=framework_color(table),
            shape=alt.Shape("with:N", title=rest), tooltip=tip)
        # the 95 % interval of the speed-up where both sides ran twice or more (a thin black whisker)
        whisker = alt.Chart().transform_filter("isValid(datum.speedup_low)").mark_rule(
            strokeWidth=1.2, color="black").encode(x=x, xOffset=offset, y=alt.Y("speedup_low:Q", scale=scale),
                                                    y2="speedup_high:Q")
        text = alt.Chart().mark_text(dy=-9, fontSize=8).encode(
            x=x, xOffset=offset, y=alt.Y("speedup:Q", scale=scale), text="speedup_label:N")
        one = alt.Chart().mark_rule(color="gray", strokeDash=[4, 4]).encode(y=alt.datum(1))
        top = faceted(alt.layer(one, stick, whisker, head, text, data=table).properties(width=400, height=200), table)
        bars = alt.Chart().mark_bar().encode(
            x=x, xOffset=offset,
            y=alt.Y("accuracy_change_pp:Q", title=f"accuracy: {other} - {base} (points)", stack=None),
            color=framework_color(table), tooltip=tip)
        change_bars = alt.Chart().transform_filter("isValid(datum.change_low)").mark_rule(
            strokeWidth=1.2, color="black").encode(x=x, xOffset=offset, y="change_low:Q", y2="change_high:Q")
        zero = alt.Chart().mark_rule(color="gray").encode(y=alt.datum(0))
        bottom = faceted(alt.layer(bars, change_bars, zero, data=table).properties(width=400, height=140), table)
        note = ("the compile phase is apart (hover: compile_time_s); time to accuracy counts it"
                if axis == "compile" else "bf16: bfloat16 compute on float32 master weights")
        return alt.vconcat(top, bottom).properties(title=titled(
            title, f"top: training throughput with {other} / with {base}, other settings the same (means over ok "
                   "repeats), one mark per thread count, "
                   f"{rest} and preset (hover); above 1: {other} is faster; black whiskers: 95 % intervals "
                   "(paired by seed where both ran the same seeds; none for a single run)",
            f"bottom: test accuracy with {other} minus with {base}, in points; {note}"))
    return make
