"""The spec's network as a Theano graph: shared weights, and the symbolic pass from a batch to logits.

A sparse convolution (a conv with a connection table) convolves with its weights times the
table's 0/1 mask (a constant in the graph): the unconnected weights start at 0, their gradient
is exactly 0, so they stay 0.

Batch normalisation is written out (Network._batchnorm): the batch's mean and biased variance in
training, the running mean and variance updated inside the training function by the spec's rule
(decay of the old, the batch's unbiased variance), the running ones in testing. A residual block
adds its body's output to its shortcut's; global average pooling is the mean over H and W.
"""

from __future__ import annotations

import numpy as np

from dlbench.frameworks.theano_config import FLOATX, MRG_RandomStream, Pool, T, constant, conv2d, pool_2d, theano
from dlbench.spec import networks
from dlbench.spec.initial_weights import connection_mask


def _pad(h, pad: int, size: int, fill: float):
    """h (N, C, size, size) framed by `pad` pixels of `fill` on every side."""
    n, c = h.shape[0], h.shape[1]
    out = T.alloc(constant(fill), n, c, size + 2 * pad, size + 2 * pad)
    return T.set_subtensor(out[:, :, pad:pad + size, pad:pad + size], h)


def pool(h, layer: dict, size_in: int, size_out: int):
    """Pooling with the spec's (Caffe's) output size: ceil rounding, the last window may overhang.

    Caffe's average divides by the window clipped to the padded input (padding counts, the
    overhang does not): Theano's `average_inc_pad`. Max pooling ignores padding in both.
    """
    k, s, p = layer["kernel"], layer["stride"], layer.get("pad", 0)
    mode = "max" if layer["mode"] == "max" else "average_inc_pad"

    def out(n: int, ignore_border: bool, pad: int) -> int:
        return int(Pool.out_shape((n, n), (k, k), ignore_border, (s, s), (pad, pad))[-1])

    if out(size_in, True, p) == size_out:  # no window overhangs: the tutorials' ignore_border=True
        return pool_2d(h, (k, k), ignore_border=True, stride=(s, s), pad=(p, p), mode=mode)
    # Theano pads only with ignore_border=True; frame the input explicitly and keep the partial windows.
    if p:
        h = _pad(h, p, size_in, 0.0 if mode != "max" else float(np.finfo(FLOATX).min))
    got = out(size_in + 2 * p, False, 0)
    if got == size_out or (p and got == size_out + 1):  # Caffe drops a last window that starts in the padding
        h = pool_2d(h, (k, k), ignore_border=False, stride=(s, s), pad=(0, 0), mode=mode)
        return h[:, :, :size_out, :size_out] if got > size_out else h
    raise networks.SpecError(f"Theano adapter: cannot reproduce pooling {layer} from {size_in} to {size_out}")


def lrn(h, layer: dict, channels: int):
    """Caffe's LRN across channels: x / (k + alpha / size * sum of x^2 over `size` channels) ** beta."""
    size, half = layer["size"], (layer["size"] - 1) // 2
    sq = T.sqr(h)
    padded = T.alloc(constant(0.0), h.shape[0], channels + size - 1, h.shape[2], h.shape[3])
    padded = T.set_subtensor(padded[:, half:half + channels], sq)
    window = sum(padded[:, i:i + channels] for i in range(size))
    scale = constant(layer.get("k", 1.0)) + constant(layer["alpha"] / size) * window
    return h / scale ** constant(layer["beta"])


class Network:
    """The spec's layers: shared weights (the given canonical ones, else zeros; a batchnorm's (1, 0, 0, 1)) and the
    graph from a batch to logits.

    Dense weights are kept (in, out), as the tutorials keep them: x . W. Every parametrised layer, inside a residual
    block too, is keyed by its path in the spec (networks.walk: `3_body1`, the second layer of block 3's body) and
    listed in `units` in the spec's order (networks.trainable), its shared variables in canonical order.

    Batch normalisation is written out (networks.py's one definition): in training mode the batch's mean and biased
    variance over (N, H, W), gradients flowing through both, and the running mean and variance moved to
    decay * old + (1 - decay) * the batch's mean and unbiased variance (x m / (m - 1), m = N H W) by updates the
    training function applies (`statistic_updates`, filled by a training-mode graph); in inference mode the running
    ones. A residual block adds its body's output to its shortcut's (none: the input itself); gap is the mean over
    H and W.
    """

    def __init__(self, layers: list[dict], input_shape: tuple[int, int, int],
                 weights: list[tuple[np.ndarray, ...]] | None = None, seed: int = 1):
        self.layers = layers
        self.input_shape = tuple(input_shape)
        self.shapes = networks.shapes(layers, self.input_shape)
        self.srng = MRG_RandomStream(1 + seed % 2_147_000_000)  # dropout's stream; MRG refuses a seed of 0
        self.at: dict[str, tuple] = {}  # path -> (input shape, output shape)
        self.arrays: dict[str, tuple] = {}  # path -> its shared variables, canonical order (dense W as (in, out))
        self.masks: dict[str, np.ndarray] = {}
        self.units: list[tuple[str, dict]] = []
        self.params: list = []  # the trained ones, in parameter_groups' order
        self.statistic_updates: list = []
        given = iter(weights) if weights is not None else None
        for path, layer, prev, shape in networks.walk(layers, self.input_shape):
            self.at[path] = (prev, shape)
            kind = layer["type"]
            if kind not in networks.PARAMETRISED:
                if kind not in ("pool", "dropout", "lrn", "gap") + networks.ACTIVATIONS:
                    raise networks.SpecError(f"Theano adapter: unknown layer type {kind!r}")
                continue
            if kind not in ("conv", "dense", "batchnorm"):
                raise networks.SpecError(f"Theano adapter: no {kind} layer")
            if kind == "conv" and "table" in layer:
                self.masks[path] = connection_mask(layer, prev[0]).astype(FLOATX)
            if given is not None:
                values = list(next(given))
            elif kind == "batchnorm":
                values = [np.ones(prev[0]), np.zeros(prev[0]), np.zeros(prev[0]), np.ones(prev[0])]
            else:
                values = [np.zeros(s) for _, s in networks.arrays(layer, prev)]
            if kind == "dense":
                values[0] = np.asarray(values[0]).T
            names = [name for name, _ in networks.arrays(layer, prev)]
            shared = tuple(theano.shared(np.ascontiguousarray(v, dtype=FLOATX), name=f"{name}{path}", borrow=True)
                           for name, v in zip(names, values))
            self.arrays[path] = shared
            self.units.append((path, layer))
            self.params += list(shared[:networks.trained_arrays(layer)])

    def outputs(self, x, train: bool, batch_statistics: bool | None = None) -> list:
        """The symbolic output of every top-level layer; dropout is active only when `train`, batch normalisation
        normalises by the batch's statistics when `batch_statistics` (by default: when `train`). A graph built with
        batch statistics leaves the running statistics' updates in `statistic_updates`."""
        batch = train if batch_statistics is None else batch_statistics
        self.statistic_updates = []
        return self._run(self.layers, x, "", train, batch)

    def _run(self, layers: list[dict], h, prefix: str, train: bool, batch: bool) -> list:
        outs = []
        for i, layer in enumerate(layers):
            kind, path = layer["type"], f"{prefix}{i}"
            if kind == "residual":
                body = self._run(layer["body"], h, f"{path}_body", train, batch)
                short = self._run(layer["shortcut"], h, f"{path}_shortcut", train, batch)
                h = (body[-1] if body else h) + (short[-1] if short else h)
                outs.append(h)
                continue
            prev, shape = self.at[path]
            if kind == "conv":
                w, *b = self.arrays[path]
                filters = w * T.constant(self.masks[path]) if path in self.masks else w
                pad, stride = layer.get("pad", 0), layer.get("stride", 1)
                # filter_flip=False: cross-correlation, the weights laid out as in Caffe and PyTorch
                h = conv2d(h, filters, input_shape=(None, *prev), filter_shape=w.get_value(borrow=True).shape,
                           border_mode=(pad, pad) if pad else "valid", subsample=(stride, stride),
                           filter_flip=False)
                if b:
                    h = h + b[0].dimshuffle("x", 0, "x", "x")
            elif kind == "batchnorm":
                h = self._batchnorm(h, path, layer, batch)
            elif kind == "gap":
                h = T.mean(h, axis=(2, 3))
            elif kind == "pool":
                h = pool(h, layer, prev[1], shape[1])
            elif kind == "dense":
                w, b = self.arrays[path]
                if h.ndim > 2:
                    h = h.flatten(2)
                h = T.dot(h, w) + b
            elif kind == "relu":
                h = T.nnet.relu(h)
            elif kind == "tanh":
                h = T.tanh(h)
            elif kind == "sigmoid":
                h = T.nnet.sigmoid(h)
            elif kind == "dropout":
                if train:
                    keep = 1.0 - layer["rate"]
                    h = h * self.srng.binomial(h.shape, p=keep, dtype=FLOATX) / constant(keep)
            elif kind == "lrn":
                h = lrn(h, layer, prev[0])
            outs.append(h)
        return outs

    def _batchnorm(self, h, path: str, layer: dict, batch: bool):
        gamma, beta, running_mean, running_var = self.arrays[path]
        axes = (0, 2, 3)

        def per_channel(v):
            return v.dimshuffle("x", 0, "x", "x")

        if batch:
            mean = T.mean(h, axis=axes)
            centred = h - per_channel(mean)
            var = T.mean(T.sqr(centred), axis=axes)  # biased: over m = N H W
            m = T.cast(h.shape[0] * h.shape[2] * h.shape[3], FLOATX)
            decay, rest = constant(layer["decay"]), constant(1.0 - layer["decay"])
            self.statistic_updates += [(running_mean, decay * running_mean + rest * mean),
                                       (running_var, decay * running_var + rest * var * m / (m - constant(1.0)))]
        else:
            centred, var = h - per_channel(running_mean), running_var
        return centred * per_channel(gamma / T.sqrt(var + constant(layer["eps"]))) + per_channel(beta)

    def logits(self, x, train: bool, batch_statistics: bool | None = None):
        return self.outputs(x, train, batch_statistics)[-1]

    def canonical(self) -> list[tuple[np.ndarray, ...]]:
        """Every parametrised layer's canonical arrays (networks.arrays), in the spec's order: copies."""
        out = []
        for path, layer in self.units:
            values = [v.get_value(borrow=False) for v in self.arrays[path]]
            if layer["type"] == "dense":
                values[0] = values[0].T.copy()
            out.append(tuple(values))
        return out

    def param_count(self) -> int:
        """Trainable parameters; a masked convolution counts its connected weights only, a batchnorm gamma and
        beta (its running statistics are not trained)."""
        n = 0
        for path, layer in self.units:
            for k, v in enumerate(self.arrays[path][:networks.trained_arrays(layer)]):
                shape = v.get_value(borrow=True).shape
                if k == 0 and path in self.masks:
                    n += int(self.masks[path].sum()) * shape[2] * shape[3]
                else:
                    n += int(np.prod(shape))
        return n


def trainable_params(layers: list[dict], input_shape: tuple[int, int, int]) -> int:
    """Trainable parameters (weights + biases) of the network as Theano builds it."""
    return Network(layers, input_shape).param_count()
