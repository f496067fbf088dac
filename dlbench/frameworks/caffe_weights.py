"""The canonical weights (dlbench.spec) as Caffe's layers hold them, in HDF5 weights files and solver states, and
back from a snapshot."""

from __future__ import annotations

from pathlib import Path

from dlbench.frameworks.caffe_prototxt import scale_name, unit_names
from dlbench.spec import networks


def caffe_blobs(layers: list[dict], weights, input_shape: tuple[int, int, int]) -> list[tuple[str, list]]:
    """Canonical weights as Caffe's layers hold them: (layer name, blobs) per Caffe layer with blobs, in net order:
    conv [W, b] ([W] without bias), dense [W, b], a batchnorm two layers, BatchNorm bn<k> and Scale scale<k>.

    A sparse conv's grouped weights (out, fan-in, kh, kw) are the canonical (out, in, kh, kw) at
    the table's planes, in table order (the order its Concat gathers them in).

    BatchNorm keeps sums, not averages: blobs mean_sum, var_sum and a scale factor s, its running statistics
    mean_sum / s and var_sum / s, and a training pass does s = f s + 1, mean_sum = batch mean + f mean_sum,
    var_sum = m / (m - 1) batch var + f var_sum (f its moving_average_fraction). With f the spec's decay and s
    1 / (1 - decay) (where it stays: f / (1 - f) + 1 = 1 / (1 - f)), that is the spec's running average exactly:
    mean_sum / s becomes decay * mean + (1 - decay) * batch mean. So the canonical running statistics are written as
    mean / (1 - decay), var / (1 - decay) and s = 1 / (1 - decay) (Caffe's own start, s = 0, would instead take the
    first batch's statistics whole).
    """
    import numpy as np

    out = []
    for name, arrays, (_, layer, _) in zip(unit_names(layers), weights, networks.trainable(layers, input_shape)):
        if layer["type"] == "batchnorm":
            gamma, beta, mean, var = (np.asarray(a, np.float64) for a in arrays)
            factor = 1.0 / (1.0 - layer["decay"])
            out.append((name, [np.asarray(mean * factor, np.float32), np.asarray(var * factor, np.float32),
                               np.array([factor], np.float32)]))
            out.append((scale_name(name), [np.asarray(gamma, np.float32), np.asarray(beta, np.float32)]))
            continue
        w, *b = arrays
        if "table" in layer:
            w = np.stack([w[o, row] for o, row in enumerate(layer["table"])])
        out.append((name, [np.ascontiguousarray(a, np.float32) for a in (w, *b)]))
    return out


def canonical_from_blobs(layers: list[dict], data, input_shape: tuple[int, int, int]) -> list[tuple]:
    """The canonical arrays of every conv, dense and batchnorm layer from a snapshot's `data` group (h5py): a
    batchnorm's running statistics are its sums over its scale factor (caffe_blobs). A sparse conv keeps Caffe's
    grouped layout."""
    import numpy as np

    out = []
    for name, (_, layer, _) in zip(unit_names(layers), networks.trainable(layers, input_shape)):
        blobs = [np.asarray(data[name][str(i)]) for i in range(len(data[name]))]
        if layer["type"] == "batchnorm":
            scale = data[scale_name(name)]
            factor = float(blobs[2][0])
            inverse = 0.0 if factor == 0 else 1.0 / factor  # Caffe's own rule for s = 0
            out.append((np.asarray(scale["0"]), np.asarray(scale["1"]), blobs[0] * inverse, blobs[1] * inverse))
        else:
            out.append(tuple(blobs))
    return out


def weights_file(path: Path, blobs: list[tuple[str, list]]) -> None:
    """Weights as Caffe's HDF5 snapshot holds them: data/<layer name>/0 (weights) and 1 (bias)."""
    import h5py

    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        for name, arrays in blobs:
            group = data.create_group(name)
            for i, array in enumerate(arrays):
                group.create_dataset(str(i), data=array)


def initial_state(path: Path, weights: Path, blobs: list[tuple[str, list]], optimizer: str) -> None:
    """A solver state as Caffe's HDF5 snapshot writes it, at iteration 0: the weights file it loads, histories 0.

    SGD keeps one history per learnable blob, Adam two (first moments, then second moments).
    """
    import h5py
    import numpy as np

    shapes = [array.shape for _, arrays in blobs for array in arrays]
    histories = shapes * (2 if optimizer == "adam" else 1)
    with h5py.File(path, "w") as f:
        f.create_dataset("iter", data=np.int32(0))
        f.create_dataset("current_step", data=np.int32(0))
        name = str(weights).encode() + b"\0"  # read back as a C string
        f.create_dataset("learned_net", data=np.array(name, dtype=f"S{len(name)}"))
        history = f.create_group("history")
        for i, shape in enumerate(histories):
            history.create_dataset(str(i), data=np.zeros(shape, np.float32))
