"""The initial weights of a point: drawn once, in numpy, from the preset's scheme and the point's seed.

Every adapter loads these numbers (as it loads weights in `forward`), so the same point starts
from the same weights in every framework. The layout is the canonical one of
dlbench.testing.forward: conv W (out, in, kh, kw), dense W (out, in) over the input flattened in
C, H, W order; b (out,). A sparse conv's unconnected weights are exactly 0.

The schemes (a preset's `init`: a name, or a mapping with the name and its numbers) describe
what each example script does:
  xavier            Caffe's "xavier" filler: W uniform in +-sqrt(3 / fan_in); b constant `bias` (0)
  gaussian          Caffe's "gaussian" filler and the Reslab tutorial's randn * 0.1: W normal with
                    standard deviation `std`; b normal with `bias_std` where given, else constant `bias`
  truncated_normal  TensorFlow's tutorials: W normal with `std`, values beyond 2 std drawn again;
                    b constant `bias`
  torch             Torch7's reset(): W and b uniform in +-1/sqrt(fan_in)
  theano            the Theano tutorial's LeNet: W uniform in +-sqrt(6 / (fan_in + fan_out)) (x4 before
                    a sigmoid), a conv's fan_out = filters * kernel area // the area of the pooling after
                    it (integer division); b 0; the output layer (the logistic regression) W = 0
  he                He et al. 2015's initialisation, as their 2016 ResNets use it: W normal with standard
                    deviation sqrt(2 / fan_in); b 0
  vit               timm's init_weights_vit_timm, with which DeiT (Touvron et al. 2021) trains its ViTs: every
                    dense weight (the attention's four projections too) and the position embedding normal with
                    standard deviation `std` (0.02; timm's trunc_normal_ cuts at +-2 absolute, 100 std: in effect
                    never), biases 0; the patch embedding (a conv) as PyTorch's Conv2d draws it, W and b uniform
                    in +-1/sqrt(fan_in) (the torch scheme); only this scheme draws tokens and attention layers
A batchnorm layer starts at gamma 1, beta 0, running mean 0, running variance 1 whatever the scheme, a layernorm
at gamma 1, beta 0; a conv without bias (bias=False) gets no b. The schemes' per-layer lists count conv and dense
layers only.
`std` and `bias` are one number for every layer or a list with one per conv and dense layer.
fan_in of a conv = its connected input planes x kernel area (a sparse conv counts its connections).

numpy's RandomState, whose streams numpy keeps the same across versions: the Theano environment's
numpy 1.23 and the others' numpy 2 draw the same numbers.
"""

from __future__ import annotations

import math

import numpy as np

from dlbench.spec import networks

SCHEMES = ("xavier", "gaussian", "truncated_normal", "torch", "theano", "he", "vit")
DRAWN_BY_VIT_ONLY = ("tokens", "attention")
VIT_STD = 0.02
DEFAULT = {"name": "xavier"}
TRUNCATE_AT = 2.0  # standard deviations, as tf.truncated_normal


class InitError(ValueError):
    """An initialiser that does not fit its network."""


def normalise(init: str | dict | None) -> dict:
    """A preset's `init` as a mapping with its name: `torch` -> {"name": "torch"}."""
    if init is None:
        return dict(DEFAULT)
    spec = {"name": init} if isinstance(init, str) else dict(init)
    if spec.get("name") not in SCHEMES:
        raise InitError(f"unknown initialiser {spec.get('name')!r}; known: {', '.join(SCHEMES)}")
    return spec


def check(init: str | dict | None, layers: list[dict]) -> None:
    """The scheme is known and its per-layer lists have one value per conv and dense layer; InitError if not."""
    spec = normalise(init)
    only_vit = sorted({layer["type"] for layer in networks.leaves(layers)} & set(DRAWN_BY_VIT_ONLY))
    if only_vit and spec["name"] != "vit":
        raise InitError(f"initialiser {spec['name']!r} does not draw {', '.join(only_vit)} layers; use vit")
    count = sum(1 for layer in networks.leaves(layers) if layer["type"] in ("conv", "dense"))
    for key in ("std", "bias"):
        if key in spec:
            per_layer(spec[key], count, key)


def per_layer(value, count: int, what: str) -> list[float]:
    """One number per trainable layer from a number or a list of them."""
    if isinstance(value, list | tuple):
        if len(value) != count:
            raise InitError(f"init.{what} lists {len(value)} values for {count} conv and dense layers")
        return [float(v) for v in value]
    return [float(value)] * count


def connection_mask(layer: dict, planes_in: int) -> np.ndarray:
    """(out, in, 1, 1) float32: 1 where the conv's table connects an input plane to an output map."""
    mask = np.zeros((layer["filters"], planes_in, 1, 1), np.float32)
    for out, row in enumerate(layer["table"]):
        mask[out, row] = 1.0
    return mask


def _pool_area_after(layers: list[dict], index: int) -> int:
    """The window area of the first pooling after layer `index`, before the next conv or dense (1 if none)."""
    for layer in layers[index + 1:]:
        if layer["type"] in ("conv", "dense"):
            break
        if layer["type"] == "pool":
            return layer["kernel"] ** 2
    return 1


def _activation_after(layers: list[dict], index: int) -> str | None:
    for layer in layers[index + 1:]:
        if layer["type"] in ("conv", "dense"):
            return None
        if layer["type"] in networks.ACTIVATIONS:
            return layer["type"]
    return None


def _truncated_normal(rng: np.random.RandomState, std: float, shape: tuple) -> np.ndarray:
    values = rng.standard_normal(shape)
    while True:
        outside = np.abs(values) > TRUNCATE_AT
        if not outside.any():
            return values * std
        values[outside] = rng.standard_normal(int(outside.sum()))


def draw(layers: list[dict], input_shape: tuple[int, int, int], init: str | dict | None,
         seed: int) -> list[tuple[np.ndarray, ...]]:
    """The canonical arrays (networks.arrays) of every conv, dense and batchnorm layer, in spec order, float32:
    (W, b) of a conv or dense layer, (W,) of a conv without bias, (gamma, beta, mean, var) of a batchnorm."""
    check(init, layers)
    spec = normalise(init)
    name = spec["name"]
    every = networks.trainable(layers, input_shape)
    count = sum(1 for _, layer, _ in every if layer["type"] in ("conv", "dense"))
    stds = per_layer(spec.get("std", VIT_STD if name == "vit" else 0.01), count, "std")
    biases = per_layer(spec.get("bias", 0.0), count, "bias")
    rng = np.random.RandomState(seed)
    out, j = [], 0
    for i, layer, prev in every:  # one stream, in spec order: only conv, dense, tokens and attention draw from it
        kind = layer["type"]
        if kind == "batchnorm":
            out.append(_batchnorm_start(prev[0]))
        elif kind == "layernorm":
            out.append((np.ones(prev[-1], np.float32), np.zeros(prev[-1], np.float32)))
        elif kind in DRAWN_BY_VIT_ONLY:
            std = float(spec.get("std", VIT_STD)) if not isinstance(spec.get("std"), list) else VIT_STD
            out.append(tuple((rng.standard_normal(shape) * std if a.startswith(("W", "pos")) else np.zeros(shape))
                             .astype(np.float32) for a, shape in networks.arrays(layer, prev)))
        else:
            out.append(_draw_one(name, spec, layers, i, j, count, layer, prev, stds, biases, rng))
            j += 1
    return out


def _batchnorm_start(channels: int) -> tuple[np.ndarray, ...]:
    return (np.ones(channels, np.float32), np.zeros(channels, np.float32), np.zeros(channels, np.float32),
            np.ones(channels, np.float32))


def _draw_one(name, spec, layers, i, j, count, layer, prev, stds, biases, rng) -> tuple[np.ndarray, ...]:
    if layer["type"] == "conv":
        w_shape = (layer["filters"], prev[0], layer["kernel"], layer["kernel"])
    else:
        w_shape = (layer["units"], networks.fan_in(layer, prev))
    width = w_shape[0]
    fan_in = networks.fan_in(layer, prev)
    bias = np.full(width, biases[j])
    if name == "xavier":
        limit = math.sqrt(3.0 / fan_in)
        w = rng.uniform(-limit, limit, w_shape)
    elif name == "gaussian":
        w = rng.standard_normal(w_shape) * stds[j]
        if "bias_std" in spec:
            bias = rng.standard_normal(width) * float(spec["bias_std"])
    elif name == "truncated_normal":
        w = _truncated_normal(rng, stds[j], w_shape)
    elif name == "he":
        w = rng.standard_normal(w_shape) * math.sqrt(2.0 / fan_in)
    elif name == "vit" and layer["type"] == "dense":
        w = rng.standard_normal(w_shape) * stds[j]
    elif name in ("torch", "vit"):  # vit: its patch embedding, a conv, as PyTorch's Conv2d draws it
        limit = 1.0 / math.sqrt(fan_in)
        w = rng.uniform(-limit, limit, w_shape)
        bias = rng.uniform(-limit, limit, width)
    else:  # theano
        if j == count - 1:
            w = np.zeros(w_shape)
        else:
            if layer["type"] == "conv":
                # integer division, as the tutorial's `// numpy.prod(poolsize)`
                fan_out = layer["filters"] * layer["kernel"] ** 2 // _pool_area_after(layers, i)
            else:
                fan_out = layer["units"]
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            if _activation_after(layers, i) == "sigmoid":
                limit *= 4
            w = rng.uniform(-limit, limit, w_shape)
        bias = np.zeros(width)
    w = w.astype(np.float32)
    if layer["type"] == "conv" and "table" in layer:
        w *= connection_mask(layer, prev[0])
    return (w, bias.astype(np.float32)) if networks.has_bias(layer) or layer["type"] == "dense" else (w,)


def describe(init: str | dict | None) -> str:
    """The scheme as the record names it: `torch`, `truncated_normal(std=[...], bias=[...])`."""
    spec = normalise(init)
    extra = ", ".join(f"{k}={spec[k]}" for k in sorted(spec) if k != "name")
    return f"{spec['name']}({extra})" if extra else spec["name"]
