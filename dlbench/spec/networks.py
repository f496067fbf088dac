"""Framework-neutral network specs: the one description every adapter builds from.

A spec is plain JSON-able data (the trainer runs in framework environments that
have numpy and the framework, nothing else), so this module imports nothing heavy.

Layer types and their keys:
  conv     filters, kernel, stride=1, pad=0            (weights + bias)
           table: optional connection table, one list of input planes per output map
           (Torch's SpatialConvolutionMap): a sparse convolution, only the listed planes
           feed an output map; every map has the same number of inputs (its fan-in)
  pool     mode max|avg, kernel, stride, pad=0         (Caffe's ceil rounding; max pooling
           ignores the padded cells, as Caffe and Torch do)
  dense    units                                       (flattens its input)
  relu | tanh | sigmoid                                (element-wise)
  dropout  rate                                        (train only)
  lrn      size, alpha, beta, k=1    across channels, Caffe's definition:
           x / (k + alpha / size * sum of x^2 over `size` channels) ** beta
  batchnorm  decay=0.9, eps=1e-5    per channel of a conv's maps (gamma, beta trained; mean, var running)
  residual   body, shortcut=[]    two layer lists from the same input, their outputs added (an empty
           shortcut is the identity; a shape change needs a projection in it: a 1x1 strided conv)
  gap      global average pooling: (C, H, W) -> (C,), a dense layer's input as it is
A conv may leave out its bias (bias=False: a conv followed by batch normalisation, whose beta is the bias).

A transformer's layers work on a token sequence, shape (T, D): T tokens of D features.
  tokens     a conv's maps (C, H, W) as H * W tokens of C features (row by row, as PyTorch's flatten(2) and a
             reshape of NHWC order them), plus a learned position embedding pos (T, C) (Dosovitskiy et al. 2021)
  layernorm  eps=1e-6    over the last axis: gamma (x - mean) / sqrt(var + eps) + beta, the biased variance
             (gamma, beta (D,)); on a token sequence or a flat vector
  attention  heads       multi-head self-attention over the tokens (Vaswani et al. 2017): q, k, v = x Wq^T + bq, ...,
             each split into `heads` heads of D / heads features (head h: features h * D/heads on), per head
             softmax(q k^T * scale) v, the heads concatenated, then x Wo^T + bo; arrays Wq bq Wk bk Wv bv Wo bo,
             W (D, D) (out, in). scale = attention_scale(): 1 / sqrt(D / heads), the one definition
  gelu       x * Phi(x), Phi the standard normal CDF (the exact form, erf; not the tanh approximation)
  dense      on a token sequence acts on every token alike (D -> units per token); on maps it flattens them
  gap        on a token sequence: the mean over the tokens, (T, D) -> (D,)
  residual   on a token sequence as on maps: body(x) + shortcut(x)
Layer normalisation's epsilon is LN_EPS (1e-6, the ViT paper's and timm's; PyTorch's own default is 1e-5, Keras'
1e-3, Flax's 1e-6): each adapter passes it to its layer. The attention's scale is passed to PyTorch's
scaled_dot_product_attention and JAX's dot_product_attention and written out in TensorFlow's layer.

Batch normalisation, the one definition every adapter maps (He et al. 2016; Ioffe and Szegedy 2015):
  training   y = gamma (x - mean) / sqrt(var + eps) + beta with the batch's mean and biased variance over
             (N, H, W); then running_mean = decay * running_mean + (1 - decay) * mean and
             running_var = decay * running_var + (1 - decay) * var * m / (m - 1), m = N * H * W: the running
             variance follows the unbiased batch variance (PyTorch's and Caffe's rule)
  inference  the same with running_mean and running_var
  eps 1e-5; decay 0.9, the weight of the old running value. Each framework's own name for it:
             PyTorch  BatchNorm2d(momentum = 1 - decay = 0.1, eps): its own layer, unbiased running variance
             Keras    BatchNormalization(momentum = decay = 0.9) updates with the biased variance, so the
                      TensorFlow adapter runs its own layer of this definition (tensorflow.BatchNorm)
             Flax     nn.BatchNorm(momentum = decay = 0.9) likewise biased: the JAX adapter's jax.BatchNorm
  The canonical arrays of a batchnorm layer are (gamma, beta, running_mean, running_var), each (C,); a
  fresh layer has (1, 0, 0, 1). gamma and beta take the layer's multipliers as a conv's W and b do.
conv, dense and batchnorm layers may carry multipliers of the point's learning rate and weight decay,
Caffe's lr_mult and decay_mult: lr_mult, bias_lr_mult, decay_mult, bias_decay_mult (each 1
when absent). Every adapter honours them.
The initial weights are not part of the spec: dlbench.spec.initial_weights draws them from the
point's scheme and seed, once, and every adapter loads the same numbers.
The final dense layer produces the logits; softmax cross-entropy is the loss.
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

Spec = dict[str, Any]
Shape = tuple[int, int, int]  # (channels, height, width)

ACTIVATIONS = ("relu", "tanh", "sigmoid")  # the study's element-wise layers (gelu is a transformer's: below)


MULTIPLIERS = ("lr_mult", "bias_lr_mult", "decay_mult", "bias_decay_mult")


def conv(filters: int, kernel: int, stride: int = 1, pad: int = 0, table: list[list[int]] | None = None,
         bias: bool = True, **mults: float) -> dict:
    layer = {"type": "conv", "filters": filters, "kernel": kernel, "stride": stride, "pad": pad}
    if table is not None:
        layer["table"] = [sorted(row) for row in table]
    if not bias:
        layer["bias"] = False
    return _with_mults(layer, mults)


def has_bias(layer: dict) -> bool:
    return bool(layer.get("bias", True))


BN_DECAY = 0.9
BN_EPS = 1e-5


def batchnorm(decay: float = BN_DECAY, eps: float = BN_EPS, **mults: float) -> dict:
    return _with_mults({"type": "batchnorm", "decay": decay, "eps": eps}, mults)


LN_EPS = 1e-6


def layernorm(eps: float = LN_EPS, **mults: float) -> dict:
    return _with_mults({"type": "layernorm", "eps": eps}, mults)


def attention(heads: int, **mults: float) -> dict:
    return _with_mults({"type": "attention", "heads": heads}, mults)


def attention_scale(dim: int, heads: int) -> float:
    """The factor of q k^T before the softmax: 1 / sqrt(features per head) (Vaswani et al. 2017)."""
    return 1.0 / math.sqrt(dim // heads)


def tokens(**mults: float) -> dict:
    return _with_mults({"type": "tokens"}, mults)


def residual(body: list[dict], shortcut: list[dict] | None = None) -> dict:
    return {"type": "residual", "body": list(body), "shortcut": list(shortcut or [])}


def gap() -> dict:
    return {"type": "gap"}


def _with_mults(layer: dict, mults: dict) -> dict:
    unknown = set(mults) - set(MULTIPLIERS)
    if unknown:
        raise SpecError(f"unknown multiplier {sorted(unknown)[0]!r}; known: {', '.join(MULTIPLIERS)}")
    return {**layer, **mults}


def random_table(planes_in: int, planes_out: int, fan_in: int, seed: int) -> list[list[int]]:
    """A random connection table: for each output map, the next `fan_in` planes of a random order of the
    input planes, a new order drawn once the whole chunks of the last one are used up.

    This is the algorithm Torch documents for nn.tables.random. The order is our own Fisher-Yates
    shuffle driven by random.Random(seed).random() alone (the one stream Python keeps the same across
    versions), so the table depends on the seed only and every framework gets the same one.
    """
    if not 1 <= fan_in <= planes_in:
        raise SpecError(f"a connection table needs 1 <= fan_in <= input planes, got {fan_in} of {planes_in}")
    rng = random.Random(seed)

    def order() -> list[int]:
        planes = list(range(planes_in))
        for i in range(planes_in - 1, 0, -1):
            j = int(rng.random() * (i + 1))
            planes[i], planes[j] = planes[j], planes[i]
        return planes

    chunks = planes_in // fan_in
    table, current, used = [], order(), 0
    for _ in range(planes_out):
        table.append(sorted(current[used * fan_in:(used + 1) * fan_in]))
        used += 1
        if used == chunks:
            current, used = order(), 0
    return table


def pool(mode: str, kernel: int, stride: int | None = None, pad: int = 0) -> dict:
    return {"type": "pool", "mode": mode, "kernel": kernel, "stride": stride or kernel, "pad": pad}


def dense(units: int, **mults: float) -> dict:
    return _with_mults({"type": "dense", "units": units}, mults)


def act(name: str) -> dict:
    return {"type": name}


def dropout(rate: float) -> dict:
    return {"type": "dropout", "rate": rate}


def lrn(size: int, alpha: float, beta: float, k: float = 1.0) -> dict:
    return {"type": "lrn", "size": size, "alpha": alpha, "beta": beta, "k": k}


# The networks of the study's example scripts (see presets.yaml for whose they are).
NETWORKS: dict[str, list[dict]] = {
    # Caffe examples/mnist/lenet_train_test.prototxt (biases learn at twice the rate: lr_mult 2)
    "lenet": [
        conv(20, 5, bias_lr_mult=2), pool("max", 2),
        conv(50, 5, bias_lr_mult=2), pool("max", 2),
        dense(500, bias_lr_mult=2), act("relu"),
        dense(10, bias_lr_mult=2),
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
    # Torch demos train-on-mnist.lua (input padded to 32x32; its first pooling pads by 1: 28 -> 10)
    "torch_mnist": [
        conv(32, 5), act("tanh"), pool("max", 3, 3, pad=1),
        conv(64, 5), act("tanh"), pool("max", 2),
        dense(200), act("tanh"),
        dense(10),
    ],
    # Caffe examples/cifar10/cifar10_quick_train_test.prototxt (pool1 is MAX then ReLU, no ReLU after ip1)
    "cifar10_quick": [
        conv(32, 5, pad=2, bias_lr_mult=2), pool("max", 3, 2), act("relu"),
        conv(32, 5, pad=2, bias_lr_mult=2), act("relu"), pool("avg", 3, 2),
        conv(64, 5, pad=2, bias_lr_mult=2), act("relu"), pool("avg", 3, 2),
        dense(64, bias_lr_mult=2),
        dense(10, bias_lr_mult=2),
    ],
    # TensorFlow models/tutorials/image/cifar10 (on 24x24 crops): weight decay on local3 and local4's
    # weights only, never on a bias
    "tf_cifar10": [
        conv(64, 5, pad=2, decay_mult=0, bias_decay_mult=0), act("relu"), pool("max", 3, 2),
        lrn(9, 0.001, 0.75, 1.0),
        conv(64, 5, pad=2, decay_mult=0, bias_decay_mult=0), act("relu"), lrn(9, 0.001, 0.75, 1.0),
        pool("max", 3, 2),
        dense(384, bias_decay_mult=0), act("relu"),
        dense(192, bias_decay_mult=0), act("relu"),
        dense(10, decay_mult=0, bias_decay_mult=0),
    ],
    # Torch demos train-on-cifar.lua: sparse convolutions (SpatialConvolutionMap with random
    # connection tables, 3 -> 16 planes with fan-in 1, 16 -> 256 with fan-in 4), tables drawn with seed 1
    "torch_cifar10": [
        conv(16, 5, table=random_table(3, 16, 1, seed=1)), act("tanh"), pool("max", 2),
        conv(256, 5, table=random_table(16, 256, 4, seed=1)), act("tanh"), pool("max", 2),
        dense(128), act("tanh"),
        dense(10),
    ],
    # Flax examples/mnist (Linen, flax v0.12.2): 3x3 'SAME' convolutions, average pooling
    "flax_cnn": [
        conv(32, 3, pad=1), act("relu"), pool("avg", 2),
        conv(64, 3, pad=1), act("relu"), pool("avg", 2),
        dense(256), act("relu"),
        dense(10),
    ],
    # The Reslab Theano tutorial's colour convnet (6_convnet_color.py), from which the study's
    # Theano CIFAR-10 run derives
    "reslab_cifar10": [
        conv(4, 3), act("relu"), pool("max", 3),
        conv(8, 3), act("relu"), pool("max", 2),
        dense(100), act("relu"),
        dense(10),
    ],
}


def resnet(blocks: int = 3, classes: int = 10) -> list[dict]:
    """He et al. 2016 (section 4.2)'s CIFAR ResNet of 6 * blocks + 2 layers: a 3x3 conv of 16 filters, three
    stages of `blocks` basic blocks at 16, 32 and 64 filters (the first block of stages 2 and 3 strides 2), batch
    normalisation after every conv (convs without bias), global average pooling, one dense layer.
    Shortcuts: identity where the shape stays; where it changes, a 1x1 conv of stride 2 with batch normalisation
    (the paper's option B; its CIFAR runs used option A, zero padding, which has no parameters)."""
    def block(filters: int, stride: int, planes_in: int) -> list[dict]:
        body = [conv(filters, 3, stride, pad=1, bias=False), batchnorm(), act("relu"),
                conv(filters, 3, 1, pad=1, bias=False), batchnorm()]
        projection = stride != 1 or planes_in != filters
        shortcut = [conv(filters, 1, stride, bias=False), batchnorm()] if projection else []
        return [residual(body, shortcut), act("relu")]

    layers = [conv(16, 3, pad=1, bias=False), batchnorm(), act("relu")]
    planes = 16
    for stage, filters in enumerate((16, 32, 64)):
        for b in range(blocks):
            layers += block(filters, 2 if stage and b == 0 else 1, planes)
            planes = filters
    return layers + [gap(), dense(classes)]


# He et al. 2016, "Deep Residual Learning for Image Recognition", section 4.2: ResNet-20 (n = 3), 0.27 M parameters
# (272,474 here: option B's three projections, no conv biases)
NETWORKS["resnet20"] = resnet(3)


def vit(patch: int = 4, dim: int = 64, depth: int = 4, heads: int = 4, mlp: int = 256, classes: int = 10) -> list[dict]:
    """A small vision transformer (Dosovitskiy et al. 2021, "An Image is Worth 16x16 Words"): the image cut into
    patch x patch patches, each embedded by one linear map (a conv of kernel and stride `patch`), a learned position
    embedding, `depth` pre-norm encoder blocks (x + attention(layernorm(x)), then x + mlp(layernorm(x)), the MLP
    dense(mlp), gelu, dense(dim)), a final layer norm, the mean over the tokens (no class token: the global average
    pooling head of Beyer et al. 2022, "Better plain ViT baselines") and one dense layer.
    No weight decay on biases, layer norms and the position embedding (decay multipliers 0), as timm's
    param_groups_weight_decay leaves them out of AdamW's decay in DeiT's training."""
    no_bias_decay = {"bias_decay_mult": 0}
    layers = [conv(dim, patch, stride=patch, **no_bias_decay), tokens(decay_mult=0)]
    for _ in range(depth):
        layers += [residual([layernorm(decay_mult=0, bias_decay_mult=0), attention(heads, **no_bias_decay)]),
                   residual([layernorm(decay_mult=0, bias_decay_mult=0), dense(mlp, **no_bias_decay), act("gelu"),
                             dense(dim, **no_bias_decay)])]
    return layers + [layernorm(decay_mult=0, bias_decay_mult=0), gap(), dense(classes, **no_bias_decay)]


# A ViT of 4 blocks, width 64, 4 heads of 16, MLP 256 (DeiT-Ti's ratio 4), patches of 4x4: 28x28 Fashion-MNIST
# gives 49 tokens, 32x32 CIFAR 64; 204,938 parameters on 28x28 (well under DeiT-Ti's 5.7 M)
NETWORKS["vit_mini"] = vit()


# The input each network was made for (channels, height, width): Torch's MNIST is padded to 32x32,
# TensorFlow's CIFAR-10 trains on 24x24 crops.
INPUT_SHAPES: dict[str, Shape] = {
    "lenet": (1, 28, 28), "mnist_deep": (1, 28, 28), "lenet5_tanh": (1, 28, 28), "torch_mnist": (1, 32, 32),
    "cifar10_quick": (3, 32, 32), "tf_cifar10": (3, 24, 24), "torch_cifar10": (3, 32, 32),
    "reslab_cifar10": (3, 32, 32), "flax_cnn": (1, 28, 28), "resnet20": (3, 32, 32), "vit_mini": (1, 28, 28),
}

# The layer types each kind of network may hold beyond the study's (a framework's adapter may lack them:
# registry.Framework.cannot_build).
KINDS_BEYOND_STUDY = ("batchnorm", "residual", "gap", "tokens", "layernorm", "attention", "gelu")


def leaves(layers: list[dict]) -> list[dict]:
    """Every layer that is not a residual block, depth first: a block's body, then its shortcut."""
    out = []
    for layer in layers:
        if layer["type"] == "residual":
            out += leaves(layer["body"]) + leaves(layer["shortcut"])
        else:
            out.append(layer)
    return out


def kinds(layers: list[dict]) -> set[str]:
    """The layer types a network uses, residual blocks and what they hold included."""
    found = {layer["type"] for layer in leaves(layers)}
    return found | ({"residual"} if any(layer["type"] == "residual" for layer in _all(layers)) else set())


def _all(layers: list[dict]):
    for layer in layers:
        yield layer
        if layer["type"] == "residual":
            yield from _all(layer["body"])
            yield from _all(layer["shortcut"])


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


def shapes(layers: list[dict], input_shape: Shape) -> list[Shape | tuple[int, int] | tuple[int]]:
    """Output shape after every layer: (C, H, W) maps, (T, D) tokens or (units,); raises SpecError where a layer does
    not fit."""
    cur: tuple = tuple(input_shape)
    out: list = []
    for i, layer in enumerate(layers):
        kind = layer["type"]
        after = "dense" if len(cur) == 1 else "tokens"
        if kind in ("conv", "pool", "batchnorm", "tokens") and len(cur) != 3:
            what = "batchnorm" if kind == "batchnorm" else kind
            why = " (it normalises a conv's maps)" if kind == "batchnorm" else ""
            raise SpecError(f"layer {i}: {what} after {after}{why}")
        if kind == "conv":
            c, h, w = cur
            if "table" in layer:
                check_table(layer, c, i)
            k, s, p = layer["kernel"], layer.get("stride", 1), layer.get("pad", 0)
            cur = (layer["filters"], conv_out(h, k, s, p), conv_out(w, k, s, p))
        elif kind == "pool":
            c, h, w = cur
            k, s, p = layer["kernel"], layer["stride"], layer.get("pad", 0)
            cur = (c, pool_out(h, k, s, p), pool_out(w, k, s, p))
        elif kind == "dense":
            cur = (cur[0], layer["units"]) if len(cur) == 2 else (layer["units"],)
        elif kind == "tokens":
            c, h, w = cur
            cur = (h * w, c)
        elif kind == "attention":
            if len(cur) != 2:
                raise SpecError(f"layer {i}: attention needs a token sequence (a tokens layer before it)")
            if cur[1] % layer["heads"]:
                raise SpecError(f"layer {i}: {cur[1]} features do not split into {layer['heads']} heads")
        elif kind == "gap":
            if len(cur) == 1:
                raise SpecError(f"layer {i}: global average pooling after dense")
            cur = (cur[0],) if len(cur) == 3 else (cur[1],)
        elif kind == "residual":
            if len(cur) == 1:
                raise SpecError(f"layer {i}: a residual block after dense")
            body = shapes(layer["body"], cur)[-1] if layer["body"] else cur
            short = shapes(layer["shortcut"], cur)[-1] if layer["shortcut"] else cur
            if body != short:
                raise SpecError(f"layer {i}: a residual block's body gives {body} and its shortcut {short}: they are "
                                "added, so they must agree (a shape change needs a projection in the shortcut)")
            if len(body) != len(cur):
                raise SpecError(f"layer {i}: a residual block must keep maps or tokens (no flattening dense inside)")
            cur = body
        if len(cur) == 3 and (cur[1] < 1 or cur[2] < 1):
            raise SpecError(f"layer {i} ({kind}) leaves no pixels on a {input_shape} input")
        out.append(cur)
    return out


def check_table(layer: dict, planes_in: int, index: int = 0) -> None:
    """A connection table fits its layer: one row per output map, planes that exist, one fan-in for all."""
    table = layer["table"]
    if len(table) != layer["filters"]:
        raise SpecError(f"layer {index}: the connection table has {len(table)} rows for {layer['filters']} filters")
    if any(not 0 <= p < planes_in for row in table for p in row):
        raise SpecError(f"layer {index}: the connection table names an input plane beyond the {planes_in} planes "
                        "its input has (a table is drawn for one input depth)")
    fan_ins = {len(row) for row in table}
    if len(fan_ins) != 1 or 0 in fan_ins or any(len(set(row)) != len(row) for row in table):
        raise SpecError(f"layer {index}: every output map of a connection table needs the same number of distinct "
                        "input planes")


def connections(layer: dict, planes_in: int) -> int:
    """Input planes feeding each output map of a conv layer: its table's fan-in, else every plane."""
    return len(layer["table"][0]) if "table" in layer else planes_in


def param_counts(layers: list[dict], input_shape: Shape) -> list[int]:
    """Trainable parameters (weights + biases) per layer; a sparse conv counts its connected weights only."""
    counts = []
    prev: Shape | tuple[int] = input_shape
    for layer, shape in zip(layers, shapes(layers, input_shape)):
        kind = layer["type"]
        if kind in ("conv", "dense"):
            width = layer["filters"] if kind == "conv" else layer["units"]
            counts.append(fan_in(layer, prev) * width + (width if has_bias(layer) else 0))
        elif kind == "batchnorm":
            counts.append(2 * prev[0])  # gamma and beta; the running statistics are not trained
        elif kind in ("layernorm", "attention", "tokens"):
            counts.append(sum(math.prod(shape) for _, shape in arrays(layer, prev)))
        elif kind == "residual":
            counts.append(sum(param_counts(layer["body"], prev)) + sum(param_counts(layer["shortcut"], prev)))
        else:
            counts.append(0)
        prev = shape
    return counts


def param_count(layers: list[dict], input_shape: Shape) -> int:
    return sum(param_counts(layers, input_shape))


def flops_per_image(layers: list[dict], input_shape: Shape) -> dict[str, int]:
    """Multiply-adds x2 of the matrix products, forward: the conv and dense layers (those inside residual blocks
    too; a dense on tokens once per token) and attention's (its four projections, q k^T and the weighted sum of
    v: 4 x 2 T D^2 + 2 x 2 T^2 D); backward is counted as 2x forward. Element-wise work (activations, batch and
    layer normalisation, softmax, the residual add, the position embedding, pooling) is not counted."""
    forward = 0
    for _, layer, prev, shape in walk(layers, input_shape):
        if layer["type"] == "conv":
            c_out, h, w = shape
            forward += 2 * c_out * h * w * fan_in(layer, prev)
        elif layer["type"] == "dense":
            per_token = prev[0] if len(prev) == 2 else 1
            forward += 2 * per_token * fan_in(layer, prev) * layer["units"]
        elif layer["type"] == "attention":
            t, d = prev
            forward += 4 * 2 * t * d * d + 2 * 2 * t * t * d
    return {"forward": forward, "train": 3 * forward}


def walk(layers: list[dict], input_shape: Shape, prefix: str = "") -> list[tuple[str, dict, tuple, tuple]]:
    """(path, layer, input shape, output shape) of every layer that is not a residual block, depth first (a
    block's body, then its shortcut). path: the spec index, `3_body1` for the second layer of block 3's body."""
    out = []
    prev: Shape | tuple[int] = tuple(input_shape)
    for i, (layer, shape) in enumerate(zip(layers, shapes(layers, input_shape))):
        if layer["type"] == "residual":
            out += walk(layer["body"], prev, f"{prefix}{i}_body")
            out += walk(layer["shortcut"], prev, f"{prefix}{i}_shortcut")
        else:
            out.append((f"{prefix}{i}", layer, prev, shape))
        prev = shape
    return out


PARAMETRISED = ("conv", "dense", "batchnorm", "tokens", "layernorm", "attention")
ATTENTION_ARRAYS = ("Wq", "bq", "Wk", "bk", "Wv", "bv", "Wo", "bo")


def arrays(layer: dict, prev: Shape | tuple[int]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of a parametrised layer's canonical arrays, in order: conv W (out, in, kh, kw) [b (out,)],
    dense W (out, in) b (out,), batchnorm gamma beta mean var (C,), tokens pos (T, D), layernorm gamma beta (D,),
    attention Wq bq Wk bk Wv bv Wo bo (W (D, D), b (D,))."""
    kind = layer["type"]
    if kind == "conv":
        out = [("W", (layer["filters"], prev[0], layer["kernel"], layer["kernel"]))]
        return out + [("b", (layer["filters"],))] if has_bias(layer) else out
    if kind == "dense":
        return [("W", (layer["units"], fan_in(layer, prev))), ("b", (layer["units"],))]
    if kind == "batchnorm":
        return [(name, (prev[0],)) for name in ("gamma", "beta", "mean", "var")]
    if kind == "tokens":
        return [("pos", (prev[1] * prev[2], prev[0]))]
    if kind == "layernorm":
        return [("gamma", (prev[-1],)), ("beta", (prev[-1],))]
    if kind == "attention":
        d = prev[-1]
        return [(name, (d, d) if name.startswith("W") else (d,)) for name in ATTENTION_ARRAYS]
    raise SpecError(f"layer type {kind!r} has no parameters")


def trained_arrays(layer: dict) -> int:
    """How many of the layer's canonical arrays training moves by gradient (batchnorm's running pair is not)."""
    kind = layer["type"]
    if kind in ("batchnorm", "layernorm"):
        return 2
    if kind == "tokens":
        return 1
    if kind == "attention":
        return len(ATTENTION_ARRAYS)
    return 2 if kind == "dense" or has_bias(layer) else 1


def array_multipliers(layer: dict) -> list[tuple[float, float]]:
    """(lr multiplier, decay multiplier) of each of the layer's trained arrays, in order: a weight (W, Wq, gamma,
    pos) takes lr_mult and decay_mult, a bias (b, bq, beta) bias_lr_mult and bias_decay_mult."""
    m = multipliers(layer)
    weights, bias = (m["lr"][0], m["decay"][0]), (m["lr"][1], m["decay"][1])
    if layer["type"] == "attention":
        return [weights if name.startswith("W") else bias for name in ATTENTION_ARRAYS]
    return [weights, bias][:trained_arrays(layer)]


def fan_in(layer: dict, prev: Shape | tuple[int]) -> int:
    """Inputs of one output unit: connected planes x kernel area for a conv, the flattened input for a dense (a
    token's features for a dense on tokens)."""
    if layer["type"] == "conv":
        return connections(layer, prev[0]) * layer["kernel"] ** 2
    return prev[-1] if len(prev) == 2 else math.prod(prev)


def multipliers(layer: dict) -> dict[str, tuple[float, float]]:
    """{"lr": (weights, bias), "decay": (weights, bias)}: the layer's multipliers of the point's rate and decay."""
    return {"lr": (float(layer.get("lr_mult", 1.0)), float(layer.get("bias_lr_mult", 1.0))),
            "decay": (float(layer.get("decay_mult", 1.0)), float(layer.get("bias_decay_mult", 1.0)))}


def trainable(layers: list[dict], input_shape: Shape) -> list[tuple[int, dict, Shape | tuple[int]]]:
    """(spec index, layer, the shape of its input) of every parametrised layer (PARAMETRISED), in spec order (those
    inside a residual block depth first: body, then shortcut, each with the block's top-level index)."""
    return [(int(path.split("_")[0]), layer, prev) for path, layer, prev, _ in walk(layers, input_shape)
            if layer["type"] in PARAMETRISED]


def xavier_limit(fan: int) -> float:
    """Caffe's xavier filler (variance_norm FAN_IN): uniform in +-sqrt(3 / fan_in)."""
    return math.sqrt(3.0 / fan)


def resolve(network: str | list[dict], num_classes: int) -> list[dict]:
    """A named network (or an inline layer list) with its last dense layer sized to the classes."""
    if isinstance(network, str):
        if network not in NETWORKS:
            raise SpecError(f"unknown network {network!r}; known: {', '.join(sorted(NETWORKS))}")
        layers = copy.deepcopy(NETWORKS[network])
    else:
        layers = copy.deepcopy(list(network))
    dense_at = [i for i, layer in enumerate(layers) if layer["type"] == "dense"]
    if not dense_at or dense_at[-1] != len(layers) - 1:
        raise SpecError("a network must end with a dense layer (the logits)")
    layers[-1]["units"] = num_classes
    return layers
