"""Framework-neutral network specs: the one description every adapter builds from.

A spec is plain JSON-able data (the trainer runs in framework environments that
have numpy and the framework, nothing else), so this module imports nothing heavy.

Layer types and their keys:
  conv     filters, kernel, stride=1, pad=0            (weights + bias)
  pool     mode max|avg, kernel, stride, pad=0         (Caffe's ceil rounding)
  dense    units                                       (flattens its input)
  relu | tanh | sigmoid                                (element-wise)
  dropout  rate                                        (train only)
  lrn      size, alpha, beta, k=1    across channels, Caffe's definition:
           x / (k + alpha / size * sum of x^2 over `size` channels) ** beta
Weights are drawn with Caffe's "xavier" filler (uniform +-sqrt(3/fan_in)), biases 0,
so the same spec starts from the same distribution in every framework.
The final dense layer produces the logits; softmax cross-entropy is the loss.
"""

from __future__ import annotations

import math
from typing import Any

Spec = dict[str, Any]
Shape = tuple[int, int, int]  # (channels, height, width)

ACTIVATIONS = ("relu", "tanh", "sigmoid")


def conv(filters: int, kernel: int, stride: int = 1, pad: int = 0) -> dict:
    return {"type": "conv", "filters": filters, "kernel": kernel, "stride": stride, "pad": pad}


def pool(mode: str, kernel: int, stride: int | None = None, pad: int = 0) -> dict:
    return {"type": "pool", "mode": mode, "kernel": kernel, "stride": stride or kernel, "pad": pad}


def dense(units: int) -> dict:
    return {"type": "dense", "units": units}


def act(name: str) -> dict:
    return {"type": name}


def dropout(rate: float) -> dict:
    return {"type": "dropout", "rate": rate}


def lrn(size: int, alpha: float, beta: float, k: float = 1.0) -> dict:
    return {"type": "lrn", "size": size, "alpha": alpha, "beta": beta, "k": k}


# The networks of the study's example scripts (see presets.yaml for whose they are).
NETWORKS: dict[str, list[dict]] = {
    # Caffe examples/mnist/lenet_train_test.prototxt
    "lenet": [
        conv(20, 5), pool("max", 2),
        conv(50, 5), pool("max", 2),
        dense(500), act("relu"),
        dense(10),
    ],
    # TensorFlow mnist_deep.py
    "mnist_deep": [
        conv(32, 5, pad=2), act("relu"), pool("max", 2),
        conv(64, 5, pad=2), act("relu"), pool("max", 2),
        dense(1024), act("relu"), dropout(0.5),
        dense(10),
    ],
    # Theano deep learning tutorial convolutional_mlp.py (LeNet-5 style)
    "lenet5_tanh": [
        conv(20, 5), pool("max", 2), act("tanh"),
        conv(50, 5), pool("max", 2), act("tanh"),
        dense(500), act("tanh"),
        dense(10),
    ],
    # Torch demos train-on-mnist.lua (input padded to 32x32)
    "torch_mnist": [
        conv(32, 5), act("tanh"), pool("max", 3, 3),
        conv(64, 5), act("tanh"), pool("max", 2),
        dense(200), act("tanh"),
        dense(10),
    ],
    # Caffe examples/cifar10/cifar10_quick_train_test.prototxt
    "cifar10_quick": [
        conv(32, 5, pad=2), pool("max", 3, 2), act("relu"),
        conv(32, 5, pad=2), act("relu"), pool("avg", 3, 2),
        conv(64, 5, pad=2), act("relu"), pool("avg", 3, 2),
        dense(64),
        dense(10),
    ],
    # TensorFlow models/tutorials/image/cifar10 (on 24x24 crops)
    "tf_cifar10": [
        conv(64, 5, pad=2), act("relu"), pool("max", 3, 2), lrn(9, 0.001, 0.75, 1.0),
        conv(64, 5, pad=2), act("relu"), lrn(9, 0.001, 0.75, 1.0), pool("max", 3, 2),
        dense(384), act("relu"),
        dense(192), act("relu"),
        dense(10),
    ],
    # Torch demos train-on-cifar.lua
    "torch_cifar10": [
        conv(16, 5), act("tanh"), pool("max", 2),
        conv(256, 5), act("tanh"), pool("max", 2),
        dense(128), act("tanh"),
        dense(10),
    ],
}


class SpecError(ValueError):
    """A network spec that cannot be built on the given input."""


def pool_out(size: int, kernel: int, stride: int, pad: int) -> int:
    """Caffe's pooling output size: ceil rounding, last window starting inside the input."""
    out = int(math.ceil((size + 2 * pad - kernel) / stride)) + 1
    if pad and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def conv_out(size: int, kernel: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - kernel) // stride + 1


def shapes(layers: list[dict], input_shape: Shape) -> list[Shape | tuple[int]]:
    """Output shape after every layer; raises SpecError where a layer does not fit."""
    c, h, w = input_shape
    flat: int | None = None
    out: list = []
    for i, layer in enumerate(layers):
        kind = layer["type"]
        if kind == "conv":
            if flat is not None:
                raise SpecError(f"layer {i}: conv after dense")
            h = conv_out(h, layer["kernel"], layer.get("stride", 1), layer.get("pad", 0))
            w = conv_out(w, layer["kernel"], layer.get("stride", 1), layer.get("pad", 0))
            c = layer["filters"]
        elif kind == "pool":
            if flat is not None:
                raise SpecError(f"layer {i}: pool after dense")
            h = pool_out(h, layer["kernel"], layer["stride"], layer.get("pad", 0))
            w = pool_out(w, layer["kernel"], layer["stride"], layer.get("pad", 0))
        elif kind == "dense":
            flat = layer["units"]
        if h < 1 or w < 1:
            raise SpecError(f"layer {i} ({kind}) leaves no pixels on a {input_shape} input")
        out.append((flat,) if flat is not None else (c, h, w))
    return out


def param_counts(layers: list[dict], input_shape: Shape) -> list[int]:
    """Trainable parameters (weights + biases) per layer."""
    counts = []
    prev: Shape | tuple[int] = input_shape
    for layer, shape in zip(layers, shapes(layers, input_shape)):
        kind = layer["type"]
        if kind == "conv":
            fan_in = prev[0] * layer["kernel"] ** 2
            counts.append(fan_in * layer["filters"] + layer["filters"])
        elif kind == "dense":
            fan_in = math.prod(prev)
            counts.append(fan_in * layer["units"] + layer["units"])
        else:
            counts.append(0)
        prev = shape
    return counts


def param_count(layers: list[dict], input_shape: Shape) -> int:
    return sum(param_counts(layers, input_shape))


def flops_per_image(layers: list[dict], input_shape: Shape) -> dict[str, int]:
    """Multiply-adds x2 of the conv and dense layers, forward; backward is counted as 2x forward."""
    forward = 0
    prev: Shape | tuple[int] = input_shape
    for layer, shape in zip(layers, shapes(layers, input_shape)):
        if layer["type"] == "conv":
            c_out, h, w = shape
            forward += 2 * c_out * h * w * prev[0] * layer["kernel"] ** 2
        elif layer["type"] == "dense":
            forward += 2 * math.prod(prev) * layer["units"]
        prev = shape
    return {"forward": forward, "train": 3 * forward}


def fan_in(layer: dict, prev: Shape | tuple[int]) -> int:
    if layer["type"] == "conv":
        return prev[0] * layer["kernel"] ** 2
    return math.prod(prev)


def xavier_limit(fan: int) -> float:
    """Caffe's xavier filler (variance_norm FAN_IN): uniform in +-sqrt(3 / fan_in)."""
    return math.sqrt(3.0 / fan)


def resolve(network: str | list[dict], num_classes: int) -> list[dict]:
    """A named network (or an inline layer list) with its last dense layer sized to the classes."""
    if isinstance(network, str):
        if network not in NETWORKS:
            raise SpecError(f"unknown network {network!r}; known: {', '.join(sorted(NETWORKS))}")
        layers = [dict(layer) for layer in NETWORKS[network]]
    else:
        layers = [dict(layer) for layer in network]
    dense_at = [i for i, layer in enumerate(layers) if layer["type"] == "dense"]
    if not dense_at or dense_at[-1] != len(layers) - 1:
        raise SpecError("a network must end with a dense layer (the logits)")
    layers[-1]["units"] = num_classes
    return layers
