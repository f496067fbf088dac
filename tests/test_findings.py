"""The findings in words (dlbench.findings) on small hand-made frames: each observation agrees and disagrees."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dlbench import findings, tables
from dlbench.testing.study import make_curves, make_runs, make_samples


@pytest.fixture(scope="module")
def study():
    runs = make_runs()
    return runs, make_curves(runs), make_samples(runs)


def own_points(times: dict, accs: dict, dataset="mnist", device="cpu") -> pd.DataFrame:
    rows = [{"run_id": f"{fw}-{dataset}-{device}", "framework": fw, "dataset": dataset, "preset": "own",
             "device": device, "batch_size": 64, "learning_rate": 0.01, "iterations": 100, "threads": 1,
             "status": "ok", "train_time_s": t, "accuracy": accs[fw]} for fw, t in times.items()]
    return pd.DataFrame(rows)


def test_findings_pick_the_fastest_and_most_accurate_framework():
    runs = pd.concat([own_points({"caffe": 10, "tensorflow": 20, "pytorch": 15},
                                 {"caffe": 0.97, "tensorflow": 0.99, "pytorch": 0.98}),
                      own_points({"caffe": 5, "tensorflow": 1}, {"caffe": 0.90, "tensorflow": 0.90}, device="gpu")])
    lead = findings.leaders(runs).set_index("device")
    assert lead.loc["cpu", "fastest"] == "caffe" and lead.loc["cpu", "most_accurate"] == "tensorflow"
    assert lead.loc["gpu", "fastest"] == "tensorflow"
    assert lead.loc["gpu", "most_accurate"] == "tensorflow"  # a tie in accuracy goes to the faster


def test_observations_a_and_b_agree_and_disagree():
    holds = own_points({"caffe": 10, "tensorflow": 20}, {"caffe": 0.97, "tensorflow": 0.99})
    fails = own_points({"caffe": 30, "tensorflow": 20}, {"caffe": 0.99, "tensorflow": 0.97})
    assert findings.observe_caffe_fastest_on_cpu(holds).verdict == "agrees"
    assert findings.observe_caffe_fastest_on_cpu(fails).verdict == "disagrees"
    assert findings.observe_tensorflow_most_accurate(holds).verdict == "agrees"
    assert findings.observe_tensorflow_most_accurate(fails).verdict == "disagrees"
    no_caffe = own_points({"pytorch": 1, "tensorflow": 2}, {"pytorch": 0.9, "tensorflow": 0.9})
    assert findings.observe_caffe_fastest_on_cpu(no_caffe).verdict.startswith("not tested in this run (")
    cross = holds.assign(preset="caffe")  # the same settings for all: not the frameworks' own defaults
    assert findings.observe_caffe_fastest_on_cpu(cross).verdict.startswith("not tested")


def test_observation_c_gpu_faster():
    cpu = own_points({"caffe": 10, "tensorflow": 20}, {"caffe": 0.9, "tensorflow": 0.9})
    gpu = own_points({"caffe": 1, "tensorflow": 2}, {"caffe": 0.9, "tensorflow": 0.9}, device="gpu")
    assert findings.observe_gpu_faster(pd.concat([cpu, gpu])).verdict == "agrees"
    slow = own_points({"caffe": 1, "tensorflow": 40}, {"caffe": 0.9, "tensorflow": 0.9}, device="gpu")
    v = findings.observe_gpu_faster(pd.concat([cpu, slow]))
    assert v.verdict == "disagrees" and "tensorflow 0.5x" in v.evidence
    assert findings.observe_gpu_faster(cpu).verdict == "not tested in this run (no ok GPU point)"


def presets_runs(own_acc: float, cross_acc: float) -> pd.DataFrame:
    rows = []
    for preset, acc in (("own", own_acc), ("tensorflow", cross_acc), ("caffe", 0.5)):
        rows.append({"run_id": preset, "framework": "pytorch", "dataset": "mnist", "preset": preset, "device": "cpu",
                     "status": "ok", "train_time_s": 1.0, "accuracy": acc, "batch_size": 64, "learning_rate": 0.01,
                     "iterations": 100})
    rows.append({**rows[-1], "run_id": "x", "preset": "theano", "status": "diverged", "accuracy": np.nan,
                 "train_time_s": np.nan})
    return pd.DataFrame(rows)


def test_observation_d_own_defaults_not_always_best():
    beaten = presets_runs(0.90, 0.95)
    assert findings.observe_own_not_always_best(beaten).verdict == "agrees"
    table = findings.own_vs_cross(beaten)
    assert table.iloc[0]["best_cross"] == "tensorflow" and not table.iloc[0]["own_is_best"]
    assert findings.observe_own_not_always_best(presets_runs(0.97, 0.95)).verdict == "disagrees"
    # the `torch` preset on PyTorch is its own defaults, not a cross-applied one
    torch_named = presets_runs(0.97, 0.95).replace({"preset": {"own": "torch"}})
    assert findings.observe_own_not_always_best(torch_named).verdict == "disagrees"
    cross = findings.cross_effects(beaten).set_index("whose")
    assert cross.loc["tensorflow", "accuracy_change_pp"] == pytest.approx(5.0)
    assert cross.loc["theano", "n_failed"] == 1


def batch_runs(times, accs, length="epochs") -> pd.DataFrame:
    return pd.DataFrame({"run_id": ["s", "l"], "framework": ["caffe"] * 2, "dataset": ["mnist"] * 2,
                         "preset": ["own"] * 2, "device": ["cpu"] * 2, "batch_size": [32, 256],
                         "learning_rate": [0.01] * 2, "epochs": [2, 2] if length == "epochs" else [np.nan] * 2,
                         "iterations": [2000, 250] if length == "epochs" else [100, 100], "threads": [1, 1],
                         "status": ["ok"] * 2, "train_time_s": times, "accuracy": accs})


def test_observation_e_batch_size():
    assert findings.observe_batch_size(batch_runs([10.0, 4.0], [0.98, 0.95])).verdict == "agrees"
    assert findings.observe_batch_size(batch_runs([10.0, 14.0], [0.98, 0.95])).verdict == "disagrees"
    assert findings.observe_batch_size(batch_runs([10.0, 4.0], [0.95, 0.98])).verdict == "disagrees"
    v = findings.observe_batch_size(batch_runs([10.0, 40.0], [0.95, 0.98], length="iterations"))
    assert v.verdict == "not tested in this run (batch sizes were swept at a fixed number of iterations, not epochs)"


def length_runs(accs, times=(1.0, 2.0, 4.0)) -> pd.DataFrame:
    return pd.DataFrame({"run_id": list("abc"), "framework": ["tensorflow"] * 3, "dataset": ["mnist"] * 3,
                         "preset": ["own"] * 3, "device": ["cpu"] * 3, "batch_size": [50] * 3,
                         "learning_rate": [1e-4] * 3, "epochs": [1, 2, 4], "threads": [1] * 3,
                         "status": ["ok"] * 3, "train_time_s": list(times), "accuracy": accs})


def test_observation_f_length():
    assert findings.observe_length(length_runs([0.80, 0.90, 0.92])).verdict == "agrees"
    assert findings.observe_length(length_runs([0.80, 0.81, 0.95])).verdict == "disagrees"
    assert findings.observe_length(length_runs([0.80, 0.90, 0.92], times=(4.0, 2.0, 1.0))).verdict == "disagrees"
    two = length_runs([0.80, 0.90, 0.92]).iloc[:2]
    assert "saturation needs at least three" in findings.observe_length(two).verdict
    assert findings.observe_length(two.iloc[:1]).verdict.startswith("not tested")


def test_observation_f_from_learning_curves_without_a_length_sweep():
    runs = length_runs([0.8, 0.9, 0.92]).iloc[:1]
    curves = pd.DataFrame({"run_id": ["a"] * 3, "kind": ["test"] * 3, "iteration": [100, 200, 300],
                           "accuracy": [0.8, 0.9, 0.92], "train_time_s": [1.0, 2.0, 3.0]})
    v = findings.observe_length(runs, curves)
    assert v.verdict == "agrees" and "learning curves" in v.evidence


def test_findings_count_failed_points(study):
    runs, curves, _ = study
    fails = findings.failures(runs)
    assert fails["n"].sum() == (runs.status != "ok").sum()
    row = fails[(fails.framework == "theano") & (fails.status == "diverged")].iloc[0]
    assert row["n"] == ((runs.framework == "theano") & (runs.status == "diverged")).sum()
    assert "nan" in row["example_reason"]


def test_write_findings_writes_markdown_with_every_observation(study, tmp_path):
    runs, curves, _ = study
    out = tmp_path / "results" / "findings.md"
    text = findings.write_findings(runs, curves, out, tables.PUBLISHED_CSV)
    assert out.read_text() == text
    for obs in findings.OBSERVATIONS:
        line = next(li for li in text.splitlines() if li.startswith(f"- ({obs.key})"))
        assert any(v in line for v in ("**agrees**", "**disagrees**", "**not tested in this run (")), line
    failed = int((runs.status != "ok").sum())
    assert f"{failed} of {len(runs)} points failed" in text
    assert "## This machine next to the published figures" in text and "| digits | mnist |" in text
    verdicts = findings.observations(runs, curves)
    assert verdicts["c"].verdict == "agrees"  # GPU is 10x faster in the hand-made study
    assert verdicts["e"].verdict == "agrees"  # larger batches: faster, less accurate, fixed epochs


def test_write_findings_on_an_empty_run(tmp_path):
    text = findings.write_findings(pd.DataFrame(columns=["run_id", "framework", "dataset", "status"]),
                                   pd.DataFrame(), tmp_path / "f.md")
    assert "nothing to report" in text
