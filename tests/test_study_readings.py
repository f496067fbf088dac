"""The paper's study in miniature through the workflow: both readings of cross-application, a tuning grid
and TensorFlow's inter-op threads, trained for real; the records, the findings and the charts say what ran."""

import re

import pandas as pd
import pytest

from dlbench import charts
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_tuning_grid_and_the_reading_reach_the_findings_and_charts(study):
    runs = pd.read_parquet(study / "results/runs.parquet")
    grid = runs[runs.tuning_grid.notna()]
    assert len(grid) == 8 and grid.tuning_grid.nunique() == 2 and grid.tuning_is_default.sum() == 2
    text = (study / "results/findings.md").read_text()
    tuned = text.split("## Tuned against own defaults")[1].split("\n## ")[0]
    number = r"\d+(\.\d+)?(e[+-]\d+)?"
    for framework in ("pytorch", "tensorflow"):
        for choice in ("defaults", "best accuracy", "fastest within 0.5 points"):
            row = re.search(rf"\| {framework} \| digits \| cpu \| \w+ \| {choice} \|(.*)\|", tuned)
            assert row, (framework, choice, tuned)
            cells = [c.strip() for c in row.group(1).split("|")]
            # batch size, learning rate, length, unit, accuracy, train time, gain (points), time saved (%)
            assert all(re.fullmatch(f"-?{number}", c) for c in cells[:3] + cells[4:6]), cells
            signed = rf"[+-]?{number}"
            for change in cells[6:8]:
                if choice == "defaults":  # the defaults against themselves: nothing compared
                    assert re.fullmatch(r"\+?0", change), cells
                else:  # the estimate, its 95 % interval where the repeats give one, and what the test tells
                    assert re.fullmatch(rf"{signed}( \[{signed}, {signed}\])?, [a-z][\w ,:.()-]*", change), cells
    cross = text.split("## What cross-applying settings did")[1].split("\n## ")[0]
    for framework in ("pytorch", "tensorflow"):
        for reading in ("settings only", "whole preset"):
            assert re.search(rf"\| {framework} \| digits \| cpu \| caffe \| {reading} \| 1 \| 0 \| {number} \|",
                             cross), (framework, reading, cross)
    assert "applied as: settings only, whole preset" in text
    assert "## Guidance" in text and "img/s per core" in text
    for name in ("tuning_grid", "defaults_matrix_accuracy"):
        svg = (study / f"results/charts/{name}.svg").read_text()
        assert charts.NO_DATA not in svg and "could not be drawn" not in svg, name
    assert "settings only" in (study / "results/charts/defaults_matrix_accuracy.svg").read_text()
