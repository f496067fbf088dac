"""One forward pass of a spec's network, built by a framework's adapter, with given weights.

    python -m dlbench.testing.forward FRAMEWORK NETWORK WEIGHTS.npz INPUT.npz OUT.json [NETWORK W I O ...]

Runs in a framework's environment (numpy and that framework only). Several networks may follow
the framework, four arguments each, so that one process (one framework start-up) checks them all.

WEIGHTS.npz holds canonical weights, W<i> and b<i> for the i-th trainable (conv or dense) layer
of the spec, in spec order:
  conv   W (out, in, kh, kw), a cross-correlation kernel (as PyTorch and Caffe apply it); b (out,)
  dense  W (out, in), the input flattened in C, H, W order (as PyTorch and Caffe flatten); b (out,)
INPUT.npz holds x (float32, N C H W) and y (int64, N).

The network is models.resolve(NETWORK, 10), run by the adapter's own `forward` (the Adapter
contract, dlbench/frameworks/base.py), which builds it as the adapter trains it and converts the
weights to its layout. The pass runs in inference mode (dropout off). OUT.json gets
  {"network", "framework", "logits": N x classes, "loss": mean softmax cross-entropy}
or, where the network could not be built or run, {"network", "framework", "error"} (exit status 1).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

from dlbench import models
from dlbench.frameworks import registry

NUM_CLASSES = 10


def load_weights(path: str, layers: list[dict], input_shape: tuple[int, int, int]) -> list[tuple[np.ndarray, ...]]:
    """The canonical (W, b) of every trainable layer, their shapes checked against the spec."""
    with np.load(path) as f:
        stored = {k: np.asarray(f[k], dtype=np.float32) for k in f.files}
    weights = []
    for j, (i, layer, prev) in enumerate(models.trainable(layers, input_shape)):
        w, b = stored[f"W{j}"], stored[f"b{j}"]
        if layer["type"] == "conv":
            want = (layer["filters"], prev[0], layer["kernel"], layer["kernel"])
        else:
            want = (layer["units"], int(np.prod(prev)))
        if w.shape != want or b.shape != (want[0],):
            raise ValueError(f"layer {i} ({layer['type']}): weights {w.shape} / bias {b.shape}, the spec wants {want}")
        weights.append((w, b))
    return weights


def softmax_xent(logits: np.ndarray, y: np.ndarray) -> float:
    """Mean softmax cross-entropy in float64 (for reference only; each framework reports its own)."""
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def check(framework: str, network: str, weights_path: str, input_path: str) -> dict:
    with np.load(input_path) as f:
        x = np.ascontiguousarray(f["x"], dtype=np.float32)
        y = np.asarray(f["y"], dtype=np.int64)
    shape = tuple(int(v) for v in x.shape[1:])
    layers = models.resolve(network, NUM_CLASSES)
    weights = load_weights(weights_path, layers, shape)
    adapter = importlib.import_module(f"dlbench.frameworks.{framework}").ADAPTER
    logits, loss = adapter.forward(layers, weights, x, y)
    return {"framework": framework, "network": network, "input_shape": list(shape),
            "logits": np.asarray(logits).tolist(), "loss": float(loss)}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 5 or (len(argv) - 1) % 4 or argv[0] not in registry.names():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print(f"FRAMEWORK: one of {', '.join(registry.names())}", file=sys.stderr)
        return 2
    framework = argv[0]
    if framework == "tensorflow":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    failed = 0
    for k in range(1, len(argv), 4):
        network, weights_path, input_path, out = argv[k:k + 4]
        try:
            result = check(framework, network, weights_path, input_path)
        except Exception as e:  # one network's failure is reported in its OUT.json; the others still run
            traceback.print_exc()
            result = {"framework": framework, "network": network, "error": f"{type(e).__name__}: {e}"}
            failed += 1
        Path(out).write_text(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
