"""JAX: a Flax (Linen) module built from the spec, trained by a jax.jit-compiled step with Optax's transforms.

Images are NHWC (the layout of Flax's convolutions); a dense layer after a convolution takes its
input flattened in C, H, W order (transposed back first), so the canonical dense weights load as
they are. Pooling follows Caffe (networks.pool_out: windows from -pad, the last one may overhang;
max pooling ignores the padding, average pooling divides by the window clipped to the padded input)
with lax.reduce_window. A sparse convolution is Flax's masked Conv: the kernel times the connection
table's 0/1 mask in every pass, so the unconnected weights (0 from the start) get a zero gradient
and stay 0.

The training step is one function of (state, training images, labels, batch indices, learning rate):
it gathers the batch, computes the mean softmax cross-entropy and its gradient, adds weight decay to
the gradient (each parameter with its layer's decay multiplier, as PyTorch and Caffe do), runs
Optax's momentum trace (SGD: v = momentum * v + g, PyTorch's form) or Adam scaling, and moves each
parameter by -lr x its layer's lr multiplier x that; the moving average of the weights follows.
The learning rate is an argument, so one compilation serves every schedule.

`compile: compiled` (JAX's usual mode): the step and the test function are compiled ahead of time
(jax.jit(...).lower(...).compile()) in the `compile` phase, for every shape they will see, so no
compilation falls into the training time. `compile: eager`: the same functions run op by op under
jax.disable_jit(); each primitive is dispatched on its own (and compiled once, the first time it
comes, inside the training time): JAX's eager mode. A GPU point, eager or compiled, also takes one
step in the `compile` phase and drops its result (stepped.warms_up), so the first step's one-time costs
fall outside the training time.

`precision: bf16`: the layers compute in bfloat16 (Flax's dtype) on float32 parameters; the logits
are cast to float32 for the loss, and the gradients, the optimizer and the weights stay float32.

A transformer's layers (networks.py): Tokens (the maps reshaped to tokens plus the position embedding), Flax's
LayerNorm with the spec's epsilon (and the two-pass variance), Attention (four Dense projections around
jax.nn.dot_product_attention with the spec's scale), the exact GELU. `optimizer: adamw`: Optax's Adam scaling, and
each parameter moves by -lr x its multiplier x (Adam's step + its weight decay x the parameter): decoupled decay,
as torch.optim.AdamW.

Batch normalisation is this module's BatchNorm, the spec's definition (networks.py): Flax's nn.BatchNorm
(momentum = the spec's decay) updates its running variance with the biased batch variance, where the spec
(and PyTorch) use the unbiased one. Its running statistics are the `batch_stats` collection, in the state
beside the parameters; the training step applies the module with them mutable. A residual block's layers
are named layer<i>_body<j> and layer<i>_shortcut<j>; global average pooling is the mean over H and W.

Threads: XLA's CPU thread pool takes its size from PJRT_NPROC, which the runner sets to the point's
threads before JAX is imported (registry `threads_env`). threads_in_effect counts that pool's
threads (named tf_XLAEigen) in /proc/self/task once the backend is up.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

from dlbench.frameworks.base import initial_weights, no_gpu, parameter_groups
from dlbench.frameworks.stepped import SteppedAdapter, warms_up
from dlbench.record.fields import Info
from dlbench.spec import networks
from dlbench.spec.initial_weights import connection_mask

XLA_POOL_THREAD = "tf_XLAEigen"  # how XLA's CPU intra-op pool names its threads


def nhwc(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def caffe_counts(size: int, kernel: int, stride: int, pad: int, out: int) -> np.ndarray:
    """Caffe's divisor of each average-pooling window along one axis: the window clipped to the padded input."""
    starts = np.arange(out) * stride - pad
    return (np.minimum(starts + kernel, size + pad) - starts).astype(np.float32)


def pool(x: jax.Array, layer: dict, size_in: int, size_out: int) -> jax.Array:
    """The spec's pooling on NHWC, with Caffe's output size (networks.pool_out) and Caffe's padding rules."""
    k, s, pad = layer["kernel"], layer["stride"], layer.get("pad", 0)
    after = max((size_out - 1) * s + k - size_in - pad, 0)  # the last window's overhang
    padding = ((0, 0), (pad, after), (pad, after), (0, 0))
    if layer["mode"] == "max":
        y = lax.reduce_window(x, -jnp.inf, lax.max, (1, k, k, 1), (1, s, s, 1), padding)
    else:
        y = lax.reduce_window(x, 0.0, lax.add, (1, k, k, 1), (1, s, s, 1), padding)[:, :size_out, :size_out, :]
        counts = caffe_counts(size_in, k, s, pad, size_out)
        y = y / jnp.asarray(np.outer(counts, counts)[None, :, :, None], dtype=y.dtype)
    return y[:, :size_out, :size_out, :]


def lrn(x: jax.Array, layer: dict) -> jax.Array:
    """Caffe's LRN across channels: x / (k + alpha / size * sum of x^2 over `size` channels) ** beta."""
    size = layer["size"]
    half = (size - 1) // 2
    window = lax.reduce_window(jnp.square(x), 0.0, lax.add, (1, 1, 1, size), (1, 1, 1, 1),
                               ((0, 0), (0, 0), (0, 0), (half, size - 1 - half)))
    return x / (layer.get("k", 1.0) + layer["alpha"] / size * window) ** layer["beta"]


class BatchNorm(nn.Module):
    """Batch normalisation as dlbench/spec/networks.py defines it: the batch's mean and biased variance in training
    (then
    running = decay * running + (1 - decay) * batch statistic, the variance's made unbiased by m / (m - 1)), the
    running ones in inference; statistics in float32 whatever the computation's dtype."""

    decay: float
    eps: float
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        c = x.shape[-1]
        gamma = self.param("scale", nn.initializers.ones, (c,), jnp.float32)
        beta = self.param("bias", nn.initializers.zeros, (c,), jnp.float32)
        mean_v = self.variable("batch_stats", "mean", lambda: jnp.zeros((c,), jnp.float32))
        var_v = self.variable("batch_stats", "var", lambda: jnp.ones((c,), jnp.float32))
        h = x.astype(jnp.float32)
        if train:
            mean = h.mean(axis=(0, 1, 2))
            var = jnp.square(h - mean).mean(axis=(0, 1, 2))
            m = h.size // c
            if not self.is_initializing():
                mean_v.value = self.decay * mean_v.value + (1.0 - self.decay) * mean
                var_v.value = self.decay * var_v.value + (1.0 - self.decay) * var * (m / (m - 1))
        else:
            mean, var = mean_v.value, var_v.value
        return ((h - mean) * lax.rsqrt(var + self.eps) * gamma + beta).astype(self.dtype)


class Attention(nn.Module):
    """Multi-head self-attention (networks.py): four Dense projections (q, k, v, o) around JAX's
    dot_product_attention with the spec's scale."""

    heads: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        n, t, d = x.shape
        q, k, v = (nn.Dense(d, dtype=self.dtype, name=name)(x).reshape(n, t, self.heads, d // self.heads)
                   for name in "qkv")
        out = jax.nn.dot_product_attention(q, k, v, scale=networks.attention_scale(d, self.heads))
        return nn.Dense(d, dtype=self.dtype, name="o")(out.reshape(n, t, d))


class Tokens(nn.Module):
    """A conv's maps (N, H, W, C) as H * W tokens of C features, row by row, plus the learned position embedding."""

    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        n, h, w, c = x.shape
        pos = self.param("pos", nn.initializers.zeros, (h * w, c), jnp.float32)
        return x.reshape(n, h * w, c) + pos.astype(self.dtype)


class Network(nn.Module):
    """The spec's layers as one Linen module; each conv, dense and batchnorm layer is named `layer<path>`
    (networks.walk: the spec index, `layer3_body0` inside a residual block)."""

    layers: list
    input_shape: tuple
    dtype: Any = jnp.float32  # the computation's dtype; parameters are always float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False) -> jax.Array:
        return self.run(self.layers, x, tuple(self.input_shape), train, "")

    def run(self, layers: list, x: jax.Array, prev: tuple, train: bool, prefix: str) -> jax.Array:
        """The layers of one list (the network's, or a residual block's body or shortcut) on x."""
        for i, (layer, shape) in enumerate(zip(layers, networks.shapes(layers, prev))):
            kind = layer["type"]
            name = f"layer{prefix}{i}"
            if kind == "residual":
                x = (self.run(layer["body"], x, prev, train, f"{prefix}{i}_body")
                     + self.run(layer["shortcut"], x, prev, train, f"{prefix}{i}_shortcut"))
            elif kind == "batchnorm":
                x = BatchNorm(layer["decay"], layer["eps"], self.dtype, name=name)(x, train)
            elif kind == "gap":
                x = x.mean(axis=(1, 2)) if x.ndim == 4 else x.mean(axis=1)
            elif kind == "tokens":
                x = Tokens(self.dtype, name=name)(x)
            elif kind == "layernorm":
                x = nn.LayerNorm(epsilon=layer["eps"], use_fast_variance=False, dtype=self.dtype, name=name)(x)
            elif kind == "attention":
                x = Attention(layer["heads"], self.dtype, name=name)(x)
            elif kind == "gelu":
                x = nn.gelu(x, approximate=False)  # the exact form (Flax's default is the tanh approximation)
            elif kind == "conv":
                k, pad, stride = layer["kernel"], layer.get("pad", 0), layer.get("stride", 1)
                mask = None
                if "table" in layer:  # (out, in, 1, 1) -> the kernel's (kh, kw, in, out)
                    mask = np.broadcast_to(connection_mask(layer, prev[0]).transpose(2, 3, 1, 0),
                                           (k, k, prev[0], layer["filters"]))
                x = nn.Conv(layer["filters"], (k, k), strides=(stride, stride), padding=((pad, pad), (pad, pad)),
                            use_bias=networks.has_bias(layer), mask=None if mask is None else jnp.asarray(mask),
                            dtype=self.dtype, name=name)(x)
            elif kind == "pool":
                x = pool(x, layer, prev[1], shape[1])
            elif kind == "dense":
                if x.ndim == 4:  # flatten in C, H, W order, as the canonical dense weights expect
                    x = jnp.transpose(x, (0, 3, 1, 2)).reshape((x.shape[0], -1))
                x = nn.Dense(layer["units"], dtype=self.dtype, name=name)(x)
            elif kind == "relu":
                x = nn.relu(x)
            elif kind == "tanh":
                x = jnp.tanh(x)
            elif kind == "sigmoid":
                x = nn.sigmoid(x)
            elif kind == "dropout":
                x = nn.Dropout(layer["rate"], deterministic=not train)(x)
            elif kind == "lrn":
                x = lrn(x, layer)
            else:
                raise networks.SpecError(f"JAX adapter: unknown layer type {kind!r}")
            prev = shape
        return x


def layer_names(layers: list[dict], input_shape: tuple) -> list[str]:
    """The module names of the conv, dense and batchnorm layers, in networks.trainable's order."""
    return [f"layer{path}" for path, layer, _, _ in networks.walk(layers, tuple(input_shape))
            if layer["type"] in networks.PARAMETRISED]


def param_names(layer: dict) -> list[tuple[str, ...]]:
    """A layer's Flax parameters (their paths inside the layer's module) in the canonical order (networks.arrays'
    trained ones)."""
    if layer["type"] in ("batchnorm", "layernorm"):
        return [("scale",), ("bias",)]
    if layer["type"] == "tokens":
        return [("pos",)]
    if layer["type"] == "attention":
        return [(proj, key) for proj in "qkvo" for key in ("kernel", "bias")]
    return [("kernel",), ("bias",)][:networks.trained_arrays(layer)]


def _put(tree: dict, path: tuple[str, ...], value) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _get(tree: dict, path: tuple[str, ...]):
    for key in path:
        tree = tree[key]
    return tree


def to_variables(layers: list[dict], input_shape: tuple, weights: list[tuple[np.ndarray, ...]]) -> dict:
    """Canonical arrays as Flax variables: {"params": conv kernels (kh, kw, in, out), dense (in, out), a batchnorm's
    scale and bias; "batch_stats": a batchnorm's running mean and var}."""
    params, stats = {}, {}
    specs = networks.trainable(layers, tuple(input_shape))
    for name, (_, layer, _), (w, *rest) in zip(layer_names(layers, input_shape), specs, weights):
        f32 = lambda a: jnp.asarray(np.ascontiguousarray(a), jnp.float32)  # noqa: E731
        if layer["type"] == "batchnorm":
            params[name] = {"scale": f32(w), "bias": f32(rest[0])}
            stats[name] = {"mean": f32(rest[1]), "var": f32(rest[2])}
            continue
        if layer["type"] in ("layernorm", "tokens", "attention"):  # W (out, in) -> kernel (in, out)
            params[name] = {}
            for path, a in zip(param_names(layer), (w, *rest)):
                _put(params[name], path, f32(a.T if path[-1] == "kernel" else a))
            continue
        kernel = w.transpose(2, 3, 1, 0) if layer["type"] == "conv" else w.T
        params[name] = {"kernel": f32(kernel), **({"bias": f32(rest[0])} if rest else {})}
    return {"params": params, "batch_stats": stats}


def from_variables(layers: list[dict], input_shape: tuple, params: dict, stats: dict) -> list[tuple[np.ndarray, ...]]:
    """Flax parameters and batch statistics back to the canonical layout."""
    out = []
    specs = networks.trainable(layers, tuple(input_shape))
    for name, (_, layer, _) in zip(layer_names(layers, input_shape), specs):
        if layer["type"] in ("layernorm", "tokens", "attention"):
            arrays = [np.asarray(_get(params[name], path)) for path in param_names(layer)]
            out.append(tuple(np.ascontiguousarray(a.T) if path[-1] == "kernel" else a
                             for path, a in zip(param_names(layer), arrays)))
            continue
        got = {k: np.asarray(v) for k, v in params[name].items()}
        if layer["type"] == "batchnorm":
            out.append((got["scale"], got["bias"], np.asarray(stats[name]["mean"]), np.asarray(stats[name]["var"])))
            continue
        kernel = got["kernel"]
        w = np.ascontiguousarray(kernel.transpose(3, 2, 0, 1) if layer["type"] == "conv" else kernel.T)
        out.append((w, got["bias"].copy()) if "bias" in got else (w,))
    return out


def xent(logits: jax.Array, y: jax.Array) -> jax.Array:
    """Softmax cross-entropy per image, in float32 whatever the logits' dtype."""
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), y)


def pool_threads() -> int | None:
    """Threads of XLA's CPU intra-op pool in this process (None where /proc cannot tell)."""
    try:
        names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    except OSError:
        return None
    return sum(1 for n in names if n == XLA_POOL_THREAD)


def _dist_version(pattern: str) -> str | None:
    wanted = re.compile(pattern)
    for dist in importlib.metadata.distributions():
        if wanted.fullmatch((dist.metadata["Name"] or "").lower().replace("_", "-")):
            return dist.version
    return None


class JaxAdapter(SteppedAdapter):
    @staticmethod
    def versions() -> dict:
        # A CUDA build is jaxlib plus NVIDIA's wheels and JAX's CUDA plugin: their versions, as installed.
        plugin = _dist_version(r"jax-cuda\d+-plugin")
        runtime = _dist_version(r"nvidia-cuda-runtime(-cu\d+)?")
        cuda = ".".join(runtime.split(".")[:2]) if runtime and plugin else plugin
        return {"framework_version": jax.__version__, "cuda_version": cuda,
                "cudnn_version": _dist_version(r"nvidia-cudnn-cu\d+") if plugin else None}

    def prepare(self) -> None:
        point = self.point
        self.eager = point.get("compile", "compiled") == "eager"
        self.dtype = jnp.bfloat16 if point.get("precision") == "bf16" else jnp.float32
        if point["device"] == "gpu":
            try:
                self.device = jax.devices("gpu")[0]
            except RuntimeError:
                cuda = self.versions()["cuda_version"]
                raise no_gpu(bool(cuda), f"JAX {jax.__version__} sees no GPU (backends: {jax.default_backend()}; "
                             f"CUDA plugin: {cuda or 'none'})") from None
        else:
            self.device = jax.devices("cpu")[0]

    def info(self) -> Info:
        return {
            "framework": "jax",
            "framework_version": jax.__version__,
            "numpy_version": np.__version__,
            "blas": "xla",
            "build": {"jaxlib": importlib.metadata.version("jaxlib"),
                      "flax": flax.__version__, "optax": optax.__version__, "platform": self.device.platform,
                      "xla_flags": os.environ.get("XLA_FLAGS"), "pjrt_nproc": os.environ.get("PJRT_NPROC")},
            "threads_in_effect": pool_threads(),
            "interop_threads_in_effect": None,
            "library_in_effect": "xla",
            "device_name": getattr(self.device, "device_kind", str(self.device)),
            "compile_in_effect": "op by op (jax.disable_jit)" if self.eager else "jax.jit (XLA), ahead of time",
            "precision_in_effect": self._precision_in_effect(),
        }

    def _precision_in_effect(self) -> str:
        """The dtypes a forward pass computes in and keeps its parameters in, as JAX traces it."""
        layers, shape = self.point["layers"], tuple(self.inputs.shape)
        module = Network(layers, shape, self.dtype)
        x = jax.ShapeDtypeStruct((1, shape[1], shape[2], shape[0]), jnp.float32)
        variables = jax.eval_shape(lambda v: module.init(jax.random.key(0), v), x)
        params = variables["params"]
        logits = jax.eval_shape(lambda p, v: module.apply(p, v), variables, x)
        param_dtypes = sorted({str(leaf.dtype) for leaf in jax.tree.leaves(params)})
        return f"{logits.dtype} compute, {'/'.join(param_dtypes)} weights"

    # ------------------------------------------------------------------------------------------ the network

    def build(self) -> None:
        p, inputs = self.point, self.inputs
        layers = p["layers"]
        self.module = Network(layers, tuple(inputs.shape), self.dtype)
        variables = to_variables(layers, inputs.shape, initial_weights(p, inputs.shape))
        params = variables["params"]
        groups = iter(parameter_groups(layers))  # (lr multiplier, decay multiplier) per trained array, spec order
        self.lr_mults, decays, weight_decays = {}, {}, {}
        decoupled = p["optimizer"] == "adamw"  # AdamW: the decay in the update, not the gradient
        for name, (_, layer, _) in zip(layer_names(layers, inputs.shape), networks.trainable(layers, inputs.shape)):
            for path, (lr_mult, decay_mult) in zip(param_names(layer), groups):
                _put(self.lr_mults.setdefault(name, {}), path, lr_mult)
                _put(decays.setdefault(name, {}), path, 0.0 if decoupled else p["weight_decay"] * decay_mult)
                _put(weight_decays.setdefault(name, {}), path, p["weight_decay"] * decay_mult if decoupled else 0.0)
        if p["optimizer"] in ("adam", "adamw"):
            self.tx = optax.scale_by_adam(b1=0.9, b2=0.999, eps=1e-8)
        else:
            self.tx = optax.trace(decay=p["momentum"], nesterov=False)
        put = lambda a: jax.device_put(a, self.device)  # noqa: E731
        self.ema_decay = float(p.get("ema_decay") or 0.0)
        state = {"params": params, "stats": variables["batch_stats"], "opt": self.tx.init(params),
                 "key": jax.random.key(p["seed"])}
        if self.ema_decay:
            state["ema"] = jax.tree.map(jnp.copy, params)
            state["ema_n"] = jnp.zeros((), jnp.float32)
        self.state = jax.tree.map(put, state)
        self.train_x = put(nhwc(inputs.train_x))
        self.train_y = put(inputs.train_y.astype(np.int32))
        splits = {"test": (inputs.test_x, inputs.test_y)}
        if inputs.val_y is not None:
            splits["validation"] = (inputs.val_x, inputs.val_y)
        bs = p["test_batch_size"]
        self.eval_batches = {split: [(put(nhwc(x[s:s + bs])), put(y[s:s + bs].astype(np.int32)))
                                     for s in range(0, len(y), bs)] for split, (x, y) in splits.items()}
        self.losses: list[jax.Array] = []
        module, tx, lr_mults, ema_decay = self.module, self.tx, self.lr_mults, self.ema_decay

        def loss_of(params, stats, x, y, key):
            logits, updated = module.apply({"params": params, "batch_stats": stats}, x, train=True,
                                           rngs={"dropout": key}, mutable=["batch_stats"])
            return xent(logits, y).mean(), updated.get("batch_stats", stats)

        def step(state, train_x, train_y, idx, lr):
            key, dropout_key = jax.random.split(state["key"])
            params = state["params"]
            (loss, stats), grads = jax.value_and_grad(loss_of, has_aux=True)(params, state["stats"], train_x[idx],
                                                                              train_y[idx], dropout_key)
            grads = jax.tree.map(lambda g, w, wd: g + wd * w if wd else g, grads, params, decays)
            updates, opt = tx.update(grads, state["opt"], params)
            params = jax.tree.map(lambda w, u, m, wd: w - (lr * m) * (u + wd * w) if wd else w - (lr * m) * u,
                                  params, updates, lr_mults, weight_decays)
            new = {**state, "params": params, "stats": stats, "opt": opt, "key": key}
            if ema_decay:
                n = state["ema_n"] + 1.0
                rate = jnp.minimum(ema_decay, (1.0 + n) / (10.0 + n))  # stepped.ema_rate
                new["ema"] = jax.tree.map(lambda e, w: e - (1.0 - rate) * (e - w), state["ema"], params)
                new["ema_n"] = n
            return new, loss

        def eval_batch(variables, x, y):
            logits = module.apply(variables, x, train=False)
            return jnp.sum(jnp.argmax(logits, -1) == y), jnp.sum(xent(logits, y))

        self._step, self._eval = step, eval_batch
        self.step_fn, self.eval_fns = step, {}

    def compile(self) -> None:
        if not self.eager:
            batch = jax.ShapeDtypeStruct((self.point["batch_size"],), jnp.int32)
            lr = jax.ShapeDtypeStruct((), jnp.float32)
            self.step_fn = jax.jit(self._step).lower(self.state, self.train_x, self.train_y, batch, lr).compile()
            judged = self._evaluated()
            for batches in self.eval_batches.values():
                for x, y in batches:
                    if x.shape not in self.eval_fns:
                        self.eval_fns[x.shape] = jax.jit(self._eval).lower(judged, x, y).compile()
        if warms_up(self.point):  # the state is immutable: dropping the step's result leaves it as it was
            first = np.arange(self.point["batch_size"]) % len(self.inputs.train_y)
            jax.block_until_ready(self._apply_step(first, 0.0))

    def _apply_step(self, batch: np.ndarray, lr: float):
        """(the state after one step on these images, its loss), as the point's compile mode runs it."""
        idx = jax.device_put(batch.astype(np.int32), self.device)
        if self.eager:
            with jax.disable_jit():
                return self._step(self.state, self.train_x, self.train_y, idx, jnp.float32(lr))
        return self.step_fn(self.state, self.train_x, self.train_y, idx, np.float32(lr))

    def train_step(self, batch: np.ndarray, lr: float) -> None:
        self.state, loss = self._apply_step(batch, lr)
        self.losses.append(loss)

    def take_loss(self) -> float:
        if not self.losses:
            return 0.0
        mean = float(np.mean(jax.device_get(self.losses)))
        self.losses.clear()
        return mean

    def evaluate(self, split: str = "test") -> tuple[float, float]:
        params = self._evaluated()
        sums = []
        for x, y in self.eval_batches[split]:
            if self.eager:
                with jax.disable_jit():
                    sums.append(self._eval(params, x, y))
            else:
                fn = self.eval_fns.get(x.shape)
                if fn is None:  # a shape compile() did not see (none expected): compiled here, in the test time
                    fn = self.eval_fns[x.shape] = jax.jit(self._eval).lower(params, x, y).compile()
                sums.append(fn(params, x, y))
        got = jax.device_get(sums)
        n = sum(int(y.shape[0]) for _, y in self.eval_batches[split])
        return sum(int(c) for c, _ in got) / n, sum(float(s) for _, s in got) / n

    def _judged(self) -> dict:
        """The parameters evaluate() uses: the moving average where the point keeps one."""
        return self.state["ema"] if self.ema_decay else self.state["params"]

    def _evaluated(self) -> dict:
        """The variables evaluate() applies: the judged parameters and the running batch statistics."""
        return {"params": self._judged(), "batch_stats": self.state["stats"]}

    def weights(self):
        state = jax.device_get({"params": self.state["params"], "stats": self.state["stats"]})
        return from_variables(self.point["layers"], self.inputs.shape, state["params"], state["stats"])

    def keep_best(self) -> None:
        self.best = self._judged()  # JAX arrays are immutable: a reference is a copy

    def restore_best(self) -> None:
        self.state = {**self.state, ("ema" if self.ema_decay else "params"): self.best}

    def sync(self) -> None:
        jax.block_until_ready((self.state, self.losses))

    def set_train_data(self, x: np.ndarray) -> None:
        self.train_x = jax.device_put(nhwc(x), self.device)

    @staticmethod
    def forward(layers, weights, x, y, train=False):
        """(`train`: batch normalisation by the batch's statistics; dropout stays off.)"""
        if train and any(layer["type"] == "dropout" for layer in networks.leaves(layers)):
            raise networks.SpecError("a training-mode forward pass of a network with dropout is not deterministic")
        module = Network(layers, tuple(x.shape[1:]))
        variables = to_variables(layers, x.shape[1:], weights)
        if train:
            logits, _ = module.apply(variables, jnp.asarray(nhwc(x)), train=True, mutable=["batch_stats"])
        else:
            logits = module.apply(variables, jnp.asarray(nhwc(x)), train=False)
        return np.asarray(logits), float(xent(logits, jnp.asarray(y.astype(np.int32))).mean())

    @staticmethod
    def train_then_infer(layers, weights, x, y):
        """A training-mode pass (batch statistics, the running ones updated in `batch_stats`), then an
        inference-mode pass with what it left: (train logits, inference logits, the canonical arrays after them)."""
        module = Network(layers, tuple(x.shape[1:]))
        variables = to_variables(layers, x.shape[1:], weights)
        trained, updated = module.apply(variables, jnp.asarray(nhwc(x)), train=True, mutable=["batch_stats"])
        variables = {"params": variables["params"], "batch_stats": updated["batch_stats"]}
        inferred = module.apply(variables, jnp.asarray(nhwc(x)), train=False)
        after = from_variables(layers, x.shape[1:], jax.device_get(variables["params"]),
                               jax.device_get(variables["batch_stats"]))
        return np.asarray(trained), np.asarray(inferred), after

    @staticmethod
    def params(layers, input_shape):
        c, h, w = input_shape
        module = Network(layers, tuple(input_shape))
        shapes = jax.eval_shape(lambda v: module.init(jax.random.key(0), v),
                                jax.ShapeDtypeStruct((1, h, w, c), jnp.float32))["params"]
        n = 0
        for (_, layer, prev), name in zip(networks.trainable(layers, tuple(input_shape)),
                                          layer_names(layers, input_shape)):
            if layer["type"] == "conv" and "table" in layer:  # a masked conv: its connected weights only
                n += networks.connections(layer, prev[0]) * layer["kernel"] ** 2 * layer["filters"]
                n += int(np.prod(shapes[name]["bias"].shape))
            else:
                n += sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(shapes[name]))
        return n


ADAPTER = JaxAdapter
