"""Theano adapter: its own environment (numpy 1.23), a compiled function with updates, honest records.

Every test needs the Theano environment (built on first use, minutes) and marks itself slow.
"""

import hashlib
import json
import os
import subprocess
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from dlbench.frameworks import protocol
from dlbench.paths import ROOT as REPO
from dlbench.run import build_record
from dlbench.spec import networks

pytestmark = pytest.mark.slow


def in_theano_env(env_python, code: str, env: dict | None = None) -> dict:
    """Run a snippet with the Theano environment's Python; it prints one JSON line last."""
    base = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"],
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.run([env_python("theano"), "-c", code], capture_output=True, text=True, cwd=REPO,
                          env=base | (env or {}), timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


VERSIONS = """
import json
from dlbench.frameworks import theano_config  # sets THEANO_FLAGS before Theano is imported
import numpy, theano
print(json.dumps({"theano": theano.__version__, "numpy": numpy.__version__}))
"""


@pytest.fixture(scope="module")
def theano_versions(env_python):
    return in_theano_env(env_python, VERSIONS)


def test_lenet_on_digits_reaches_over_90_percent(train, env_python, theano_versions):
    r = train("theano", "caffe", epochs=10, batch_size=64, threads=2)
    assert r["status"] == "ok", r.get("log_tail")
    assert r["accuracy"] > 0.90
    assert r["iterations"] == 10 * 23
    assert r["framework_version"] == theano_versions["theano"] == "1.1.2"
    assert r["framework_numpy_version"] == theano_versions["numpy"] == "1.23.5"
    assert r["framework_numpy_version"] != np.__version__  # not the base environment's numpy
    # compilation is its own phase, before training and apart from its clock
    assert r["compile_time_s"] > 0 and r["train_time_s"] > 0
    events = protocol.read(r["_out"] / "events.jsonl")
    spans = {name: (start, end) for name, start, end in build_record.phases(events)}
    assert spans["compile"][1] <= spans["train"][0]
    assert r["train_time_s"] <= spans["train"][1] - spans["train"][0] + 1e-6
    assert "openblas" in r["blas"] and r["library_in_effect"] == "openblas"
    assert r["threads_requested"] == 2 and r["threads_in_effect"] == 2
    build = json.loads(r["build_json"])
    assert build["floatX"] == "float32" and build["openblas_threads"] == 2
    prefix = os.path.dirname(os.path.dirname(env_python("theano")))
    assert build["compiledir"].startswith(os.path.join(prefix, "theano-cache") + os.sep)
    assert r["params"] == 431_080
    curve = (r["_out"] / "curve.csv").read_text().splitlines()
    assert len(curve) > 10


LAYERS = """
import json
import numpy as np
from dlbench.spec import networks
from dlbench.frameworks import theano_network
import theano, theano.tensor as T

def caffe_pool(x, mode, k, s, p):  # Caffe's pooling_layer.cpp, in numpy
    n, c, size, _ = x.shape
    out = networks.pool_out(size, k, s, p)
    y = np.zeros((n, c, out, out))
    for i in range(out):
        for j in range(out):
            h0, w0 = i * s - p, j * s - p
            h1, w1 = min(h0 + k, size + p), min(w0 + k, size + p)
            area = (h1 - h0) * (w1 - w0)
            win = x[:, :, max(h0, 0):min(h1, size), max(w0, 0):min(w1, size)]
            y[:, :, i, j] = win.max(axis=(2, 3)) if mode == "max" else win.sum(axis=(2, 3)) / area
    return y

rng = np.random.RandomState(0)
x = T.tensor4()
worst = {}
for mode in ("max", "avg"):
    for size, k, s, p in [(24, 2, 2, 0), (24, 3, 2, 0), (7, 2, 2, 0), (8, 3, 2, 1), (9, 3, 2, 1), (10, 3, 3, 1)]:
        out = networks.pool_out(size, k, s, p)
        f = theano.function([x], theano_network.pool(x, networks.pool(mode, k, s, p), size, out))
        xv = rng.randn(2, 3, size, size).astype("float32")
        got = f(xv)
        assert got.shape == (2, 3, out, out), (mode, size, k, s, p, got.shape)
        worst[f"{mode}{size}k{k}s{s}p{p}"] = float(abs(got - caffe_pool(xv.astype(float), mode, k, s, p)).max())
f = theano.function([x], theano_network.lrn(x, networks.lrn(5, 0.001, 0.75, 2.0), 7))
xv = rng.randn(2, 7, 4, 4).astype("float32")
sq = xv.astype(float) ** 2
want = np.stack([xv[:, c] / (2.0 + 0.001 / 5 * sq[:, max(0, c - 2):c + 3].sum(1)) ** 0.75 for c in range(7)], 1)
worst["lrn"] = float(abs(f(xv) - want).max())
shapes = {}
for net, shape in networks.INPUT_SHAPES.items():
    if networks.kinds(networks.NETWORKS[net]) & set(networks.KINDS_BEYOND_STUDY):  # refused: test_resnet.py
        continue
    outs = theano_network.Network(networks.resolve(net, 10), shape).outputs(x, train=True)
    got = theano.function([x], [o.shape for o in outs])(np.zeros((2, *shape), "float32"))
    shapes[net] = [[int(v) for v in s[1:]] for s in got]
print(json.dumps({"worst": worst, "shapes": shapes}))
"""


@pytest.mark.long
def test_layers_compute_what_caffe_computes(env_python):
    """Ceil-rounded pooling (max, average, padded) and cross-channel LRN against numpy; every layer's shape."""
    out = in_theano_env(env_python, LAYERS)
    for case, err in out["worst"].items():
        assert err < 1e-5, case
    assert set(out["shapes"]) == {net for net in networks.NETWORKS
                                  if not networks.kinds(networks.NETWORKS[net]) & set(networks.KINDS_BEYOND_STUDY)}
    for net, got in out["shapes"].items():
        want = networks.shapes(networks.resolve(net, 10), networks.INPUT_SHAPES[net])
        assert [tuple(s) for s in got] == [tuple(s) for s in want], net


FLAGS = """
import json
from dlbench.frameworks import theano as adapter  # its configuration, as a trainer imports it
import sys, theano
print(json.dumps({"floatX": theano.config.floatX, "device": theano.config.device,
                  "ldflags": theano.config.blas__ldflags, "compiledir": theano.config.compiledir,
                  "prefix": sys.prefix}))
"""


def test_theano_is_configured_by_dlbench_not_by_the_user(env_python, tmp_path):
    (tmp_path / ".theanorc").write_text("[global]\nfloatX = float64\ndevice = cuda\n")
    out = in_theano_env(env_python, FLAGS, {"HOME": str(tmp_path), "THEANO_FLAGS": "floatX=float64,device=cuda"})
    assert out["floatX"] == "float32" and out["device"] == "cpu"
    assert "-lopenblas" in out["ldflags"]
    assert out["compiledir"].startswith(out["prefix"] + os.sep)  # the environment's own cache


TOOLCHAIN = """
import json, sys
from dlbench.frameworks import theano_config
import theano
errors = []
if sys.argv[1:] == ["no-blas"]:
    theano.config.blas__ldflags = "-lnosuchblas"
try:
    theano_config.check_toolchain()
except RuntimeError as exc:
    errors.append(str(exc))
print(json.dumps(errors))
"""


def test_a_missing_compiler_or_blas_stops_with_one_clear_line(env_python):
    def check(arg: str, path: str) -> list[str]:
        proc = subprocess.run([env_python("theano"), "-c", TOOLCHAIN, arg], capture_output=True, text=True, cwd=REPO,
                              env={"PYTHONPATH": str(REPO), "PATH": path, "HOME": os.environ["HOME"]}, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    assert check("-", os.environ.get("PATH", "/usr/bin:/bin")) == []
    (no_cxx,) = check("-", "/nonexistent")
    assert "g++" in no_cxx
    (no_blas,) = check("no-blas", os.environ.get("PATH", "/usr/bin:/bin"))
    assert "libopenblas-dev" in no_blas


def test_gpu_point_is_unavailable(train):
    # On a machine without a GPU the runner says so before Theano starts; the adapter's own refusal
    # (no libgpuarray) is tested in test_adapters.py::test_the_adapter_itself_refuses_a_gpu_it_cannot_use.
    r = train("theano", "caffe", iterations=5, device="gpu")
    assert r["status"] == "unavailable" and "GPU" in r["reason"]
    assert r["iterations_done"] == 0


@pytest.mark.long
def test_a_huge_learning_rate_diverges_and_stops_early(train):
    r = train("theano", "caffe", iterations=400, learning_rate=1000.0, threads=1)
    assert r["status"] == "diverged", r.get("log_tail")
    assert r["diverged_at_iteration"] is not None and r["diverged_at_iteration"] < 400


def compiled_modules(cache: Path) -> Counter:
    """How many folders of Theano's compile cache hold each module, by its source (mod.cpp's digest): Theano
    compiles a module into a folder of its own once, and loads it from there in every later process."""
    return Counter(hashlib.sha256(f.read_bytes()).hexdigest() for f in cache.rglob("mod.cpp"))


@pytest.mark.long
def test_two_theano_points_at_once_share_the_compile_cache(train):
    """Both compile into the environment's one cache at the same time; Theano's lock keeps them apart."""
    from dlbench.environments import key

    cache = key.env_dir("theano") / "theano-cache"
    before = compiled_modules(cache)
    records, errors = {}, []

    def go(lr):
        try:
            records[lr] = train("theano", "caffe", epochs=2, batch_size=64, threads=1, learning_rate=lr)
        except Exception as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(lr,)) for lr in (0.01, 0.02)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(records) == 2
    for r in records.values():
        assert r["status"] == "ok", r.get("log_tail")
        assert r["accuracy"] > 0.7
    assert len({str(r["_out"]) for r in records.values()}) == 2
    # One cache: both trainers compiled into the same folder, the environment's, under Theano's lock (the lock
    # file it takes in that folder while it compiles)
    compiledirs = {json.loads(r["build_json"])["compiledir"] for r in records.values()}
    assert len(compiledirs) == 1, compiledirs
    (compiledir,) = compiledirs
    assert compiledir.startswith(str(cache) + os.sep), compiledir
    assert (Path(compiledir) / ".lock").is_file()
    # Shared, not raced: no module compiled twice (the second trainer found what the first compiled, or waited for
    # it), nothing lost from before, and what they compiled is all a point of this network needs: a third point
    # after them compiles nothing.
    # (Theano can keep one source in several folders of a cache that earlier points filled, under other keys: only
    # what these two compiled is counted.)
    after = compiled_modules(cache)
    added = after - before
    assert after and all(n == 1 for n in added.values()), [n for n in added.values() if n > 1]
    assert not before - after
    third = train("theano", "caffe", iterations=5, threads=1, learning_rate=0.03)
    assert third["status"] == "ok", third.get("log_tail")
    assert json.loads(third["build_json"])["compiledir"] == compiledir
    assert compiled_modules(cache) == after


@pytest.mark.long
def test_a_point_that_differs_only_in_its_learning_rate_compiles_nothing_new(train):
    """Each trainer is a new process: the compile cache must hit across processes (no module per point)."""
    from dlbench.environments import key

    cache = key.env_dir("theano") / "theano-cache"

    def modules() -> int:
        return sum(1 for _ in cache.rglob("mod.cpp"))

    first = train("theano", "caffe", iterations=5, threads=1, learning_rate=0.0123)
    # the cache counted is the one the trainer compiled into, and it holds this network's modules
    assert json.loads(first["build_json"])["compiledir"].startswith(str(cache) + os.sep), first["build_json"]
    before = modules()
    assert before > 0, f"no compiled module under {cache}"
    for lr in (0.0231, 0.0312):
        r = train("theano", "caffe", iterations=5, threads=1, learning_rate=lr)
        assert r["status"] == first["status"] == "ok", r.get("log_tail")
    assert modules() == before


@pytest.mark.long
def test_theano_preset_lenet5_tanh_learns_digits(train):
    # the tutorial's network and SGD (lr 0.1, no momentum); a smaller batch than its 500 for enough steps
    r = train("theano", "theano", epochs=5, batch_size=50, threads=2)
    assert r["status"] == "ok", r.get("log_tail")
    assert r["network"] == "lenet5_tanh" and r["optimizer"] == "sgd"
    assert r["accuracy"] > 0.85


@pytest.mark.long
def test_tensorflow_preset_mnist_deep_with_adam_and_dropout_learns_digits(train):
    r = train("theano", "tensorflow", epochs=3, threads=2)
    assert r["status"] == "ok", r.get("log_tail")
    assert r["network"] == "mnist_deep" and r["optimizer"] == "adam"
    assert r["accuracy"] > 0.8


@pytest.mark.long
def test_resnet20_trains_on_digits(train):
    """ResNet-20 as the Theano adapter builds it (batch normalisation written out, residual blocks with their 1x1
    projections, global average pooling), a short real run of the ResNet preset (SGD, momentum 0.9, weight decay
    1e-4) at learning rate 0.02 on the digits: it learns (the loss falls well below ln 10; the test accuracy, read
    with the running statistics, is far above chance: over 0.5, where PyTorch reached 0.86, Theano 0.79 and Caffe
    0.73 after these 100 steps, the running statistics still trailing the weights) and has the spec's parameters."""
    r = train("theano", "resnet", iterations=100, batch_size=32, threads=2, learning_rate=0.02)
    assert r["status"] == "ok", r.get("log_tail")
    assert r["iterations"] == 100
    assert r["params"] == networks.param_count(networks.resolve("resnet20", 10), (1, 28, 28)) == 272_474 - 2 * 16 * 9
    assert r["final_loss"] < 0.5 * np.log(10)
    assert r["accuracy"] > 0.5
