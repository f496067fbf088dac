"""Charts and findings on small hand-made tables (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dlbench import chart_drawings, chartlist, charts, tables, tuning
from dlbench.paths import ROOT
from dlbench.testing.study import make_curves, make_modern_runs, make_runs, make_samples, small_runs


@pytest.fixture(scope="module")
def study():
    """The study's four frameworks, and the compile and precision axes of the three that have them."""
    runs = pd.concat([make_runs(), make_modern_runs()], ignore_index=True)
    return runs, make_curves(runs), make_samples(runs)


def spec_title(chart) -> str:
    title = chart.to_dict()["title"]
    return title["text"] if isinstance(title, dict) else title


def test_the_hand_made_study_has_failures_of_several_kinds(study):
    runs, _, _ = study
    assert {"ok", "diverged", "oom", "timeout", "error"} <= set(runs.status)


@pytest.mark.parametrize("name", list(charts.CHARTS))
def test_every_chart_draws_and_saves_html_and_svg(study, name, tmp_path):
    runs, curves, samples = study
    chart = charts.CHARTS[name].make(runs, curves, samples, charts.read_published())
    spec = chart.to_dict()
    assert spec_title(chart)
    assert charts.NO_DATA not in json.dumps(spec), f"{name} found no data in a study that has it"
    charts.save(chart, tmp_path / name)
    html = (tmp_path / f"{name}.html").read_text()
    assert "vegaEmbed" in html and "cdn.jsdelivr" not in html
    svg = (tmp_path / f"{name}.svg").read_text()
    assert svg.lstrip().startswith("<svg") and "<path" in svg
    assert "x" * 300 not in html  # log tails and JSON blobs are left out of the chart data


def test_a_chart_is_registered_once_and_everything_it_needs_is_there():
    registered = chartlist.CHARTS
    # every drawing a chart names exists, and none is left that no chart draws
    assert {c.drawing for c in registered.values()} == set(chart_drawings.DRAWINGS)
    assert list(charts.CHARTS) == list(registered)  # the drawn charts are the registered ones, in their order
    for name, c in registered.items():
        assert (ROOT / "workflow" / "report" / f"{name}.rst").is_file(), f"{name} has no caption"
        assert charts.CHARTS[name].category == c.category == chartlist.category(f"results/charts/{name}.svg")
        assert chartlist.subcategory(f"results/charts/{name}.svg") == c.subcategory
    # a drawing given another chart's arguments draws that other chart: the arguments are the registration's
    wrong = chart_drawings.DRAWINGS["per_framework"](*registered["test_time_by_framework"].args)
    assert "Testing time" in spec_title(wrong(make_runs()))


def test_draw_all_writes_every_file_of_chart_files(study, tmp_path):
    runs, curves, samples = study
    runs.to_parquet(tmp_path / "runs.parquet")
    curves.to_parquet(tmp_path / "curves.parquet")
    samples.to_parquet(tmp_path / "samples.parquet")
    out = tmp_path / "charts"
    charts.draw_all(tmp_path / "runs.parquet", tmp_path / "curves.parquet", tmp_path / "samples.parquet", out)
    files = charts.chart_files(str(out))
    assert len(files) == 2 * len(charts.CHARTS)
    for f in files:
        text = Path(f).read_text()
        assert "could not be drawn" not in text, f
    assert {charts.category(f) for f in files} >= {"Time and accuracy", "Resources", "Default settings"}


def test_failed_points_are_in_the_chart_data(study):
    runs, curves, samples = study
    spec = json.dumps(charts.CHARTS["train_time_by_framework"].make(runs, curves, samples).to_dict())
    assert '"diverged"' in spec and '"oom"' in spec and '"timeout"' in spec
    status = tables.status_counts(runs)
    theano = status[(status.framework == "theano") & (status.status == "diverged")]["n"].sum()
    assert theano == len(runs[(runs.framework == "theano") & (runs.status == "diverged")]) > 0


@pytest.mark.parametrize("name", ["gpu_timeline", "speedup_vs_threads", "defaults_matrix_accuracy",
                                  "defaults_matrix_train_time", "published_comparison", "train_time_vs_length",
                                  "accuracy_vs_batch_size", "resource_correlation", "time_to_accuracy",
                                  "tuning_grid", "compile_speedup", "bf16_speedup"])
def test_a_chart_without_data_still_writes_valid_files(name, tmp_path):
    runs = small_runs()
    samples = pd.DataFrame({"run_id": ["a"] * 3, "framework": ["pytorch"] * 3, "dataset": ["digits"] * 3,
                            "phase": ["import", "train", "train"], "t": [0.1, 0.3, 0.5],
                            "cpu_pct": [90.0, 100, 100], "rss_mb": [100.0, 120, 130]})
    chart = charts.draw(name, runs, pd.DataFrame(), samples, charts.read_published())
    assert charts.NO_DATA in json.dumps(chart.to_dict())
    assert spec_title(chart)
    charts.save(chart, tmp_path / name)
    assert "vegaEmbed" in (tmp_path / f"{name}.html").read_text()
    svg = (tmp_path / f"{name}.svg").read_text()
    assert svg.lstrip().startswith("<svg") and charts.NO_DATA in svg


def test_every_chart_survives_empty_tables(tmp_path):
    empty = pd.DataFrame(columns=["run_id", "framework", "dataset", "status"])
    charts.draw_all(empty, pd.DataFrame(), pd.DataFrame(), tmp_path)
    for f in charts.chart_files(str(tmp_path)):
        text = Path(f).read_text()
        assert "could not be drawn" not in text and charts.NO_DATA in text, f


def test_the_defaults_matrices_say_which_reading_ran():
    runs = make_runs()
    settings = runs.assign(cross_apply=["settings" if p == "caffe" and fw != "caffe" else None
                                        for p, fw in zip(runs.preset, runs.framework)])
    for name in ("defaults_matrix_accuracy", "defaults_matrix_train_time"):
        spec = json.dumps(charts.CHARTS[name].make(settings).to_dict())
        assert "applied as settings only" in spec and "whole preset" not in spec
        whole = json.dumps(charts.CHARTS[name].make(runs).to_dict())
        assert "applied as whole preset" in whole
    both = pd.concat([settings, runs[runs.preset == "caffe"].assign(run_id=lambda d: d.run_id + "-whole")])
    spec = charts.CHARTS["defaults_matrix_accuracy"].make(both).to_dict()
    columns = {row["column"] for row in next(iter(spec["datasets"].values()))}
    assert {"caffe (settings only)", "caffe (whole preset)", "torch", "tensorflow", "theano"} <= columns


def test_the_tuning_chart_marks_the_defaults_the_best_and_the_fastest(study):
    runs, _, _ = study
    spec = charts.CHARTS["tuning_grid"].make(runs).to_dict()
    cells = next(iter(spec["datasets"].values()))
    panels = {c["panel"] for c in cells}
    assert len(panels) == runs["tuning_grid"].nunique()
    assert sum(c["is_default"] for c in cells) == len(panels)
    best = [c for c in cells if "best" in c["mark"]]
    assert len(best) == len(panels) - sum(tuning.tuning_table(runs).query("choice == 'best accuracy'")
                                           ["accuracy_pct"].isna())


@pytest.mark.parametrize("name,axis", [("compile_speedup", "compile"), ("bf16_speedup", "precision")])
def test_the_speed_up_charts_draw_each_frameworks_pairs_with_their_accuracy_cost(study, name, axis):
    runs, _, _ = study
    spec = charts.CHARTS[name].make(runs).to_dict()
    rows = next(iter(spec["datasets"].values()))
    want = tables.axis_speedups(runs, axis)
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
    chart = charts.draw("train_time_by_framework", pd.DataFrame(rows), pd.DataFrame(), pd.DataFrame())
    data = chart_rows(chart)
    mean = next(r for r in data if r.get("layer") == "mean" and r["framework"] == "pytorch")
    # the contended 40 s run is left out: mean of 10, 12, 14 s, sd 2, interval 12 -/+ 4.3027 x 2 / sqrt(3)
    half = 4.302652729749462 * 2 / 3 ** 0.5
    assert mean["train_time_s"] == 12.0 and mean["n_ok"] == 3
    assert mean["ci_low"] == pytest.approx(12 - half) and mean["ci_high"] == pytest.approx(12 + half)
    single = next(r for r in data if r.get("layer") == "mean" and r["framework"] == "tensorflow")
    assert single["n_ok"] == 1 and single.get("ci_low") is None  # one run: no interval drawn
    busy = [r for r in data if r.get("layer") == "point" and r.get("contended")]
    assert [r["train_time_s"] for r in busy] == [40.0]
    assert "1 point(s) timed under outside load" in json.dumps(chart.to_dict()["title"])


def test_a_timeline_thinned_keeps_each_buckets_peak():
    runs = pd.DataFrame({"run_id": ["r"], "framework": ["pytorch"], "dataset": ["digits"], "preset": ["own"],
                         "device": ["cpu"], "status": ["ok"], "train_time_s": [1.0], "accuracy": [0.9]})
    t = [round(0.2 * i, 3) for i in range(9000)]
    cpu = [100.0] * 9000
    cpu[4321] = 555.0  # one reading's peak, far from any every-k-th reading
    samples = pd.DataFrame({"run_id": "r", "framework": "pytorch", "dataset": "digits", "t": t, "cpu_pct": cpu,
                            "phase": "train", "rss_mb": 100.0})
    data = chart_rows(charts.draw("cpu_timeline", runs, pd.DataFrame(), samples))
    readings = [r for r in data if r.get("layer") == "sample"]
    assert len(readings) <= charts.MAX_SAMPLES + 2 and max(r["cpu_pct"] for r in readings) == 555.0
    assert min(r["t"] for r in readings) == 0.0 and max(r["t"] for r in readings) == t[-1]


def test_the_speed_up_and_sweep_charts_draw_intervals_where_repeats_ran():
    rows = [{"run_id": f"t{th}-{i}", "framework": "pytorch", "dataset": "digits", "preset": "caffe", "device": "cpu",
             "status": "ok", "seed": i, "threads": th, "batch_size": 32, "learning_rate": 0.01, "epochs": 1,
             "train_time_s": base * f, "accuracy": 0.9}
            for th, base in ((1, 10.0), (2, 5.0)) for i, f in enumerate((0.9, 1.0, 1.1))]
    table = tables.speedups(pd.DataFrame(rows)).set_index("threads")
    # both means have a relative half-width of 4.3027 x 0.1 / sqrt(3) (sd 10 % of the mean): the ratio's is sqrt(2) x
    rel = 2 ** 0.5 * 4.302652729749462 * 0.1 / 3 ** 0.5
    assert table.loc[2, "speedup"] == pytest.approx(2.0) and table.loc[2, "speedup_low"] == pytest.approx(2 * (1 - rel))
    assert pd.isna(table.loc[1, "speedup_low"])
    sweep = tables.sweep_table(pd.DataFrame(rows), "threads", "train_time_s").set_index("threads")
    assert sweep.loc[1, "ci_high"] == pytest.approx(10 + 4.302652729749462 * 1.0 / 3 ** 0.5)
