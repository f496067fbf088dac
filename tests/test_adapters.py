"""PyTorch and TensorFlow adapters: real training on real data, same networks, honest records."""

import json
import subprocess

import pytest

from dlbench import models
from dlbench.paths import ROOT as REPO
from dlbench.sweep import one_point

FRAMEWORKS = ["pytorch", "tensorflow"]


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
    # the curve: training loss went down, the test accuracy is the record's
    curve = (r["_out"] / "curve.csv").read_text().splitlines()
    assert len(curve) > 10
    metrics = json.loads((r["_out"] / "metrics.json").read_text())
    assert metrics["accuracy"] == r["accuracy"]


@pytest.mark.slow
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


PARAM_SNIPPET = """
import json, sys
from dlbench import models
fw = sys.argv[1]
out = {}
for net, shape in [("lenet", (1, 28, 28)), ("mnist_deep", (1, 28, 28)), ("lenet5_tanh", (1, 28, 28)),
                   ("torch_mnist", (1, 32, 32)), ("cifar10_quick", (3, 32, 32)), ("tf_cifar10", (3, 24, 24)),
                   ("torch_cifar10", (3, 32, 32))]:
    layers = models.resolve(net, 10)
    if fw == "pytorch":
        from dlbench.frameworks.pytorch import build_module
        m = build_module(layers, shape)
        out[net] = sum(p.numel() for p in m.parameters())
    else:
        from dlbench.frameworks.tensorflow import build_model
        m = build_model(layers, shape, 1)
        out[net] = int(sum(v.shape.num_elements() for v in m.trainable_variables))
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_built_networks_have_the_parameters_of_the_spec(env_python, framework):
    proc = subprocess.run([env_python(framework), "-c", PARAM_SNIPPET, framework], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": "", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = {"lenet": (1, 28, 28), "mnist_deep": (1, 28, 28), "lenet5_tanh": (1, 28, 28),
                "torch_mnist": (1, 32, 32), "cifar10_quick": (3, 32, 32), "tf_cifar10": (3, 24, 24),
                "torch_cifar10": (3, 32, 32)}
    for net, shape in expected.items():
        assert counts[net] == models.param_count(models.resolve(net, 10), shape), net


def test_point_records_carry_every_parameter():
    p = one_point("pytorch", "tensorflow", batch_size=16)
    assert p["network"] == "mnist_deep" and p["optimizer"] == "adam" and p["batch_size"] == 16
    assert p["layers"][-1] == {"type": "dense", "units": 10}


@pytest.mark.slow
@pytest.mark.parametrize("framework", [*FRAMEWORKS, "theano"])
def test_the_adapter_itself_refuses_a_gpu_it_cannot_use(env_python, digits_dir, tmp_path, framework):
    """Past the runner's machine-wide check (a GPU node whose framework build has no CUDA, say)."""
    point = one_point(framework, "caffe", iterations=5, device="gpu")
    (tmp_path / "point.json").write_text(json.dumps(point))
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([env_python(framework), "-m", "dlbench.trainer", str(tmp_path / "point.json"),
                           str(digits_dir), str(tmp_path / "events.jsonl")], cwd=REPO, env=env,
                          capture_output=True, text=True)
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert proc.returncode == 3
    reason = events[-1]["reason"]
    assert events[-1]["status"] == "unavailable" and ("GPU" in reason or "CUDA" in reason)
    assert framework != "theano" or "libgpuarray" in reason
    assert not any(e["e"] == "phase_start" and e["name"] == "train" for e in events)
