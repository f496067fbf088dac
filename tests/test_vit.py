"""The small vision transformer (vit_mini) as a spec: its parameters and FLOPs counted by hand, its shapes, the numpy
reference of the position embedding, layer normalisation, attention and GELU worked by hand, its initialisation and
multipliers, its preset, the modern study's sub-studies, and Caffe's and Theano's refusal. The long tests build it in
PyTorch, TensorFlow and JAX: the same weights and batch give numpy's logits, one AdamW step gives the same weights in
all three, and a few real iterations of the preset train in each, eager and compiled, fp32 and bf16."""

from __future__ import annotations

import json
import math
import os
import subprocess

import numpy as np
import pytest

from dlbench.frameworks import base
from dlbench.paths import ROOT as REPO
from dlbench.plan import estimate
from dlbench.spec import initial_weights, networks
from dlbench.study import config, sweep
from dlbench.study.sweep import one_point
from dlbench.testing.forward import numpy_forward, softmax_xent

FMNIST = (1, 28, 28)
CIFAR = (3, 32, 32)
D, MLP, DEPTH, HEADS = 64, 256, 4, 4


def test_vit_mini_has_the_parameters_counted_by_hand():
    """Patch embedding (a 4x4 conv of stride 4), position embedding (one D-vector per token), four blocks of
    (layer norm, four D x D projections with biases, layer norm, MLP D -> 256 -> D), final layer norm, classifier."""
    ln = 2 * D
    block = ln + 4 * (D * D + D) + ln + (D * MLP + MLP) + (MLP * D + D)
    for shape, tokens in ((FMNIST, 49), (CIFAR, 64)):
        patch = shape[0] * 16 * D + D
        want = patch + tokens * D + DEPTH * block + ln + (D * 10 + 10)
        assert networks.param_count(networks.resolve("vit_mini", 10), shape) == want
    assert networks.param_count(networks.resolve("vit_mini", 10), FMNIST) == 204_938  # well under 1 M


def test_vit_mini_shapes():
    layers = networks.resolve("vit_mini", 10)
    shapes = networks.shapes(layers, FMNIST)
    assert shapes[:2] == [(D, 7, 7), (49, D)]  # 28 / 4 = 7: 49 patches, no padding needed
    assert shapes[2:2 + 2 * DEPTH] == [(49, D)] * (2 * DEPTH)  # every block keeps the tokens
    assert shapes[-3:] == [(49, D), (D,), (10,)]  # final layer norm, mean over tokens, logits
    assert networks.shapes(layers, CIFAR)[1] == (64, D)
    mlp = layers[3]["body"]
    assert [layer["type"] for layer in mlp] == ["layernorm", "dense", "gelu", "dense"]
    assert networks.shapes(mlp, (49, D))[1] == (49, MLP)  # a dense on tokens acts on every token
    with pytest.raises(networks.SpecError, match="do not split into 3 heads"):
        networks.shapes([networks.tokens(), networks.attention(3)], (8, 2, 2))
    with pytest.raises(networks.SpecError, match="attention needs a token sequence"):
        networks.shapes([networks.attention(2)], (8, 2, 2))
    with pytest.raises(networks.SpecError, match="conv after tokens"):
        networks.shapes([networks.tokens(), networks.conv(4, 1)], (8, 2, 2))


def test_vit_mini_flops_counted_by_hand():
    """Multiply-adds x 2 of the matrix products: the patch embedding, per block four projections, q k^T and the
    weighted sum (T^2 D each), the MLP's two dense layers on every token; the classifier."""
    for shape, t in ((FMNIST, 49), (CIFAR, 64)):
        patch = 2 * D * t * (shape[0] * 16)
        attention = 4 * 2 * t * D * D + 2 * 2 * t * t * D
        mlp = 2 * t * D * MLP + 2 * t * MLP * D
        forward = patch + DEPTH * (attention + mlp) + 2 * D * 10
        flops = networks.flops_per_image(networks.resolve("vit_mini", 10), shape)
        assert flops == {"forward": forward, "train": 3 * forward}
    assert networks.flops_per_image(networks.resolve("vit_mini", 10), FMNIST)["forward"] == 21_827_840
    # the estimate (and the peak fraction, from the record's flops_per_image_train) takes the point's own input
    point = one_point("pytorch", "vit", "fashion_mnist", iterations=10)
    assert estimate.flops(point) == networks.flops_per_image(networks.resolve("vit_mini", 10), FMNIST)


def test_layer_norm_attention_and_gelu_in_numpy_by_hand():
    """The reference's new layers on numbers worked by hand."""
    # layer norm over the last axis: [1, 3] -> mean 2, biased variance 1
    ln = numpy_forward([networks.layernorm(eps=0.0)], [(np.array([2.0, 2.0]), np.array([0.5, 0.5]))],
                       np.array([[[1.0, 3.0]]]))
    assert ln.ravel().tolist() == pytest.approx([-1.5, 2.5])
    assert networks.layernorm() == {"type": "layernorm", "eps": 1e-6}
    # tokens: a 2x2 map of 1 channel becomes 4 tokens, row by row, plus the position embedding
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 1, 2, 2)
    got = numpy_forward([networks.tokens()], [(np.full((4, 1), 10.0),)], x)
    assert got.reshape(-1).tolist() == [11.0, 12.0, 13.0, 14.0]
    # one head, identity projections: token 0 attends to keys [1, 0] and [0, 1] with scores [1, 0] x 1/sqrt(2)
    eye, zero = np.eye(2), np.zeros(2)
    a = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    got = numpy_forward([networks.attention(1)], [(eye, zero, eye, zero, eye, zero, eye, zero)], a)
    p = 1.0 / (1.0 + math.exp(-1.0 / math.sqrt(2.0)))  # softmax of [s, 0]: its first weight
    assert got[0].tolist() == [pytest.approx([p, 1 - p]), pytest.approx([1 - p, p])]
    assert networks.attention_scale(64, 4) == 0.25  # 1 / sqrt(16)
    # two heads of one feature each: scale 1, each head attends on its own feature
    got = numpy_forward([networks.attention(2)], [(eye, zero, eye, zero, eye, zero, eye, zero)], a)
    w = 1.0 / (1.0 + math.exp(-1.0))  # head 0: token 0's query 1 meets keys [1, 0]
    assert got[0, 0].tolist() == pytest.approx([w * 1 + (1 - w) * 0, 0.5 * 0 + 0.5 * 1])
    # GELU, the exact form: x * Phi(x)
    got = numpy_forward([networks.act("gelu")], [], np.array([[-1.0, 0.0, 1.0, 2.0]]))
    phi = [0.15865525393145707, 0.5, 0.8413447460685429, 0.9772498680518208]
    assert got.ravel().tolist() == pytest.approx([v * f for v, f in zip((-1.0, 0.0, 1.0, 2.0), phi)], rel=1e-12)


def test_vit_initialisation_and_multipliers():
    layers = networks.resolve("vit_mini", 10)
    weights = initial_weights.draw(layers, FMNIST, "vit", 7)
    kinds = [layer["type"] for _, layer, _ in networks.trainable(layers, FMNIST)]
    assert kinds[:3] == ["conv", "tokens", "layernorm"] and kinds[-2:] == ["layernorm", "dense"]
    patch_w, patch_b = weights[0]
    assert np.abs(patch_w).max() <= 1 / 4 and np.abs(patch_b).max() <= 1 / 4 and patch_b.std() > 0.05  # +-1/sqrt(16)
    attention = weights[kinds.index("attention")]
    assert len(attention) == 8 and all(abs(float(w.std()) - 0.02) < 0.002 for w in attention[::2])
    assert all(not b.any() for b in attention[1::2])
    assert abs(float(weights[1][0].std()) - 0.02) < 0.002  # the position embedding
    assert weights[2][0].tolist() == [1.0] * D and weights[2][1].tolist() == [0.0] * D  # layer norm
    assert all(np.array_equal(a, b) for t, u in zip(weights, initial_weights.draw(layers, FMNIST, "vit", 7))
               for a, b in zip(t, u))
    with pytest.raises(initial_weights.InitError, match="does not draw attention, tokens"):
        initial_weights.draw(layers, FMNIST, "xavier", 7)
    # no weight decay on biases, layer norms and the position embedding; every array learns at the base rate
    groups = base.parameter_groups(layers)
    sizes = [math.prod(shape) for _, layer, prev in networks.trainable(layers, FMNIST)
             for _, shape in networks.arrays(layer, prev)[:networks.trained_arrays(layer)]]
    assert len(groups) == len(sizes) == 2 + 1 + DEPTH * (2 + 8 + 2 + 4) + 2 + 2
    decayed = sum(size for size, (_, decay) in zip(sizes, groups) if decay)
    assert decayed == 16 * D + DEPTH * (4 * D * D + 2 * D * MLP) + D * 10  # the weight matrices only
    assert {lr for lr, _ in groups} == {1.0}


def test_the_vit_preset_is_deits_recipe():
    for dataset, shape in (("fashion_mnist", FMNIST), ("cifar10", CIFAR)):
        point = one_point("jax", "vit", dataset, threads=1)
        assert point["network"] == "vit_mini" and point["init"] == {"name": "vit"}
        assert (point["optimizer"], point["weight_decay"], point["batch_size"], point["epochs"]) == ("adamw", 0.05,
                                                                                                     128, 300)
        assert point["learning_rate"] == pytest.approx(5e-4 * 128 / 512)  # DeiT's linear scaling rule
        assert point["lr_policy"] == {"name": "cosine", "warmup_epochs": 5, "warmup_lr": 1e-6, "min_lr": 1e-5}
        assert networks.shapes(point["layers"], shape)[1][0] == (shape[1] // 4) ** 2  # patches divide the image
        plan = base.Plan.of(point, 60000 if dataset == "fashion_mnist" else 50000)
        assert plan.lr_policy["total_iterations"] == plan.total_iterations
        assert plan.lr_policy["warmup_iterations"] == int((60000 if dataset == "fashion_mnist" else 50000) / 128 * 5)


@pytest.mark.parametrize("framework", ["caffe", "theano"])
def test_caffe_and_theano_refuse_the_vit_in_one_line(framework):
    point = one_point(framework, "vit", "fashion_mnist", iterations=10)
    with pytest.raises(base.Unavailable) as refused:
        base.refuse_layers(point)
    message = str(refused.value)
    assert "\n" not in message and refused.value.status == "unavailable"
    assert "attention, gelu, layernorm, tokens" in message and "vit_mini" in message


def test_caffe_refuses_adamw_and_cosine_in_one_line():
    """Settings of the vit preset cross-applied to Caffe's own LeNet: refused before training, never run as SGD."""
    from dlbench.frameworks import caffe

    point = one_point("caffe", "caffe", iterations=10)
    assert caffe.check_procedure(point) is None
    for change in ({"optimizer": "adamw"}, {"lr_policy": {"name": "cosine", "warmup_epochs": 5}}):
        with pytest.raises(base.Unavailable, match="no substitute is run") as refused:
            caffe.check_procedure({**point, **change})
        assert "\n" not in str(refused.value)


def test_the_modern_study_runs_both_networks_on_every_axis():
    """config/modern.yaml: resnet and vit each on PyTorch, TensorFlow and JAX, eager and compiled, fp32 and bf16,
    1 and 2 threads, three seeds, on Fashion-MNIST: 3 x 2 x 2 x 2 x 3 = 72 points each."""
    cfg = config.load(REPO / "config" / "modern.yaml")
    plan = sweep.plan(cfg)
    for study, network in (("resnet", "resnet20"), ("vit", "vit_mini")):
        points = [p for p in plan.points if study in plan.membership[p["id"]]]
        assert len(points) == 72 and {p["network"] for p in points} == {network}
        assert {p["dataset"] for p in points} == {"fashion_mnist"}
        axes = {(p["framework"], p.get("compile") or "eager" if p["framework"] == "pytorch" else p.get("compile"),
                 p.get("precision") or "fp32", p["threads"], p["seed"]) for p in points}
        assert len(axes) == 72
        assert {a[0] for a in axes} == {"pytorch", "tensorflow", "jax"}
        assert {a[3] for a in axes} == {1, 2} and {a[4] for a in axes} == {1, 2, 3}
        assert {a[2] for a in axes} == {"fp32", "bf16"}
        assert all(p["iterations"] == 300 for p in points)


SHORT = {"datasets": ["digits"], "frameworks": ["pytorch", "tensorflow", "jax"], "preset": ["vit"],
         "sweep": {"compile": ["eager", "compiled"], "precision": ["fp32", "bf16"], "iterations": [4],
                   "batch_size": [16], "threads": [1]},
         "studies": {"vit": {}, "resnet": {"preset": ["resnet"], "sweep": {"compile": ["compiled"],
                                                                           "precision": ["fp32"]}}}}


def test_a_short_modern_study_validates_and_expands():
    """The short form the long test below trains: the ViT on the embedded digits in every mode, ResNet-20 compiled."""
    cfg = config.validate(json.loads(json.dumps(SHORT)))
    plan = sweep.plan(cfg)
    vit = [p for p in plan.points if "vit" in plan.membership[p["id"]]]
    resnet = [p for p in plan.points if "resnet" in plan.membership[p["id"]]]
    assert len(vit) == 3 * 2 * 2 and len(resnet) == 3
    assert all(p["iterations"] == 4 and p["batch_size"] == 16 and p["network"] == "vit_mini" for p in vit)
    assert {p["framework"] for p in plan.points} == {"pytorch", "tensorflow", "jax"}
    assert networks.shapes(vit[0]["layers"], (1, 8, 8))[1] == (4, D)  # 8x8 digits: 2x2 patches of 4x4


# ---------------------------------------------------------------------------------------------- long: frameworks

FRAMEWORKS = ["pytorch", "tensorflow", "jax"]
LOGIT_TOL = 1e-4  # times (1 + max |numpy's logit|), as tests/test_forward.py
LOSS_TOL = 1e-4


def _env() -> dict:
    return {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"],
            "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1"}


def non_trivial(layers, shape, rng) -> list[tuple[np.ndarray, ...]]:
    """The vit scheme's weights with every bias, layer norm and the position embedding drawn away from 0 and 1, and
    the attention's projections 5x larger, so that each attention's softmax is far from uniform."""
    out = []
    for arrays, (_, layer, _) in zip(initial_weights.draw(layers, shape, "vit", 3), networks.trainable(layers, shape)):
        arrays = [a + rng.uniform(-0.1, 0.1, a.shape) for a in arrays]
        if layer["type"] == "attention":
            arrays = [a * 5 if a.ndim == 2 else a for a in arrays]
        out.append(tuple(np.asarray(a, np.float32) for a in arrays))
    return out


@pytest.fixture(scope="module")
def passes(env_python, tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("vit_forward")
    rng = np.random.default_rng(20210603)
    layers = networks.resolve("vit_mini", 10)
    x = rng.standard_normal((8, *FMNIST)).astype(np.float32)
    y = rng.integers(0, 10, 8).astype(np.int64)
    weights = non_trivial(layers, FMNIST, rng)
    specs = networks.trainable(layers, FMNIST)
    np.savez(work / "w.npz", **{f"{name}{j}": a for j, (arrays, (_, layer, prev)) in enumerate(zip(weights, specs))
                                for (name, _), a in zip(networks.arrays(layer, prev), arrays)})
    np.savez(work / "x.npz", x=x, y=y)
    logits = numpy_forward(layers, weights, x)
    out: dict = {"_numpy": {"logits": logits, "loss": softmax_xent(logits, y)}}
    procs = {fw: subprocess.Popen([env_python(fw), "-m", "dlbench.testing.forward", fw, "vit_mini", str(work / "w.npz"),
                                   str(work / "x.npz"), str(work / f"{fw}.json")], cwd=REPO, env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for fw in FRAMEWORKS}
    for fw, proc in procs.items():
        log, _ = proc.communicate(timeout=900)
        path = work / f"{fw}.json"
        out[fw] = json.loads(path.read_text()) if path.exists() else {"error": log[-3000:]}
    return out


@pytest.mark.long
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_vit_forward_agrees_with_numpy(passes, framework):
    ref, got = passes["_numpy"], passes[framework]
    assert "error" not in got, got.get("error")
    want = np.asarray(ref["logits"])
    assert 0.1 < np.abs(want).max() < 100 and want.std(axis=0).max() > 1e-2  # O(1), and the images differ
    diff = float(np.abs(np.asarray(got["logits"]) - want).max())
    bound = LOGIT_TOL * (1 + float(np.abs(want).max()))
    assert diff <= bound, f"{framework}: logits differ by up to {diff:.3g} (allowed {bound:.3g})"
    assert abs(got["loss"] - ref["loss"]) <= LOSS_TOL * ref["loss"]


@pytest.mark.long
def test_vit_takes_the_same_adamw_step_in_every_framework(env_python, digits_dir, tmp_path):
    """The ViT preset's AdamW (decoupled weight decay 0.05 on the weight matrices only), two steps of 16 digits at a
    fixed rate of 1e-3, against PyTorch's same steps in float64: every framework's float32 weights within 2x PyTorch's
    own float32 distance from float64 (plus 1e-6), and that distance a small part of the update. Adam's first steps
    move every weight by about the rate, whatever its gradient, so a weight left out of the update, a decay applied
    to a bias or coupled into the gradient would show at 1e-3 scale."""
    from tests.test_forward import trained

    def step(framework: str, precision: str) -> dict:
        point = one_point("pytorch", "vit", "digits", iterations=2, batch_size=16, threads=1, precision=precision)
        point.update(test_batch_size=64, learning_rate=1e-3, lr_policy={"name": "fixed"})
        sub = tmp_path / precision
        sub.mkdir(exist_ok=True)
        return trained(env_python, framework, point, digits_dir, sub)[0]

    exact = step("pytorch", "fp64")
    runs = {fw: step(fw, "fp32") for fw in FRAMEWORKS}
    keys = [k for k in exact if not k.startswith("init_")]
    assert len(keys) == 2 + 1 + DEPTH * 16 + 2 + 2
    # The key's bias adds q . bk to every score of a query alike, which the softmax ignores: its gradient is 0, so
    # in float64 it stays (Adam's eps holds rounding's 1e-16 gradients to nothing), and in float32 its rounding
    # noise is all Adam sees: left out of the comparison.
    keys_bias = [k for k in keys if k.startswith("bk")]
    assert len(keys_bias) == DEPTH and all(np.abs(exact[k] - exact[f"init_{k}"]).max() < 1e-9 for k in keys_bias)
    keys = [k for k in keys if k not in keys_bias]
    for key in keys:
        assert np.abs(exact[key] - exact[f"init_{key}"]).max() > 5e-4, f"{key} did not move"
    for fw, got in runs.items():
        for key in keys:
            assert np.array_equal(got[f"init_{key}"], runs["pytorch"][f"init_{key}"]), f"{fw} {key} starts elsewhere"
            diff = float(np.abs(got[key] - exact[key]).max())
            noise = float(np.abs(runs["pytorch"][key] - exact[key]).max())
            assert noise <= 0.1 * 2e-3 + 1e-6, f"PyTorch's float32 {key} is {noise:.3g} from float64"
            assert diff <= 2 * noise + 1e-5, f"{fw} {key}: {diff:.3g} from float64 (PyTorch float32: {noise:.3g})"


@pytest.mark.long
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_short_modern_study_trains_the_vit_for_real(env_python, digits_dir, tmp_path, framework):
    """The short study's ViT points of one framework, each trained for real by its adapter (the preset's AdamW,
    warm-up and cosine over 4 iterations, compiled and in bfloat16 where the point says): the loss is finite, the
    weights move, the test accuracy is reported."""
    from tests.test_forward import trained

    cfg = config.validate(json.loads(json.dumps(SHORT)))
    points = [p for p in sweep.expand(cfg) if p["framework"] == framework and p["network"] == "vit_mini"]
    assert len(points) == 4
    for k, point in enumerate(points):
        point = dict(point, test_batch_size=200)
        sub = tmp_path / str(k)
        sub.mkdir()
        weights, events = trained(env_python, framework, point, digits_dir, sub)
        tests = [e for e in events if e["e"] == "test"]
        assert tests and 0.0 <= tests[-1]["accuracy"] <= 1.0 and tests[-1]["iteration"] == 4
        assert all(np.isfinite(e["loss"]) for e in events if e["e"] == "train"), point.get("precision")
        assert np.abs(weights["Wq3"] - weights["init_Wq3"]).max() > 1e-5, f"{framework} {point.get('compile')}"
