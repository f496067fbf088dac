"""The spec's network as Keras layers, for the TensorFlow adapter (NHWC: TensorFlow's CPU convolutions and oneDNN
want channels last).

A sparse convolution (a conv with a connection table) is a Conv2D whose kernel is multiplied by
the table's 0/1 mask in every pass (MaskedConv2D): the unconnected weights start at 0, their
gradient is exactly 0, so they stay 0.

A transformer's layers (networks.py): Tokens (the maps reshaped to tokens plus the position embedding), Keras'
LayerNormalization with the spec's epsilon, Attention (four Dense projections and the spec's scale, written out),
Keras' exact GELU.

Batch normalisation is this module's BatchNorm layer, the spec's definition (networks.py): Keras'
BatchNormalization (momentum = the spec's decay) updates its moving variance with the biased batch
variance, where the spec (and PyTorch) use the unbiased one. Its statistics are computed in the variables'
dtype (float32 under mixed bfloat16). A residual block is a Residual layer holding its body's and its
shortcut's layers; global average pooling is Keras' GlobalAveragePooling2D.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dlbench.spec import networks
from dlbench.spec.initial_weights import connection_mask

keras = tf.keras


class MaskedConv2D(keras.layers.Conv2D):
    """A sparse convolution: the kernel (kh, kw, in, out) times the connection table's mask in every pass."""

    def __init__(self, layer: dict, planes_in: int, **kw):
        super().__init__(layer["filters"], layer["kernel"], layer.get("stride", 1), **kw)
        mask = connection_mask(layer, planes_in)  # (out, in, 1, 1)
        self.mask = tf.constant(mask.transpose(2, 3, 1, 0))  # (1, 1, in, out)
        self.connected = int(mask.sum())

    def convolution_op(self, inputs, kernel):
        return super().convolution_op(inputs, kernel * tf.cast(self.mask, kernel.dtype))


class BatchNorm(keras.layers.Layer):
    """Batch normalisation as dlbench/spec/networks.py defines it: the batch's mean and biased variance in training
    (then running = decay * running + (1 - decay) * batch statistic, the variance's made unbiased by m / (m - 1)),
    the running ones in inference."""

    def __init__(self, layer: dict, **kw):
        super().__init__(**kw)
        self.decay, self.eps = float(layer["decay"]), float(layer["eps"])

    def build(self, input_shape):
        c = int(input_shape[-1])
        self.gamma = self.add_weight(shape=(c,), initializer="ones", name="gamma", autocast=False)
        self.beta = self.add_weight(shape=(c,), initializer="zeros", name="beta", autocast=False)
        self.moving_mean = self.add_weight(shape=(c,), initializer="zeros", name="moving_mean", trainable=False,
                                           autocast=False)
        self.moving_variance = self.add_weight(shape=(c,), initializer="ones", name="moving_variance",
                                               trainable=False, autocast=False)

    def call(self, x, training=None):
        dtype = self.gamma.dtype
        h = tf.cast(x, dtype)
        if training:
            mean, var = tf.nn.moments(h, axes=[0, 1, 2])
            m = tf.cast(tf.size(h) // tf.shape(h)[-1], dtype)
            decay = tf.constant(self.decay, dtype)
            self.moving_mean.assign(decay * self.moving_mean + (1 - decay) * mean)
            self.moving_variance.assign(decay * self.moving_variance + (1 - decay) * var * m / (m - 1))
        else:
            mean, var = self.moving_mean, self.moving_variance
        out = (h - mean) * tf.math.rsqrt(var + tf.constant(self.eps, dtype)) * self.gamma + self.beta
        return tf.cast(out, x.dtype)


class Tokens(keras.layers.Layer):
    """A conv's maps (N, H, W, C) as H * W tokens of C features, row by row, plus the learned position embedding."""

    def build(self, input_shape):
        _, h, w, c = (int(v) if v is not None else None for v in input_shape)
        self.pos = self.add_weight(shape=(h * w, c), initializer="zeros", name="pos")

    def call(self, x):
        shape = tf.shape(x)
        return tf.reshape(x, (shape[0], shape[1] * shape[2], shape[3])) + tf.cast(self.pos, x.dtype)


class Attention(keras.layers.Layer):
    """Multi-head self-attention (networks.py), written out: four Dense projections, softmax(q k^T x the spec's scale)
    per head (Keras' MultiHeadAttention fixes its scale at 1 / sqrt(key_dim): the same number, but not the spec's
    to set), the softmax in float32 under mixed precision, as Keras' own attention does."""

    def __init__(self, heads: int, **kw):
        super().__init__(**kw)
        self.heads = heads

    def build(self, input_shape):
        d = int(input_shape[-1])
        self.scale = networks.attention_scale(d, self.heads)
        self.q, self.k, self.v, self.o = (keras.layers.Dense(d) for _ in range(4))
        for proj in (self.q, self.k, self.v, self.o):
            proj.build(input_shape)

    def call(self, x):
        shape = tf.shape(x)
        n, t, d = shape[0], shape[1], x.shape[-1]
        split = lambda h: tf.transpose(tf.reshape(h, (n, t, self.heads, d // self.heads)), (0, 2, 1, 3))  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = tf.matmul(q, k, transpose_b=True) * tf.cast(self.scale, q.dtype)
        weights = tf.cast(tf.nn.softmax(tf.cast(scores, tf.float32), axis=-1), v.dtype)
        out = tf.reshape(tf.transpose(tf.matmul(weights, v), (0, 2, 1, 3)), (n, t, d))
        return self.o(out)

    def projections(self) -> list:
        return [self.q, self.k, self.v, self.o]


class Residual(keras.layers.Layer):
    """A residual block: its body's layers and its shortcut's (none: the identity) from the same input, added."""

    def __init__(self, body: list, shortcut: list, **kw):
        super().__init__(**kw)
        self.body, self.shortcut = body, shortcut

    def call(self, x, training=None):
        h, s = x, x
        for sub in self.body:
            h = sub(h, training=training)
        for sub in self.shortcut:
            s = sub(s, training=training)
        return h + s


def nhwc(x: np.ndarray) -> np.ndarray:
    """Channels last: TensorFlow's CPU convolutions (and oneDNN) want it."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def _pool_layers(layer: dict, size_in: int, size_out: int) -> list:
    """Keras layers reproducing the spec's pooling (Caffe's windows: start at -pad, ceil-rounded count).

    'valid' where floor rounding already gives the size; 'same' where its padding all falls after
    the input (Caffe's overhanging last window); otherwise, for max pooling, explicit padding with
    -inf (pad before, pad plus overhang after) and 'valid'. SAME would centre its padding and shift
    every window by a pixel (torch_mnist's 3x3 stride-3 pooling on 28 pixels).
    """
    k, s, pad = layer["kernel"], layer["stride"], layer.get("pad", 0)
    cls = keras.layers.MaxPooling2D if layer["mode"] == "max" else keras.layers.AveragePooling2D
    if pad == 0 and (size_in - k) // s + 1 == size_out:
        return [cls(k, s, padding="valid")]
    same_total = max((size_out - 1) * s + k - size_in, 0)
    if pad == 0 and -(-size_in // s) == size_out and same_total // 2 == 0:
        return [cls(k, s, padding="same")]
    if layer["mode"] == "max":
        after = (size_out - 1) * s + k - size_in - pad
        padding = ((0, 0), (pad, after), (pad, after), (0, 0))
        return [keras.layers.Lambda(lambda x: tf.pad(x, padding, constant_values=float("-inf"))),
                cls(k, s, padding="valid")]
    raise networks.SpecError(f"TensorFlow adapter: cannot reproduce pooling {layer} from {size_in} to {size_out}")


def build_model(layers: list[dict], input_shape: tuple[int, int, int], seed: int) -> keras.Sequential:
    """The spec as a Keras model (its weights as Keras draws them: load_weights sets the point's)."""
    c, h, w = input_shape
    model = keras.Sequential([keras.Input((h, w, c))])
    for sub in spec_layers(layers, input_shape, seed):
        model.add(sub)
    return model


def spec_layers(layers: list[dict], input_shape: tuple[int, int, int], seed: int) -> list:
    """The Keras layers of a spec's layer list, in order (a residual block one Residual layer)."""
    out: list = []
    prev = input_shape
    for i, (layer, shape) in enumerate(zip(layers, networks.shapes(layers, input_shape))):
        kind = layer["type"]
        if kind == "conv":
            k, pad, stride = layer["kernel"], layer.get("pad", 0), layer.get("stride", 1)
            padding = "valid"
            if pad and stride == 1 and 2 * pad == k - 1:
                padding = "same"
            elif pad:
                out.append(keras.layers.ZeroPadding2D(pad))
            if "table" in layer:
                out.append(MaskedConv2D(layer, prev[0], padding=padding))
            else:
                out.append(keras.layers.Conv2D(layer["filters"], k, stride, padding=padding,
                                              use_bias=networks.has_bias(layer)))
        elif kind == "batchnorm":
            out.append(BatchNorm(layer))
        elif kind == "residual":
            out.append(Residual(spec_layers(layer["body"], prev, seed), spec_layers(layer["shortcut"], prev, seed)))
        elif kind == "gap":
            out.append(keras.layers.GlobalAveragePooling2D() if len(prev) == 3 else
                       keras.layers.GlobalAveragePooling1D())
        elif kind == "tokens":
            out.append(Tokens())
        elif kind == "layernorm":
            out.append(keras.layers.LayerNormalization(epsilon=layer["eps"]))
        elif kind == "attention":
            out.append(Attention(layer["heads"]))
        elif kind == "gelu":
            out.append(keras.layers.Activation(lambda x: keras.activations.gelu(x, approximate=False)))
        elif kind == "pool":
            for pooling in _pool_layers(layer, prev[1], shape[1]):
                out.append(pooling)
        elif kind == "dense":
            if len(prev) == 3:
                out.append(keras.layers.Flatten())
            out.append(keras.layers.Dense(layer["units"]))
        elif kind in networks.ACTIVATIONS:
            out.append(keras.layers.Activation(kind))
        elif kind == "dropout":
            out.append(keras.layers.Dropout(layer["rate"], seed=seed + i))
        elif kind == "lrn":
            radius, size = (layer["size"] - 1) // 2, layer["size"]
            # In float32 whatever the policy: TensorFlow has no bfloat16 LRN kernel.
            out.append(keras.layers.Lambda(lambda x, r=radius, L=layer, n=size: tf.cast(
                tf.nn.local_response_normalization(tf.cast(x, tf.float32), depth_radius=r, bias=L.get("k", 1.0),
                                                   alpha=L["alpha"] / n, beta=L["beta"]), x.dtype)))
        else:
            raise networks.SpecError(f"TensorFlow adapter: unknown layer type {kind!r}")
        prev = shape
    return out


def trainable_layers(model) -> list:
    """The conv, dense and batchnorm layers in the spec's order (networks.trainable: a block's body, then shortcut)."""
    out = []
    for m in (model.layers if isinstance(model, keras.Sequential) else model):
        if isinstance(m, Residual):
            out += trainable_layers(m.body) + trainable_layers(m.shortcut)
        elif isinstance(m, (keras.layers.Conv2D, keras.layers.Dense, BatchNorm, Tokens, keras.layers.LayerNormalization,
                            Attention)):
            out.append(m)
    return out


def trained_variables(mod) -> list:
    """The layer's trained variables in the canonical order: kernel (gamma), then bias (beta) where it has one; a
    position embedding's pos; an attention's q, k, v and o kernels and biases."""
    if isinstance(mod, BatchNorm | keras.layers.LayerNormalization):
        return [mod.gamma, mod.beta]
    if isinstance(mod, Tokens):
        return [mod.pos]
    if isinstance(mod, Attention):
        return [v for proj in mod.projections() for v in (proj.kernel, proj.bias)]
    return [mod.kernel] + ([mod.bias] if mod.bias is not None else [])
