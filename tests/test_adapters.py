"""The adapters of PyTorch, TensorFlow and JAX (and, where they share the loop, Theano's): real training on real
data, same networks, honest records; the compile and precision axes recorded as they ran."""

import csv
import io
import json
import os
import subprocess

import numpy as np
import pytest

from dlbench.frameworks import registry
from dlbench.paths import ROOT as REPO
from dlbench.study.sweep import one_point

# The frameworks with a compile and a precision switch (PyTorch, TensorFlow, JAX), and those dlbench's shared
# training loop drives (those and Theano).
FRAMEWORKS = [f.name for f in registry.FRAMEWORKS.values() if f.accepts.get("compile")]
STEPPED = [f.name for f in registry.FRAMEWORKS.values() if f.stepped]


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_lenet_on_digits_reaches_over_90_percent(train, framework):
    r = train(framework, "caffe", epochs=10, batch_size=64, threads=2)
    assert r["status"] == "ok", r.get("log_tail")
    assert r["accuracy"] > 0.90
    assert r["iterations"] == 10 * 23  # ceil(1438 / 64) iterations per epoch
    assert r["train_time_s"] > 0 and r["test_time_s"] > 0
    assert r["throughput_img_s"] == pytest.approx(r["images_trained"] / r["train_time_s"])
    assert r["threads_requested"] == 2 and r["threads_in_effect"] == 2
    assert r["params"] == 431_080
    assert r["framework_version"] and r["cpu_model"] and r["cpu_cores_logical"] >= 1
    assert r["rss_peak_mb"] > 100 and r["cpu_util_mean_pct"] > 30
    assert r["dataset_digest"] and r["seed"] == 1
    # the curve: the training loss fell to under half its first value, and the last test is the record's
    curve = list(csv.DictReader(io.StringIO((r["_out"] / "curve.csv").read_text())))
    losses = [float(row["loss"]) for row in curve if row["kind"] == "train"]
    assert len(losses) > 10 and max(losses[-3:]) < 0.5 * losses[0], losses
    tests = [row for row in curve if row["kind"] == "test"]
    assert int(tests[-1]["iteration"]) == r["iterations"] and float(tests[-1]["accuracy"]) == r["accuracy"]


@pytest.mark.long
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_huge_learning_rate_diverges_and_stops_early(train, framework):
    r = train(framework, "caffe", iterations=400, learning_rate=1000.0, threads=1)
    assert r["status"] == "diverged"
    assert r["diverged_at_iteration"] is not None and r["diverged_at_iteration"] < 400
    assert r["iterations_done"] == r["diverged_at_iteration"]
    assert "loss became" in r["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_gpu_point_without_a_gpu_is_unavailable(train, framework):
    r = train(framework, "caffe", iterations=5, device="gpu")
    assert r["status"] == "unavailable"
    assert "GPU" in r["reason"] or "CUDA" in r["reason"]


def test_point_records_carry_every_parameter():
    p = one_point("pytorch", "tensorflow", batch_size=16)
    assert p["network"] == "mnist_deep" and p["optimizer"] == "adam" and p["batch_size"] == 16
    assert p["layers"][-1] == {"type": "dense", "units": 10}


@pytest.mark.long
@pytest.mark.parametrize("framework", STEPPED)
def test_the_adapter_itself_refuses_a_gpu_it_cannot_use(env_python, digits_dir, tmp_path, framework):
    """Past the runner's machine-wide check (a GPU node whose framework build has no CUDA, say)."""
    point = one_point(framework, "caffe", iterations=5, device="gpu")
    (tmp_path / "point.json").write_text(json.dumps(point))
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([env_python(framework), "-m", "dlbench.frameworks.trainer", str(tmp_path / "point.json"),
                           str(digits_dir), str(tmp_path / "events.jsonl")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert proc.returncode == 3
    reason = events[-1]["reason"]
    assert events[-1]["status"] == "unavailable" and ("GPU" in reason or "CUDA" in reason)
    assert framework != "theano" or "libgpuarray" in reason
    assert not any(e["e"] == "phase_start" and e["name"] == "train" for e in events)



def test_early_stopping_follows_the_theano_tutorials_patience_rule():
    """Validated every min(epoch, patience // 2) iterations; a clear improvement raises the patience to it x 2."""
    from dlbench.frameworks.stepped import EarlyStopping

    rule = EarlyStopping({"patience": 100, "patience_increase": 2, "improvement_threshold": 0.995}, 30)
    assert rule.every == 30
    assert rule.record(30, 0.50) and rule.patience == 100  # 29 * 2 < 100
    assert rule.record(60, 0.70) and rule.patience == 118  # (60 - 1) * 2
    assert not rule.record(90, 0.70)  # no better: nothing changes
    assert rule.record(120, 0.7001) and rule.patience == 118  # better, but not by 0.5 % of the error
    assert (rule.best_iteration, rule.best_accuracy) == (120, 0.7001)
    assert not rule.should_stop(118) and rule.should_stop(119)  # patience <= iterations done - 1
    assert EarlyStopping({"patience": 10}, 30).every == 5


def test_the_moving_average_follows_tensorflows_num_updates_rule():
    from dlbench.frameworks.stepped import ema_rate

    assert ema_rate(0.9999, 1) == pytest.approx(2 / 11)
    assert ema_rate(0.9999, 1000) == pytest.approx(1001 / 1010)
    assert ema_rate(0.9999, 10**6) == 0.9999


def _events(record) -> list[dict]:
    return [json.loads(line) for line in (record["_out"] / "events.jsonl").read_text().splitlines()]


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / max(values)


@pytest.mark.long
def test_the_same_point_starts_and_steps_alike_in_every_python_framework(train):
    """Same initial weights, same batches, same updates (momentum, decay, bias lr_mult 2, inv policy): after 30 steps
    PyTorch's, TensorFlow's and JAX's test losses agree to float32 rounding, with and without a moving average.

    Theano's come within a few per cent, not closer: its max-pooling gradient goes to every element that ties
    for the maximum (PyTorch, TensorFlow and Caffe pick one), and LeNet pools its first conv's output directly,
    where the blank background gives the bias alone, tied over whole windows (docs/reproduction.md)."""
    sweep = dict(iterations=30, batch_size=32, threads=1)
    plain = {fw: train(fw, "caffe", **sweep) for fw in STEPPED}
    averaged = {fw: train(fw, "caffe", update={"ema_decay": 0.95}, **sweep) for fw in STEPPED}
    for fw in STEPPED:
        for r in (plain[fw], averaged[fw]):
            assert r["status"] == "ok", r.get("log_tail")
            assert r["init"] == "xavier" and r["shuffle"] is False
        assert plain[fw]["ema"] is None and averaged[fw]["ema"].startswith("applied (decay 0.95")
    for runs in (plain, averaged):
        losses = {fw: r["test_loss"] for fw, r in runs.items()}
        assert _spread([loss for fw, loss in losses.items() if fw != "theano"]) < 2e-3, losses
        assert _spread(list(losses.values())) < 5e-2, losses
    assert abs(averaged["pytorch"]["test_loss"] - plain["pytorch"]["test_loss"]) > 0.01  # not the last weights


# Theano's validation on the digits: the last fifth validates, the patience (in iterations) short enough to end
# well before 60 epochs of 37 batches; a test at every validation.
PATIENT = {"validation": {"fraction": 0.2, "patience": 40, "patience_increase": 2, "improvement_threshold": 0.995},
           "test_interval": 20}


@pytest.mark.long
@pytest.mark.parametrize("framework", STEPPED)
def test_validation_stops_early_and_tests_the_best_weights(train, framework):
    r = train(framework, "caffe", update=PATIENT, epochs=60, batch_size=32, threads=1)
    assert r["status"] == "ok", r.get("log_tail")
    events = _events(r)
    validations = [e for e in events if e["e"] == "validation"]
    tests = {e["iteration"]: e["accuracy"] for e in events if e["e"] == "test"}
    assert r["validation_samples"] == 288 and r["train_samples"] == 1438 - 288  # the last fifth of the digits
    # replay the patience rule on the validations the trainer reported: the same best and the same stop
    from dlbench.frameworks.stepped import EarlyStopping

    rule = EarlyStopping(PATIENT["validation"], steps_per_epoch=36)
    assert rule.every == 20 and [v["iteration"] for v in validations][:3] == [20, 40, 60]
    for v in validations:
        rule.record(v["iteration"], v["accuracy"])
    assert r["best_validation_iteration"] == rule.best_iteration
    assert r["best_validation_accuracy"] == rule.best_accuracy
    assert r["stopped_early_at"] is not None and r["stopped_early_at"] < r["iterations_planned"] == 60 * 36
    assert r["iterations"] == r["stopped_early_at"] and rule.should_stop(r["stopped_early_at"])
    assert not rule.should_stop(r["stopped_early_at"] - 1) or r["stopped_early_at"] % rule.every == 0
    # the tested weights are the best validation's: the test there (every validation has one) gives the same
    assert r["accuracy"] == r["accuracy_at_best"] == pytest.approx(tests[r["best_validation_iteration"]], abs=1e-9)


# bf16 against fp32 on the digits: LeNet, 5 epochs. The tolerance: 2 points (7 of the 359 test images).
BF16_TOLERANCE_PP = 2.0


@pytest.mark.long
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_compile_and_precision_run_as_asked_and_are_recorded(train, framework):
    """The framework's natural mode in fp32 and in bf16, and its other compile mode: each record says what ran; a
    compiled point spends its compile phase before training (and not in it); bf16 costs at most the tolerance."""
    natural = registry.get(framework).natural["compile"]
    other = "eager" if natural == "compiled" else "compiled"
    sweep = dict(epochs=5, batch_size=64, threads=1)
    fp32 = train(framework, "caffe", **sweep)
    bf16 = train(framework, "caffe", precision="bf16", **sweep)
    switched = train(framework, "caffe", compile=other, **sweep)
    for r in (fp32, bf16, switched):
        assert r["status"] == "ok", r.get("log_tail")
        assert r["accuracy"] > 0.90 and r["compile_time_s"] is not None
    assert (fp32["compile"], fp32["precision"]) == (natural, "fp32")
    assert fp32["precision_in_effect"].startswith("float32 compute")
    assert bf16["precision"] == "bf16" and bf16["precision_in_effect"].startswith("bfloat16 compute, float32 weights")
    assert switched["compile"] == other and switched["precision"] == "fp32"
    assert abs(bf16["accuracy"] - fp32["accuracy"]) * 100 <= BF16_TOLERANCE_PP, (fp32["accuracy"], bf16["accuracy"])
    assert bf16["test_loss"] != fp32["test_loss"]  # bfloat16 rounding changed the numbers: it did run
    compiled, eager = (switched, fp32) if other == "compiled" else (fp32, switched)
    # (TensorFlow's eager mode traces its graph function in the compile phase too: less than XLA's compilation)
    assert compiled["compile_time_s"] > max(0.5, eager["compile_time_s"]), (compiled["compile_time_s"],
                                                                            eager["compile_time_s"])
    assert compiled["compile_in_effect"] != eager["compile_in_effect"]
    # the first training step of a compiled point is no slower than its later ones: the compilation came before
    first = [e for e in _events(compiled) if e["e"] == "step"][:3]
    assert first[0]["train_time_s"] < 0.25 * compiled["train_time_s"] + 0.1


FUSED_UPDATE = """
import json, sys
import numpy as np, tensorflow as tf
from dlbench.frameworks.tensorflow_update import FusedUpdate
out = {}
for kind, momentum in (("adam", 0.0), ("sgd", 0.9), ("sgd", 0.0)):
    w = tf.Variable(np.array([0.5, -0.25, 1e-3], np.float32))
    update = FusedUpdate([w], kind, momentum, [2.0])
    step = tf.function(lambda g, lr: update.apply([g], lr))
    for g in ([0.1, -0.2, 0.0], [0.3, 0.1, 1e-6], [-0.1, 0.05, 0.0]):
        step(tf.constant(g, tf.float32), tf.constant(0.01))
    out[f"{kind}{momentum}"] = w.numpy().tolist()
print(json.dumps(out))
"""


def test_the_fused_update_is_adam_and_momentum_sgd_as_tensorflow_1_computed_them(env_python):
    """TensorFlow's update (FusedUpdate: ResourceApplyAdam, ResourceApplyKerasMomentum, ResourceApplyGradientDescent)
    against the formulas written out: Adam as tf.compat.v1's AdamOptimizer (epsilon on sqrt(v), the bias correction
    in the rate), SGD with the rate inside the velocity (Keras, Caffe), each at the rate x the variable's multiplier."""
    proc = subprocess.run([env_python("tensorflow"), "-c", FUSED_UPDATE], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    grads = np.array([[0.1, -0.2, 0.0], [0.3, 0.1, 1e-6], [-0.1, 0.05, 0.0]])
    lr = 0.01 * 2.0
    w, m, v = np.array([0.5, -0.25, 1e-3]), np.zeros(3), np.zeros(3)
    for t, g in enumerate(grads, 1):
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        w = w - lr * np.sqrt(1 - 0.999**t) / (1 - 0.9**t) * m / (np.sqrt(v) + 1e-8)
    assert np.allclose(got["adam0.0"], w, rtol=1e-5, atol=1e-7)
    w, vel = np.array([0.5, -0.25, 1e-3]), np.zeros(3)
    for g in grads:
        vel = 0.9 * vel - lr * g
        w = w + vel
    assert np.allclose(got["sgd0.9"], w, rtol=1e-5, atol=1e-7)
    assert np.allclose(got["sgd0.0"], np.array([0.5, -0.25, 1e-3]) - lr * grads.sum(axis=0), rtol=1e-5, atol=1e-7)


@pytest.mark.long
def test_adam_steps_alike_in_pytorch_and_tensorflow(train):
    """From the same weights and batches, 30 steps of Caffe's LeNet with Adam at 1e-3: TensorFlow's test loss is within
    0.5 % of PyTorch's. Not closer: TensorFlow 1's Adam (which dlbench's TensorFlow runs, as the study's script did)
    adds epsilon to sqrt(v) before the bias correction, PyTorch after it (0.3 % apart here, as with Keras' Adam)."""
    adam = {"optimizer": "adam", "learning_rate": 1e-3, "momentum": 0.0, "weight_decay": 5e-4}
    runs = {fw: train(fw, "caffe", update=adam, iterations=30, batch_size=32, threads=1)
            for fw in ("pytorch", "tensorflow")}
    for r in runs.values():
        assert r["status"] == "ok", r.get("log_tail")
    losses = [r["test_loss"] for r in runs.values()]
    assert _spread(losses) < 5e-3, losses
    first = [e["loss"] for e in _events(runs["tensorflow"]) if e["e"] == "step"][0]
    assert runs["tensorflow"]["final_loss"] < 0.7 * first


@pytest.mark.long
@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "theano"])
def test_fp64_trains_in_float64_and_says_so(train, framework):
    """`precision: fp64` (Theano's own floatX default, Torch7's default tensor type): the record says float64, and
    the same point's test loss is within float32 rounding of its fp32 run's but not equal to it (it did run)."""
    sweep = dict(iterations=30, batch_size=32, threads=1)
    fp32, fp64 = train(framework, "caffe", **sweep), train(framework, "caffe", precision="fp64", **sweep)
    for r in (fp32, fp64):
        assert r["status"] == "ok", r.get("log_tail")
    assert fp64["precision"] == "fp64" and fp64["precision_in_effect"].startswith("float64")
    assert fp32["precision_in_effect"].startswith("float32")
    assert fp64["test_loss"] != fp32["test_loss"]
    assert abs(fp64["test_loss"] - fp32["test_loss"]) < 1e-2 * fp32["test_loss"]


@pytest.mark.slow
def test_pytorch_trains_in_its_own_layout_by_default_and_channels_last_only_when_asked(train):
    """A PyTorch user's weights are contiguous (NCHW), so dlbench's default point's are too; `memory_format:
    channels_last` reaches the model (read from its weights), and a default point's id names no layout."""
    sweep = dict(iterations=20, batch_size=32, threads=1)
    default, opted = train("pytorch", "caffe", **sweep), train("pytorch", "caffe", memory_format="channels_last",
                                                               **sweep)
    for r in (default, opted):
        assert r["status"] == "ok", r.get("log_tail")
    assert (default["memory_format"], default["memory_format_in_effect"]) == ("contiguous", "contiguous")
    assert (opted["memory_format"], opted["memory_format_in_effect"]) == ("channels_last", "channels_last")
    assert "channels_last" not in default["id"] and "contiguous" not in default["id"]
    assert "channels_last" in opted["id"]
    # the same arithmetic in another layout: the losses agree to float32 rounding, and differ (it did run)
    assert abs(opted["test_loss"] - default["test_loss"]) < 1e-3 * default["test_loss"]
