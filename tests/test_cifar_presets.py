"""Every framework's own CIFAR-10 preset, trained end to end through the workflow on a test copy of CIFAR-10.

CIFAR-10 cannot be downloaded here, so the test writes a small data set in CIFAR-10's binary format
(`data_batch_1.bin` .. `data_batch_5.bin`, `test_batch.bin`: records of 1 label byte and 3 x 32 x 32 pixel
bytes). It is **Fashion-MNIST** (Debian's dataset-fashion-mnist), 1,000 training and 200 test images, each
28 x 28 grey image padded to 32 x 32 and coloured deterministically by its class: channel c is the image
times a fixed weight of (class, c) from a seeded table. So it has CIFAR-10's shape and 10 classes, and
is learnable, but it is not CIFAR-10: the workflow takes it as a test copy (`data_test_copy`), whose
digest is not checked, and every record says so.

Each framework trains its own preset for a short length: TensorFlow's tutorial network with its
augmentation (crops, flips, brightness, contrast, per-image standardisation) and moving average,
Caffe's cifar10_quick on raw pixels minus the mean image, Torch's sparse-convolution network on YUV
with local contrast normalisation (PyTorch), and the Reslab tutorial's network (Theano). The test
asserts that each point finished, that its training loss fell, and that its record says what ran.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlbench.datasets import catalog, cifar, idx
from dlbench.frameworks import registry
from dlbench.study import presets
from dlbench.testing.sandbox import copy_workflow, snakemake

pytestmark = pytest.mark.long

TRAIN_PER_BATCH, TEST_IMAGES = 200, 200
LABEL = "Fashion-MNIST padded to 32x32 and coloured by class (tests/test_cifar_presets.py)"
# Iterations per framework: enough for the loss to fall at its preset's batch size, a few minutes in all on 2 cores.
ITERATIONS = {"tensorflow": 40, "caffe": 40, "pytorch": 150, "theano": 100}


def coloured_fashion_mnist(images: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(N, 28, 28) grey uint8 -> (N, 3, 32, 32) uint8: padded by 2 pixels, channel c = image x weight[label, c]."""
    weights = np.random.RandomState(10).uniform(0.3, 1.0, (10, 3))
    padded = np.pad(images, ((0, 0), (2, 2), (2, 2))).astype(np.float64)
    colour = padded[:, None] * weights[labels][:, :, None, None]
    return np.clip(np.rint(colour), 0, 255).astype(np.uint8)


def write_cifar_binary(folder: Path) -> None:
    source = Path(catalog.FASHION_MNIST_SYSTEM_DIR)
    train_x = idx.load(source / "train-images-idx3-ubyte.gz")
    train_y = idx.load(source / "train-labels-idx1-ubyte.gz")
    test_x = idx.load(source / "t10k-images-idx3-ubyte.gz")
    test_y = idx.load(source / "t10k-labels-idx1-ubyte.gz")
    folder.mkdir(parents=True)

    def batch(x, y) -> bytes:
        pixels = coloured_fashion_mnist(x, y).reshape(len(y), -1)
        return np.concatenate([y.astype(np.uint8)[:, None], pixels], axis=1).tobytes()

    for i, name in enumerate(cifar.TRAIN_BATCHES):
        part = slice(i * TRAIN_PER_BATCH, (i + 1) * TRAIN_PER_BATCH)
        (folder / name).write_bytes(batch(train_x[part], train_y[part]))
    (folder / cifar.TEST_BATCH).write_bytes(batch(test_x[:TEST_IMAGES], test_y[:TEST_IMAGES]))


@pytest.fixture(scope="module")
def cifar_run(tmp_path_factory):
    if not Path(catalog.FASHION_MNIST_SYSTEM_DIR, "train-images-idx3-ubyte.gz").exists():
        pytest.skip("Fashion-MNIST (Debian's dataset-fashion-mnist) is not installed")
    root = tmp_path_factory.mktemp("cifar")
    data = root / "cifar-test-copy"
    write_cifar_binary(data)
    study = {
        "datasets": ["cifar10"], "frameworks": list(ITERATIONS), "preset": ["own"],
        "sweep": {"threads": [2]}, "monitor": {"interval_s": 0.5},
        "data": {"cifar10": str(data)}, "data_test_copy": {"cifar10": LABEL},
        "studies": {fw: {"frameworks": [fw], "sweep": {"iterations": [n]}} for fw, n in ITERATIONS.items()},
    }
    wf = copy_workflow(root / "wf", study, "cifar.yaml")
    snakemake(wf, "results/runs.parquet", "--configfile", "cifar.yaml")
    return wf, pd.read_parquet(wf / "results/runs.parquet").set_index("framework")


def test_the_cifar_binary_writer_gives_cifar10s_format(tmp_path):
    write_cifar_binary(tmp_path / "c")
    arrays = cifar.load_folder(tmp_path / "c")
    assert arrays["train_x"].shape == (5 * TRAIN_PER_BATCH, 3, 32, 32) and arrays["test_x"].shape[0] == TEST_IMAGES
    assert set(np.unique(arrays["train_y"])) == set(range(10))
    # coloured by class: two classes' mean colours differ, the border is the padding
    x, y = arrays["train_x"].astype(float), arrays["train_y"]
    means = np.array([x[y == c].mean(axis=(0, 2, 3)) / x[y == c].mean() for c in range(10)])
    assert np.abs(means[0] - means[1]).max() > 0.05 and not arrays["train_x"][:, :, :2].any()


def test_every_frameworks_own_cifar10_preset_trains(cifar_run):
    wf, runs = cifar_run
    assert set(runs.index) == set(ITERATIONS)
    assert (runs.status == "ok").all(), runs[["status", "reason"]]
    own = presets.study_presets()["cifar10"]
    for fw, row in runs.iterrows():
        preset = own[registry.get(fw).own_preset]
        assert row.network == preset["network"] and row.iterations == ITERATIONS[fw]
        assert row.batch_size == preset["batch_size"] and row.learning_rate == pytest.approx(preset["learning_rate"])
        assert json.loads(row.input_json) == preset["input"]
        # the record names the test copy, never the published data set
        assert row.dataset_test_copy == LABEL and row.dataset_source.startswith("TEST COPY")
        curve = pd.read_csv(next((wf / "results/runs" / fw / "cifar10").glob("*/curve.csv")))
        losses = curve.loc[curve["kind"] == "train", "loss"].dropna().to_numpy()
        assert len(losses) >= 4, (fw, curve)
        quarter = max(1, len(losses) // 4)
        assert losses[-quarter:].mean() < 0.9 * losses[:quarter].mean(), (fw, losses)


def test_what_each_record_says_of_its_procedure(cifar_run):
    _, runs = cifar_run
    assert runs.loc["tensorflow", "ema"].startswith("applied (decay 0.9999")
    assert runs.loc["pytorch", "network"] == "torch_cifar10" and runs.loc["pytorch", "init"] == "torch"
    assert runs.loc["theano", "network"] == "reslab_cifar10" and runs.loc["theano", "init"].startswith("gaussian")
    assert runs.loc["caffe", "network"] == "cifar10_quick"
    assert json.loads(runs.loc["caffe", "input_json"])["scale"] == 1.0  # raw pixels minus the mean image
