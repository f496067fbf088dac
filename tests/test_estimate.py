"""The time estimate: from FLOPs and the machine's peak before anything ran, from finished points after."""

import json
import math

import pytest

from dlbench import cluster, config, estimate, models, sweep
from dlbench.frameworks import registry

STUDY = {"datasets": ["digits"], "frameworks": ["pytorch", "caffe"], "preset": ["caffe"],
         "sweep": {"batch_size": [16, 64], "iterations": [100], "threads": [1, 2]}}
PEAK = {1: 100.0, 2: 180.0}


def points(study=STUDY) -> list[dict]:
    return sweep.plan(config.validate(study)).points


def run_dir_in(root):
    return lambda p: str(root / p["framework"] / p["dataset"] / p["id"])


def finish(root, p, throughput, wall, train, test=0.0) -> None:
    folder = root / p["framework"] / p["dataset"] / p["id"]
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text(json.dumps({
        "id": p["id"], "framework": p["framework"], "dataset": p["dataset"], "status": "ok",
        "throughput_img_s": throughput, "wall_time_s": wall, "train_time_s": train, "test_time_s": test,
        "interval_test_time_s": 0.0, "flops_per_image_train": estimate.flops(p)["train"],
        "test_throughput_img_s": None}))


def test_before_anything_ran_every_cpu_point_is_modelled_from_flops_and_the_peak(tmp_path):
    ps = points()
    est = estimate.estimate(ps, run_dir_in(tmp_path), peak=PEAK)
    assert est["pending"] == len(ps) == 8 and est["unknown"] == 0 and est["sources"]["modelled"] == 8
    p = ps[0]
    fl = models.flops_per_image(p["layers"], (1, 28, 28))
    cost = registry.get(p["framework"]).cost
    per_s = cost.efficiency * PEAK[1] * 1e9 * p["threads"] ** cost.thread_exponent
    overhead = cost.step_overhead_s  # per step: 100 steps
    expected = (cost.fixed_s + 100 * (overhead + p["batch_size"] * fl["train"] / per_s)
                + 359 * fl["forward"] / per_s)  # one final test of digits' 359 test images
    seconds, source = estimate.Model(estimate.finished(ps, run_dir_in(tmp_path)), PEAK).seconds(p)
    assert source == "modelled" and seconds == pytest.approx(expected)
    assert est["estimated_s"] > seconds


def test_finished_points_replace_the_model_for_their_kind_and_scale_to_other_threads(tmp_path):
    ps = points()
    torch1 = [p for p in ps if p["framework"] == "pytorch" and p["threads"] == 1]
    finish(tmp_path, torch1[0], throughput=1000.0, wall=3.0, train=1.6)
    done = estimate.finished(ps, run_dir_in(tmp_path))
    assert done.done == 1 and len(done.pending) == 7
    model = estimate.Model(done, PEAK)
    # its step: 16 images in 16 ms, of which PyTorch's per-step overhead; the rest is the computation's rate
    measured = torch1[0]
    fl = estimate.flops(measured)
    overhead = registry.get("pytorch").cost.step_overhead_s
    step = measured["batch_size"] / 1000
    rate = measured["batch_size"] * fl["train"] / (step - overhead)  # FLOP/s
    same_kind = torch1[1]  # another batch size: its steps at the same rate
    assert same_kind["batch_size"] != measured["batch_size"]
    seconds, source = model.seconds(same_kind)
    assert source == "measured"
    assert seconds == pytest.approx(1.4 + 100 * (overhead + same_kind["batch_size"] * fl["train"] / rate)
                                    + 359 * fl["forward"] / rate)
    # the same framework and network at 2 threads: that rate, by PyTorch's thread scaling
    other = next(p for p in ps if p["framework"] == "pytorch" and p["threads"] == 2)
    seconds, source = model.seconds(other)
    rate2 = rate * 2 ** registry.get("pytorch").cost.thread_exponent
    assert source == "scaled"
    assert seconds == pytest.approx(1.4 + 100 * (overhead + other["batch_size"] * fl["train"] / rate2)
                                    + 359 * fl["forward"] / rate2)
    # Caffe has nothing finished: still the model
    assert model.seconds(next(p for p in ps if p["framework"] == "caffe"))[1] == "modelled"


def test_a_point_of_another_compile_or_precision_mode_is_not_timed_by_a_natural_one(tmp_path):
    """A finished fp32 eager point measures its own kind only: the bf16 and compiled points of the same framework,
    network and threads are modelled (the registry's cost of the framework) until one of theirs has run."""
    modern = {"datasets": ["digits"], "frameworks": ["pytorch", "jax"], "preset": ["caffe"],
              "sweep": {"iterations": [100], "threads": [1], "compile": ["eager", "compiled"],
                        "precision": ["fp32", "bf16"]}}
    ps = points(modern)
    assert len(ps) == 8 and all(registry.get(p["framework"]).cost for p in ps)
    natural = next(p for p in ps if p["framework"] == "pytorch" and estimate.mode(p) == ("default", "eager", "fp32"))
    finish(tmp_path, natural, throughput=1000.0, wall=3.0, train=1.6)
    model = estimate.Model(estimate.finished(ps, run_dir_in(tmp_path)), PEAK)
    sources = {(p["framework"], *estimate.mode(p)[1:]): model.seconds(p)[1] for p in ps if p is not natural}
    assert sources == {("pytorch", "compiled", "fp32"): "modelled", ("pytorch", "eager", "bf16"): "modelled",
                       ("pytorch", "compiled", "bf16"): "modelled", ("jax", "compiled", "fp32"): "modelled",
                       ("jax", "eager", "fp32"): "modelled", ("jax", "compiled", "bf16"): "modelled",
                       ("jax", "eager", "bf16"): "modelled"}
    names = {estimate.probe_name(p) for p in ps}
    assert len(names) == 8  # a probe of each kind
    assert estimate.probe_name(natural) == "pytorch-lenet-digits-cpu-t1-default"  # the name it always had


def test_a_gpu_point_with_nothing_measured_is_counted_apart(tmp_path):
    ps = points({**STUDY, "frameworks": ["pytorch"], "sweep": {**STUDY["sweep"], "device": ["gpu"],
                                                              "threads": [1]}})
    est = estimate.estimate(ps, run_dir_in(tmp_path), peak=PEAK)
    assert est["unknown"] == len(ps) == 2 and est["estimated_s"] == 0
    assert "not counting 2 GPU points" in estimate.describe(est)


def test_only_a_sample_of_each_kind_is_read_and_a_bad_record_counts_as_not_done(tmp_path, capsys):
    ps = points({**STUDY, "frameworks": ["pytorch"], "repeats": estimate.SAMPLE + 5})
    kind = [p for p in ps if p["threads"] == 1]
    for p in kind:
        finish(tmp_path, p, throughput=1000.0, wall=3.0, train=1.6)
    bad = next(p for p in ps if p["threads"] == 2)  # the first of its kind: read
    folder = tmp_path / "pytorch" / "digits" / bad["id"]
    folder.mkdir(parents=True)
    (folder / "metrics.json").write_text("{not json")
    done = estimate.finished(ps, run_dir_in(tmp_path))
    assert done.done == len(kind) and len(done.pending) == len(ps) - len(kind)
    assert len(done.by_kind[estimate.kind(kind[0])]) == estimate.SAMPLE
    assert "not JSON" in capsys.readouterr().err


def test_a_cluster_job_asks_for_time_only_from_measured_points(tmp_path):
    ps = points()
    cfg = config.validate({**STUDY, "cluster": {"runtime_min": 45}})
    done = estimate.finished(ps, run_dir_in(tmp_path))
    lock_wait = math.ceil(cfg["measurement"]["lock_timeout_s"] / 60)  # the job may wait that long for the node
    # the model alone never sets a time
    assert set(cluster.runtime_table(cfg, ps, done).values()) == {45 + lock_wait}
    p = ps[0]
    finish(tmp_path, p, throughput=10.0, wall=700.0, train=650.0)  # slow: 1,600 images at 10 img/s
    table = cluster.runtime_table(cfg, ps, estimate.finished(ps, run_dir_in(tmp_path)))
    twin = next(q for q in ps if estimate.kind(q) == estimate.kind(p) and q["id"] != p["id"])
    seconds, source = estimate.Model(estimate.finished(ps, run_dir_in(tmp_path)), PEAK).seconds(twin)
    assert source == "measured" and seconds > 600
    assert table[twin["id"]] == max(10, math.ceil(2 * seconds / 60)) + lock_wait


def test_the_quick_peak_is_measured_once_and_kept(tmp_path, capsys):
    first = estimate.peak_gflops([1], tmp_path)
    assert first[1] > 1 and "measured this machine's GEMM peak" in capsys.readouterr().err
    assert estimate.peak_gflops([1], tmp_path) == first and capsys.readouterr().err == ""
    (tmp_path / "results/machine/peak.json").write_text(json.dumps({"gflops_by_threads": {"1": 123.0}}))
    assert estimate.peak_gflops([1], tmp_path) == {1: 123.0}  # the machine_peak rule's figure wins
