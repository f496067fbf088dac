"""ResNet-20 (He et al. 2016, section 4.2) as a spec: its parameters and FLOPs counted by hand, its shapes, the numpy
reference of batch normalisation, residual blocks and global average pooling, its preset. The long tests build it in
PyTorch, TensorFlow, JAX, Theano (batch normalisation written out) and Caffe (BatchNorm + Scale): the same weights and
batch give numpy's logits in training mode (batch statistics) and in inference mode (running statistics), a
training-mode pass updates the running statistics by the spec's one rule (Caffe's too, through its
moving_average_fraction and scale factor), and one SGD step moves every weight, and every running statistic, the same
way in PyTorch, TensorFlow, JAX and Theano."""

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
from dlbench.study.sweep import one_point
from dlbench.testing.forward import numpy_forward, softmax_xent

CIFAR = (3, 32, 32)
STAGES = ((16, 32), (32, 16), (64, 8))  # (filters, map size) of the three stages on 32x32


def bn(c: int) -> int:
    return 2 * c  # gamma and beta


def test_resnet20_has_the_parameters_counted_by_hand():
    """0.27 M: the stem, 18 3x3 convs without bias each followed by batch normalisation, two 1x1 projections with
    batch normalisation (option B) where the stage changes, one dense layer."""
    stem = 3 * 16 * 9 + bn(16)
    stage1 = 6 * (16 * 16 * 9 + bn(16))
    stage2 = (16 * 32 * 9 + bn(32)) + 5 * (32 * 32 * 9 + bn(32)) + (16 * 32 * 1 + bn(32))
    stage3 = (32 * 64 * 9 + bn(64)) + 5 * (64 * 64 * 9 + bn(64)) + (32 * 64 * 1 + bn(64))
    head = 64 * 10 + 10
    want = stem + stage1 + stage2 + stage3 + head
    assert want == 272_474
    layers = networks.resolve("resnet20", 10)
    assert networks.param_count(layers, CIFAR) == want
    # the same on Fashion-MNIST's 28x28: global average pooling makes the count independent of the input size
    assert networks.param_count(networks.resolve("resnet20", 10), (1, 28, 28)) == want - 2 * 16 * 9
    convs = [layer for layer in networks.leaves(layers) if layer["type"] == "conv"]
    assert len(convs) == 21 and not any(networks.has_bias(c) for c in convs)  # 19 3x3 + 2 projections
    assert sum(1 for layer in networks.leaves(layers) if layer["type"] == "batchnorm") == 21


def test_resnet20_shapes():
    layers = networks.resolve("resnet20", 10)
    shapes = networks.shapes(layers, CIFAR)
    assert shapes[-1] == (10,) and shapes[-2] == (64,)  # global average pooling, then the logits
    blocks = [s for layer, s in zip(layers, shapes) if layer["type"] == "residual"]
    assert blocks == [(16, 32, 32)] * 3 + [(32, 16, 16)] * 3 + [(64, 8, 8)] * 3
    shortcuts = [layer["shortcut"] for layer in layers if layer["type"] == "residual"]
    assert [len(s) for s in shortcuts] == [0, 0, 0, 2, 0, 0, 2, 0, 0]  # identity, except where the shape changes
    assert shortcuts[3][0] == {"type": "conv", "filters": 32, "kernel": 1, "stride": 2, "pad": 0, "bias": False}
    assert networks.shapes(layers, (1, 28, 28))[-2:] == [(64,), (10,)]  # 28 -> 14 -> 7: no padding needed
    rng = np.random.default_rng(0)
    weights = initial_weights.draw(layers, CIFAR, "he", 1)
    assert numpy_forward(layers, weights, rng.normal(size=(2, *CIFAR))).shape == (2, 10)


def test_a_residual_block_whose_shortcut_does_not_fit_is_refused():
    bad = [networks.residual([networks.conv(8, 3, stride=2, pad=1)]), networks.gap(), networks.dense(10)]
    with pytest.raises(networks.SpecError, match="projection"):
        networks.shapes(bad, (4, 8, 8))
    with pytest.raises(networks.SpecError, match="batchnorm after dense"):
        networks.shapes([networks.dense(4), networks.batchnorm()], (1, 4, 4))


def test_resnet20_flops_counted_by_hand():
    """Multiply-adds x 2 of every conv (the projections included) and the dense layer; element-wise work uncounted."""
    def conv(c_out, size, fan_in):
        return 2 * c_out * size * size * fan_in

    (f1, s1), (f2, s2), (f3, s3) = STAGES
    forward = (conv(16, 32, 3 * 9)
               + 6 * conv(f1, s1, f1 * 9)
               + conv(f2, s2, f1 * 9) + 5 * conv(f2, s2, f2 * 9) + conv(f2, s2, f1)
               + conv(f3, s3, f2 * 9) + 5 * conv(f3, s3, f3 * 9) + conv(f3, s3, f2)
               + 2 * 64 * 10)
    assert forward == 81_626_368  # about 41 M multiply-adds, He et al.'s figure for ResNet-20
    flops = networks.flops_per_image(networks.resolve("resnet20", 10), CIFAR)
    assert flops == {"forward": forward, "train": 3 * forward}
    # the estimate takes the point's own input: Fashion-MNIST's 28x28 maps (28, 14, 7)
    point = one_point("pytorch", "resnet", "fashion_mnist", iterations=10)
    small = (conv(16, 28, 9) + 6 * conv(16, 28, 144) + conv(32, 14, 144) + 5 * conv(32, 14, 288)
             + conv(32, 14, 16) + conv(64, 7, 288) + 5 * conv(64, 7, 576) + conv(64, 7, 32) + 2 * 64 * 10)
    assert estimate.flops(point) == {"forward": small, "train": 3 * small}


def test_batch_normalisation_residual_and_gap_in_numpy():
    """The reference by hand: training mode by the batch's mean and biased variance, inference by the running ones;
    a block adds its body's and its shortcut's outputs; gap averages each map."""
    x = np.array([1.0, 3.0, 5.0, 7.0]).reshape(2, 1, 1, 2)  # one channel, m = 4: mean 4, biased variance 5
    gamma, beta, mean, var = np.array([2.0]), np.array([0.5]), np.array([1.0]), np.array([4.0])
    layer = [networks.batchnorm(eps=0.0)]
    got = numpy_forward(layer, [(gamma, beta, mean, var)], x, train=True)
    assert got.ravel().tolist() == pytest.approx([2 * (v - 4) / math.sqrt(5) + 0.5 for v in (1, 3, 5, 7)])
    got = numpy_forward(layer, [(gamma, beta, mean, var)], x)
    assert got.ravel().tolist() == pytest.approx([2 * (v - 1) / 2 + 0.5 for v in (1, 3, 5, 7)])
    block = [networks.residual([networks.conv(1, 1, bias=False)], [networks.conv(1, 1, bias=False)]), networks.gap()]
    got = numpy_forward(block, [(np.full((1, 1, 1, 1), 2.0),), (np.full((1, 1, 1, 1), 10.0),)], x)
    assert got.tolist() == [[12 * 2.0], [12 * 6.0]]  # (2x + 10x) averaged over each image's two pixels
    identity = numpy_forward([networks.residual([networks.conv(1, 1, bias=False)])], [(np.ones((1, 1, 1, 1)),)], x)
    assert identity.ravel().tolist() == [2.0, 6.0, 10.0, 14.0]


def test_batch_normalisation_has_one_definition():
    layer = networks.batchnorm()
    assert layer == {"type": "batchnorm", "decay": 0.9, "eps": 1e-5}
    shapes = networks.arrays(layer, (16, 8, 8))
    assert shapes == [("gamma", (16,)), ("beta", (16,)), ("mean", (16,)), ("var", (16,))]
    layers = [networks.conv(4, 3, bias=False), layer, networks.gap(), networks.dense(2)]
    start = initial_weights.draw(layers, (1, 5, 5), "he", 0)
    assert [len(t) for t in start] == [1, 4, 2]
    assert start[1][0].tolist() == [1.0] * 4 and start[1][3].tolist() == [1.0] * 4
    assert start[1][1].tolist() == [0.0] * 4 and start[1][2].tolist() == [0.0] * 4


def test_he_initialisation_and_the_parameter_groups():
    layers = networks.resolve("resnet20", 10)
    weights = initial_weights.draw(layers, CIFAR, "he", 7)
    big = [t[0] for t, (_, layer, _) in zip(weights, networks.trainable(layers, CIFAR)) if layer["type"] == "conv"]
    assert abs(float(big[-1].std()) - math.sqrt(2 / (64 * 9))) < 0.01
    # one (lr, decay) per trained array: W of each conv, gamma and beta of each batchnorm, W and b of the dense
    assert len(base.parameter_groups(layers)) == 21 + 2 * 21 + 2


def test_the_resnet_preset_is_he_et_al_s():
    for dataset in ("fashion_mnist", "cifar10"):
        point = one_point("tensorflow", "resnet", dataset, threads=1)
        assert point["network"] == "resnet20" and point["init"] == {"name": "he"}
        assert (point["optimizer"], point["momentum"], point["weight_decay"]) == ("sgd", 0.9, 1e-4)
        assert (point["learning_rate"], point["batch_size"], point["iterations"]) == (0.1, 128, 64000)
        assert point["lr_policy"] == {"name": "multistep", "factor": 0.1, "at_iterations": [32000, 48000]}


@pytest.mark.parametrize("framework", ["caffe", "theano"])
def test_caffe_and_theano_build_resnet20_and_refuse_the_transformer_in_one_line(framework, tmp_path):
    """Caffe (BatchNorm + Scale, Eltwise, a global Pooling) and Theano (written out) build batch normalisation,
    residual blocks and global average pooling; the transformer's layers they lack, and say so in one line, before
    any data are read."""
    assert base.refuse_layers(one_point(framework, "resnet", "fashion_mnist", iterations=10)) is None
    point = one_point(framework, "caffe", iterations=10)
    point.update(network="vit_mini", layers=networks.resolve("vit_mini", 10))
    with pytest.raises(base.Unavailable) as refused:
        base.refuse_layers(point)
    message = str(refused.value)
    assert "\n" not in message and refused.value.status == "unavailable"
    assert "attention, gelu, layernorm, tokens" in message and "vit_mini" in message
    assert "batchnorm" not in message and "residual" not in message and "gap" not in message
    if framework == "caffe":  # the trainer's own path (there are no data here)
        from dlbench.frameworks import trainer
        from dlbench.frameworks.base import Reporter

        reporter = Reporter(tmp_path / "events.jsonl")
        assert trainer._train(point, str(tmp_path / "no-data"), reporter) == ("unavailable", message)
        reporter.close()


# ---------------------------------------------------------------------------------------------- long: frameworks

FRAMEWORKS = ["pytorch", "tensorflow", "jax", "theano", "caffe"]
# Those whose trained weights dlbench.testing.trained reads in the canonical layout (Caffe's it reads from a snapshot
# of conv and dense layers only): the SGD step's comparison.
STEPPED = ["pytorch", "tensorflow", "jax", "theano"]
BATCH = 8
LOGIT_TOL = 1e-4  # times (1 + max |numpy's logit|), as tests/test_forward.py
LOSS_TOL = 1e-4


def _env() -> dict:
    return {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ["HOME"],
            "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1"}


def non_trivial(layers, shape, x, rng) -> list[tuple[np.ndarray, ...]]:
    """He-initialised weights with every batchnorm's gamma, beta and running statistics moved away from (1, 0, 0,
    1): gamma and beta drawn, the running mean and variance the batch's own at that layer, shifted and scaled
    (so that inference mode stays O(1) through 20 layers and still differs from training mode)."""
    weights = initial_weights.draw(layers, shape, "he", 3)
    stats: list = []
    numpy_forward(layers, weights, x, train=True, statistics=stats)
    it = iter(stats)
    out = []
    for arrays, (_, layer, _) in zip(weights, networks.trainable(layers, shape)):
        if layer["type"] == "batchnorm":
            mean, var, _ = next(it)
            c = len(mean)
            arrays = (rng.uniform(0.5, 1.5, c), rng.uniform(-0.2, 0.2, c),
                      mean + rng.uniform(-0.3, 0.3, c) * np.sqrt(var), var * rng.uniform(0.6, 1.6, c))
        out.append(tuple(np.asarray(a, np.float32) for a in arrays))
    return out


@pytest.fixture(scope="module")
def passes(env_python, tmp_path_factory) -> dict:
    """{(framework, mode): the forward pass's result}, mode train or inference, and numpy's under '_numpy'."""
    work = tmp_path_factory.mktemp("resnet_forward")
    rng = np.random.default_rng(20160610)
    layers = networks.resolve("resnet20", 10)
    x = rng.standard_normal((BATCH, *CIFAR)).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int64)
    weights = non_trivial(layers, CIFAR, x, rng)
    specs = networks.trainable(layers, CIFAR)
    stored = {f"{name}{j}": a for j, (arrays, (_, layer, prev)) in enumerate(zip(weights, specs))
              for (name, _), a in zip(networks.arrays(layer, prev), arrays)}
    np.savez(work / "w.npz", **stored)
    np.savez(work / "x.npz", x=x, y=y)
    out: dict = {"_numpy": {}}
    for mode in ("train", "inference"):
        logits = numpy_forward(layers, weights, x, train=mode == "train")
        out["_numpy"][mode] = {"logits": logits, "loss": softmax_xent(logits, y)}
    procs = {}
    for fw in FRAMEWORKS:
        for mode in ("train", "inference"):
            args = [fw, "resnet20", str(work / "w.npz"), str(work / "x.npz"), str(work / f"{fw}.{mode}.json")]
            procs[fw, mode] = subprocess.Popen([env_python(fw), "-m", "dlbench.testing.forward", *args,
                                                *(["--train"] if mode == "train" else [])], cwd=REPO, env=_env(),
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for (fw, mode), proc in procs.items():
        log, _ = proc.communicate(timeout=900)
        path = work / f"{fw}.{mode}.json"
        out[fw, mode] = json.loads(path.read_text()) if path.exists() else {"error": log[-3000:]}
    return out


@pytest.mark.long
@pytest.mark.parametrize("mode", ["train", "inference"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_resnet20_forward_agrees_with_numpy(passes, framework, mode):
    ref, got = passes["_numpy"][mode], passes[framework, mode]
    assert "error" not in got, got.get("error")
    assert got["train"] == (mode == "train")
    want = np.asarray(ref["logits"])
    assert 0.1 < np.abs(want).max() < 100 and want.std(axis=0).max() > 1e-3  # O(1), and the images differ
    other = passes["_numpy"]["inference" if mode == "train" else "train"]["logits"]
    assert np.abs(other - want).max() > 0.1  # the two modes are told apart
    diff = float(np.abs(np.asarray(got["logits"]) - want).max())
    bound = LOGIT_TOL * (1 + float(np.abs(want).max()))
    assert diff <= bound, f"{framework} {mode}: logits differ by up to {diff:.3g} (allowed {bound:.3g})"
    assert abs(got["loss"] - ref["loss"]) <= LOSS_TOL * ref["loss"]


@pytest.mark.long
def test_resnet20_takes_the_same_sgd_step_in_every_framework(env_python, digits_dir, tmp_path):
    """The ResNet preset (momentum 0.9, weight decay 1e-4 on every parameter, batch normalisation in training mode),
    one step of 16 digits, against PyTorch's same step in float64. Float32 itself is the yardstick: on this step
    PyTorch's float32 weights are up to about 5 % of the update away from its float64 ones (measured: batch
    normalisation through 20 layers amplifies rounding), so each framework's float32 step must be as close to
    float64 as PyTorch's own (within 2x). The running statistics come from the forward pass alone and are held
    tighter: the running variance within 2e-5, where a biased update would be 1.3e-4 off in the last stage
    (m = 16 x 7 x 7: m / (m - 1) - 1 = 1.3e-3, x (1 - decay))."""
    from tests.test_forward import trained

    def step(framework: str, precision: str) -> dict:
        point = one_point("pytorch", "resnet", "digits", iterations=1, batch_size=16, threads=1, precision=precision)
        point.update(test_batch_size=64)
        sub = tmp_path / precision
        sub.mkdir(exist_ok=True)
        return trained(env_python, framework, point, digits_dir, sub)[0]

    exact = step("pytorch", "fp64")
    runs = {fw: step(fw, "fp32") for fw in STEPPED}
    keys = [k for k in exact if not k.startswith("init_")]
    moved = [k for k in keys if np.abs(exact[k] - exact[f"init_{k}"]).max() > 1e-5]
    assert len(moved) > 60, "the step did not move the weights and statistics"
    for fw, got in runs.items():
        for key in keys:
            assert np.array_equal(got[f"init_{key}"], runs["pytorch"][f"init_{key}"]), f"{fw} {key} starts elsewhere"
            diff = float(np.abs(got[key] - exact[key]).max())
            if key.startswith(("mean", "var")):
                assert diff <= 2e-5 * (1 + float(np.abs(exact[key]).max())), f"{fw} {key}: {diff:.3g}"
                continue
            noise = float(np.abs(runs["pytorch"][key] - exact[key]).max())
            update = float(np.abs(exact[key] - exact[f"init_{key}"]).max())
            assert noise <= 0.1 * update + 1e-7, f"PyTorch's float32 {key} is {noise:.3g} from float64"
            assert diff <= 2 * noise + 1e-6, f"{fw} {key}: {diff:.3g} from float64 (PyTorch float32: {noise:.3g})"


@pytest.fixture(scope="module")
def after_training_pass(env_python, tmp_path_factory) -> dict:
    """{framework: its train-then-infer result}, and under '_numpy' the spec's: the training-mode logits, the running
    statistics the spec's rule gives after that pass (decay 0.9 of the old, the batch's mean and unbiased variance),
    and the inference-mode logits with those."""
    work = tmp_path_factory.mktemp("resnet_train_then_infer")
    rng = np.random.default_rng(20151210)
    layers = networks.resolve("resnet20", 10)
    x = rng.standard_normal((BATCH, *CIFAR)).astype(np.float32)
    y = rng.integers(0, 10, BATCH).astype(np.int64)
    weights = non_trivial(layers, CIFAR, x, rng)
    specs = networks.trainable(layers, CIFAR)
    np.savez(work / "w.npz", **{f"{name}{j}": a for j, (arrays, (_, layer, prev)) in enumerate(zip(weights, specs))
                                for (name, _), a in zip(networks.arrays(layer, prev), arrays)})
    np.savez(work / "x.npz", x=x, y=y)
    stats: list = []
    trained = numpy_forward(layers, weights, x, train=True, statistics=stats)
    it, updated, statistics = iter(stats), [], {}
    for j, (arrays, (_, layer, _)) in enumerate(zip(weights, specs)):
        if layer["type"] == "batchnorm":
            mean, var, m = next(it)
            decay = layer["decay"]
            arrays = (*arrays[:2], decay * arrays[2] + (1 - decay) * mean,
                      decay * arrays[3] + (1 - decay) * var * m / (m - 1))
            statistics[f"mean{j}"], statistics[f"var{j}"] = arrays[2], arrays[3]
        updated.append(arrays)
    out: dict = {"_numpy": {"train_logits": trained, "logits": numpy_forward(layers, updated, x),
                            "statistics": statistics, "before": numpy_forward(layers, weights, x)}}
    procs = {fw: subprocess.Popen([env_python(fw), "-m", "dlbench.testing.forward", fw, "resnet20", str(work / "w.npz"),
                                   str(work / "x.npz"), str(work / f"{fw}.json"), "--train-then-infer"], cwd=REPO,
                                  env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for fw in FRAMEWORKS}
    for fw, proc in procs.items():
        log, _ = proc.communicate(timeout=900)
        path = work / f"{fw}.json"
        out[fw] = json.loads(path.read_text()) if path.exists() else {"error": log[-3000:]}
    return out


@pytest.mark.long
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_resnet20_inference_after_a_training_pass(after_training_pass, framework):
    """One training-mode pass in the framework's own layers updates every running mean and variance by the spec's one
    rule (decay 0.9: PyTorch's momentum 0.1, Keras' and Flax's momentum 0.9, Caffe's moving_average_fraction 0.9 with
    its scale factor at 10, Theano's written out; the unbiased batch variance), and the
    inference-mode pass that follows, on those statistics, gives numpy's logits: within 1e-5 relative on the
    statistics (a biased variance update would be 1.3e-4 off in the last stage) and the forward tolerance on logits."""
    ref, got = after_training_pass["_numpy"], after_training_pass[framework]
    assert "error" not in got, got.get("error")
    assert len(got["statistics"]) == 2 * 21 == len(ref["statistics"])
    for key, want in ref["statistics"].items():
        diff = float(np.abs(np.asarray(got["statistics"][key]) - want).max())
        assert diff <= 1e-5 * (1 + float(np.abs(want).max())), f"{framework} {key}: {diff:.3g} from the spec's update"
    assert np.abs(ref["logits"] - ref["before"]).max() > 1e-3  # the update changes the inference pass
    for key in ("train_logits", "logits"):
        want = np.asarray(ref[key])
        diff = float(np.abs(np.asarray(got[key]) - want).max())
        bound = LOGIT_TOL * (1 + float(np.abs(want).max()))
        assert diff <= bound, f"{framework} {key}: logits differ by up to {diff:.3g} (allowed {bound:.3g})"
