"""The time estimate: from FLOPs and the machine's peak before anything ran, from finished points after."""

import json
import math

import pytest

from dlbench.frameworks import registry
from dlbench.plan import estimate
from dlbench.rules import cluster_request
from dlbench.study import config, sweep

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
    model = estimate.Model(estimate.finished(ps, run_dir_in(tmp_path)), PEAK)
    by = {(p["framework"], p["batch_size"], p["threads"]): p for p in ps}
    # Caffe's LeNet on digits' 28x28 images, counted by hand (a multiply-add is 2 FLOPs; pooling and ReLU are not
    # counted): conv1 20x24x24 outputs x 5x5x1 x 2 = 576,000; conv2 50x8x8 x 5x5x20 x 2 = 3,200,000; ip1 800x500x2
    # = 800,000; ip2 500x10x2 = 10,000: 4,586,000 forward; a training step (forward, backward twice that) 3x that.
    assert estimate.flops(by["pytorch", 16, 1]) == {"forward": 4_586_000, "train": 13_758_000}
    # The figures below are worked out from these costs; a recalibrated registry means working them out again.
    assert registry.get("pytorch").cost == registry.Cost(efficiency=1.46, thread_exponent=0.75,
                                                         step_overhead_s=0.0011, fixed_s=2.0)
    assert registry.get("caffe").cost == registry.Cost(efficiency=0.93, thread_exponent=0.0,
                                                       step_overhead_s=0.00017, fixed_s=0.15)
    # PyTorch, batch 16, 1 thread, 100 steps, one final test of digits' 359 test images; its rate 1.46 x 100 = 146
    # GFLOP/s. A step: 0.0011 + 16 x 13,758,000 / 146e9 = 0.0011 + 0.00150773 = 0.00260773 s; 100 of them 0.260773 s.
    # The test: 359 x 4,586,000 / 146e9 = 1,646,374,000 / 146e9 = 0.0112765 s. In all 2.0 + 0.260773 + 0.011277:
    assert model.seconds(by["pytorch", 16, 1]) == (pytest.approx(2.272049, rel=1e-6), "modelled")
    # batch 64, 2 threads: 146 x 2 ** 0.75 = 146 x 1.681793 = 245.5418 GFLOP/s. A step: 0.0011 + 64 x 13,758,000 /
    # 245.5418e9 = 0.0011 + 0.00358600 = 0.00468600 s, 100 of them 0.468600 s; the test 1,646,374,000 / 245.5418e9
    # = 0.00670507 s. In all 2.0 + 0.468600 + 0.006705:
    assert model.seconds(by["pytorch", 64, 2]) == (pytest.approx(2.475305, rel=1e-6), "modelled")
    # Caffe, batch 16: 0.93 x 100 = 93 GFLOP/s, at 1 thread and at 2 alike (thread exponent 0). A step: 0.00017 +
    # 220,128,000 / 93e9 = 0.00017 + 0.00236697 = 0.00253697 s, 100 of them 0.253697 s; the test 1,646,374,000 /
    # 93e9 = 0.0177029 s. In all 0.15 + 0.253697 + 0.017703:
    assert model.seconds(by["caffe", 16, 1]) == (pytest.approx(0.421400, rel=1e-6), "modelled")
    assert model.seconds(by["caffe", 16, 2]) == model.seconds(by["caffe", 16, 1])
    # Twice the steps: exactly 100 more steps of 0.00260773 s, the fixed cost and the test unchanged.
    longer = {**by["pytorch", 16, 1], "iterations": 200, "id": "pytorch-16-1-200"}
    assert model.seconds(longer)[0] - model.seconds(by["pytorch", 16, 1])[0] == pytest.approx(0.260773, rel=1e-5)
    # The study's estimate: its 8 points, worked out alike. PyTorch 16/1: 2.272049, 16/2 (a step 0.0011 + 220,128,000
    # / 245.5418e9 = 0.0019965): 2.0 + 0.199650 + 0.006705 = 2.206355, 64/1 (a step 0.0011 + 880,512,000 / 146e9 =
    # 0.0071309): 2.0 + 0.713090 + 0.011277 = 2.724367, 64/2: 2.475305; Caffe 16 (1 and 2 threads): 0.421400 each,
    # 64 (a step 0.00017 + 880,512,000 / 93e9 = 0.00963787): 0.15 + 0.963787 + 0.017703 = 1.131490 each.
    assert est["estimated_s"] == pytest.approx(2.272049 + 2.206355 + 2.724367 + 2.475305 + 2 * 0.421400
                                               + 2 * 1.131490, rel=1e-6)


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
    assert set(cluster_request.runtime_table(cfg, ps, done).values()) == {45 + lock_wait}
    p = ps[0]
    finish(tmp_path, p, throughput=10.0, wall=700.0, train=650.0)  # slow: 1,600 images at 10 img/s
    table = cluster_request.runtime_table(cfg, ps, estimate.finished(ps, run_dir_in(tmp_path)))
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
