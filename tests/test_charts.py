"""Charts and findings on small hand-made tables (no training)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO  # noqa: F401  (puts the repository on sys.path)

from dlbench import charts, findings

FRAMEWORKS = ["pytorch", "tensorflow", "caffe", "theano"]
BASE_TIME = {"pytorch": 2.0, "tensorflow": 3.0, "caffe": 1.0, "theano": 5.0}


def make_runs() -> pd.DataFrame:
    """A small study with every axis varied and failures of several kinds."""
    rows = []
    grid = itertools.product(FRAMEWORKS, ["digits", "cifar10"], ["own", "caffe"], [32, 128], [0.01, 0.1], [2, 8],
                             ["cpu", "gpu"], [1, 4])
    for i, (fw, ds, preset, bs, lr, ep, dev, th) in enumerate(grid):
        t = BASE_TIME[fw] * ep * (1 + 32 / bs) / th ** 0.6
        t *= (0.1 if dev == "gpu" else 1) * (3 if ds == "cifar10" else 1)
        acc = min(0.995, 0.80 + 0.04 * math.log2(ep) - 0.03 * (bs == 128) + 0.02 * (lr == 0.01)
                  + 0.01 * (preset == "own") - 0.1 * (ds == "cifar10"))
        status, reason = "ok", None
        if fw == "theano" and lr == 0.1 and bs == 32:
            status, reason = "diverged", "loss became nan at iteration 7"
        elif fw == "caffe" and dev == "gpu" and th == 4 and ds == "cifar10":
            status, reason = "oom", "resident memory over the 1000 MB limit"
        elif fw == "tensorflow" and ep == 8 and bs == 128 and lr == 0.01 and ds == "digits" and dev == "cpu":
            status, reason = "timeout", "over the 60 s limit"
        elif fw == "pytorch" and i % 37 == 0:
            status, reason = "error", "the trainer exited with code 1"
        ok = status == "ok"
        rows.append({
            "run_id": f"{fw}-{ds}-{preset}-bs{bs}-lr{lr}-e{ep}-{dev}-t{th}", "framework": fw, "dataset": ds,
            "preset": preset, "network": "lenet", "optimizer": "sgd", "learning_rate": lr, "batch_size": bs,
            "iterations": ep * 1000 // bs if ok else np.nan, "iterations_planned": ep * 1000 // bs, "epochs": ep,
            "device": dev, "threads": th, "library": "default", "repeat": 0, "seed": 1, "status": status,
            "reason": reason, "train_time_s": t if ok else np.nan, "test_time_s": t / 20 if ok else np.nan,
            "accuracy": acc if ok else np.nan, "final_loss": 0.1, "throughput_img_s": 1000 / t,
            "cpu_util_mean_pct": 80.0 * th + bs / 10, "rss_peak_mb": 300 + bs + 100 * (ds == "cifar10"),
            "rss_mean_mb": 250 + bs / 2, "gpu_util_mean_pct": 60.0 if dev == "gpu" else np.nan,
            "threads_in_effect": th, "framework_version": "1.0", "log_tail": "x" * 500,
        })
    return pd.DataFrame(rows)


def make_curves(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in runs[runs.status == "ok"].itertuples():
        for k in (1, 2, 3):
            rows.append({"run_id": r.run_id, "framework": r.framework, "dataset": r.dataset, "kind": "test",
                         "iteration": k * 10, "epoch": np.nan, "loss": 1 / k, "accuracy": r.accuracy - 0.1 / k,
                         "lr": r.learning_rate, "train_time_s": r.train_time_s * k / 3, "test_time_s": 0.1})
            rows.append({"run_id": r.run_id, "framework": r.framework, "dataset": r.dataset, "kind": "train",
                         "iteration": k * 10, "epoch": k / 3, "loss": 1.2 / k, "accuracy": np.nan,
                         "lr": r.learning_rate, "train_time_s": r.train_time_s * k / 3, "test_time_s": np.nan})
    return pd.DataFrame(rows)


def make_samples(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    phases = [(0.0, "startup"), (0.5, "import"), (1.5, "data_load"), (2.0, "build"), (2.5, "train"),
              (5.0, "test"), (5.5, "other")]
    for r in runs.itertuples():
        for t in np.arange(0.1, 6.0, 0.25):
            phase = [p for start, p in phases if t >= start][-1]
            gpu = r.device == "gpu"
            rows.append({"run_id": r.run_id, "framework": r.framework, "dataset": r.dataset, "phase": phase,
                         "t": round(float(t), 3), "cpu_pct": 100 + 50 * (phase == "train"), "rss_mb": 100 + 40 * t,
                         "threads": 4, "processes": 1, "gpu_util_pct": 70.0 if gpu and phase == "train" else
                         (5.0 if gpu else np.nan), "gpu_mem_mb": 500.0 if gpu else np.nan})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def study():
    runs = make_runs()
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
    status = charts.status_counts(runs)
    theano = status[(status.framework == "theano") & (status.status == "diverged")]["n"].sum()
    assert theano == len(runs[(runs.framework == "theano") & (runs.status == "diverged")]) > 0


def small_runs() -> pd.DataFrame:
    return pd.DataFrame({"run_id": ["a", "b"], "framework": ["pytorch", "tensorflow"], "dataset": ["digits"] * 2,
                         "preset": ["caffe"] * 2, "batch_size": [32, 32], "learning_rate": [0.01, 0.01],
                         "iterations": [30, np.nan], "epochs": [np.nan, np.nan], "device": ["cpu"] * 2,
                         "threads": [1, 1], "status": ["ok", "error"], "reason": [None, "crash"],
                         "train_time_s": [1.0, np.nan], "test_time_s": [0.1, np.nan], "accuracy": [0.9, np.nan],
                         "cpu_util_mean_pct": [100.0, 90.0], "rss_peak_mb": [300.0, 310.0],
                         "rss_mean_mb": [250.0, 255.0]})


@pytest.mark.parametrize("name", ["gpu_timeline", "speedup_vs_threads", "defaults_matrix_accuracy",
                                  "defaults_matrix_train_time", "published_comparison", "train_time_vs_length",
                                  "accuracy_vs_batch_size", "resource_correlation", "time_to_accuracy"])
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


def test_pareto_front_on_a_known_set():
    df = pd.DataFrame({"train_time_s": [1, 2, 3, 2, 5, 1, 4, np.nan],
                       "accuracy": [0.5, 0.8, 0.9, 0.7, 0.9, 0.4, 0.95, 0.99]},
                      index=list("abcdefgh"))
    front = charts.pareto_front(df)
    # a: fastest; b: beats d; c: beats e (same accuracy, faster); g: most accurate; h: no time
    assert sorted(front[front].index) == ["a", "b", "c", "g"]


def test_pareto_front_keeps_identical_points_and_ties():
    df = pd.DataFrame({"train_time_s": [1.0, 1.0, 1.0, 2.0], "accuracy": [0.9, 0.9, 0.8, 0.9]})
    assert charts.pareto_front(df).tolist() == [True, True, False, False]


def test_speedup_against_the_fewest_threads():
    runs = pd.DataFrame({
        "run_id": list("abcdefg"), "framework": ["pytorch"] * 4 + ["tensorflow"] * 3, "dataset": ["digits"] * 7,
        "preset": ["caffe"] * 7, "batch_size": [32] * 7, "learning_rate": [0.01] * 7, "epochs": [1] * 7,
        "device": ["cpu"] * 7, "threads": [2, 4, 8, 8, 1, 2, 4], "repeat": [0, 0, 0, 1, 0, 0, 0],
        "status": ["ok"] * 6 + ["timeout"], "train_time_s": [8.0, 4.0, 3.0, 1.0, 6.0, 4.0, np.nan],
        "accuracy": [0.9] * 7})
    s = charts.speedups(runs).set_index(["framework", "threads"])
    assert s.loc[("pytorch", 2), "speedup"] == 1.0
    assert s.loc[("pytorch", 4), "speedup"] == 2.0
    assert s.loc[("pytorch", 8), "speedup"] == 4.0  # repeats averaged: (3 + 1) / 2 = 2 s
    assert s.loc[("pytorch", 8), "ideal"] == 4.0
    assert s.loc[("tensorflow", 2), "speedup"] == 1.5 and ("tensorflow", 4) not in s.index  # timed out
    assert set(s["base_threads"]) == {1, 2}


def test_speedup_groups_keep_other_settings_apart():
    runs = pd.DataFrame({"run_id": list("abcd"), "framework": ["caffe"] * 4, "dataset": ["mnist"] * 4,
                         "preset": ["own"] * 4, "batch_size": [64, 64, 256, 256], "learning_rate": [0.01] * 4,
                         "iterations": [100] * 4, "device": ["cpu"] * 4, "threads": [1, 2, 1, 2],
                         "status": ["ok"] * 4, "train_time_s": [10.0, 5.0, 30.0, 10.0], "accuracy": [0.9] * 4})
    s = charts.speedups(runs)
    assert sorted(s[s.threads == 2]["speedup"]) == [2.0, 3.0]


def test_ratio_to_published():
    runs = pd.DataFrame({
        "run_id": list("abcdef"), "framework": ["caffe", "caffe", "pytorch", "tensorflow", "tensorflow", "caffe"],
        "dataset": ["digits", "digits", "fashion_mnist", "mnist", "mnist", "cifar10"],
        "preset": ["own", "own", "own", "caffe", "own", "own"], "device": ["cpu", "cpu", "gpu", "cpu", "cpu", "cpu"],
        "status": ["ok", "ok", "ok", "ok", "diverged", "ok"],
        "train_time_s": [100.0, 300.0, 33.846, 5.0, np.nan, 270.888],
        "test_time_s": [1.0, 1.0, 1.73, 1.0, np.nan, 1.0], "accuracy": [0.99, 0.98, 0.9522, 0.9, np.nan, 0.8]})
    published = pd.read_csv(charts.PUBLISHED_CSV)
    r = charts.published_ratios(runs, published).set_index(["dataset", "framework", "device"])
    caffe = r.loc[("digits", "caffe", "cpu")]
    assert caffe["published_dataset"] == "mnist" and caffe["n"] == 2
    assert caffe["train_time_ratio"] == pytest.approx(200.0 / 512.18)
    assert caffe["accuracy_diff_pp"] == pytest.approx(98.5 - 99.03)
    torch = r.loc[("fashion_mnist", "pytorch", "gpu")]
    assert torch["train_time_ratio"] == pytest.approx(0.1) and torch["test_time_ratio"] == pytest.approx(1.0)
    assert torch["accuracy_diff_pp"] == pytest.approx(-4.0)
    assert r.loc[("cifar10", "caffe", "cpu")]["train_time_ratio"] == pytest.approx(0.1)
    # cross-applied presets and failed points are not compared with the published own-defaults figures
    assert ("mnist", "tensorflow", "cpu") not in r.index


def test_resource_correlations():
    runs = pd.DataFrame({"run_id": list("abcd"), "framework": ["pytorch"] * 4, "dataset": ["digits"] * 4,
                         "batch_size": [16, 32, 64, 128], "learning_rate": [0.1] * 4, "iterations": [40, 30, 20, 10],
                         "status": ["ok"] * 4, "train_time_s": [1.0] * 4, "accuracy": [0.9] * 4,
                         "cpu_util_mean_pct": [100.0, 150, 170, 190], "rss_peak_mb": [500.0, 400, 300, 200],
                         "rss_mean_mb": [1.0, 3, 2, 4]})
    c = charts.resource_correlations(runs).set_index(["resource", "hyper_parameter"])["r"]
    assert c[("cpu_util_mean_pct", "batch_size")] == pytest.approx(1.0)
    assert c[("rss_peak_mb", "batch_size")] == pytest.approx(-1.0)
    assert c[("rss_peak_mb", "iterations")] == pytest.approx(1.0)
    assert c[("rss_mean_mb", "batch_size")] == pytest.approx(0.8)
    assert math.isnan(c[("cpu_util_mean_pct", "learning_rate")])  # constant: no correlation to speak of


def test_phase_spans_are_contiguous():
    samples = pd.DataFrame({"run_id": ["r"] * 6, "t": [0.2, 0.4, 0.6, 0.8, 1.0, 1.2],
                            "phase": ["import", "import", "train", "train", "train", "test"]})
    spans = charts.phase_spans(samples)
    assert spans[["phase", "start", "end"]].values.tolist() == [
        ["import", 0.2, 0.6], ["train", 0.6, 1.2], ["test", 1.2, pytest.approx(1.4)]]


def test_sweeps_use_only_the_sub_study_that_varies_the_axis():
    runs = pd.DataFrame({"run_id": list("abcde"), "framework": ["pytorch"] * 5, "dataset": ["digits"] * 5,
                         "preset": ["own"] * 5, "batch_size": [32, 64, 128, 32, 32],
                         "learning_rate": [0.01, 0.01, 0.01, 0.1, 0.5], "epochs": [1] * 5,
                         "status": ["ok"] * 5, "train_time_s": [3.0, 2, 1, 3, 3], "accuracy": [0.9] * 5,
                         "studies": ["defaults,batch_size", "batch_size", "batch_size", "learning_rate",
                                     "learning_rate"]})
    bs = charts.sweep_table(runs, "batch_size", "train_time_s")
    assert sorted(bs["batch_size"]) == [32, 64, 128]
    lr = charts.sweep_table(runs, "learning_rate", "train_time_s")
    assert sorted(lr["learning_rate"]) == [0.1, 0.5]  # the batch_size study's lr 0.01 is not part of this sweep
    assert "studies" not in small_runs().columns and charts.sweep_table(small_runs(), "batch_size", "accuracy").empty


def test_peak_fraction_is_used_when_present():
    runs = make_runs()
    runs["peak_fraction"] = runs["cpu_util_mean_pct"] / 1000
    c = charts.resource_correlations(runs)
    assert "peak_fraction" in set(c.resource)
    assert "peak_fraction" not in set(charts.resource_correlations(make_runs()).resource)


# --- findings -----------------------------------------------------------------------------------

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
    text = findings.write_findings(runs, curves, out, charts.PUBLISHED_CSV)
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
