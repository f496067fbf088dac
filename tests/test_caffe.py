"""Caffe adapter: generated prototxt, `caffe train` as a child, its log turned into the common record.

The parser and the prototxt/solver generation are tested without Caffe; the rest needs the
Caffe environment (dlbench envs build caffe: a from-source build, about 3 minutes on 2 cores
the first time, cached after) and is marked slow.
"""

import calendar
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from dlbench.datasets import loading
from dlbench.frameworks import base, caffe_data, caffe_log, caffe_prototxt, protocol
from dlbench.paths import ROOT as REPO
from dlbench.run import build_record, measure, runner
from dlbench.run.options import RunOptions
from dlbench.spec import networks
from dlbench.study.sweep import one_point
from dlbench.testing.sandbox import copy_workflow

# ------------------------------------------------------------------------------------------- the parser

LOG = """\
I20261130 11:03:33.591127  6961 caffe.cpp:232] Starting Optimization
I20261130 11:03:33.592473  6961 solver.cpp:282] Solving dlbench
I20261130 11:03:33.592496  6961 solver.cpp:283] Learning Rate Policy: inv
I20261130 11:03:33.671046  6961 solver.cpp:231] Iteration 0, loss = 2.31333
I20261130 11:03:33.671100  6961 solver.cpp:247]     Train net output #0: loss = 2.31333 (* 1 = 2.31333 loss)
I20261130 11:03:33.677120  6961 sgd_solver.cpp:106] Iteration 0, lr = 0.01
I20261130 11:03:34.671046  6961 solver.cpp:346] Iteration 10, Testing net (#0)
I20261130 11:03:35.171046  6961 solver.cpp:413]     Test net output #0: accuracy = 0.5
I20261130 11:03:35.171046  6961 solver.cpp:413]     Test net output #1: loss = 1.5 (* 1 = 1.5 loss)
I20261130 11:03:35.592496  6961 solver.cpp:231] Iteration 10, loss = 1.07654
I20261130 11:03:35.600000  6961 sgd_solver.cpp:106] Iteration 10, lr = 0.00998503
I20261130 11:03:36.592496  6961 solver.cpp:320] Iteration 20, loss = 0.5
I20261130 11:03:36.600000  6961 solver.cpp:346] Iteration 20, Testing net (#0)
I20261130 11:03:36.800000  6961 solver.cpp:413]     Test net output #0: accuracy = 0.793
I20261130 11:03:36.900000  6961 solver.cpp:413]     Test net output #1: loss = 2.3278 (* 1 = 2.3278 loss)
I20261130 11:03:36.900100  6961 solver.cpp:325] Optimization Done.
I20261130 11:03:36.900200  6961 caffe.cpp:243] Optimization Done.
"""


def test_lines_parse_into_time_kind_and_fields():
    lines = caffe_log.parse(LOG.splitlines())
    kinds = [ln.kind for ln in lines]
    assert kinds == ["start_optimization", "solving", "lr_policy", "train_loss", "train_output", "lr", "test_start",
                     "test_output", "test_output", "train_loss", "lr", "train_loss", "test_start", "test_output",
                     "test_output", "done", "done"]
    assert lines[3].fields == {"iteration": 0, "loss": 2.31333}
    assert lines[5].fields == {"iteration": 0, "lr": 0.01}
    assert lines[8].fields == {"index": 1, "name": "loss", "value": 1.5}
    assert lines[3].time - lines[0].time == pytest.approx(0.079919, abs=1e-6)
    assert lines[3].source == "solver.cpp:231" and lines[3].severity == "I"
    # glog without the year (older glog), and a line that is no log line at all
    old = caffe_log.parse_line("I1130 10:55:26.123456  4567 solver.cpp:231] Iteration 20, loss = 1.5", year=2026)
    assert old.kind == "train_loss" and old.fields == {"iteration": 20, "loss": 1.5}
    assert old.time == pytest.approx(calendar.timegm((2026, 11, 30, 10, 55, 26, 0, 0, 0)) + 0.123456)
    assert caffe_log.parse_line("*** Check failure stack trace: ***").kind == "raw"
    assert caffe_log.parse_line("double free or corruption (!prev)").time is None


@pytest.mark.parametrize("text,want", [("nan", math.nan), ("-nan", math.nan), ("inf", math.inf), ("-inf", -math.inf),
                                       ("1e-05", 1e-05), ("0.793", 0.793), ("87.3365", 87.3365), ("3", 3.0)])
def test_numbers_as_caffe_prints_them(text, want):
    line = caffe_log.parse_line(f"I20261130 11:03:33.671046  6961 solver.cpp:231] Iteration 20, loss = {text}")
    assert line.kind == "train_loss"
    got = line.fields["loss"]
    assert (math.isnan(got) and math.isnan(want)) or got == want
    assert caffe_log.number(text) == got or math.isnan(got)


def test_a_fatal_line_and_a_nan_loss_are_found():
    log = LOG.splitlines()[:4] + [
        "I20261130 11:03:34.0 6961 x.cpp:1] garbage",  # not a glog stamp: raw
        "I20261130 11:03:35.592496  6961 solver.cpp:231] Iteration 10, loss = -nan",
        "F20261130 11:03:35.600000  6961 layer_factory.hpp:81] Check failed: registry.count(type) == 1 (0 vs. 1) "
        "Unknown layer type: ReLUX (known types: ...)",
        "*** Check failure stack trace: ***",
    ]
    lines = caffe_log.parse(log)
    assert caffe_log.fatal_message(lines).startswith("Check failed: registry.count(type) == 1 (0 vs. 1) Unknown layer")
    assert "[layer_factory.hpp:81]" in caffe_log.fatal_message(lines)
    it, loss = caffe_log.first_nonfinite_loss(lines)
    assert it == 10 and math.isnan(loss)


def test_the_tracker_times_training_without_the_tests_in_it():
    tracker = caffe_log.Tracker(max_iter=20, steps_per_epoch=10)
    events = []
    for line in caffe_log.parse(LOG.splitlines()):
        events += tracker.feed(line)
    events += tracker.finish()
    names = [e for e, _ in events]
    assert names == ["build_end", "train_start", "step", "test_start", "test", "step", "train_end", "step",
                     "test_start", "test", "done"]
    steps = [f for e, f in events if e == "step"]
    assert [s["iteration"] for s in steps] == [0, 10, 20]
    assert steps[0]["lr"] == 0.01 and steps[1]["lr"] == 0.00998503 and steps[2]["lr"] is None
    assert steps[1]["epoch"] == 1.0
    interval, final = [f for e, f in events if e == "test"]
    assert interval["iteration"] == 10 and not interval["final"] and interval["test_time_s"] == pytest.approx(0.5)
    assert final["final"] and final["accuracy"] == 0.793 and final["loss"] == 2.3278
    assert final["test_time_s"] == pytest.approx(0.3)
    # from `Learning Rate Policy` to the line after the loop (the final display), less the interval test
    want = (36.592496 - 33.592496) - 0.5
    assert tracker.train_time() == pytest.approx(want)
    assert dict(events)["train_end"]["train_time_s"] == pytest.approx(want)
    assert steps[1]["train_time_s"] == pytest.approx(35.592496 - 33.592496 - 0.5)


def test_caffe_test_output_is_summarised():
    log = """\
I20261130 11:04:20.356992  7345 caffe.cpp:274] Running for 4 iterations.
I20261130 11:04:20.493414  7345 caffe.cpp:297] Batch 0, accuracy = 0.84
I20261130 11:04:20.493414  7345 caffe.cpp:297] Batch 0, loss = 1.1
I20261130 11:04:21.066486  7345 caffe.cpp:302] Loss: 1.05654
I20261130 11:04:21.067068  7345 caffe.cpp:314] accuracy = 0.845
I20261130 11:04:21.067127  7345 caffe.cpp:314] loss = 1.05654 (* 1 = 1.05654 loss)
"""
    s = caffe_log.test_summary(caffe_log.parse(log.splitlines()))
    assert s["accuracy"] == 0.845 and s["loss"] == 1.05654
    assert s["test_time_s"] == pytest.approx(21.067127 - 20.356992)
    assert caffe_log.test_summary(caffe_log.parse(log.splitlines()[:3])) is None


# ------------------------------------------------------------------------------------------- prototxt, solver


def caffe_adapter():
    from dlbench.frameworks import caffe  # numpy only at import: no Caffe needed here

    return caffe


def test_the_net_prototxt_follows_the_spec():
    text = caffe_prototxt.net_prototxt(networks.resolve("tf_cifar10", 10) + [], "/d/train.txt", "/d/test.txt", 128, 100)
    assert text.count('type: "HDF5Data"') == 2 and "shuffle: true" in text and "batch_size: 100" in text
    assert text.count('type: "Convolution"') == 2 and text.count('type: "InnerProduct"') == 3
    assert text.count('type: "xavier"') == 5
    # TensorFlow's tutorial decays local3 and local4's weights only: decay_mult 1 twice, 0 on the other 8 blobs
    assert text.count("decay_mult: 1") == 2 and text.count("decay_mult: 0") == 8 and "lr_mult: 2" not in text
    assert "norm_region: ACROSS_CHANNELS" in text and "local_size: 9" in text and "alpha: 0.001" in text
    assert 'type: "SoftmaxWithLoss"' in text and 'type: "Accuracy"' in text and "pool: MAX" in text
    quick = caffe_prototxt.net_prototxt(networks.resolve("cifar10_quick", 10), "/t", "/s", 100, 100, shuffle=False)
    assert quick.count("pool: AVE") == 2 and "shuffle: false" in quick
    assert quick.count("lr_mult: 2") == 5 and quick.count("lr_mult: 1") == 5  # Caffe's examples: biases at 2x
    with pytest.raises(networks.SpecError):
        caffe_prototxt.net_prototxt([{"type": "maxout"}], "/t", "/s", 1, 1)


def test_a_sparse_conv_becomes_slice_concat_and_a_grouped_convolution():
    layers = networks.resolve("torch_cifar10", 10)
    with pytest.raises(networks.SpecError, match="input shape"):
        caffe_prototxt.net_prototxt(layers, "/t", "/s", 1, 1)
    text = caffe_prototxt.net_prototxt(layers, "/t", "/s", 1, 1, input_shape=(3, 32, 32))
    assert text.count('type: "Slice"') == 2 and text.count('type: "Concat"') == 2 and "Silence" not in text
    assert "group: 16" in text and "group: 256" in text
    second = text[text.index('name: "conv2_gather"'):text.index('name: "conv2"\n')]
    bottoms = re.findall(r'bottom: "conv2_plane(\d+)"', second)
    assert [int(b) for b in bottoms] == [p for row in layers[3]["table"] for p in row]  # table order, 1,024 planes
    # a plane no output map reads is silenced, not left as an output of the net
    lonely = [networks.conv(2, 3, table=[[0], [2]]), networks.dense(10)]
    lonely_text = caffe_prototxt.net_prototxt(lonely, "/t", None, 1, 1, input_shape=(3, 8, 8))
    assert "type: \"Silence\"" in lonely_text and "bottom: \"conv1_plane1\"" in lonely_text


def test_caffe_refuses_early_stopping_and_records_no_moving_average():
    caffe = caffe_adapter()
    point = one_point("caffe", "theano")
    assert point["validation"]["patience"] == 10000
    with pytest.raises(base.Unavailable, match="early stopping") as refused:
        caffe.check_procedure(point)
    # it names where the preset runs: every framework of the registry that can stop early, JAX among them
    assert str(refused.value).endswith("run it on tensorflow, pytorch, theano or jax")
    caffe.check_procedure(one_point("caffe", "caffe"))
    assert caffe.EMA_NOT_APPLIED.startswith("not applied")


@pytest.mark.parametrize("policy,lines", [
    ({"name": "fixed"}, ['lr_policy: "fixed"']),
    ({"name": "inv", "gamma": 1e-4, "power": 0.75}, ['lr_policy: "inv"', "gamma: 0.0001", "power: 0.75"]),
    ({"name": "decay", "decay": 5e-7}, ['lr_policy: "inv"', "gamma: 5e-07", "power: 1.0"]),
    ({"name": "step", "factor": 0.1, "step_iterations": 350}, ['lr_policy: "step"', "gamma: 0.1", "stepsize: 350"]),
    ({"name": "multistep", "factor": 0.1, "at_iterations": [8, 4]},
     ['lr_policy: "multistep"', "gamma: 0.1", "stepvalue: 4", "stepvalue: 8"]),
])
def test_lr_policies_become_caffes(policy, lines):
    assert caffe_prototxt.lr_lines(policy) == lines


def test_the_solver_has_the_plans_length_tests_and_seed():
    p = one_point("caffe", "caffe", epochs=10, batch_size=64)
    plan = base.Plan.of(p, 1438)
    text = caffe_prototxt.solver_prototxt(p, plan, "/w/net.prototxt", 359, "/w/final")
    assert "max_iter: 230\n" in text and "test_iter: 4\n" in text and "test_interval: 230\n" in text
    assert "display: 2\n" in text and "average_loss: 2\n" in text and "snapshot_after_train: false" in text
    assert "test_initialization: false" in text and "solver_mode: CPU" in text and "random_seed: 1\n" in text
    assert 'type: "SGD"' in text and "momentum: 0.9" in text and "weight_decay: 0.0005" in text
    adam = one_point("caffe", "tensorflow", iterations=40)
    plan = base.Plan.of(adam, 1438)
    text = caffe_prototxt.solver_prototxt(adam, plan, "/w/net.prototxt", 359, "/w/final")
    assert 'type: "Adam"' in text and "momentum: 0.9" in text and "momentum2: 0.999" in text
    assert "test_interval: 29\n" in text  # an epoch of 50-image batches
    assert caffe_prototxt.test_interval_of(plan) == (29, False)  # 40 % 29: Caffe's solver makes no final test


def test_the_data_key_depends_on_input_handling_only():
    a = one_point("caffe", "caffe", epochs=1)
    b = one_point("caffe", "caffe", epochs=2, learning_rate=0.5)
    assert caffe_data.input_key(a["input"]) == caffe_data.input_key(b["input"])
    a2 = dict(a, seed=7)
    assert caffe_data.input_key(a2["input"]) == caffe_data.input_key(a["input"])
    assert caffe_data.input_key({"scale": 0.5}) != caffe_data.input_key({"scale": 0.25})
    assert caffe_data.data_dir("resources/datasets/digits", {}) == Path(
        "resources/caffe/digits") / caffe_data.input_key({})


def test_the_hdf5_files_hold_what_the_other_frameworks_get(digits_dir, tmp_path):
    point = one_point("caffe", "caffe", epochs=1)
    out = tmp_path / "caffe" / "digits" / caffe_data.input_key(point["input"])
    meta = caffe_data.prepare(digits_dir, point["input"], out)
    inputs = loading.load_inputs(digits_dir, point)
    with h5py.File(out / "train.h5") as f:
        assert f["data"].dtype == np.float32 and f["label"].dtype == np.float32
        np.testing.assert_array_equal(f["data"][:], inputs.train_x)
        np.testing.assert_array_equal(f["label"][:], inputs.train_y.astype(np.float32))
    with h5py.File(out / "test.h5") as f:
        np.testing.assert_array_equal(f["data"][:], inputs.test_x)
    assert (out / "train.txt").read_text().strip() == str((out / "train.h5").resolve())
    assert caffe_data.list_points_at(out / "test.txt", out / "test.h5")
    assert meta["train_samples"] == 1438 and meta["augmented"] is False and meta["input_shape"] == [1, 28, 28]
    assert caffe_data.is_current(out, digits_dir, point["input"])
    # an augmenting preset: one view, drawn once, and meta says so
    crop = {"scale": 1 / 255, "crop": 24, "flip": True}
    out2 = tmp_path / "caffe" / "digits" / caffe_data.input_key(crop)
    meta2 = caffe_data.prepare(digits_dir, crop, out2)
    assert meta2["augmented"] and "drawn once" in meta2["augmentation"]
    with h5py.File(out2 / "train.h5") as f:
        assert f["data"].shape == (1438, 1, 24, 24)


# ------------------------------------------------------------------------------------------- with Caffe

slow = pytest.mark.slow


def run_caffe(point: dict, dataset_dir, out: Path, python: str, **kw) -> dict:
    record = runner.run_point(point, dataset_dir, out, RunOptions(python=python, **kw))
    record["_out"] = out
    return record


@pytest.fixture(scope="module")
def caffe_python(env_python):
    return env_python("caffe")


@pytest.fixture(scope="module")
def lenet_10_epochs(caffe_python, digits_dir, tmp_path_factory):
    point = one_point("caffe", "caffe", epochs=10, batch_size=64, threads=2)
    return run_caffe(point, digits_dir, tmp_path_factory.mktemp("caffe") / point["id"], caffe_python)


@slow
def test_lenet_on_digits_reaches_over_90_percent(lenet_10_epochs):
    r = lenet_10_epochs
    assert r["status"] == "ok", r.get("log_tail")
    assert r["accuracy"] > 0.90
    assert r["iterations"] == r["iterations_done"] == 230 == r["iterations_planned"]
    assert r["train_time_s"] > 0 and r["test_time_s"] > 0 and r["build_time_s"] > 0
    assert r["throughput_img_s"] == pytest.approx(r["images_trained"] / r["train_time_s"])
    assert r["framework_version"] == "1.0.0" and "openblas" in r["blas"]
    assert r["threads_requested"] == 2 and r["threads_in_effect"] == 2
    build = json.loads(r["build_json"])
    assert build["caffe_process_threads"] == 2  # main thread + one OpenBLAS worker
    assert "CPU_ONLY" in " ".join(build["cmake_flags"]) and build["input_augmentation"] is None
    assert r["rss_peak_mb"] > 20 and r["cpu_util_mean_pct"] > 30
    assert r["params"] == 431_080 and r["dataset_digest"] and r["seed"] == 1
    curve = (r["_out"] / "curve.csv").read_text().splitlines()
    kinds = {row.split(",")[0] for row in curve[1:]}
    assert kinds == {"train", "test"} and len(curve) > 100
    # the phases: build (caffe's start to `Starting Optimization`), then train, then the final test
    spans = {name: (s, e) for name, s, e in build_record.phases(protocol.read(r["_out"] / "events.jsonl"))}
    assert spans["build"][1] <= spans["train"][0] <= spans["train"][1] <= spans["test"][0]
    assert r["train_time_s"] <= spans["train"][1] - spans["train"][0] + 0.05


@pytest.mark.long
def test_the_parser_reads_what_caffe_wrote(lenet_10_epochs):
    """The trainer log of the real run: every training line parsed, the record's figures recomputed from it."""
    r = lenet_10_epochs
    lines = caffe_log.parse((r["_out"] / "trainer.log").read_text().splitlines())
    kinds = [ln.kind for ln in lines]
    for kind in ("start_optimization", "solving", "lr_policy", "train_loss", "train_output", "lr", "test_start",
                 "test_output", "done"):
        assert kind in kinds, kind
    assert "fatal" not in kinds
    losses = [ln.fields for ln in lines if ln.kind == "train_loss"]
    assert [f["iteration"] for f in losses] == list(range(0, 231, 2))
    assert all(math.isfinite(f["loss"]) for f in losses)
    tracker = caffe_log.Tracker(230, 23)
    for line in lines:
        tracker.feed(line)
    tracker.finish()
    assert tracker.done
    assert tracker.train_time() == pytest.approx(r["train_time_s"])
    assert tracker.final_test["accuracy"] == r["accuracy"] and tracker.final_test["test_time_s"] == r["test_time_s"]
    assert tracker.steps[-1]["loss"] == r["final_loss"]


@pytest.mark.long
def test_an_invalid_net_ends_as_an_error_quoting_the_f_line(caffe_python, digits_dir, tmp_path):
    point = one_point("caffe", "caffe", iterations=10)
    point["layers"].insert(2, networks.lrn(4, 1e-4, 0.75))  # Caffe's LRN takes odd sizes only
    point["id"] += "-badlrn"
    r = run_caffe(point, digits_dir, tmp_path / point["id"], caffe_python)
    assert r["status"] == "error"
    assert "caffe train: Check failed: size_ % 2 == 1" in r["reason"] and "lrn_layer.cpp" in r["reason"]
    assert r["iterations_done"] == 0 and r["framework_version"] == "1.0.0"
    lines = caffe_log.parse((r["_out"] / "trainer.log").read_text().splitlines())
    fatal = caffe_log.fatal_message(lines)
    assert fatal and fatal in r["reason"]


@pytest.mark.long
def test_a_broken_hdf5_file_ends_as_an_error_and_a_stale_list_is_replaced(caffe_python, digits_dir, tmp_path):
    ds = tmp_path / "datasets" / "digits"
    shutil.copytree(digits_dir, ds)
    point = one_point("caffe", "caffe", iterations=10)
    folder = caffe_data.data_dir(ds, point["input"])
    caffe_data.prepare(ds, point["input"], folder)
    # a list naming another place (the folder was moved): the adapter lists the files itself
    (folder / "train.txt").write_text("/nowhere/train.h5\n")
    r = run_caffe(point, ds, tmp_path / "moved", caffe_python)
    assert r["status"] == "ok", r.get("log_tail")
    # a file Caffe cannot open: its F line is the reason
    (folder / "test.h5").write_bytes(b"not an HDF5 file")
    r = run_caffe(point, ds, tmp_path / "broken", caffe_python)
    assert r["status"] == "error"
    assert "caffe train: Failed opening HDF5 file" in r["reason"] and "test.h5" in r["reason"]


@pytest.mark.long
def test_a_huge_learning_rate_diverges_and_stops_early(caffe_python, digits_dir, tmp_path):
    point = one_point("caffe", "caffe", iterations=400, learning_rate=1000.0, threads=1)
    r = run_caffe(point, digits_dir, tmp_path / "div", caffe_python)
    assert r["status"] == "diverged", r.get("log_tail")
    assert r["diverged_at_iteration"] is not None and r["diverged_at_iteration"] < 400
    assert r["iterations_done"] == r["diverged_at_iteration"]
    assert "loss became" in r["reason"]
    assert r["wall_time_s"] < 60  # stopped at the nan, not run to the end


@pytest.mark.long
def test_gpu_point_on_a_cpu_only_build_is_unavailable(caffe_python, digits_dir, tmp_path):
    point = one_point("caffe", "caffe", iterations=5, device="gpu")
    r = run_caffe(point, digits_dir, tmp_path / "gpu", caffe_python)
    assert r["status"] == "unavailable"
    assert "GPU" in r["reason"] and r["iterations_done"] == 0
    # the adapter's own answer, where a GPU is visible (or the runner does not look): a CPU_ONLY build
    (tmp_path / "point.json").write_text(json.dumps(point))
    env = measure.trainer_env(point)
    proc = subprocess.run([caffe_python, "-m", "dlbench.frameworks.trainer", str(tmp_path / "point.json"),
                           str(digits_dir), str(tmp_path / "events.jsonl")], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]  # the trainer's exit code: unavailable
    status = protocol.read(tmp_path / "events.jsonl")[-1]
    assert status["status"] == "unavailable" and "CPU_ONLY" in status["reason"] and "GPU" in status["reason"]


@pytest.mark.long
def test_interval_tests_and_a_final_test_by_caffe_test(caffe_python, digits_dir, tmp_path):
    """40 iterations, a test every epoch (27: 1,318 images, TensorFlow's reader leaving 1/12 out, in batches of 50):
    Caffe's solver tests at 27; `caffe test` makes the final one."""
    point = one_point("caffe", "tensorflow", iterations=40, threads=2)
    r = run_caffe(point, digits_dir, tmp_path / "tf", caffe_python)
    assert r["status"] == "ok", r.get("log_tail")
    assert r["network"] == "mnist_deep" and r["optimizer"] == "adam"
    tests = [e for e in protocol.read(r["_out"] / "events.jsonl") if e["e"] == "test"]
    assert [t["iteration"] for t in tests] == [27, 40]
    assert r["interval_test_time_s"] == pytest.approx(tests[0]["test_time_s"]) and r["interval_test_time_s"] > 0
    assert r["accuracy"] == tests[1]["accuracy"] and r["test_time_s"] == tests[1]["test_time_s"]
    assert "Running for 4 iterations." in (r["_out"] / "trainer.log").read_text()
    # divisible: the solver's own final test
    point = one_point("caffe", "caffe", iterations=46, threads=1)
    point["test_interval"] = 23
    r = run_caffe(point, digits_dir, tmp_path / "c", caffe_python)
    assert r["status"] == "ok", r.get("log_tail")
    tests = [e for e in protocol.read(r["_out"] / "events.jsonl") if e["e"] == "test"]
    assert [t["iteration"] for t in tests] == [23, 46]
    assert "Running for" not in (r["_out"] / "trainer.log").read_text()


@pytest.mark.long
def test_an_augmenting_input_is_one_view_and_the_record_says_so(caffe_python, digits_dir, tmp_path):
    point = one_point("caffe", "caffe", iterations=20)
    point["input"] = {"scale": 1 / 255, "crop": 24, "flip": True}  # LeNet fits 24x24 crops too
    point["id"] += "-crop24"
    r = run_caffe(point, digits_dir, tmp_path / "aug", caffe_python)
    assert r["status"] == "ok", r.get("log_tail")
    assert r["augment_time_s"] == 0.0
    assert "drawn once" in json.loads(r["build_json"])["input_augmentation"]


@pytest.mark.long
def test_caffe_pytorch_and_tensorflow_give_rows_with_the_same_columns(env_python, digits_dir, tmp_path):
    records = {}
    for fw in ("caffe", "pytorch", "tensorflow"):
        point = one_point(fw, "caffe", iterations=20, batch_size=64, threads=1)
        records[fw] = runner.run_point(point, digits_dir, tmp_path / fw, RunOptions(python=env_python(fw)))
        assert records[fw]["status"] == "ok", records[fw].get("log_tail")
    keys = {fw: set(r) for fw, r in records.items()}
    assert keys["caffe"] == keys["pytorch"] == keys["tensorflow"]
    assert {r["params"] for r in records.values()} == {431_080}
    assert {r["iterations"] for r in records.values()} == {20}
    assert {r["train_samples"] for r in records.values()} == {1438}
    for r in records.values():
        assert r["train_time_s"] > 0 and r["accuracy"] > 0.3


# ------------------------------------------------------------------------------------------- the workflow

TINY = {
    "datasets": ["digits"],
    "frameworks": ["caffe"],
    "preset": ["caffe"],
    "sweep": {"learning_rate": [0.01, 0.02], "iterations": [30], "batch_size": [32], "threads": [1]},
    "monitor": {"interval_s": 0.1},
}


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "2", "--configfile", "tiny.yaml", *args],
                          cwd=workdir, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@slow
def test_the_workflow_prepares_caffe_data_once_and_trains(caffe_python, tmp_path):
    import pandas as pd

    copy_workflow(tmp_path, TINY, "tiny.yaml")
    proc = snakemake(tmp_path)
    out = proc.stdout + proc.stderr
    assert len(re.findall(r"rule caffe_data:", out)) == 1  # two points, one input handling, one preparation
    runs = pd.read_parquet(tmp_path / "results/runs.parquet")
    assert len(runs) == 2 and set(runs.framework) == {"caffe"}
    assert (runs.status == "ok").all(), runs[["run_id", "status", "reason"]]
    assert (runs.iterations == 30).all() and (runs.accuracy > 0.3).all()
    assert runs.framework_version.eq("1.0.0").all() and runs.train_time_s.gt(0).all()
    (key_dir,) = [d for d in (tmp_path / "resources/caffe/digits").iterdir() if d.is_dir()]
    assert (key_dir / "train.h5").exists() and (key_dir / "train.txt").read_text().startswith(str(tmp_path))
    curves = pd.read_parquet(tmp_path / "results/curves.parquet")
    assert {"train", "test"} <= set(curves.kind)
    # nothing left to do
    dry = snakemake(tmp_path, "-n")
    assert "rule train" not in dry.stdout and "rule caffe_data" not in dry.stdout


# ------------------------------------------------------------------------------------------- ResNet-20's layers


def test_resnet20_becomes_batchnorm_scale_eltwise_and_a_global_pooling():
    """Every conv without bias (bias_term false, one param), each batchnorm a BatchNorm (its three statistics blobs
    never trained, moving_average_fraction the spec's decay, eps the spec's; use_global_stats left to Caffe's phase)
    and a Scale with bias_term, each block an Eltwise SUM of its body and its shortcut (the block's input, or the 1x1
    projection), gap a Pooling AVE with global_pooling."""
    layers = networks.resolve("resnet20", 10)
    text = caffe_prototxt.net_prototxt(layers, "/t", "/s", 8, 8, input_shape=(3, 32, 32))
    assert text.count('type: "Convolution"') == 21 == text.count("bias_term: false")
    assert text.count('type: "BatchNorm"') == 21 == text.count('type: "Scale"') == text.count("bias_term: true")
    assert text.count("moving_average_fraction: 0.9") == 21 and text.count("eps: 1e-05") == 21
    assert "use_global_stats" not in text  # TRAIN: batch statistics, TEST: running ones (Caffe's defaults)
    assert text.count("lr_mult: 0") == 3 * 21  # the statistics
    assert text.count('type: "Eltwise"') == 9 == text.count("operation: SUM")
    assert text.count("global_pooling: true") == 1 and 'type: "InnerProduct"' in text
    first = text[text.index('name: "res1"'):].split("}")[0]
    assert 'bottom: "scale3"' in first and 'bottom: "scale1"' in first  # body's end + the block's input (identity)
    fourth = text[text.index('name: "res4"'):].split("}")[0]
    assert 'bottom: "scale9"' in fourth and 'bottom: "scale10"' in fourth  # body's end + the projection's BN
    assert 'name: "conv10"' in text and "kernel_size: 1\n    stride: 2" in text
    training_mode = caffe_prototxt.net_prototxt(layers, "/t", "/s", 8, 8, batch_statistics=True)
    assert training_mode.count("use_global_stats: false") == 21
    assert len(caffe_prototxt.unit_names(layers)) == len(networks.trainable(layers, (3, 32, 32))) == 43


def test_caffes_batchnorm_statistics_follow_the_specs_running_average():
    """Caffe's BatchNorm keeps sums and a scale factor (batch_norm_layer.cpp: s = f s + 1, mean_sum = batch mean +
    f mean_sum, var_sum = m / (m - 1) batch var + f var_sum; the running ones are the sums over s). With f the
    spec's decay and the blobs written by caffe_blobs (s = 1 / (1 - decay)), five updates by Caffe's rule give the
    spec's running mean and variance (decay * old + (1 - decay) * the batch's, unbiased variance) after every one;
    Caffe's own start (s = 0) would not."""
    from dlbench.frameworks import caffe_weights  # numpy and h5py only: no Caffe needed here

    layers = [networks.conv(3, 1, bias=False), networks.batchnorm(), networks.gap(), networks.dense(2)]
    rng = np.random.default_rng(5)
    w = rng.standard_normal((3, 2, 1, 1)).astype(np.float32)
    gamma, beta = np.float32([1.5, 0.5, 2.0]), np.float32([0.1, -0.2, 0.3])
    mean, var = np.float32([0.2, -1.0, 3.0]), np.float32([1.0, 0.5, 2.0])
    dense = (np.ones((2, 3), np.float32), np.zeros(2, np.float32))
    blobs = dict(caffe_weights.caffe_blobs(layers, [(w,), (gamma, beta, mean, var), dense], (2, 4, 4)))
    assert list(blobs) == ["conv1", "bn1", "scale1", "ip1"]
    assert [b.shape for b in blobs["bn1"]] == [(3,), (3,), (1,)] and blobs["bn1"][2][0] == pytest.approx(10.0)
    assert np.array_equal(blobs["scale1"][0], gamma) and np.array_equal(blobs["scale1"][1], beta)
    decay, m = 0.9, 4 * 4 * 4
    mean_sum, var_sum, s = (b.astype(np.float64) for b in blobs["bn1"])
    own = (np.zeros(3), np.zeros(3), np.zeros(1))
    want_mean, want_var = mean.astype(np.float64), var.astype(np.float64)
    for _ in range(5):
        batch = rng.standard_normal((4, 3, 4, 4)) * 2 + 1
        bm, bv = batch.mean(axis=(0, 2, 3)), batch.var(axis=(0, 2, 3))
        s = decay * s + 1
        mean_sum, var_sum = bm + decay * mean_sum, m / (m - 1) * bv + decay * var_sum
        own = (bm + decay * own[0], m / (m - 1) * bv + decay * own[1], decay * own[2] + 1)
        want_mean = decay * want_mean + (1 - decay) * bm
        want_var = decay * want_var + (1 - decay) * bv * m / (m - 1)
        np.testing.assert_allclose(mean_sum / s, want_mean, rtol=1e-6)
        np.testing.assert_allclose(var_sum / s, want_var, rtol=1e-6)
    assert np.abs(own[0] / own[2] - want_mean).max() > 1e-2  # Caffe's own start is another average
    # and back: a snapshot's blobs give the canonical arrays (the running statistics: the sums over s)
    data = {"conv1": {"0": w}, "bn1": {"0": mean_sum, "1": var_sum, "2": s}, "scale1": {"0": gamma, "1": beta},
            "ip1": {"0": dense[0], "1": dense[1]}}
    back = caffe_weights.canonical_from_blobs(layers, data, (2, 4, 4))
    assert np.array_equal(back[0][0], w) and np.array_equal(back[1][0], gamma) and np.array_equal(back[1][1], beta)
    np.testing.assert_allclose(back[1][2], want_mean, rtol=1e-6)
    np.testing.assert_allclose(back[1][3], want_var, rtol=1e-6)


@pytest.mark.long
def test_resnet20_trains_on_digits(caffe_python, digits_dir, tmp_path):
    """ResNet-20 in Caffe's own layers (BatchNorm + Scale, Eltwise, global Pooling), a short real run of the ResNet
    preset (SGD, momentum 0.9, weight decay 1e-4) at learning rate 0.02 on the digits from the shared initial
    weights: it learns (the loss falls well below ln 10; the test accuracy, read with the running statistics, is far
    above chance: over 0.5, where PyTorch reached 0.86, Theano 0.79 and Caffe 0.73 after these 100 steps) and its
    trainable parameters are the spec's (the BatchNorm statistics not among them)."""
    point = one_point("caffe", "resnet", iterations=100, batch_size=32, threads=2, learning_rate=0.02)
    r = run_caffe(point, digits_dir, tmp_path / "resnet", caffe_python)
    assert r["status"] == "ok", r.get("log_tail")
    assert r["iterations"] == 100
    assert r["params"] == networks.param_count(networks.resolve("resnet20", 10), (1, 28, 28)) == 272_474 - 2 * 16 * 9
    assert r["final_loss"] < 0.5 * math.log(10)
    assert r["accuracy"] > 0.5
