"""The time estimate: from FLOPs and the machine's peak before anything ran, from finished points after."""

import json
import math

import pytest

from dlbench import cluster, config, estimate, models, sweep

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
    per_s = (estimate.EFFICIENCY[p["framework"]] * PEAK[1] * 1e9
             * p["threads"] ** estimate.THREAD_EXPONENT[p["framework"]])
    overhead = estimate.STEP_OVERHEAD_S[p["framework"]]  # per step: 100 steps
    expected = (estimate.FIXED_S[p["framework"]] + 100 * (overhead + p["batch_size"] * fl["train"] / per_s)
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
    overhead = estimate.STEP_OVERHEAD_S["pytorch"]
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
    rate2 = rate * 2 ** estimate.THREAD_EXPONENT["pytorch"]
    assert source == "scaled"
    assert seconds == pytest.approx(1.4 + 100 * (overhead + other["batch_size"] * fl["train"] / rate2)
                                    + 359 * fl["forward"] / rate2)
    # Caffe has nothing finished: still the model
    assert model.seconds(next(p for p in ps if p["framework"] == "caffe"))[1] == "modelled"


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
    assert set(cluster.runtime_table(cfg, ps, done).values()) == {45}  # the model alone never sets a time
    p = ps[0]
    finish(tmp_path, p, throughput=10.0, wall=700.0, train=650.0)  # slow: 1,600 images at 10 img/s
    table = cluster.runtime_table(cfg, ps, estimate.finished(ps, run_dir_in(tmp_path)))
    twin = next(q for q in ps if estimate.kind(q) == estimate.kind(p) and q["id"] != p["id"])
    seconds, source = estimate.Model(estimate.finished(ps, run_dir_in(tmp_path)), PEAK).seconds(twin)
    assert source == "measured" and seconds > 600
    assert table[twin["id"]] == max(10, math.ceil(2 * seconds / 60))


def test_the_quick_peak_is_measured_once_and_kept(tmp_path, capsys):
    first = estimate.peak_gflops([1], tmp_path)
    assert first[1] > 1 and "measured this machine's GEMM peak" in capsys.readouterr().err
    assert estimate.peak_gflops([1], tmp_path) == first and capsys.readouterr().err == ""
    (tmp_path / "results/machine/peak.json").write_text(json.dumps({"gflops_by_threads": {"1": 123.0}}))
    assert estimate.peak_gflops([1], tmp_path) == {1: 123.0}  # the machine_peak rule's figure wins
