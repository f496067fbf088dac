"""One forward pass of a spec's network, built by a framework's adapter, with given weights.

    python -m dlbench.forward_check FRAMEWORK NETWORK WEIGHTS.npz INPUT.npz OUT.json [NETWORK W I O ...]

Runs in a framework's environment (numpy and that framework only). Several networks may follow
the framework, four arguments each, so that one process (one framework start-up) checks them all.

WEIGHTS.npz holds canonical weights, W<i> and b<i> for the i-th trainable (conv or dense) layer
of the spec, in spec order:
  conv   W (out, in, kh, kw), a cross-correlation kernel (as PyTorch and Caffe apply it); b (out,)
  dense  W (out, in), the input flattened in C, H, W order (as PyTorch and Caffe flatten); b (out,)
INPUT.npz holds x (float32, N C H W) and y (int64, N).

The network is models.resolve(NETWORK, 10) as the framework's adapter builds it for x's shape
(pytorch.build_module, tensorflow.build_model, theano.Network, caffe.net_prototxt), the weights
converted to the framework's layout:
  pytorch     as they are
  tensorflow  conv kernel (kh, kw, in, out); dense kernel (in, out), the rows of the first dense
              layer after a convolution or pooling permuted from C, H, W to H, W, C (Flatten of NHWC)
  theano      conv as it is (the adapter convolves with filter_flip=False: cross-correlation);
              dense (in, out)
  caffe       an HDF5 .caffemodel.h5 (data/<layer>/0 and 1, Caffe's own blob shapes), run with
              `caffe test --weights`; the data come through the adapter's HDF5Data (TEST) layer
The pass runs in inference mode (dropout off). OUT.json gets
  {"network", "framework", "logits": N x classes, "loss": mean softmax cross-entropy}
or, where the network could not be built or run, {"network", "framework", "error"} (exit status 1).
Caffe prints the outputs of its test net only: an identity Power layer makes the logits a net
output besides the loss, and both are read from its log (6 significant digits: glog's default).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import numpy as np

from dlbench import models

NUM_CLASSES = 10
LOGITS_BLOB = "dlbench_logits"


def trainable(layers: list[dict], input_shape: tuple[int, int, int]) -> list[tuple[int, dict, tuple]]:
    """(spec index, layer, the shape of its input) of every conv and dense layer, in spec order."""
    out, prev = [], tuple(input_shape)
    for i, (layer, shape) in enumerate(zip(layers, models.shapes(layers, input_shape))):
        if layer["type"] in ("conv", "dense"):
            out.append((i, layer, prev))
        prev = shape
    return out


def load_weights(path: str, layers: list[dict], input_shape: tuple[int, int, int]) -> list[tuple[np.ndarray, ...]]:
    """The canonical (W, b) of every trainable layer, their shapes checked against the spec."""
    with np.load(path) as f:
        stored = {k: np.asarray(f[k], dtype=np.float32) for k in f.files}
    weights = []
    for j, (i, layer, prev) in enumerate(trainable(layers, input_shape)):
        w, b = stored[f"W{j}"], stored[f"b{j}"]
        if layer["type"] == "conv":
            want = (layer["filters"], prev[0], layer["kernel"], layer["kernel"])
        else:
            want = (layer["units"], int(np.prod(prev)))
        if w.shape != want or b.shape != (want[0],):
            raise ValueError(f"layer {i} ({layer['type']}): weights {w.shape} / bias {b.shape}, the spec wants {want}")
        weights.append((w, b))
    return weights


def chw_rows_to_hwc(w: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """A dense W (out, C*H*W) whose input columns follow C, H, W order, reordered to H, W, C."""
    c, h, wd = chw
    return np.ascontiguousarray(w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1).reshape(w.shape[0], -1))


def softmax_xent(logits: np.ndarray, y: np.ndarray) -> float:
    """Mean softmax cross-entropy in float64 (for reference only; each framework reports its own)."""
    z = logits.astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


# ---------------------------------------------------------------------------------------------- frameworks


def run_pytorch(layers, weights, x, y) -> dict:
    import torch
    import torch.nn.functional as F
    from torch import nn

    from dlbench.frameworks.pytorch import build_module

    torch.set_num_threads(1)
    model = build_module(layers, x.shape[1:])
    params = [m for m in model if isinstance(m, (nn.Conv2d, nn.Linear))]
    assert len(params) == len(weights), (len(params), len(weights))
    with torch.no_grad():
        for mod, (w, b) in zip(params, weights):
            mod.weight.copy_(torch.from_numpy(w))
            mod.bias.copy_(torch.from_numpy(b))
        model.eval()
        logits = model(torch.from_numpy(x))
        loss = F.cross_entropy(logits, torch.from_numpy(y))
    return {"logits": logits.numpy().tolist(), "loss": float(loss)}


def run_tensorflow(layers, weights, x, y) -> dict:
    import tensorflow as tf

    from dlbench.frameworks.tensorflow import build_model, keras, nhwc

    model = build_model(layers, x.shape[1:], 1)
    params = [m for m in model.layers if isinstance(m, (keras.layers.Conv2D, keras.layers.Dense))]
    specs = trainable(layers, x.shape[1:])
    assert len(params) == len(weights) == len(specs), (len(params), len(weights))
    for mod, (w, b), (_, layer, prev) in zip(params, weights, specs):
        if layer["type"] == "conv":
            kernel = w.transpose(2, 3, 1, 0)  # (out, in, kh, kw) -> (kh, kw, in, out)
        else:
            kernel = (chw_rows_to_hwc(w, prev) if len(prev) == 3 else w).T
        mod.set_weights([np.ascontiguousarray(kernel), b])
    logits = model(tf.constant(nhwc(x)), training=False)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(tf.constant(y), logits)
    return {"logits": logits.numpy().tolist(), "loss": float(loss)}


def run_theano(layers, weights, x, y) -> dict:
    from dlbench.frameworks import theano as adapter

    T = adapter.T
    net = adapter.Network(layers, x.shape[1:], seed=0)
    specs = trainable(layers, x.shape[1:])
    assert sorted(net.weights) == [i for i, _, _ in specs], (sorted(net.weights), specs)
    for (i, layer, _), (w, b) in zip(specs, weights):
        shared_w, shared_b = net.weights[i]
        shared_w.set_value(np.ascontiguousarray(w if layer["type"] == "conv" else w.T).astype(adapter.FLOATX))
        shared_b.set_value(b.astype(adapter.FLOATX))
    xs, ys = T.tensor4("x"), T.ivector("y")
    logits = net.logits(xs, train=False)
    loss = T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(logits), ys))
    f = adapter.theano.function([xs, ys], [logits, loss], name="forward_check")
    got_logits, got_loss = f(x.astype(adapter.FLOATX), y.astype(np.int32))
    return {"logits": np.asarray(got_logits).tolist(), "loss": float(got_loss)}


def caffe_weights_file(path: Path, layers: list[dict], weights) -> None:
    """The weights as Caffe's HDF5 snapshot holds them: data/<layer name>/0 (weights) and 1 (bias)."""
    import h5py

    from dlbench.frameworks.caffe import LAYER_NAMES

    names, counts = [], {}
    for layer in layers:
        counts[layer["type"]] = counts.get(layer["type"], 0) + 1
        if layer["type"] in ("conv", "dense"):
            names.append(f"{LAYER_NAMES[layer['type']]}{counts[layer['type']]}")
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        for name, (w, b) in zip(names, weights):
            group = data.create_group(name)
            group.create_dataset("0", data=np.ascontiguousarray(w, np.float32))
            group.create_dataset("1", data=np.ascontiguousarray(b, np.float32))


def caffe_net(layers: list[dict], data_list: str, batch: int) -> str:
    """The adapter's net prototxt (TEST phase reads data_list) plus an identity copy of the logits as an output."""
    from dlbench.frameworks import caffe

    net = caffe.net_prototxt(layers, data_list, data_list, batch, batch)
    dense = sum(1 for layer in layers if layer["type"] == "dense")
    logits = f"{caffe.LAYER_NAMES['dense']}{dense}"  # the last layer is dense and never in place
    if f'top: "{logits}"' not in net:
        raise RuntimeError(f"the Caffe net has no blob {logits!r}")
    extra = caffe._block("layer", [f'name: "{LOGITS_BLOB}"', 'type: "Power"', f'bottom: "{logits}"',
                                   f'top: "{LOGITS_BLOB}"', "include { phase: TEST }"])
    return net + "\n".join(extra) + "\n"


def run_caffe(layers, weights, x, y) -> dict:
    import h5py

    from dlbench.frameworks import caffe, caffe_log

    binary = str(caffe.find_binary())
    with tempfile.TemporaryDirectory(prefix="dlbench-forward-") as tmp:
        work = Path(tmp)
        with h5py.File(work / "data.h5", "w") as f:
            f.create_dataset("data", data=np.ascontiguousarray(x, np.float32))
            f.create_dataset("label", data=y.astype(np.float32))
        (work / "data.txt").write_text(f"{work / 'data.h5'}\n")
        (work / "net.prototxt").write_text(caffe_net(layers, str(work / "data.txt"), len(y)))
        caffe_weights_file(work / "weights.caffemodel.h5", layers, weights)
        proc = subprocess.run([binary, "test", f"--model={work / 'net.prototxt'}",
                               f"--weights={work / 'weights.caffemodel.h5'}", "--iterations=1"],
                              cwd=work, capture_output=True, text=True, env=caffe.caffe_env(1), timeout=600)
    lines = caffe_log.parse((proc.stdout + proc.stderr).splitlines())
    batch = [ln.fields for ln in lines if ln.kind == "test_batch" and ln.fields["batch"] == 0]
    logits = [f["value"] for f in batch if f["name"] == LOGITS_BLOB]
    loss = [f["value"] for f in batch if f["name"] == "loss"]
    if proc.returncode != 0 or len(loss) != 1 or len(logits) != len(y) * NUM_CLASSES:
        fatal = caffe_log.fatal_message(lines) or (proc.stdout + proc.stderr)[-1500:]
        raise RuntimeError(f"caffe test failed (exit {proc.returncode}, {len(logits)} logits, {len(loss)} losses): "
                           f"{fatal}")
    return {"logits": np.asarray(logits).reshape(len(y), NUM_CLASSES).tolist(), "loss": loss[0]}


RUNNERS = {"pytorch": run_pytorch, "tensorflow": run_tensorflow, "theano": run_theano, "caffe": run_caffe}


def check(framework: str, network: str, weights_path: str, input_path: str) -> dict:
    with np.load(input_path) as f:
        x = np.ascontiguousarray(f["x"], dtype=np.float32)
        y = np.asarray(f["y"], dtype=np.int64)
    shape = tuple(int(v) for v in x.shape[1:])
    layers = models.resolve(network, NUM_CLASSES)
    weights = load_weights(weights_path, layers, shape)
    result = RUNNERS[framework](layers, weights, x, y)
    return {"framework": framework, "network": network, "input_shape": list(shape), **result}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 5 or (len(argv) - 1) % 4 or argv[0] not in RUNNERS:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print(f"FRAMEWORK: one of {', '.join(RUNNERS)}", file=sys.stderr)
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
