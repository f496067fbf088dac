"""Every adapter builds the same network from the same spec: one forward pass, same weights, same numbers.

For each network, random canonical weights (xavier-like, so activations stay O(1); a sparse
conv's unconnected weights 0) and a fixed random batch are drawn here with numpy;
dlbench.testing.forward runs the pass in each framework's environment (all networks of a
framework in one process, the frameworks at once). The reference is no framework's: the same
pass written out in numpy from the spec's definitions, in float64 (forward.numpy_forward,
itself checked layer by layer against hand-worked values in tests/test_numpy_forward.py).
Every network of dlbench/spec/networks.py is checked, among them the padded pooling of torch_mnist,
the sparse convolutions of torch_cifar10 and the Reslab net.

Tolerances (float32 everywhere):
  logits  max |logits - numpy's| <= 1e-4 * (1 + max |numpy's logits|), every framework, Caffe
          included (its logits are read from its log, printed to 6 significant digits);
  loss    |loss - numpy's| <= 1e-4 * numpy's loss (mean softmax cross-entropy of the batch, as each
          framework computes it; Caffe's as `caffe test` reports it).
"""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from dlbench.frameworks import registry
from dlbench.paths import ROOT as REPO
from dlbench.spec import initial_weights, networks
from dlbench.study.sweep import one_point
from dlbench.testing.forward import numpy_forward, softmax_xent

pytestmark = pytest.mark.long

# The study's networks and those every framework builds; ResNet-20 (batch normalisation, residual blocks) has its
# own checks, in training and inference mode, in tests/test_resnet.py.
NETWORKS = {net: shape for net, shape in networks.INPUT_SHAPES.items()
            if not networks.kinds(networks.NETWORKS[net]) & set(networks.KINDS_BEYOND_STUDY)}
FRAMEWORKS = registry.names()
REFERENCE = "pytorch"
BATCH = 16
CLASSES = 10
LOGIT_TOL = 1e-4  # times (1 + max |reference logit|)
LOSS_TOL = 1e-4  # relative to the reference loss


def canonical_weights(layers: list[dict], shape: tuple[int, int, int], rng: np.random.Generator) -> dict:
    """W<i>, b<i> of the i-th conv/dense layer: conv (out, in, kh, kw), dense (out, in) over C, H, W inputs."""
    out, prev, j = {}, shape, 0
    for layer, next_shape in zip(layers, networks.shapes(layers, shape)):
        if layer["type"] in ("conv", "dense"):
            if layer["type"] == "conv":
                w_shape = (layer["filters"], prev[0], layer["kernel"], layer["kernel"])
            else:
                w_shape = (layer["units"], int(np.prod(prev)))
            limit = networks.xavier_limit(networks.fan_in(layer, prev))
            out[f"W{j}"] = rng.uniform(-limit, limit, w_shape).astype(np.float32)
            if "table" in layer:
                out[f"W{j}"] *= initial_weights.connection_mask(layer, prev[0])
            out[f"b{j}"] = rng.uniform(-0.1, 0.1, w_shape[0]).astype(np.float32)  # non-zero: the biases count
            j += 1
        prev = next_shape
    return out


@pytest.fixture(scope="module")
def results(env_python, tmp_path_factory) -> dict:
    """{framework: {network: the forward pass's result}}; each process's output under '_log', numpy's pass under
    '_numpy'."""
    work = tmp_path_factory.mktemp("forward")
    rng = np.random.default_rng(20190521)
    args: dict[str, list[str]] = {fw: [] for fw in FRAMEWORKS}
    reference = {}
    for net, shape in NETWORKS.items():
        layers = networks.resolve(net, CLASSES)
        weights = canonical_weights(layers, shape, rng)
        np.savez(work / f"{net}.weights.npz", **weights)
        x = rng.standard_normal((BATCH, *shape)).astype(np.float32)
        y = rng.integers(0, CLASSES, BATCH).astype(np.int64)
        np.savez(work / f"{net}.input.npz", x=x, y=y)
        logits = numpy_forward(layers, [(weights[f"W{j}"], weights[f"b{j}"]) for j in range(len(weights) // 2)], x)
        reference[net] = {"logits": logits, "loss": softmax_xent(logits, y)}
        for fw in FRAMEWORKS:
            args[fw] += [net, str(work / f"{net}.weights.npz"), str(work / f"{net}.input.npz"),
                         str(work / f"{fw}.{net}.json")]
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"],
           "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    procs = {fw: subprocess.Popen([env_python(fw), "-m", "dlbench.testing.forward", fw, *args[fw]], cwd=REPO, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for fw in FRAMEWORKS}
    out: dict = {"_log": {}, "_numpy": reference}
    for fw, proc in procs.items():
        log, _ = proc.communicate(timeout=900)
        out["_log"][fw] = log[-3000:]
        out[fw] = {}
        for net in NETWORKS:
            path = work / f"{fw}.{net}.json"
            missing = {"error": f"no output (exit {proc.returncode})"}
            out[fw][net] = json.loads(path.read_text()) if path.exists() else missing
    return out


def _result(results: dict, framework: str, network: str) -> dict:
    got = results[framework][network]
    assert "error" not in got, f"{framework} {network}: {got['error']}\n{results['_log'][framework]}"
    return got


@pytest.mark.parametrize("network", list(NETWORKS))
def test_the_reference_tells_networks_apart(results, network):
    """numpy's logits have the batch's shape and are O(1), so that the tolerance below is a test: not so small
    that any pass would be within it, nor so large that float32 could not be."""
    logits = results["_numpy"][network]["logits"]
    assert logits.shape == (BATCH, CLASSES)
    assert np.isfinite(logits).all() and 0.1 < np.abs(logits).max() < 100
    assert logits.std(axis=0).max() > 1e-3  # the batch's images give different logits


CASES = [(fw, net) for fw in FRAMEWORKS for net in NETWORKS]


@pytest.mark.parametrize("framework,network", CASES)
def test_forward_pass_agrees_with_numpy(results, framework, network):
    """Same spec, same weights, same batch: numpy's logits and loss, within the stated tolerances."""
    ref = results["_numpy"][network]
    got = _result(results, framework, network)
    want_logits = np.asarray(ref["logits"], dtype=np.float64)
    got_logits = np.asarray(got["logits"], dtype=np.float64)
    assert got_logits.shape == want_logits.shape
    diff = float(np.abs(got_logits - want_logits).max())
    bound = LOGIT_TOL * (1 + float(np.abs(want_logits).max()))
    assert diff <= bound, f"{framework} {network}: logits differ by up to {diff:.3g} (allowed {bound:.3g})"
    loss_diff = abs(got["loss"] - ref["loss"])
    assert loss_diff <= LOSS_TOL * ref["loss"], (
        f"{framework} {network}: loss {got['loss']!r} vs numpy's {ref['loss']!r} "
        f"(relative {loss_diff / ref['loss']:.3g})")


# A sparse conv between two dense-connected layers, on the 28x28 digits: 8 planes -> 16 maps,
# each map fed by 2 planes of a seeded random table.
SPARSE_NET = [networks.conv(8, 3, pad=1), networks.act("tanh"),
              networks.conv(16, 3, table=networks.random_table(8, 16, 2, seed=3)), networks.act("tanh"),
              networks.pool("max", 2), networks.dense(10)]


def trained(env_python, framework: str, point: dict, digits_dir, tmp_path) -> tuple[dict, list[dict]]:
    """The point trained by the framework's adapter (dlbench.testing.trained): its weights, and its events."""
    point = dict(point, framework=framework)
    work = tmp_path / framework
    work.mkdir()
    (work / "point.json").write_text(json.dumps(point))
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"],
           "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1",
           "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run([env_python(framework), "-m", "dlbench.testing.trained", str(work / "point.json"),
                           str(digits_dir), str(work / "events.jsonl"), str(work / "w.npz")], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    events = [json.loads(line) for line in (work / "events.jsonl").read_text().splitlines()]
    with np.load(work / "w.npz") as f:
        return {k: f[k] for k in f.files}, events


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_unconnected_weights_stay_zero_through_training(env_python, digits_dir, tmp_path, framework):
    """A few real SGD steps (momentum, weight decay, a moving average) on the digits: the connected weights move,
    the unconnected ones are still exactly 0; Caffe's grouped convolution holds the connected weights only."""
    point = one_point(framework, "caffe", iterations=25, batch_size=16, threads=1)
    point.update(network="sparse_test", layers=SPARSE_NET, test_interval=10, learning_rate=0.05, ema_decay=0.99)
    weights, events = trained(env_python, framework, point, digits_dir, tmp_path)
    final = [e for e in events if e["e"] == "test"][-1]
    assert 0.0 <= final["accuracy"] <= 1.0 and final["iteration"] == 25
    w0, w = weights["init_W1"], weights["W1"]
    table = SPARSE_NET[2]["table"]
    if framework == "caffe":
        assert w.shape == (16, 2, 3, 3)  # one group per output map: only the connected weights exist
        connected, after = w0, w
    else:
        mask = initial_weights.connection_mask(SPARSE_NET[2], 8)[:, :, 0, 0].astype(bool)
        assert w.shape == (16, 8, 3, 3)
        assert np.count_nonzero(w0[~mask]) == 0 and np.count_nonzero(w[~mask]) == 0, "an unconnected weight moved"
        connected, after = w0[mask], w[mask]
        assert connected.size == 16 * 2 * 9
    assert np.abs(after - connected).max() > 1e-4, "training did not move the connected weights"
    assert sum(len(row) for row in table) * 9 == connected.size


def test_every_framework_starts_from_the_same_weights_and_takes_the_same_steps(env_python, digits_dir, tmp_path):
    """Caffe's LeNet preset, 20 steps on the digits: the same initial weights, the same batches (file order), the same
    updates (momentum, decay, bias lr_mult 2, inv policy) in every framework. PyTorch, TensorFlow and Caffe end
    within 1e-3 of each other on every weight; Theano on every weight matrix, while its biases differ more: its
    max-pooling gradient goes to every tied maximum (the blank background), the others' to one."""
    point = one_point("pytorch", "caffe", iterations=20, threads=1)
    point["test_interval"] = 7  # Caffe snapshots its final weights
    runs = {fw: trained(env_python, fw, point, digits_dir, tmp_path)[0] for fw in FRAMEWORKS}
    ref = runs[REFERENCE]
    for j in range(4):
        assert np.abs(ref[f"W{j}"] - ref[f"init_W{j}"]).max() > 5e-3  # they moved
        for fw, got in runs.items():
            assert np.array_equal(got[f"init_W{j}"], ref[f"init_W{j}"]), fw
            names = (f"W{j}", f"b{j}") if fw != "theano" else (f"W{j}",)
            for name in names:
                diff = float(np.abs(got[name] - ref[name]).max())
                assert diff < (1e-3 if fw != "theano" else 3e-3), f"{fw} {name}: {diff:.3g} from PyTorch's"
