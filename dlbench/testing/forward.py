"""One forward pass of a spec's network, built by a framework's adapter, with given weights.

    python -m dlbench.testing.forward FRAMEWORK NETWORK WEIGHTS.npz INPUT.npz OUT.json [NETWORK W I O ...]

Runs in a framework's environment (numpy and that framework only). Several networks may follow
the framework, four arguments each, so that one process (one framework start-up) checks them all.

WEIGHTS.npz holds canonical weights, W<i> and b<i> for the i-th parametrised (conv, dense or
batchnorm) layer of the spec, in spec order (networks.trainable; inside a residual block, its body then
its shortcut):
  conv       W (out, in, kh, kw), a cross-correlation kernel (as PyTorch and Caffe apply it); b (out,),
             none for a conv without bias
  dense      W (out, in), the input flattened in C, H, W order (as PyTorch and Caffe flatten); b (out,)
  batchnorm  gamma<i>, beta<i>, mean<i>, var<i> (C,): scale, shift, running mean and running variance
  tokens     pos<i> (T, D): the position embedding
  layernorm  gamma<i>, beta<i> (D,)
  attention  Wq<i> bq<i> Wk<i> bk<i> Wv<i> bv<i> Wo<i> bo<i>: the projections, W (D, D) (out, in), b (D,)
INPUT.npz holds x (float32, N C H W) and y (int64, N). With --train (anywhere after FRAMEWORK) every
network runs in training mode: batch normalisation normalises by the batch's statistics (dropout stays
off); without it, inference mode (the running statistics). With --train-then-infer, a training-mode pass updates
the running statistics in the framework's own layers, then an inference-mode pass uses them: OUT.json gets both
logits and the running statistics after the first pass (check_train_then_infer).

The network is networks.resolve(NETWORK, 10), run by the adapter's own `forward` (the Adapter
contract, dlbench/frameworks/base.py), which builds it as the adapter trains it and converts the
weights to its layout. `numpy_forward` is the same pass written out in numpy from the spec's
definitions (dlbench/spec/networks.py), in float64 and with no framework: the reference every framework's
pass is held to (tests/test_forward.py). The pass runs in inference mode (dropout off). OUT.json gets
  {"network", "framework", "logits": N x classes, "loss": mean softmax cross-entropy}
or, where the network could not be built or run, {"network", "framework", "error"} (exit status 1).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
import traceback
from pathlib import Path

import numpy as np

from dlbench.frameworks import registry
from dlbench.spec import networks

NUM_CLASSES = 10


def load_weights(path: str, layers: list[dict], input_shape: tuple[int, int, int]) -> list[tuple[np.ndarray, ...]]:
    """The canonical arrays of every parametrised layer, their shapes checked against the spec."""
    with np.load(path) as f:
        stored = {k: np.asarray(f[k], dtype=np.float32) for k in f.files}
    weights = []
    for j, (i, layer, prev) in enumerate(networks.trainable(layers, input_shape)):
        got = []
        for name, want in networks.arrays(layer, prev):
            a = stored[f"{name}{j}"]
            if a.shape != want:
                raise ValueError(f"layer {i} ({layer['type']}): {name} {a.shape}, the spec wants {want}")
            got.append(a)
        weights.append(tuple(got))
    return weights


def softmax_xent(logits: np.ndarray, y: np.ndarray) -> float:
    """Mean softmax cross-entropy in float64: numpy_forward's loss (each framework reports its own)."""
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


# ------------------------------------------------------------------------------ the reference, in numpy

def numpy_forward(layers: list[dict], weights: list[tuple[np.ndarray, ...]], x: np.ndarray,
                  train: bool = False, statistics: list | None = None) -> np.ndarray:
    """The logits of the network of `layers` with canonical `weights` on x (N, C, H, W), in float64, each layer
    as dlbench/spec/networks.py defines it: conv a cross-correlation (a table's unlisted planes feed nothing), pool with
    Caffe's ceil rounding (max over the cells inside the input, avg over the window clipped to the padded
    input), lrn across channels, dense on the C, H, W flattening, dropout off; batchnorm by the batch's mean and
    biased variance where `train`, else by its running ones; a residual block's body plus its shortcut; gap
    the mean over H and W. `statistics`, where given, gets the batch's (mean, biased variance, m) at every
    batchnorm layer, in spec order."""
    return _forward(layers, iter(weights), np.asarray(x, dtype=np.float64), train, statistics)


def batch_statistics(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Per channel of (N, C, H, W): the mean, the biased variance, and m = N * H * W (spec/networks.py's batchnorm)."""
    return a.mean(axis=(0, 2, 3)), a.var(axis=(0, 2, 3)), a.size // a.shape[1]


def _forward(layers: list[dict], params, a: np.ndarray, train: bool, statistics: list | None) -> np.ndarray:
    for layer in layers:
        kind = layer["type"]
        if kind == "conv":
            w, *rest = next(params)
            b = np.asarray(rest[0], np.float64) if rest else np.zeros(len(w))
            a = _conv(a, _connected(np.asarray(w, np.float64), layer), b, layer["stride"], layer["pad"])
        elif kind == "batchnorm":
            gamma, beta, mean, var = (np.asarray(v, np.float64) for v in next(params))
            if statistics is not None:
                statistics.append(batch_statistics(a))
            if train:
                mean, var, _ = batch_statistics(a)
            a = ((a - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + layer["eps"])
                 * gamma[None, :, None, None] + beta[None, :, None, None])
        elif kind == "residual":
            body = _forward(layer["body"], params, a, train, statistics)
            a = body + _forward(layer["shortcut"], params, a, train, statistics)
        elif kind == "gap":
            a = a.mean(axis=(2, 3)) if a.ndim == 4 else a.mean(axis=1)
        elif kind == "tokens":
            (pos,) = next(params)
            a = a.reshape(a.shape[0], a.shape[1], -1).transpose(0, 2, 1) + np.asarray(pos, np.float64)
        elif kind == "layernorm":
            gamma, beta = (np.asarray(v, np.float64) for v in next(params))
            centred = a - a.mean(axis=-1, keepdims=True)
            a = centred / np.sqrt(a.var(axis=-1, keepdims=True) + layer["eps"]) * gamma + beta
        elif kind == "attention":
            a = _attention(a, [np.asarray(v, np.float64) for v in next(params)], layer["heads"])
        elif kind == "gelu":
            a = 0.5 * a * (1.0 + _erf(a / math.sqrt(2.0)))
        elif kind == "pool":
            a = _pool(a, layer["mode"], layer["kernel"], layer["stride"], layer["pad"])
        elif kind == "dense":
            w, b = next(params)
            a = a if a.ndim == 3 else a.reshape(len(a), -1)  # tokens: every token alike; maps: flattened
            a = a @ np.asarray(w, np.float64).T + np.asarray(b, np.float64)
        elif kind == "relu":
            a = np.maximum(a, 0.0)
        elif kind == "tanh":
            a = np.tanh(a)
        elif kind == "sigmoid":
            a = 1.0 / (1.0 + np.exp(-a))
        elif kind == "lrn":
            a = _lrn(a, layer["size"], layer["alpha"], layer["beta"], layer.get("k", 1.0))
        elif kind != "dropout":
            raise ValueError(f"numpy_forward knows no layer {kind!r}")
    return a


def _attention(a: np.ndarray, arrays: list[np.ndarray], heads: int) -> np.ndarray:
    """Multi-head self-attention on tokens (N, T, D), as networks.py defines it."""
    wq, bq, wk, bk, wv, bv, wo, bo = arrays
    n, t, d = a.shape
    split = lambda h: h.reshape(n, t, heads, d // heads).transpose(0, 2, 1, 3)  # noqa: E731  (N, heads, T, D/heads)
    q, k, v = split(a @ wq.T + bq), split(a @ wk.T + bk), split(a @ wv.T + bv)
    scores = q @ k.transpose(0, 1, 3, 2) * networks.attention_scale(d, heads)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out = (scores / scores.sum(axis=-1, keepdims=True)) @ v
    return out.transpose(0, 2, 1, 3).reshape(n, t, d) @ wo.T + bo


def _erf(x: np.ndarray) -> np.ndarray:
    """erf, element-wise, to float64 precision (numpy has none; math.erf is the C library's)."""
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _connected(w: np.ndarray, layer: dict) -> np.ndarray:
    """The kernel with every plane a connection table does not list for an output map set to 0."""
    if "table" not in layer:
        return w
    mask = np.zeros(w.shape[:2])
    for out, planes in enumerate(layer["table"]):
        mask[out, planes] = 1.0
    return w * mask[:, :, None, None]


def _conv(a: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    n, c, h, wd = a.shape
    k = w.shape[2]
    a = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
    out = np.zeros((n, w.shape[0], oh, ow))
    for i in range(k):
        for j in range(k):
            patch = a[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]  # (n, c, oh, ow)
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out + b[None, :, None, None]


def _pool_size(size: int, kernel: int, stride: int, pad: int) -> int:
    out = -(-(size + 2 * pad - kernel) // stride) + 1  # ceil
    return out - 1 if pad and (out - 1) * stride >= size + pad else out


def _pool(a: np.ndarray, mode: str, kernel: int, stride: int, pad: int) -> np.ndarray:
    n, c, h, w = a.shape
    oh, ow = _pool_size(h, kernel, stride, pad), _pool_size(w, kernel, stride, pad)
    out = np.zeros((n, c, oh, ow))
    for y in range(oh):
        for x in range(ow):
            y0, x0 = y * stride - pad, x * stride - pad
            y1, x1 = min(y0 + kernel, h + pad), min(x0 + kernel, w + pad)
            area = (y1 - y0) * (x1 - x0)  # avg: the window clipped to the padded input, padding counted
            window = a[:, :, max(y0, 0):min(y1, h), max(x0, 0):min(x1, w)]
            out[:, :, y, x] = window.max(axis=(2, 3)) if mode == "max" else window.sum(axis=(2, 3)) / area
    return out


def _lrn(a: np.ndarray, size: int, alpha: float, beta: float, k: float) -> np.ndarray:
    squares = np.pad(a ** 2, ((0, 0), ((size - 1) // 2, size // 2), (0, 0), (0, 0)))
    window = sum(squares[:, i:i + a.shape[1]] for i in range(size))
    return a / (k + alpha / size * window) ** beta


def check_train_then_infer(framework: str, network: str, weights_path: str, input_path: str) -> dict:
    """A training-mode pass, then an inference-mode pass with the running statistics it left, in the framework's
    own layers (its adapter's train_then_infer): both logits, and every batchnorm's running mean and variance after
    the first pass (mean<j>, var<j>, the spec's j-th parametrised layer)."""
    with np.load(input_path) as f:
        x = np.ascontiguousarray(f["x"], dtype=np.float32)
        y = np.asarray(f["y"], dtype=np.int64)
    shape = tuple(int(v) for v in x.shape[1:])
    layers = networks.resolve(network, NUM_CLASSES)
    adapter = importlib.import_module(f"dlbench.frameworks.{framework}").ADAPTER
    trained, inferred, after = adapter.train_then_infer(layers, load_weights(weights_path, layers, shape), x, y)
    statistics = {f"{name}{j}": np.asarray(a).tolist()
                  for j, ((_, layer, prev), arrays) in enumerate(zip(networks.trainable(layers, shape), after))
                  if layer["type"] == "batchnorm"
                  for (name, _), a in zip(networks.arrays(layer, prev), arrays) if name in ("mean", "var")}
    return {"framework": framework, "network": network, "input_shape": list(shape), "train_then_infer": True,
            "train_logits": np.asarray(trained).tolist(), "logits": np.asarray(inferred).tolist(),
            "statistics": statistics}


def check(framework: str, network: str, weights_path: str, input_path: str, train: bool = False) -> dict:
    with np.load(input_path) as f:
        x = np.ascontiguousarray(f["x"], dtype=np.float32)
        y = np.asarray(f["y"], dtype=np.int64)
    shape = tuple(int(v) for v in x.shape[1:])
    layers = networks.resolve(network, NUM_CLASSES)
    weights = load_weights(weights_path, layers, shape)
    adapter = importlib.import_module(f"dlbench.frameworks.{framework}").ADAPTER
    if train:  # only the adapters that build batch normalisation take the mode
        logits, loss = adapter.forward(layers, weights, x, y, train=True)
    else:
        logits, loss = adapter.forward(layers, weights, x, y)
    return {"framework": framework, "network": network, "input_shape": list(shape), "train": train,
            "logits": np.asarray(logits).tolist(), "loss": float(loss)}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    train = "--train" in argv
    then_infer = "--train-then-infer" in argv
    argv = [a for a in argv if a not in ("--train", "--train-then-infer")]
    if len(argv) < 5 or (len(argv) - 1) % 4 or argv[0] not in registry.names():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print(f"FRAMEWORK: one of {', '.join(registry.names())}", file=sys.stderr)
        return 2
    framework = argv[0]
    for name, value in registry.get(framework).env.items():  # as its trainer starts it (quiet logs included)
        os.environ.setdefault(name, value)
    failed = 0
    for k in range(1, len(argv), 4):
        network, weights_path, input_path, out = argv[k:k + 4]
        try:
            if then_infer:
                result = check_train_then_infer(framework, network, weights_path, input_path)
            else:
                result = check(framework, network, weights_path, input_path, train)
        except Exception as e:  # one network's failure is reported in its OUT.json; the others still run
            traceback.print_exc()
            result = {"framework": framework, "network": network, "error": f"{type(e).__name__}: {e}"}
            failed += 1
        Path(out).write_text(json.dumps(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
