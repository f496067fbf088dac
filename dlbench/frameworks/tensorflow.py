"""TensorFlow: a Keras model built from the spec, trained by a tf.function step.

Images are NHWC (TensorFlow's CPU convolutions and oneDNN want channels last).
The step gathers its batch from tensors already in memory, applies the point's
learning rate (an argument, so there is one trace) and adds L2 weight decay to the
gradients as Caffe and PyTorch do, each variable with its layer's decay multiplier. The
update is TensorFlow's own fused training kernel, one op per variable (FusedUpdate), at the
rate times the variable's learning-rate multiplier.

A sparse convolution (a conv with a connection table) is a Conv2D whose kernel is multiplied by
the table's 0/1 mask in every pass (MaskedConv2D): the unconnected weights start at 0, their
gradient is exactly 0, so they stay 0.

`compile: compiled`: the training step is a tf.function with jit_compile=True (XLA); otherwise
(`eager`, TensorFlow's usual mode) a tf.function graph without XLA. XLA compiles at the first
call, so the `compile` phase calls the step once on the first batch and then puts every variable
(weights, optimizer slots and counters, moving averages, random state) back as it was. Testing
runs the graph function without XLA either way. `precision: bf16`: Keras' mixed_bfloat16 policy
(layers compute in bfloat16 on float32 variables); the loss is taken on float32 logits. `precision: fp64`:
Keras' float64 policy (variables, data, loss and moving average in float64).

A transformer's layers (networks.py): Tokens (the maps reshaped to tokens plus the position embedding), Keras'
LayerNormalization with the spec's epsilon, Attention (four Dense projections and the spec's scale, written out),
Keras' exact GELU. `optimizer: adamw`: each variable first decays by rate x its weight decay (decoupled, as
torch.optim.AdamW), then takes the fused Adam update with epsilon x sqrt(1 - b2^t) in the kernel's place of epsilon:
m_hat / (sqrt(v_hat) + epsilon), PyTorch's and Optax's form (the kernel's own adds epsilon to sqrt(v), before the
bias correction: TensorFlow 1's AdamOptimizer, which `adam` keeps for the study's mnist_deep).

Batch normalisation is this module's BatchNorm layer, the spec's definition (networks.py): Keras'
BatchNormalization (momentum = the spec's decay) updates its moving variance with the biased batch
variance, where the spec (and PyTorch) use the unbiased one. Its statistics are computed in the variables'
dtype (float32 under mixed bfloat16). A residual block is a Residual layer holding its body's and its
shortcut's layers; global average pooling is Keras' GlobalAveragePooling2D.
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf

from dlbench.frameworks.base import initial_weights, no_gpu, parameter_groups
from dlbench.frameworks.stepped import SteppedAdapter, warms_up
from dlbench.record.fields import Info
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


class FusedUpdate:
    """The optimizer's update as TensorFlow's fused training kernels, one op per variable, with its slots.

    adam: ResourceApplyAdam, the kernel tf.compat.v1.train.AdamOptimizer runs (the study's mnist_deep.py):
    m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, w -= lr sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps),
    with b1 0.9, b2 0.999, eps 1e-8. sgd: ResourceApplyKerasMomentum (v = m v - lr g, w += v: the rate inside
    the velocity, as Keras' SGD and Caffe), or ResourceApplyGradientDescent without momentum. The arithmetic
    is Keras' optimizers'; Keras spells it as several element-wise ops per variable, each a pass over the
    weights, and on mnist_deep (3.2 M weights in its first dense layer) its Adam took about a third of the step
    (bench/script_parity.py, docs/performance.md).
    """

    def __init__(self, variables: list, optimizer: str, momentum: float, lr_mults: list[float],
                 decays: list[float] | None = None):
        self.variables, self.optimizer, self.momentum = variables, optimizer, float(momentum)
        self.lr_mults = lr_mults
        self.decays = decays if optimizer == "adamw" else None  # adamw's decoupled decay, per variable
        dtype = variables[0].dtype
        self.steps = tf.Variable(tf.zeros((), dtype), trainable=False, name="update_steps")
        self.slots: list[list[tf.Variable]] = []  # per variable: Adam's m and v, or the velocity
        for i, v in enumerate(variables):
            if optimizer in ("adam", "adamw"):
                self.slots.append([tf.Variable(tf.zeros_like(v), trainable=False, name=f"adam_m_{i}"),
                                   tf.Variable(tf.zeros_like(v), trainable=False, name=f"adam_v_{i}")])
            elif self.momentum:
                self.slots.append([tf.Variable(tf.zeros_like(v), trainable=False, name=f"velocity_{i}")])
            else:
                self.slots.append([])

    def state(self) -> list[tf.Variable]:
        """Every variable the update moves besides the weights (what a compile call must put back)."""
        return [self.steps, *(slot for slots in self.slots for slot in slots)]

    def apply(self, grads: list, lr) -> None:
        """One update at the base rate `lr` (a scalar tensor), each variable at lr x its multiplier (in the step)."""
        dtype = self.variables[0].dtype
        lr = tf.cast(lr, dtype)
        t = self.steps.assign_add(tf.ones((), dtype))
        adam = self.optimizer in ("adam", "adamw")
        if adam:
            b1, b2 = tf.constant(0.9, dtype), tf.constant(0.999, dtype)
            b1_power, b2_power = tf.pow(b1, t), tf.pow(b2, t)
            eps = tf.constant(1e-8, dtype)
            if self.optimizer == "adamw":  # eps added to sqrt of the bias-corrected v, as torch.optim.AdamW and Optax
                eps = eps * tf.sqrt(1 - b2_power)
        for i, (v, g, slots, mult) in enumerate(zip(self.variables, grads, self.slots, self.lr_mults)):
            rate = lr * tf.constant(mult, dtype)
            if self.decays is not None and self.decays[i]:  # AdamW: w -= rate x decay x w, as torch.optim.AdamW
                v.assign_sub(rate * tf.constant(self.decays[i], dtype) * v)
            if adam:
                tf.raw_ops.ResourceApplyAdam(var=v.handle, m=slots[0].handle, v=slots[1].handle,
                                             beta1_power=b1_power, beta2_power=b2_power, lr=rate, beta1=b1,
                                             beta2=b2, epsilon=eps, grad=g)
            elif slots:
                tf.raw_ops.ResourceApplyKerasMomentum(var=v.handle, accum=slots[0].handle, lr=rate, grad=g,
                                                      momentum=tf.constant(self.momentum, dtype))
            else:
                tf.raw_ops.ResourceApplyGradientDescent(var=v.handle, alpha=rate, delta=g)


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


class TFAdapter(SteppedAdapter):
    @staticmethod
    def versions() -> dict:
        build = tf.sysconfig.get_build_info()  # the CUDA and cuDNN it was built for; none in a CPU build
        return {"framework_version": tf.__version__, "cuda_version": build.get("cuda_version"),
                "cudnn_version": build.get("cudnn_version")}

    def prepare(self) -> None:
        point = self.point
        self.xla = point.get("compile") == "compiled"
        # The policy every layer built from now on takes (mixed: bfloat16 compute, float32 variables).
        policy = {"bf16": "mixed_bfloat16", "fp64": "float64"}.get(point.get("precision"), "float32")
        keras.mixed_precision.set_global_policy(policy)
        self.dtype = tf.float64 if policy == "float64" else tf.float32  # of the data, the loss and the variables
        tf.config.threading.set_intra_op_parallelism_threads(point["threads"])
        # One inter-op thread unless the point sweeps them (`interop_threads`).
        tf.config.threading.set_inter_op_parallelism_threads(point.get("interop_threads") or 1)
        tf.random.set_seed(point["seed"])
        if point["device"] == "gpu":
            if not tf.config.list_physical_devices("GPU"):
                raise no_gpu(tf.test.is_built_with_cuda(), f"TensorFlow {tf.__version__} sees no GPU "
                             f"(built with CUDA: {tf.test.is_built_with_cuda()})")
            self.device = "/GPU:0"
        else:
            self.device = "/CPU:0"

    def info(self) -> Info:
        build = dict(tf.sysconfig.get_build_info())
        onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0"
        return {
            "framework": "tensorflow",
            "framework_version": tf.__version__,
            "numpy_version": np.__version__,
            "blas": "onednn" if onednn else "eigen",
            "build": {k: build.get(k) for k in ("is_cuda_build", "cuda_version", "cudnn_version")} | {
                "keras": keras.__version__ if hasattr(keras, "__version__") else None},
            "threads_in_effect": tf.config.threading.get_intra_op_parallelism_threads(),
            "interop_threads_in_effect": tf.config.threading.get_inter_op_parallelism_threads(),
            "library_in_effect": "onednn" if onednn else "eigen",
            "device_name": self.device,
            "compile_in_effect": "tf.function + XLA (jit_compile)" if self.xla else "tf.function (graph, no XLA)",
            "precision_in_effect": self._precision_in_effect(),
        }

    @staticmethod
    def _precision_in_effect() -> str:
        policy = keras.mixed_precision.global_policy()
        return f"{policy.compute_dtype} compute, {policy.variable_dtype} weights ({policy.name})"

    def build(self) -> None:
        p = self.point
        with tf.device(self.device):
            self.model = build_model(p["layers"], self.inputs.shape, p["seed"])
            load_weights(self.model, p["layers"], self.inputs.shape, initial_weights(p, self.inputs.shape))
            variables = [v for m in trainable_layers(self.model) for v in trained_variables(m)]
            mults = parameter_groups(p["layers"])
            decays = [float(p["weight_decay"]) * decay_mult for _, decay_mult in mults]
            self.update = FusedUpdate(variables, p["optimizer"], p["momentum"], [lr_mult for lr_mult, _ in mults],
                                      decays)
            self.ema = None
            if p.get("ema_decay"):
                self.ema = [tf.Variable(v, trainable=False, name=f"ema_{i}") for i, v in enumerate(variables)]
                self.ema_updates = tf.Variable(0.0, trainable=False, name="ema_updates")
            self.variables = variables
            # A variable, so that a new augmented view can be assigned without retracing the step.
            self.train_x = tf.Variable(tf.cast(nhwc(self.inputs.train_x), self.dtype), trainable=False)
            self.train_y = tf.constant(self.inputs.train_y)
            self.eval_data = {"test": (tf.constant(nhwc(self.inputs.test_x), self.dtype),
                                       tf.constant(self.inputs.test_y))}
            if self.inputs.val_y is not None:
                self.eval_data["validation"] = (tf.constant(nhwc(self.inputs.val_x), self.dtype),
                                                tf.constant(self.inputs.val_y))
        self.losses: list[tf.Tensor] = []  # each step's loss since the last take_loss
        if p["optimizer"] == "adamw":  # decoupled: in the update, not the gradient
            decays = [0.0] * len(decays)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        ema_decay = float(p.get("ema_decay") or 0.0)
        dtype = self.dtype

        # Every training batch has the point's size (batch_order): the step is traced for that shape.
        @tf.function(input_signature=[tf.TensorSpec([p["batch_size"]], tf.int64), tf.TensorSpec([], tf.float32)],
                     jit_compile=self.xla)
        def step(idx, lr):
            x = tf.gather(self.train_x, idx)
            y = tf.gather(self.train_y, idx)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, tf.cast(self.model(x, training=True), dtype))
            grads = tape.gradient(loss, variables)
            grads = [g + wd * v if wd else g for g, v, wd in zip(grads, variables, decays)]
            self.update.apply(grads, lr)
            if self.ema is not None:
                n = self.ema_updates.assign_add(1.0)
                rate = tf.cast(tf.minimum(ema_decay, (1.0 + n) / (10.0 + n)), dtype)  # stepped.ema_rate
                for shadow, v in zip(self.ema, variables):
                    shadow.assign_sub((1.0 - rate) * (shadow - v))
            return loss

        test_shape = self.eval_data["test"][0].shape[1:]

        @tf.function(input_signature=[tf.TensorSpec([None, *test_shape], dtype),
                                      tf.TensorSpec([None], tf.int64)])
        def eval_batch(x, y):
            logits = tf.cast(self.model(x, training=False), dtype)
            correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int64))
            loss = tf.reduce_sum(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
            return correct, loss

        self.step, self.eval_batch = step, eval_batch

    def compile(self) -> None:
        # Trace both functions now, so tracing is reported as compile time, not training time.
        self.step.get_concrete_function()
        self.eval_batch.get_concrete_function()
        # XLA compiles at the first call, and a GPU's first step pays one-time costs (cuDNN handles, kernel
        # loading): take it now, then put back every variable the step moved (the fused update's state too).
        if self.xla or warms_up(self.point):
            variables = [*self.model.variables, *self.update.state(),
                         *(self.ema or []), *([self.ema_updates] if self.ema is not None else [])]
            kept = [v.numpy() for v in variables]
            with tf.device(self.device):
                self.step(tf.range(self.point["batch_size"], dtype=tf.int64) % int(self.train_y.shape[0]),
                          tf.constant(0.0)).numpy()
            for v, value in zip(variables, kept):
                v.assign(value)

    def train_step(self, batch: np.ndarray, lr: float) -> None:
        with tf.device(self.device):
            # The step returns its loss, kept as a tensor: counting it in graph variables cost
            # two more ops a step and four eager ops a report (about 1.5 ms each report on LeNet).
            self.losses.append(self.step(tf.constant(batch), tf.constant(lr, tf.float32)))

    def take_loss(self) -> float:
        if not self.losses:  # the stepped loop asks only after a step; as before, nothing taken reads 0
            return 0.0
        # Read one by one (a few microseconds each): an eager add_n would cost more than the reading.
        mean = sum(float(loss) for loss in self.losses) / len(self.losses)
        self.losses.clear()
        return mean

    def evaluate(self, split: str = "test") -> tuple[float, float]:
        xs, ys = self.eval_data[split]
        n = int(ys.shape[0])
        bs = self.point["test_batch_size"]
        correct, loss = 0, 0.0
        with tf.device(self.device):
            if self.ema is not None:
                self._swap_ema()  # the model holds the moving average while it is judged
            try:
                for start in range(0, n, bs):
                    c, s = self.eval_batch(xs[start:start + bs], ys[start:start + bs])
                    correct += int(c)
                    loss += float(s)
            finally:
                if self.ema is not None:
                    self._swap_ema()
        return correct / n, loss / n

    def weights(self):
        out = []
        for mod, (_, layer, prev) in zip(trainable_layers(self.model), networks.trainable(self.point["layers"],
                                                                                        self.inputs.shape)):
            if isinstance(mod, Attention):
                values = [np.asarray(v) for v in trained_variables(mod)]
            else:
                values = [np.asarray(v) for v in mod.get_weights()]  # a batchnorm's: gamma, beta, mean, var
            out.append(from_keras(layer, prev, values))
        return out

    def _swap_ema(self) -> None:
        for v, shadow in zip(self.variables, self.ema):
            held = tf.identity(v)
            v.assign(shadow)
            shadow.assign(held)

    def _judged(self) -> list:
        return self.ema if self.ema is not None else self.variables

    def keep_best(self) -> None:
        self.best = [tf.identity(v) for v in self._judged()]

    def restore_best(self) -> None:
        for v, kept in zip(self._judged(), self.best):
            v.assign(kept)

    def sync(self) -> None:
        # Reading a value waits for the queued steps (a no-op cost on CPU).
        if self.losses:
            self.losses[-1].numpy()

    def set_train_data(self, x: np.ndarray) -> None:
        with tf.device(self.device):
            self.train_x.assign(tf.cast(nhwc(x), self.dtype))

    @staticmethod
    def forward(layers, weights, x, y, train=False):
        """(`train`: batch normalisation by the batch's statistics; the model has no dropout where it is asked.)"""
        keras.mixed_precision.set_global_policy("float32")
        model = build_model(layers, x.shape[1:], 1)
        load_weights(model, layers, x.shape[1:], weights)
        if train and any(layer["type"] == "dropout" for layer in networks.leaves(layers)):
            raise networks.SpecError("a training-mode forward pass of a network with dropout is not deterministic")
        logits = model(tf.constant(nhwc(x)), training=train)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(tf.constant(y), logits)
        return logits.numpy(), float(loss)

    @staticmethod
    def train_then_infer(layers, weights, x, y):
        """A training-mode pass (BatchNorm's batch statistics, updating its moving ones), then an inference-mode
        pass with what it left: (train logits, inference logits, the canonical arrays after them)."""
        keras.mixed_precision.set_global_policy("float32")
        shape = x.shape[1:]
        model = build_model(layers, shape, 1)
        load_weights(model, layers, shape, weights)
        trained = model(tf.constant(nhwc(x)), training=True).numpy()
        inferred = model(tf.constant(nhwc(x)), training=False).numpy()
        after = [from_keras(layer, prev, [np.asarray(v) for v in (trained_variables(mod) if isinstance(mod, Attention)
                                                                    else mod.get_weights())])
                 for mod, (_, layer, prev) in zip(trainable_layers(model), networks.trainable(layers, shape))]
        return trained, inferred, after

    @staticmethod
    def params(layers, input_shape):
        return count_params(build_model(layers, tuple(input_shape), 1))


def chw_rows_to_hwc(w: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """A dense W (out, C*H*W) whose input columns follow C, H, W order, reordered to H, W, C (Flatten of NHWC)."""
    c, h, wd = chw
    return np.ascontiguousarray(w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1).reshape(w.shape[0], -1))


def hwc_rows_to_chw(w: np.ndarray, chw: tuple[int, int, int]) -> np.ndarray:
    """The inverse of chw_rows_to_hwc: a dense W (out, H*W*C) back to C, H, W column order."""
    c, h, wd = chw
    return np.ascontiguousarray(w.reshape(w.shape[0], h, wd, c).transpose(0, 3, 1, 2).reshape(w.shape[0], -1))


ADAPTER = TFAdapter
