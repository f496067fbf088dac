"""Charts and findings on small hand-made tables (no training)."""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlbench.analysis import frames, groups, joint_grids
from dlbench.analysis.published import published_ratios
from dlbench.paths import ROOT
from dlbench.present import findings
from dlbench.present.charts import catalog, draw, drawings
from dlbench.testing.study import (
    make_curves,
    make_modern_runs,
    make_runs,
    make_samples,
    one_default,
    small_runs,
    with_preset_points,
)


@pytest.fixture(scope="module")
def study():
    """The study's four frameworks, and the compile and precision axes of the three that have them."""
    runs = pd.concat([with_preset_points(make_runs()), make_modern_runs()], ignore_index=True)
    return runs, make_curves(runs), make_samples(runs)


def spec_title(chart) -> str:
    title = chart.to_dict()["title"]
    return title["text"] if isinstance(title, dict) else title


def test_the_hand_made_study_has_failures_of_several_kinds(study):
    runs, _, _ = study
    assert {"ok", "diverged", "oom", "timeout", "error"} <= set(runs.status)


def encoded_fields(node) -> set[str]:
    """Every field a chart's spec (or any of its layers and facets) encodes, on any channel."""
    found = set()
    if isinstance(node, dict):
        for channel in (node.get("encoding") or {}).values():
            if isinstance(channel, dict) and "field" in channel:
                found.add(channel["field"])
        for value in node.values():
            found |= encoded_fields(value)
    elif isinstance(node, list):
        for value in node:
            found |= encoded_fields(value)
    return found


def spec_rows(spec: dict) -> pd.DataFrame:
    """Every row of data a chart's Vega-Lite spec holds (Altair keeps the chart's and its layers' in `datasets`)."""
    return pd.DataFrame([row for rows in spec.get("datasets", {}).values() for row in rows])


def html_rows(page: str) -> tuple[pd.DataFrame, set[str]]:
    """The rows of data a saved chart page holds (the Vega spec inlined in it: every dataset with a framework
    column, as VegaFusion left them), and every field its marks encode."""
    start = page.rindex("const spec = ") + len("const spec = ")
    spec, _ = json.JSONDecoder().raw_decode(page[start:])
    rows = [row for data in spec["data"] for row in (data.get("values") or []) if "framework" in row]
    text = json.dumps(spec["marks"] if "marks" in spec else spec)
    return pd.DataFrame(rows), {f for f in set(pd.DataFrame(rows).columns) if f'"{f}"' in text}


def svg_marks(svg: str) -> Counter:
    """How many marks an SVG draws, by the class of Vega's group of them (`mark-symbol role-mark
    child_layer_2_marks`: the third layer's points), summed over the facet cells."""
    marks = Counter()
    for group in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}g"):
        cls = group.get("class", "")
        if "role-mark" in cls.split():
            marks[cls] += len(group)
    return marks


def _with_pct(runs: pd.DataFrame) -> pd.DataFrame:
    return runs.assign(accuracy_pct=pd.to_numeric(runs["accuracy"], errors="coerce") * 100)


def _at_presets(runs: pd.DataFrame) -> pd.DataFrame:
    return groups.preset_points(frames.points(runs))


def _in_panels(at: pd.DataFrame) -> pd.DataFrame:
    """The preset points as the per-framework charts draw them: each once in its own panel, and a preset's owner's
    own defaults once more in each panel of that preset applied to others (same dataset, device and knobs)."""
    knobs = ["dataset", "device", "threads", "interop_threads", "library"]
    applied = at[at["reading"] != "own"]
    copies = [at[at["reading"] == "own"].merge(applied[["whose", "reading", *knobs]].drop_duplicates()
                                               .rename(columns={"reading": "as"}), on=["whose", *knobs])]
    return pd.concat([at, *copies], ignore_index=True)


def _ok(runs: pd.DataFrame, *metrics: str, positive: bool = False) -> pd.DataFrame:
    """The ok points with every one of `metrics` (positive ones, if asked): what a chart of points draws a dot for."""
    df = _with_pct(runs)
    keep = df["status"] == "ok"
    for m in metrics:
        keep &= df[m].notna() & ((df[m] > 0) if positive else True)
    return df[keep]


def _curve_tests(runs: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """Every test of every run's curve, at its run's compile time plus the training time so far."""
    tests = curves[(curves["kind"] == "test") & curves["accuracy"].notna()]
    compile_s = pd.to_numeric(runs.set_index("run_id")["compile_time_s"], errors="coerce").fillna(0.0)
    tests = tests[tests["run_id"].isin(compile_s.index)]
    return tests.assign(accuracy_pct=tests["accuracy"] * 100,
                        train_time_s=tests["train_time_s"] + tests["run_id"].map(compile_s))


def _samples_of(column: str):
    def rows(runs, curves, samples, published):
        return samples[samples[column].notna() & samples["run_id"].isin(set(runs["run_id"]))]
    return rows


_T = ("train_time_s",)
_A = ("accuracy_pct",)
# What each chart draws: the columns its marks encode, where the rows it draws them for come from, and the columns
# that name one drawn row (None: rows compared as framework and value). A chart of the points (or runs, curves and
# samples) as they are is checked against the runs, curves and samples tables themselves; a chart of what
# dlbench.analysis.frames computes from them (means, speed-ups, correlations), against that computation.
DRAWS = {
    # per framework: the points of each preset at its own values (groups.preset_points), never a sweep beside it
    "train_time_by_framework": (_T, lambda r, c, s, p: _ok(_at_presets(r), *_T, positive=True), ["run_id"]),
    "test_time_by_framework": (("test_time_s",), lambda r, c, s, p: _ok(_at_presets(r), "test_time_s", positive=True),
                               ["run_id"]),
    "accuracy_by_framework": (_A, lambda r, c, s, p: _ok(_at_presets(r), *_A), ["run_id"]),
    "status_by_framework": (("n",), lambda r, c, s, p: r.groupby(["framework", "dataset", "device", "status"])
                            .size().rename("n").reset_index(), ["framework", "dataset", "device", "status"]),
    **{f"{what}_vs_{param}": (cols, lambda r, c, s, p, a=param, m=cols[0]: frames.sweep_table(r, a, m), None)
       for what, cols in (("train_time", _T), ("accuracy", _A))
       for param in ("batch_size", "learning_rate", "length")},
    "defaults_matrix_accuracy": (_A, lambda r, c, s, p: frames.defaults_table(r), None),
    "defaults_matrix_train_time": (_T, lambda r, c, s, p: frames.defaults_table(r), None),
    "tuning_grid": (_A, lambda r, c, s, p: joint_grids.tuning_cells(r), None),
    "speedup_vs_threads": (("speedup",), lambda r, c, s, p: frames.speedups(r), None),
    "time_to_accuracy": (("accuracy_pct", "train_time_s"), lambda r, c, s, p: _curve_tests(r, c),
                         ["run_id", "iteration"]),
    "pareto_front": (("train_time_s", "accuracy_pct"), lambda r, c, s, p: _ok(r, *_T, *_A, positive=True),
                     ["run_id"]),
    "cpu_timeline": (("cpu_pct",), _samples_of("cpu_pct"), ["run_id", "t"]),
    "memory_timeline": (("rss_mb",), _samples_of("rss_mb"), ["run_id", "t"]),
    "gpu_timeline": (("gpu_util_pct",), _samples_of("gpu_util_pct"), ["run_id", "t"]),
    "resource_correlation": (("r",), lambda r, c, s, p: frames.resource_correlations(r), None),
    "published_comparison": (("train_time_ratio", "accuracy_diff_pp"), lambda r, c, s, p: published_ratios(r, p),
                             None),
    "compile_speedup": (("speedup", "accuracy_change_pp"), lambda r, c, s, p: frames.axis_speedups(r, "compile"),
                        None),
    "bf16_speedup": (("speedup", "accuracy_change_pp"), lambda r, c, s, p: frames.axis_speedups(r, "precision"),
                     None),
}
# The timelines draw one run per framework, dataset and device: some of the samples, never all.
SOME = {"cpu_timeline", "memory_timeline", "gpu_timeline"}


def _pairs(df: pd.DataFrame, col: str) -> Counter:
    return Counter(zip(df["framework"], np.round(df[col].astype(float), 9)))


def assert_draws_its_data(name: str, rows: pd.DataFrame, fields: set[str], runs, curves, samples, published,
                          whole: bool = True) -> None:
    """The chart `name`, holding `rows` of data and encoding `fields`, draws what DRAWS says from these tables:
    its columns are encoded; the frameworks it draws a value of are those the tables have one for; every value it
    draws is the tables' value for that row (or a framework's value there); and, if `whole` (a chart that draws
    no sample), every value of the tables is drawn."""
    columns, source, key = DRAWS[name]
    expected = source(runs, curves, samples, published)
    assert not expected.empty, f"{name}: the study has nothing for it to draw"
    for col in columns:
        assert col in fields, f"{name} does not draw {col} (it encodes {sorted(fields)})"
        drawn = rows[rows[col].notna()] if col in rows.columns else rows.iloc[0:0]
        want = expected[expected[col].notna()]
        assert set(drawn["framework"]) == set(want["framework"]), (name, col, set(drawn["framework"]),
                                                                   set(want["framework"]))
        if key:
            drawn = drawn.dropna(subset=key)  # rows of a point (not a mean of them)
            both = drawn.merge(want, on=key, how="left", suffixes=("", "_want"), indicator=True)
            stray = both[both["_merge"] != "both"]
            assert stray.empty, f"{name} draws {col} of rows the tables lack: {stray[key].head(3).to_dict('records')}"
            assert np.allclose(both[col].astype(float), both[f"{col}_want"].astype(float), rtol=1e-9), (name, col)
            assert "framework" in key or (both["framework"] == both["framework_want"]).all(), name
            missing = want.merge(drawn[key], on=key, how="left", indicator=True)["_merge"] != "both"
            assert not (whole and name not in SOME and missing.any()), f"{name} leaves out {int(missing.sum())} rows"
        else:
            have, need = _pairs(drawn, col), _pairs(want, col)
            stray = sorted(set(have) - set(need))
            assert not stray, f"{name} draws {len(stray)} {col} values the tables lack: {stray[:3]}"
            assert not (whole and need - have), f"{name} leaves out {col} values: {sorted(need - have)[:3]}"


@pytest.mark.parametrize("name", list(draw.CHARTS))
def test_every_chart_draws_and_saves_html_and_svg(study, name, tmp_path):
    runs, curves, samples = study
    if name == "published_comparison":
        # make_runs' own points are a full factorial, so no framework has a default point there (a tie), and only
        # default points are set beside the published figures: its own points at one setting (one_default)
        runs = pd.concat([one_default(make_runs()), make_modern_runs()], ignore_index=True)
    published = draw.read_published()
    chart = draw.CHARTS[name].make(runs, curves, samples, published)
    spec = chart.to_dict()
    assert spec_title(chart)
    assert draw.NO_DATA not in json.dumps(spec), f"{name} found no data in a study that has it"
    assert_draws_its_data(name, spec_rows(spec), encoded_fields(spec), runs, curves, samples, published)
    draw.save(chart, tmp_path / name)
    html = (tmp_path / f"{name}.html").read_text()
    assert "vegaEmbed" in html and "cdn.jsdelivr" not in html
    # the page holds the same data (as VegaFusion evaluated the chart's transforms)
    assert_draws_its_data(name, *html_rows(html), runs, curves, samples, published)
    svg = (tmp_path / f"{name}.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "<path" in svg
    marks = svg_marks(svg)
    assert sum(marks.values()) > 0, f"{name}: the SVG draws no mark"
    if name in SVG_MARKS:  # a mark for each row drawn
        for layer, count in SVG_MARKS[name](runs).items():
            assert marks[layer] == count, (name, layer, marks[layer], count)
    assert "x" * 300 not in html  # log tails and JSON blobs are left out of the chart data


def _per_point(metric: str, positive: bool):
    """A chart per framework: a dot per ok point of a preset at its own values (layer 2) and a red mark per failed
    one (layer 4)."""
    def count(runs):
        at = _in_panels(_at_presets(runs))
        ok = _ok(at, metric, positive=positive)
        quiet = ~ok["contended"].astype(bool) if "contended" in ok else pd.Series(True, index=ok.index)
        return {"mark-symbol role-mark child_layer_2_marks": int(quiet.sum()),
                "mark-symbol role-mark child_layer_4_marks": int((at["status"] != "ok").sum())}
    return count


# The marks some SVGs must draw: how many, in which layer, worked out from the runs table.
SVG_MARKS = {
    "train_time_by_framework": _per_point("train_time_s", True),
    "test_time_by_framework": _per_point("test_time_s", True),
    "accuracy_by_framework": _per_point("accuracy_pct", False),
    # a bar segment per framework, dataset, device and status
    "status_by_framework": lambda runs: {"mark-rect role-mark child_layer_0_marks": len(
        runs.groupby(["framework", "dataset", "device", "status"]))},
    # a dot per ok point with a time and an accuracy
    "pareto_front": lambda runs: {"mark-symbol role-mark child_layer_0_marks": len(
        _ok(runs, "train_time_s", "accuracy_pct", positive=True))},
}


def test_a_chart_is_registered_once_and_everything_it_needs_is_there():
    registered = catalog.CHARTS
    # every drawing a chart names exists, and none is left that no chart draws
    assert {c.drawing for c in registered.values()} == set(drawings.DRAWINGS)
    assert list(draw.CHARTS) == list(registered)  # the drawn charts are the registered ones, in their order
    # every chart has its caption, a branch of workflow/report/charts.rst by its name, in the registry's order
    captions = (ROOT / "workflow" / "report" / "charts.rst").read_text()
    assert re.findall(r'\{% (?:el)?if name == "(\w+)" %\}', captions) == list(registered)
    for name, c in registered.items():
        assert draw.CHARTS[name].category == c.category == catalog.category(f"results/charts/{name}.svg")
        assert catalog.category(name) == c.category  # the report's: by the name its pattern finds
        assert catalog.subcategory(f"results/charts/{name}.svg") == catalog.subcategory(name) == c.subcategory
    # a drawing given another chart's arguments draws that other chart: the arguments are the registration's
    wrong = drawings.DRAWINGS["per_framework"](*registered["test_time_by_framework"].args)
    assert "Testing time" in spec_title(wrong(with_preset_points(make_runs())))


def test_the_report_caption_of_each_chart_is_its_own():
    """The report gives every chart found in the folder the one caption file, rendered with its name (Snakemake's
    Jinja settings): each chart gets its own text and only that."""
    from jinja2 import Environment

    template = Environment(trim_blocks=True, lstrip_blocks=True).from_string(
        (ROOT / "workflow" / "report" / "charts.rst").read_text())
    texts = {}
    for name in catalog.CHARTS:
        wildcards = type("Wildcards", (), {"name": name})
        texts[name] = template.render(snakemake=type("Snakemake", (), {"wildcards": wildcards})).strip()
        assert texts[name] and "{" not in texts[name] and "\n" not in texts[name], name
    assert len(set(texts.values())) == len(texts)
    assert "GPU utilisation" in texts["gpu_timeline"] and "threads" in texts["speedup_vs_threads"]


def files_in(folder: Path) -> set[str]:
    return {f for f in os.listdir(folder) if not f.startswith(".")}


def test_a_study_with_data_for_every_chart_draws_every_one(tmp_path):
    # make_runs' sweeps, one setting of each framework's own points (the published comparison's default points),
    # and the compile and precision axes
    runs = pd.concat([one_default(make_runs()), make_modern_runs()], ignore_index=True)
    for name, frame in (("runs", runs), ("curves", make_curves(runs)), ("samples", make_samples(runs))):
        frame.to_parquet(tmp_path / f"{name}.parquet")
    out = tmp_path / "charts"
    index = draw.draw_all(tmp_path / "runs.parquet", tmp_path / "curves.parquet", tmp_path / "samples.parquet", out)
    assert index == {"drawn": list(draw.CHARTS), "not_drawn": {}} == catalog.read_index(out)
    files = catalog.chart_files(str(out), index["drawn"])
    assert len(files) == len(catalog.FORMATS) * len(draw.CHARTS) == len(catalog.chart_files(str(out)))
    assert files_in(out) == {Path(f).name for f in files} | {catalog.INDEX}
    for f in files:
        if f.endswith((".png", ".pdf")):  # the drawing as images: real ones, drawn from the SVG beside them
            assert Path(f).read_bytes()[:5] in (b"\x89PNG\r", b"%PDF-"), f
            continue
        text = Path(f).read_text()
        assert "could not be drawn" not in text and draw.NO_DATA not in text, f
    assert {draw.category(f) for f in files} >= {"Time and accuracy", "Resources", "Default settings"}
    assert findings.not_drawn_line(index["not_drawn"]) == ""  # nothing to say in the findings
    text = findings.render(runs, make_curves(runs), draw.read_published(), not_drawn=index["not_drawn"])
    assert "Charts not drawn" not in text


def test_a_study_without_gpu_points_or_a_threads_sweep_draws_neither_and_says_why(tmp_path):
    runs = with_preset_points(make_runs())
    runs = runs[(runs["device"] == "cpu") & (runs["threads"] == 1)].reset_index(drop=True)
    curves, samples = make_curves(runs), make_samples(runs)
    out = tmp_path / "charts"
    out.mkdir()
    for stale in ("gpu_timeline.svg", "speedup_vs_threads.html"):  # another study's drawing in the same folder
        (out / stale).write_text("<svg></svg>")
    index = draw.draw_all(runs, curves, samples, out)
    assert catalog.read_index(out) == index
    gone = {"gpu_timeline": "no GPU point", "speedup_vs_threads": "one thread count per setting"}
    assert gone.items() <= index["not_drawn"].items()
    assert "cpu_timeline" in index["drawn"] and "train_time_by_framework" in index["drawn"]
    assert set(index["drawn"]) | set(index["not_drawn"]) == set(draw.CHARTS)
    assert not set(index["drawn"]) & set(index["not_drawn"])
    # a file for every chart drawn and none for the others (the stale ones removed): the folder lists what was drawn
    assert files_in(out) == {Path(f).name for f in catalog.chart_files(str(out), index["drawn"])} | {catalog.INDEX}
    for name in index["drawn"]:
        assert draw.NO_DATA not in (out / f"{name}.svg").read_text(), name
    # the findings say in one line which charts were not drawn, and why
    text = findings.render(runs, curves, None, not_drawn=index["not_drawn"])
    lines = [line for line in text.splitlines() if line.startswith("Charts not drawn (no data in this study): ")]
    assert len(lines) == 1, lines
    assert "GPU timeline (no GPU point)" in lines[0]
    assert "speed-up against threads (one thread count per setting)" in lines[0]
    for name in index["not_drawn"]:
        title = catalog.CHARTS[name].title
        assert title in lines[0] or title[0].lower() + title[1:] in lines[0], name
    assert "CPU timeline" not in lines[0] and "training time per framework" not in lines[0]
    assert "Charts not drawn" not in findings.render(runs, curves, None)  # nothing said where it is not known


def test_failed_points_are_in_the_chart_data(study):
    runs, curves, samples = study
    spec = json.dumps(draw.CHARTS["train_time_by_framework"].make(runs, curves, samples).to_dict())
    assert '"diverged"' in spec and '"oom"' in spec and '"timeout"' in spec
    status = frames.status_counts(runs)
    theano = status[(status.framework == "theano") & (status.status == "diverged")]["n"].sum()
    assert theano == len(runs[(runs.framework == "theano") & (runs.status == "diverged")]) > 0


@pytest.mark.parametrize("name", ["gpu_timeline", "speedup_vs_threads", "defaults_matrix_accuracy",
                                  "defaults_matrix_train_time", "published_comparison", "train_time_vs_length",
                                  "accuracy_vs_batch_size", "resource_correlation", "time_to_accuracy",
                                  "tuning_grid", "compile_speedup", "bf16_speedup"])
def test_a_chart_without_data_is_not_drawn_and_says_why(name, tmp_path):
    runs = small_runs()
    samples = pd.DataFrame({"run_id": ["a"] * 3, "framework": ["pytorch"] * 3, "dataset": ["digits"] * 3,
                            "phase": ["import", "train", "train"], "t": [0.1, 0.3, 0.5],
                            "cpu_pct": [90.0, 100, 100], "rss_mb": [100.0, 120, 130]})
    with pytest.raises(draw.NoData) as gap:
        draw.draw(name, runs, pd.DataFrame(), samples, draw.read_published())
    why = gap.value.why
    assert why and len(why) < 80 and "\n" not in why, why  # a phrase for the findings' line
    index = draw.draw_all(runs, pd.DataFrame(), samples, tmp_path, published=draw.read_published())
    assert index["not_drawn"][name] == why and name not in index["drawn"]
    assert not (tmp_path / f"{name}.svg").exists() and not (tmp_path / f"{name}.html").exists()


def test_every_chart_survives_empty_tables(tmp_path):
    empty = pd.DataFrame(columns=["run_id", "framework", "dataset", "status"])
    index = draw.draw_all(empty, pd.DataFrame(), pd.DataFrame(), tmp_path)
    assert index["drawn"] == [] and list(index["not_drawn"]) == list(draw.CHARTS)
    assert files_in(tmp_path) == {catalog.INDEX}


def test_the_defaults_matrices_say_which_reading_ran():
    runs = with_preset_points(make_runs())
    settings = runs.assign(cross_apply=["settings" if p == "caffe" and fw != "caffe" else None
                                        for p, fw in zip(runs.preset, runs.framework)])
    for name in ("defaults_matrix_accuracy", "defaults_matrix_train_time"):
        spec = json.dumps(draw.CHARTS[name].make(settings).to_dict())
        assert "applied as settings only" in spec and "whole preset" not in spec
        whole = json.dumps(draw.CHARTS[name].make(runs).to_dict())
        assert "applied as whole preset" in whole
    both = pd.concat([settings, runs[runs.preset == "caffe"].assign(run_id=lambda d: d.run_id + "-whole")])
    spec = draw.CHARTS["defaults_matrix_accuracy"].make(both).to_dict()
    columns = {row["column"] for row in next(iter(spec["datasets"].values()))}
    assert {"caffe (settings only)", "caffe (whole preset)", "torch", "tensorflow", "theano"} <= columns


def test_the_tuning_chart_marks_the_defaults_the_best_and_the_fastest(study):
    runs, _, _ = study
    spec = draw.CHARTS["tuning_grid"].make(runs).to_dict()
    cells = next(iter(spec["datasets"].values()))
    panels = {c["panel"] for c in cells}
    assert len(panels) == runs["tuning_grid"].nunique()
    assert sum(c["is_default"] for c in cells) == len(panels)
    best = [c for c in cells if "best" in c["mark"]]
    assert len(best) == len(panels) - sum(joint_grids.tuning_table(runs).query("choice == 'best accuracy'")
                                           ["accuracy_pct"].isna())


@pytest.mark.parametrize("name,axis", [("compile_speedup", "compile"), ("bf16_speedup", "precision")])
def test_the_speed_up_charts_draw_each_frameworks_pairs_with_their_accuracy_cost(study, name, axis):
    runs, _, _ = study
    spec = draw.CHARTS[name].make(runs).to_dict()
    rows = next(iter(spec["datasets"].values()))
    want = frames.axis_speedups(runs, axis)
    assert len(rows) == len(want) > 0
    assert {r["framework"] for r in rows} == {"pytorch", "tensorflow", "jax"}
    assert sorted(r["speedup"] for r in rows) == pytest.approx(sorted(want["speedup"]))
    assert sorted(r["accuracy_change_pp"] for r in rows) == pytest.approx(sorted(want["accuracy_change_pp"]))
    text = json.dumps(spec)
    assert "accuracy_change_pp" in text and ("compile_time_s" in text if axis == "compile" else "bf16" in text)


def chart_rows(chart) -> list[dict]:
    spec = chart.to_dict()
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_the_per_framework_bars_carry_their_interval_and_mark_contended_points():
    rows = [{"run_id": f"{fw}{i}", "framework": fw, "dataset": "digits", "preset": "caffe", "device": "cpu",
             "status": "ok", "seed": i, "train_time_s": t, "accuracy": 0.9, "batch_size": 32, "learning_rate": 0.01,
             "contended": busy}
            for fw, times in (("pytorch", (10.0, 12.0, 14.0, 40.0)), ("tensorflow", (20.0,)))
            for i, t in enumerate(times) for busy in [i == 3]]
    chart = draw.draw("train_time_by_framework", pd.DataFrame(rows), pd.DataFrame(), pd.DataFrame())
    data = chart_rows(chart)
    mean = next(r for r in data if r.get("layer") == "mean" and r["framework"] == "pytorch")
    # the contended 40 s run is left out: mean of 10, 12, 14 s, the interval on the log scale (a time's),
    # exp(mean(log t) -/+ 4.3027 x sd(log t) / sqrt(3))
    logs = np.log([10.0, 12.0, 14.0])
    half = 4.302652729749462 * logs.std(ddof=1) / 3 ** 0.5
    assert mean["train_time_s"] == 12.0 and mean["n_ok"] == 3
    assert mean["ci_low"] == pytest.approx(np.exp(logs.mean() - half))
    assert mean["ci_high"] == pytest.approx(np.exp(logs.mean() + half))
    single = next(r for r in data if r.get("layer") == "mean" and r["framework"] == "tensorflow")
    assert single["n_ok"] == 1 and single.get("ci_low") is None  # one run: no interval drawn
    busy = [r for r in data if r.get("layer") == "point" and r.get("contended")]
    assert [r["train_time_s"] for r in busy] == [40.0]
    assert "1 run(s) timed under outside load" in json.dumps(chart.to_dict()["title"])


def test_a_timeline_thinned_keeps_each_buckets_peak():
    runs = pd.DataFrame({"run_id": ["r"], "framework": ["pytorch"], "dataset": ["digits"], "preset": ["own"],
                         "device": ["cpu"], "status": ["ok"], "train_time_s": [1.0], "accuracy": [0.9]})
    t = [round(0.2 * i, 3) for i in range(9000)]
    cpu = [100.0] * 9000
    cpu[4321] = 555.0  # one reading's peak, far from any every-k-th reading
    samples = pd.DataFrame({"run_id": "r", "framework": "pytorch", "dataset": "digits", "t": t, "cpu_pct": cpu,
                            "phase": "train", "rss_mb": 100.0})
    data = chart_rows(draw.draw("cpu_timeline", runs, pd.DataFrame(), samples))
    readings = [r for r in data if r.get("layer") == "sample"]
    assert len(readings) <= draw.MAX_SAMPLES + 2 and max(r["cpu_pct"] for r in readings) == 555.0
    assert min(r["t"] for r in readings) == 0.0 and max(r["t"] for r in readings) == t[-1]


def test_the_speed_up_and_sweep_charts_draw_intervals_where_repeats_ran():
    rows = [{"run_id": f"t{th}-{i}", "framework": "pytorch", "dataset": "digits", "preset": "caffe", "device": "cpu",
             "status": "ok", "seed": i, "threads": th, "batch_size": 32, "learning_rate": 0.01, "epochs": 1,
             "train_time_s": base * f, "accuracy": 0.9}
            for th, base in ((1, 10.0), (2, 5.0)) for i, f in enumerate((0.9, 1.0, 1.1))]
    table = frames.speedups(pd.DataFrame(rows)).set_index("threads")
    # both means have a relative half-width of 4.3027 x 0.1 / sqrt(3) (sd 10 % of the mean): the ratio's is sqrt(2) x
    rel = 2 ** 0.5 * 4.302652729749462 * 0.1 / 3 ** 0.5
    assert table.loc[2, "speedup"] == pytest.approx(2.0) and table.loc[2, "speedup_low"] == pytest.approx(2 * (1 - rel))
    assert pd.isna(table.loc[1, "speedup_low"])
    sweep = frames.sweep_table(pd.DataFrame(rows), "threads", "train_time_s").set_index("threads")
    logs = np.log([9.0, 10.0, 11.0])  # a time's interval: on its logarithm
    high = np.exp(logs.mean() + 4.302652729749462 * logs.std(ddof=1) / 3 ** 0.5)
    assert sweep.loc[1, "ci_high"] == pytest.approx(high)


def test_a_charts_folder_without_an_index_says_how_to_draw_it_again(tmp_path):
    """A folder drawn before charts had an index (every chart, placeholders too): the findings stop and name the fix."""
    (tmp_path / "gpu_timeline.svg").write_text("<svg></svg>")
    with pytest.raises(FileNotFoundError, match=r"no index\.json.*snakemake --forcerun charts"):
        catalog.read_index(tmp_path)


def test_the_per_framework_charts_draw_a_study_whose_every_run_failed(tmp_path):
    # a point rerun that timed out: no counted run, no mean, and still a chart of its red mark (it saved nothing)
    runs = with_preset_points(make_runs())
    gone = runs.assign(status="timeout", train_time_s=None, test_time_s=None, accuracy_pct=None, accuracy=None)
    gone = gone[gone["run_id"] == groups.preset_points(frames.points(gone))["run_id"].iloc[0]]  # a single run
    for name in ("train_time_by_framework", "accuracy_by_framework"):
        draw.save(draw.CHARTS[name].make(gone), tmp_path / name)
        rows = chart_rows(draw.CHARTS[name].make(gone))
        at_presets = groups.preset_points(frames.points(gone))
        assert {r["layer"] for r in rows} == {"failed"} and len(rows) == len(at_presets) == 1, name
        assert (tmp_path / f"{name}.svg").read_text().lstrip().startswith("<svg")


def test_a_log_axis_labels_a_value_near_every_mark():
    """The default study's training times run from 2.9 to 14.9 s: Vega's own ticks stop at 10, so the top marks had
    no labelled value near them; the ticks given cover the range, inside it, denser for a narrow one."""
    from dlbench.present.charts.pieces import log_ticks

    narrow = log_ticks(2.9, 14.9)
    assert narrow[0] == 3 and narrow[-1] == 14 and 12 in narrow and all(2.9 <= v <= 14.9 for v in narrow)
    assert log_ticks(0.5, 60) == [0.5, 1, 2, 5, 10, 20, 50]
    assert log_ticks(5, 5) == [] and log_ticks(0, 10) == []


def _encodings(node, field: str):
    """Every encoding channel in a Vega-Lite spec that encodes `field`."""
    if isinstance(node, dict):
        if node.get("field") == field and "type" in node:
            yield node
        for value in node.values():
            yield from _encodings(value, field)
    elif isinstance(node, list):
        for value in node:
            yield from _encodings(value, field)


@pytest.mark.parametrize("name", ["time_to_accuracy", "pareto_front", "train_time_vs_batch_size"])
def test_a_log_time_axis_spans_the_times_it_draws_not_whole_decades(study, name):
    """Vega's nice log domain ran the default study's 0.5-12 s from 0.1 to 100 s, the half to the right empty, and
    2.5-3 s from 1 to 10 s: the axis runs over the times drawn, with labelled values among the marks and none
    outside them."""
    runs, curves, samples = study
    chart = draw.CHARTS[name].make(runs, curves, samples)
    rows = chart_rows(chart)
    drawn = {"train_time_s": lambda r: r.get("good", True), "ci_low": bool, "ci_high": bool,
             "contended_mean": bool, "failed_at": lambda r: (r.get("failed") or 0) > 0}  # a failure's cross
    times = [r[c] for r in rows for c, shown in drawn.items() if isinstance(r.get(c), float) and shown(r)]
    scaled = [e for e in _encodings(chart.to_dict(), "train_time_s") if "scale" in e]
    assert scaled, name
    for x in scaled:
        assert x["scale"]["type"] == "log" and x["scale"]["nice"] is False
        ticks = x["axis"]["values"]
        assert len(ticks) >= 2 and min(times) <= min(ticks) and max(ticks) <= max(times), (ticks, min(times))


@pytest.mark.parametrize("name", ["cpu_timeline", "memory_timeline"])
def test_a_timeline_runs_from_the_launch_to_its_last_moment(study, name):
    """Padding ran the default study's timelines from -2 s, before the launch, to 16 s for a 14 s run: the time axis
    starts at the launch and ends just after the last reading or phase drawn."""
    runs, curves, samples = study
    chart = draw.CHARTS[name].make(runs, curves, samples)
    rows = chart_rows(chart)
    last = max(max(r["t"] for r in rows if r.get("layer") == "sample"),
               max(r["end"] for r in rows if r.get("layer") == "phase"))
    for field in ("t", "start"):
        (x,) = [e for e in _encodings(chart.to_dict(), field) if "scale" in e]
        low, high = x["scale"]["domain"]
        assert low == 0 and last <= high <= last * 1.05, (field, x["scale"], last)
