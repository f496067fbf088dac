"""A point's data as every adapter trains on it: the prepared dataset, after the point's input handling.

Runs inside a framework's environment: numpy and the standard library only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from dlbench.datasets import store
from dlbench.node.hugepages import no_hugepage_advice
from dlbench.spec import inputs as input_handling


@dataclass
class Inputs:
    """Float32 NCHW arrays ready for any framework, after the preset's input handling."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    classes: int
    digest: str
    augmenter: input_handling.Augmenter | None = None  # redraws train_x each epoch where the preset augments
    val_x: np.ndarray | None = None  # the validation hold-out, where the point validates
    val_y: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.train_x.shape[1:])


def load_inputs(dataset_dir: str | os.PathLike, point: dict) -> Inputs:
    """The prepared dataset in `dataset_dir`, split, sized and (where the point augments) augmented as its input
    says."""
    cfg = point.get("input", {})
    holdout = (point.get("validation") or {}).get("fraction", 0.0)
    with no_hugepage_advice():
        arrays, meta = store.load(dataset_dir)
        split = input_handling.splits(arrays["train_x"], arrays["train_y"], arrays["test_x"], arrays["test_y"], cfg,
                                      holdout)
    (train_x, train_y), (test_x, test_y) = split["train"], split["test"]
    val_x, val_y = split.get("validation", (None, None))
    augmenter = None
    if input_handling.augments(cfg):
        augmenter = input_handling.Augmenter(train_x, cfg, point["seed"])
        train_x = augmenter()
    return Inputs(train_x, train_y, test_x, test_y, int(meta["classes"]), meta["digest"], augmenter, val_x, val_y)
