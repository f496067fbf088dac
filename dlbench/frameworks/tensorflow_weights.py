"""The canonical weights (dlbench.spec) in a Keras model's variables and back: kernels (kh, kw, in, out), a dense
layer after a convolution in the H, W, C order in which Flatten of NHWC feeds it."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dlbench.frameworks.tensorflow_layers import Attention, MaskedConv2D, trainable_layers, trained_variables
from dlbench.spec import networks

keras = tf.keras


def to_keras(layer: dict, prev: tuple, arrays: tuple) -> list[np.ndarray]:
    """A layer's canonical arrays in its Keras variables' layout (trained_variables' order, then a batchnorm's
    running pair)."""
    w, *rest = arrays
    if layer["type"] in ("batchnorm", "layernorm", "tokens"):
        return [w, *rest]
    if layer["type"] == "attention":  # W (out, in) -> kernel (in, out)
        return [a.T if a.ndim == 2 else a for a in arrays]
    if layer["type"] == "conv":
        return [w.transpose(2, 3, 1, 0), *rest]  # (out, in, kh, kw) -> (kh, kw, in, out)
    return [(chw_rows_to_hwc(w, prev) if len(prev) == 3 else w).T, *rest]


def from_keras(layer: dict, prev: tuple, values: list[np.ndarray]) -> tuple[np.ndarray, ...]:
    """The inverse of to_keras."""
    kernel, *rest = values
    if layer["type"] in ("batchnorm", "layernorm", "tokens"):
        return (kernel, *rest)
    if layer["type"] == "attention":
        return tuple(np.ascontiguousarray(a.T) if a.ndim == 2 else a for a in values)
    if layer["type"] == "conv":
        return (np.ascontiguousarray(kernel.transpose(3, 2, 0, 1)), *rest)
    return (np.ascontiguousarray(hwc_rows_to_chw(kernel.T, prev) if len(prev) == 3 else kernel.T), *rest)


def load_weights(model: keras.Sequential, layers: list[dict], input_shape: tuple[int, int, int],
                 weights: list[tuple[np.ndarray, ...]]) -> None:
    """Canonical arrays per conv, dense and batchnorm layer into the model: kernels to (kh, kw, in, out), a dense
    layer after a conv to the H, W, C order in which Flatten of NHWC feeds it; a batchnorm's as they are."""
    mods = trainable_layers(model)
    specs = networks.trainable(layers, input_shape)
    assert len(mods) == len(weights) == len(specs), (len(mods), len(weights), len(specs))
    for mod, arrays, (_, layer, prev) in zip(mods, weights, specs):
        values = [np.ascontiguousarray(a) for a in to_keras(layer, prev, arrays)]
        if isinstance(mod, Attention):
            for proj, (kernel, bias) in zip(mod.projections(), zip(values[::2], values[1::2])):
                proj.set_weights([kernel, bias])
        else:
            mod.set_weights(values)


def count_params(model: keras.Sequential) -> int:
    """Trainable parameters; a masked convolution counts its connected weights only."""
    n = 0
    for mod in trainable_layers(model):
        kernel, *rest = trained_variables(mod)
        if isinstance(mod, MaskedConv2D):
            n += mod.connected * int(kernel.shape[0]) * int(kernel.shape[1])
        else:
            n += int(np.prod(kernel.shape))
        n += sum(int(np.prod(v.shape)) for v in rest)
    return n


def chw_rows_to_hwc(w: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """A dense W (out, C*H*W) whose input columns follow C, H, W order, reordered to H, W, C (Flatten of NHWC)."""
    c, h, wd = chw
    return np.ascontiguousarray(w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1).reshape(w.shape[0], -1))


def hwc_rows_to_chw(w: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """The inverse of chw_rows_to_hwc: a dense W (out, H*W*C) back to C, H, W column order."""
    c, h, wd = chw
    return np.ascontiguousarray(w.reshape(w.shape[0], h, wd, c).transpose(0, 3, 1, 2).reshape(w.shape[0], -1))
