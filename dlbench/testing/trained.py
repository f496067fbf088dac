"""Train one point with its framework's adapter and keep its initial and trained weights.

    python -m dlbench.testing.trained POINT_JSON DATASET_DIR EVENTS_JSONL OUT.npz

Runs in a framework's environment. The adapter trains the point exactly as the trainer would
(prepare, load, plan, train: the real loop, the real updates); OUT.npz then holds, for the j-th
conv or dense layer, init_W<j>, init_b<j> (the point's initial weights, dlbench.spec.initial_weights) and
W<j>, b<j> (the weights after training; a batchnorm layer's gamma<j>, beta<j>, mean<j>, var<j>, a conv
without bias no b<j>):
  PyTorch, TensorFlow, Theano  canonical layout, as stored (a sparse conv's unconnected weights
                               included, unmasked): Adapter.weights(), where the adapter can;
  Caffe (it cannot)            the blobs of its snapshot after training, in Caffe's layout (a
                               sparse conv is a grouped convolution: (out, fan-in, kh, kw)),
                               and init_W<j> converted to that layout too.
It shows that training moves the weights that exist and leaves the unconnected ones at 0.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import numpy as np

from dlbench.frameworks.base import Plan, Reporter, initial_weights
from dlbench.spec import networks


def _caffe_blobs(path: Path, layers: list[dict]) -> list[tuple[np.ndarray, np.ndarray]]:
    import h5py

    from dlbench.frameworks.caffe_prototxt import LAYER_NAMES

    names, counts = [], {}
    for layer in layers:
        counts[layer["type"]] = counts.get(layer["type"], 0) + 1
        if layer["type"] in ("conv", "dense"):
            names.append(f"{LAYER_NAMES[layer['type']]}{counts[layer['type']]}")
    with h5py.File(path, "r") as f:
        return [(np.asarray(f["data"][name]["0"]), np.asarray(f["data"][name]["1"])) for name in names]


def train(point: dict, dataset_dir: str, events: str) -> dict[str, np.ndarray]:
    adapter = importlib.import_module(f"dlbench.frameworks.{point['framework']}").ADAPTER(
        point, dataset_dir, Reporter(events))
    out: dict[str, np.ndarray] = {}
    try:
        adapter.refuse()
        adapter.prepare()
        loaded = adapter.load()
        shape = tuple(loaded.input_shape)
        plan = Plan.of(point, loaded.train_samples)
        start = initial_weights(point, shape)
        adapter.train(plan)
        if adapter.can("weights"):
            trained = adapter.weights()
        else:  # Caffe: the blobs of the snapshot its solver writes after training
            snapshot = adapter.work / f"final_iter_{plan.total_iterations}.caffemodel.h5"
            if not snapshot.exists():
                raise RuntimeError("no snapshot after training: give the point a test_interval that does not "
                                   "divide its iterations, so that Caffe snapshots its final weights")
            from dlbench.frameworks.caffe_weights import caffe_blobs

            trained = _caffe_blobs(snapshot, point["layers"])
            start = [tuple(arrays) for _, arrays in caffe_blobs(point["layers"], start, shape)]
    finally:
        adapter.close()
    trainable = networks.trainable(point["layers"], shape)
    names = [[name for name, _ in networks.arrays(layer, prev)] for _, layer, prev in trainable]
    for j, (first, last, keys) in enumerate(zip(start, trained, names)):
        for key, a0, a in zip(keys, first, last):  # W, b; a batchnorm's gamma, beta, mean, var
            out.update({f"init_{key}{j}": a0, f"{key}{j}": np.asarray(a)})
    return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 4:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    point_path, dataset_dir, events, out = argv
    point = json.loads(Path(point_path).read_text())
    np.savez(out, **train(point, dataset_dir, events))
    return 0


if __name__ == "__main__":
    sys.exit(main())
