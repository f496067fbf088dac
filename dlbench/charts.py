"""The study's charts, drawn with Altair from the Parquet tables.

Each chart is saved as self-contained HTML (Vega inlined: opens offline) and SVG.
Failed points are drawn too, as hollow red marks at zero, so a missing bar is never
mistaken for a failure; the `status` column says what happened.
"""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pandas as pd

from dlbench.atomic import atomic_path

FORMATS = ("html", "svg")
FRAMEWORK_COLORS = alt.Scale(domain=["pytorch", "tensorflow", "theano", "caffe"],
                             range=["#ee4c2c", "#ff8f00", "#3d6ab0", "#2ca02c"])
STATUS_SHAPES = alt.Scale(domain=["ok", "diverged", "error", "killed", "timeout", "oom", "unavailable", "cancelled"],
                          range=["circle", "cross", "triangle-down", "triangle-down", "diamond", "square",
                                 "triangle-up", "triangle-down"])


def _color():
    return alt.Color("framework:N", scale=FRAMEWORK_COLORS, title="framework")


def _prepare_runs(runs: pd.DataFrame) -> pd.DataFrame:
    df = runs.copy()
    df["accuracy_pct"] = df["accuracy"].astype(float) * 100
    df["point"] = df["run_id"]
    return df


def _per_framework(metric: str, title: str, log: bool):
    """Bars (mean over points) and dots (each point) per framework; failed points as red marks at zero."""
    def chart(runs, curves, samples):
        df = _prepare_runs(runs)
        base = alt.Chart(df).encode(x=alt.X("framework:N", title=None))
        ok = base.transform_filter(alt.datum.status == "ok")
        y_scale = alt.Scale(type="log") if log else alt.Scale(zero=True)
        bars = ok.mark_bar(opacity=0.5).encode(y=alt.Y(f"mean({metric}):Q", title=title, scale=y_scale),
                                                color=_color())
        dots = ok.mark_circle(size=45).encode(y=f"{metric}:Q", color=_color(),
                                              tooltip=["point", metric, "batch_size", "learning_rate"])
        failed = base.transform_filter(alt.datum.status != "ok").transform_calculate(at_axis="0").mark_point(
            color="red", size=90, filled=False).encode(
            y=alt.Y("at_axis:Q"), shape=alt.Shape("status:N", scale=STATUS_SHAPES),
            tooltip=["point", "status", "reason"])
        layers = [bars, dots] if log else [bars, dots, failed]
        return alt.layer(*layers).properties(width=220, height=220).facet(column=alt.Column("dataset:N")).properties(
            title=f"{title} per framework (bar: mean over points; dots: points; red: failed points)")
    return chart


def _against(param: str, metric: str, title: str, log_x: bool):
    def chart(runs, curves, samples):
        df = _prepare_runs(runs)
        ok = df[df.status == "ok"]
        x = alt.X(f"{param}:Q", scale=alt.Scale(type="log" if log_x else "linear"), title=param.replace("_", " "))
        y = alt.Y(f"mean({metric}):Q", title=title)
        lines = alt.Chart(ok).mark_line(point=True).encode(
            x=x, y=y, color=_color(), tooltip=["framework", param, f"mean({metric}):Q"])
        return lines.properties(width=260, height=200).facet(column="dataset:N").properties(
            title=f"{title} against {param.replace('_', ' ')}")
    return chart


def _timeline(column: str, title: str):
    def chart(runs, curves, samples):
        if samples.empty:
            return alt.Chart(pd.DataFrame({"t": [], column: []})).mark_line()
        ok = runs[runs.status == "ok"]
        # One run per framework and dataset: the first point of the sweep, so the lines are comparable.
        first = ok.sort_values("run_id").groupby(["framework", "dataset"]).head(1)["run_id"]
        df = samples[samples.run_id.isin(first)]
        line = alt.Chart(df).mark_line().encode(
            x=alt.X("t:Q", title="time since launch (s)"), y=alt.Y(f"{column}:Q", title=title),
            color=_color(), tooltip=["framework", "phase", "t", column])
        phases = alt.Chart(df).mark_tick(thickness=2, opacity=0.5).encode(
            x="t:Q", y=alt.value(0), color=alt.Color("phase:N", legend=alt.Legend(title="phase")))
        return alt.layer(line, phases).properties(width=600, height=200).facet(
            row="dataset:N").resolve_scale(color="independent").properties(
            title=f"{title} over one run per framework")
    return chart


CHARTS = {
    "train_time_by_framework": _per_framework("train_time_s", "training time (s)", log=True),
    "accuracy_by_framework": _per_framework("accuracy_pct", "test accuracy (%)", log=False),
    "train_time_vs_batch_size": _against("batch_size", "train_time_s", "training time (s)", True),
    "accuracy_vs_batch_size": _against("batch_size", "accuracy_pct", "test accuracy (%)", True),
    "train_time_vs_learning_rate": _against("learning_rate", "train_time_s", "training time (s)", True),
    "accuracy_vs_learning_rate": _against("learning_rate", "accuracy_pct", "test accuracy (%)", True),
    "cpu_timeline": _timeline("cpu_pct", "CPU (% of one core)"),
    "memory_timeline": _timeline("rss_mb", "resident memory (MB)"),
}


def chart_files(root: str, cfg: dict | None = None) -> list[str]:
    return [f"{root}/{name}.{fmt}" for name in CHARTS for fmt in FORMATS]


def save(chart, stem: Path) -> None:
    for fmt in FORMATS:
        target = stem.with_suffix(f".{fmt}")
        with atomic_path(target, suffix=f".{fmt}") as tmp:
            if fmt == "html":
                chart.save(str(tmp), format="html", inline=True)
            else:
                chart.save(str(tmp), format=fmt)


def draw_all(runs_path, curves_path, samples_path, out_dir, cfg: dict | None = None) -> list[Path]:
    runs = pd.read_parquet(runs_path)
    curves = pd.read_parquet(curves_path)
    samples = pd.read_parquet(samples_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in CHARTS.items():
        save(make(runs, curves, samples), out / name)
        written.append(out / name)
    return written
