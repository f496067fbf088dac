"""Charts and findings on small hand-made tables (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dlbench import charts, tables
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
    assert len(best) == len(panels) - sum(tables.tuning_table(runs).query("choice == 'best accuracy'")
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
