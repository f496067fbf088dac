"""scikit-learn's embedded UCI handwritten digits, brought to MNIST's geometry.

Each 8x8 digit (values 0..16) is scaled into a centred 20x20 box on a 28x28 canvas,
as MNIST centres its digits in a 20x20 box, and split deterministically.
"""

from __future__ import annotations

import numpy as np

TEST_FRACTION = 0.2
SPLIT_SEED = 20181012  # fixed: the split is part of the dataset, not of a run


def resize_bilinear(images: np.ndarray, size: int) -> np.ndarray:
    """Bilinear resize of (N, h, w) float images to (N, size, size), pixel centres aligned."""
    n, h, w = images.shape
    ys = (np.arange(size) + 0.5) * h / size - 0.5
    xs = (np.arange(size) + 0.5) * w / size - 0.5
    y0 = np.clip(np.floor(ys).astype(int), 0, h - 1)
    x0 = np.clip(np.floor(xs).astype(int), 0, w - 1)
    y1 = np.clip(y0 + 1, 0, h - 1)
    x1 = np.clip(x0 + 1, 0, w - 1)
    wy = np.clip(ys - y0, 0, 1)[None, :, None]
    wx = np.clip(xs - x0, 0, 1)[None, None, :]
    top = images[:, y0][:, :, x0] * (1 - wx) + images[:, y0][:, :, x1] * wx
    bottom = images[:, y1][:, :, x0] * (1 - wx) + images[:, y1][:, :, x1] * wx
    return top * (1 - wy) + bottom * wy


def to_mnist_geometry(images8: np.ndarray) -> np.ndarray:
    """(N, 8, 8) values 0..16 -> (N, 1, 28, 28) uint8, digit in the centred 20x20 box."""
    box = resize_bilinear(images8.astype(np.float64) / 16.0, 20)
    canvas = np.zeros((len(images8), 28, 28))
    canvas[:, 4:24, 4:24] = box
    return np.clip(np.rint(canvas * 255), 0, 255).astype(np.uint8)[:, None]


def load() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = to_mnist_geometry(bunch.images)
    labels = bunch.target.astype(np.int64)
    order = np.random.RandomState(SPLIT_SEED).permutation(len(labels))
    n_test = int(round(len(labels) * TEST_FRACTION))
    test, train = order[:n_test], order[n_test:]
    return {"train_x": images[train], "train_y": labels[train], "test_x": images[test], "test_y": labels[test]}
