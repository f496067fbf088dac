"""The paper's study in miniature through the workflow: both readings of cross-application, a tuning grid
and TensorFlow's inter-op threads, trained for real; the records, the findings and the charts say what ran."""

import re

import pandas as pd
import pytest

from dlbench.frameworks import registry
from dlbench.present.charts import draw
from dlbench.testing.sandbox import copy_workflow, snakemake

STUDY = {
    "datasets": ["digits"],
    "frameworks": ["pytorch", "tensorflow"],
    "preset": ["own"],
    "sweep": {"iterations": [40], "threads": [1]},
    "monitor": {"interval_s": 0.2},
    "studies": {
        "defaults": {},
        # as in config/paper.yaml, each cross study holds the frameworks' own defaults too (the same points)
        "cross_settings": {"preset": ["own", "caffe"], "cross_apply": ["settings"]},
        "cross_preset": {"preset": ["own", "caffe"], "cross_apply": ["preset"]},
        "tuning": {"tune": {"batch_size": [0.5, 1], "learning_rate": [1, 2]}},
        "interop": {"frameworks": ["tensorflow"], "sweep": {"interop_threads": [2]}},
    },
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = copy_workflow(tmp_path_factory.mktemp("readings"), STUDY, "study.yaml")
    snakemake(root, "--configfile", "study.yaml")
    return root


@pytest.mark.long
def test_the_records_say_the_reading_and_both_thread_counts(study):
    runs = pd.read_parquet(study / "results/runs.parquet")
    # own 2 + caffe's settings 2 + caffe's whole preset 2 + tuning 8 (its 2 defaults are the own points) + interop 1
    assert len(runs) == 13 and (runs.status == "ok").all(), runs[["run_id", "status", "reason"]]
    own = runs[runs.preset == "own"]
    assert own.cross_apply.isna().all()
    settings, whole = runs[runs.cross_apply == "settings"], runs[runs.cross_apply == "preset"]
    assert len(settings) == len(whole) == 2
    networks = dict(zip(own.framework, own.network))
    assert networks == {"pytorch": "torch_mnist", "tensorflow": "mnist_deep"}
    assert dict(zip(settings.framework, settings.network)) == networks  # own network, Caffe's hyper-parameters
    assert set(settings.learning_rate) == {0.01} and set(settings.batch_size) == {64}
    assert set(whole.network) == {"lenet"}
    tf = runs[runs.framework == "tensorflow"]
    assert (tf.threads_in_effect == 1).all()
    assert tf.set_index("run_id").interop_threads_in_effect.to_dict() == {
        i: (2 if "-io2-" in i else 1) for i in tf.run_id}
    assert runs[runs.framework == "pytorch"].interop_threads_in_effect.notna().all()  # PyTorch has the pool too


@pytest.mark.long
def test_the_tuning_grid_and_the_reading_reach_the_findings_and_charts(study):
    runs = pd.read_parquet(study / "results/runs.parquet")
    grid = runs[runs.tuning_grid.notna()]
    assert len(grid) == 8 and grid.tuning_grid.nunique() == 2 and grid.tuning_is_default.sum() == 2
    text = (study / "results/findings.md").read_text()
    assert_tables_hold_the_runs(text, runs)
    assert "applied as: settings only, whole preset" in text
    # the provider's guidance reads TensorFlow's inter-op threads (the interop point beside its own defaults) where
    # both were timed without outside load; a contended one is left out, and then no knob varied alone
    pair = runs[(runs.framework == "tensorflow") & (in_defaults_study(runs) | runs.interop_threads.notna())]
    assert len(pair) == 2
    quiet = not pair.contended.map(lambda v: v is True or v == 1).any()
    assert "## Guidance" in text
    assert ("img/s per core" in text) if quiet else (
        "No library, thread or inter-op setting was varied with the other settings fixed" in text)
    for name in ("tuning_grid", "defaults_matrix_accuracy"):
        svg = (study / f"results/charts/{name}.svg").read_text()
        assert draw.NO_DATA not in svg and "could not be drawn" not in svg, name
    assert "settings only" in (study / "results/charts/defaults_matrix_accuracy.svg").read_text()


def md_rows(section: str, *lead: str) -> list[list[str]]:
    """The cells of a findings table's rows that begin with these cells."""
    prefix = "| " + " | ".join(lead) + " |"
    return [[c.strip() for c in line[len(prefix):].strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith(prefix)]


def in_defaults_study(runs: pd.DataFrame) -> pd.Series:
    """The points of the `defaults` sub-study: each framework's own defaults (the records list their sub-studies)."""
    return runs["studies"].map(lambda s: "defaults" in s.split(","))


def fmt(value: float) -> str:
    """A number as findings.md's tables write one (4 significant digits)."""
    return f"{value:.4g}"


def assert_tables_hold_the_runs(text: str, runs: pd.DataFrame) -> None:
    """findings.md's tuning and cross-application tables state the runs table's points: the grid's defaults, its
    most accurate cell and its fastest cell within 0.5 points of that (one run each here: the cells are the points),
    and each cross-applied point, with their settings, accuracy and training time, and the gains worked out from
    them."""
    number = r"\d+(\.\d+)?(e[+-]\d+)?"
    signed = rf"[+-]?{number}"
    tuned = text.split("## Tuned against own defaults")[1].split("\n## ")[0]
    for framework in ("pytorch", "tensorflow"):
        grid = runs[(runs.framework == framework) & runs.tuning_grid.notna()]
        assert len(grid) == 4 and grid.status.eq("ok").all()
        (default,) = [r for _, r in grid.iterrows() if r.tuning_is_default]
        # the grid's defaults are the framework's own defaults: the same point as the defaults study's
        own = runs[(runs.framework == framework) & in_defaults_study(runs)]
        assert list(own.run_id) == [default.run_id], (list(own.run_id), default.run_id)
        top = grid.accuracy.max()
        best = grid[grid.accuracy >= top - 1e-6].sort_values("train_time_s").iloc[0]  # ties: the faster
        near = grid[grid.accuracy * 100 >= top * 100 - 0.5].sort_values(
            ["train_time_s", "accuracy"], ascending=[True, False]).iloc[0]
        for choice, point in (("defaults", default), ("best accuracy", best), ("fastest within 0.5 points", near)):
            (cells,) = md_rows(tuned, framework, "digits", "cpu", registry.get(framework).own_preset, choice)
            what = (framework, choice, cells)
            # batch size, learning rate, length, unit, accuracy, train time: the point's
            assert [float(c) for c in cells[:3]] == [point.batch_size, point.learning_rate, point.iterations], what
            assert cells[3] == "iterations", what
            assert cells[4:6] == [fmt(point.accuracy * 100), fmt(point.train_time_s)], what
            gain, saved = cells[6:8]
            if choice == "defaults":  # the defaults against themselves: nothing compared
                assert re.fullmatch(r"\+?0", gain) and re.fullmatch(r"\+?0", saved), what
                continue
            # against the defaults (one run each): accuracy points gained, training time saved in % of the defaults'
            # (the ratio of the two runs), each with what the test tells
            for cell, estimate in ((gain, (point.accuracy - default.accuracy) * 100),
                                   (saved, (1 - point.train_time_s / default.train_time_s) * 100)):
                assert re.fullmatch(rf"{signed}( \[{signed}, {signed}\])?, [a-z][\w ,:.()-]*", cell), what
                assert float(cell.split(",")[0].split(" [")[0]) == pytest.approx(float(f"{estimate:+.3g}")), what
    cross = text.split("## What cross-applying settings did")[1].split("\n## ")[0]
    for framework in ("pytorch", "tensorflow"):
        (own,) = [r for _, r in runs[(runs.framework == framework) & in_defaults_study(runs)].iterrows()]
        assert own.preset == "own" and pd.isna(own.cross_apply)
        # ok, failed, accuracy (%), vs own (points), train time (s), time / own
        (cells,) = md_rows(cross, framework, "digits", "cpu", registry.get(framework).own_preset, "own defaults")
        assert cells == ["1", "0", fmt(own.accuracy * 100), "0", fmt(own.train_time_s), "1"], (framework, cells)
        for reading, applied in (("settings", "settings only"), ("preset", "whole preset")):
            (point,) = [r for _, r in runs.iterrows() if r.framework == framework and r.cross_apply == reading]
            (cells,) = md_rows(cross, framework, "digits", "cpu", "caffe", applied)
            what = (framework, reading, cells)
            assert cells[:3] == ["1", "0", fmt(point.accuracy * 100)] and cells[4] == fmt(point.train_time_s), what
            assert float(cells[3]) == pytest.approx((point.accuracy - own.accuracy) * 100, rel=1e-3, abs=1e-3), what
            assert float(cells[5]) == pytest.approx(point.train_time_s / own.train_time_s, rel=1e-3), what
