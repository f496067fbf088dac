"""Theano: a symbolic graph built from the spec, trained by a compiled function with updates.

Written the way Theano's deep learning tutorials write LeNet (convolutional_mlp.py):
the weights are shared variables, the training data live in shared variables too and
the compiled training function takes a batch of indices into them (`givens`), the
updates (SGD with momentum, or Adam) are part of that function, and a second compiled
function tests a slice of the test split (or of the validation hold-out, kept after it in
the same shared variable).

A sparse convolution (a conv with a connection table) convolves with its weights times the
table's 0/1 mask (a constant in the graph): the unconnected weights start at 0, their gradient
is exactly 0, so they stay 0. Where the point keeps a moving average of the weights, the
shadows are updated inside the training function and the test function reads them instead
of the weights.

Batch normalisation is written out (Network._batchnorm): the batch's mean and biased variance in
training, the running mean and variance updated inside the training function by the spec's rule
(decay of the old, the batch's unbiased variance), the running ones in testing. A residual block
adds its body's output to its shortcut's; global average pooling is the mean over H and W.

Theano is configured here, not by the user's ~/.theanorc or THEANO_FLAGS: the flags
below are set before `import theano`. Its compile cache lives inside the environment
(sys.prefix), so that two environments never share one; Theano locks the cache while
it compiles, so points running at once wait for each other there instead of clashing.
The runner sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS to the point's threads before
this module is imported; the threads are OpenBLAS's (Theano's OpenMP is off, see
`theano_flags`).

numpy's own OpenBLAS (inside numpy.libs) is an ILP64 build with suffixed symbols
(sgemm_64_) that Theano cannot call, so Theano's C code links the system OpenBLAS
(`-lopenblas`, Debian's libopenblas-dev).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dlbench.frameworks.base import Unavailable, check_library, initial_weights, parameter_groups
from dlbench.frameworks.stepped import SteppedAdapter
from dlbench.node.blas import blas_in_effect
from dlbench.paths import cache_root
from dlbench.record.fields import Info
from dlbench.spec import networks
from dlbench.spec.initial_weights import connection_mask


def blas_ldflags() -> str:
    """-lopenblas; a conda environment's own OpenBLAS (in sys.prefix/lib) first, where it has one; MKL's
    single dynamic library (the environment's, PyPI's `mkl`) where the point asks for MKL (DLBENCH_BLAS).

    No commas (THEANO_FLAGS splits on them) and every token a flag (Theano refuses a bare path): the run
    path goes to the linker as -Xlinker -R<dir> (ld's -R with a folder is -rpath).
    """
    lib = Path(sys.prefix) / "lib"
    if os.environ.get("DLBENCH_BLAS") == "mkl":
        found = sorted(lib.glob("libmkl_rt.so*"))
        if found:  # PyPI's wheel has only the versioned file: link it by its name
            return f"-L{lib} -Xlinker -R{lib} -l:{found[-1].name}"
    if (lib / "libopenblas.so").exists():
        return f"-L{lib} -Xlinker -R{lib} -lopenblas"
    return "-lopenblas"


def _compile_base() -> str:
    """The folder Theano compiles into: inside the environment, else (read-only env) in the user's cache."""
    inside = Path(sys.prefix) / "theano-cache"
    try:
        inside.mkdir(exist_ok=True)
        if os.access(inside, os.W_OK):
            return str(inside)
    except OSError:
        pass
    digest = hashlib.sha256(sys.prefix.encode()).hexdigest()[:12]
    return str(cache_root() / "theano-cache" / f"{Path(sys.prefix).name}-{digest}")


def requested_threads() -> int:
    try:
        return max(1, int(os.environ.get("OMP_NUM_THREADS") or 1))
    except ValueError:
        return 1


def theano_flags(compile_base: str) -> str:
    """The whole of Theano's configuration, as THEANO_FLAGS (comma-separated key=value)."""
    flags = {
        "device": "cpu",
        # float32, or float64 for `precision: fp64` (the registry sets DLBENCH_FLOATX before the import)
        "floatX": os.environ.get("DLBENCH_FLOATX", "float32"),
        "blas__ldflags": blas_ldflags(),
        # OpenMP stays off: theano-pymc 1.1.2's Elemwise emits a broken pragma with openmp=True
        # (`#pragma omp parallel for if(n>={int(config.openmp_elemwise_minsize)})`, not an f-string)
        # that g++ rejects; the threads come from OpenBLAS (OPENBLAS_NUM_THREADS), which runs the
        # convolutions (CorrMM: im2col + gemm) and the dense layers.
        "openmp": "False",
        "base_compiledir": compile_base,
        # Points running at once queue on the compile lock (a flock, freed if its holder dies); the
        # default 120 s of waiting can run out behind a few cold compilations.
        "compile__timeout": "3600",
    }
    bad = [v for v in flags.values() if "," in v or "=" in v]
    if bad:
        raise RuntimeError(f"THEANO_FLAGS cannot hold a value with ',' or '=' (a path?): {bad[0]}")
    return ",".join(f"{k}={v}" for k, v in flags.items())


THEANO_FLAGS = theano_flags(_compile_base())
os.environ["THEANO_FLAGS"] = THEANO_FLAGS  # overrides whatever the user's shell had
os.environ["THEANORC"] = os.path.join(sys.prefix, "dlbench-no-theanorc")  # a file that does not exist

import theano  # noqa: E402
import theano.tensor as T  # noqa: E402  (T: the tutorials' spelling)
from theano.sandbox.rng_mrg import MRG_RandomStream  # noqa: E402
from theano.tensor.nnet import conv2d  # noqa: E402
from theano.tensor.signal.pool import Pool, pool_2d  # noqa: E402

FLOATX = theano.config.floatX


def _f(value: float) -> np.ndarray:
    """A floatX number for a shared variable's value."""
    return np.asarray(value, dtype=FLOATX)


def _c(value: float):
    """A floatX constant in the graph, so that no float64 creeps in."""
    return T.constant(_f(value))


def _pad(h, pad: int, size: int, fill: float):
    """h (N, C, size, size) framed by `pad` pixels of `fill` on every side."""
    n, c = h.shape[0], h.shape[1]
    out = T.alloc(_c(fill), n, c, size + 2 * pad, size + 2 * pad)
    return T.set_subtensor(out[:, :, pad:pad + size, pad:pad + size], h)


def _pool(h, layer: dict, size_in: int, size_out: int):
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


def _lrn(h, layer: dict, channels: int):
    """Caffe's LRN across channels: x / (k + alpha / size * sum of x^2 over `size` channels) ** beta."""
    size, half = layer["size"], (layer["size"] - 1) // 2
    sq = T.sqr(h)
    padded = T.alloc(_c(0.0), h.shape[0], channels + size - 1, h.shape[2], h.shape[3])
    padded = T.set_subtensor(padded[:, half:half + channels], sq)
    window = sum(padded[:, i:i + channels] for i in range(size))
    scale = _c(layer.get("k", 1.0)) + _c(layer["alpha"] / size) * window
    return h / scale ** _c(layer["beta"])


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
                h = _pool(h, layer, prev[1], shape[1])
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
                    h = h * self.srng.binomial(h.shape, p=keep, dtype=FLOATX) / _c(keep)
            elif kind == "lrn":
                h = _lrn(h, layer, prev[0])
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
            decay, rest = _c(layer["decay"]), _c(1.0 - layer["decay"])
            self.statistic_updates += [(running_mean, decay * running_mean + rest * mean),
                                       (running_var, decay * running_var + rest * var * m / (m - _c(1.0)))]
        else:
            centred, var = h - per_channel(running_mean), running_var
        return centred * per_channel(gamma / T.sqrt(var + _c(layer["eps"]))) + per_channel(beta)

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


def sgd_updates(params, grads, lr, momentum: float, lr_mults: list[float] | None = None) -> list:
    """torch.optim.SGD: v = momentum * v + g; w -= lr * lr_mult * v (no velocity when momentum is 0)."""
    updates = []
    for p, g, mult in zip(params, grads, lr_mults or [1.0] * len(params)):
        rate = lr * _c(mult) if mult != 1.0 else lr
        if momentum:
            v = theano.shared(np.zeros_like(p.get_value(borrow=True)), name=f"v_{p.name}", borrow=True)
            v_new = _c(momentum) * v + g
            updates += [(v, v_new), (p, p - rate * v_new)]
        else:
            updates.append((p, p - rate * g))
    return updates


def ema_updates(params, updates: list, decay: float) -> tuple[list, list]:
    """Shadows of the parameters, moved towards their updated values after every step (stepped.ema_rate):
    (the shadows, the updates that do it, counter included)."""
    new_value = dict(updates)
    count = theano.shared(_f(0.0), name="ema_updates")
    n = count + _c(1.0)
    rate = T.minimum(_c(decay), (_c(1.0) + n) / (_c(10.0) + n))
    shadows, out = [], [(count, n)]
    for p in params:
        shadow = theano.shared(p.get_value(borrow=False), name=f"ema_{p.name}", borrow=True)
        shadows.append(shadow)
        out.append((shadow, shadow - (_c(1.0) - rate) * (shadow - new_value[p])))
    return shadows, out


def adam_updates(params, grads, lr, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
                 lr_mults: list[float] | None = None) -> list:
    """torch.optim.Adam: bias-corrected moments, w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)."""
    t = theano.shared(_f(0.0), name="adam_t")
    t_new = t + _c(1.0)
    step = lr / (_c(1.0) - _c(beta1) ** t_new)
    root_c2 = T.sqrt(_c(1.0) - _c(beta2) ** t_new)
    updates = [(t, t_new)]
    for p, g, mult in zip(params, grads, lr_mults or [1.0] * len(params)):
        m = theano.shared(np.zeros_like(p.get_value(borrow=True)), name=f"m_{p.name}", borrow=True)
        v = theano.shared(np.zeros_like(p.get_value(borrow=True)), name=f"v_{p.name}", borrow=True)
        m_new = _c(beta1) * m + _c(1.0 - beta1) * g
        v_new = _c(beta2) * v + _c(1.0 - beta2) * T.sqr(g)
        rate = step * _c(mult) if mult != 1.0 else step
        updates += [(m, m_new), (v, v_new), (p, p - rate * m_new / (T.sqrt(v_new) / root_c2 + _c(eps)))]
    return updates


def _find_library(name: str, dirs: list[str]) -> str | None:
    """Where the linker finds -l`name`: the -L folders first, then the compiler's own search path."""
    filename = name[1:] if name.startswith(":") else f"lib{name}.so"  # -l:libmkl_rt.so.3 names the file
    for d in dirs:
        candidate = Path(d) / filename
        if candidate.exists():
            return os.path.realpath(candidate)
    try:
        found = subprocess.run([theano.config.cxx or "g++", f"-print-file-name={filename}"], capture_output=True,
                               text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(found) if os.path.isabs(found) and os.path.exists(found) else None


@functools.cache
def blas_libraries() -> list[str]:
    """The shared libraries theano.config.blas__ldflags resolves to (what Theano's C code links)."""
    flags = theano.config.blas__ldflags.split()
    dirs = [f[2:] for f in flags if f.startswith("-L")]
    found = [_find_library(f[2:], dirs) for f in flags if f.startswith("-l")]
    return [f for f in found if f]


def openblas_threads(libraries: list[str]) -> int | None:
    """Threads of the OpenBLAS Theano links, asked of the library itself (the same one its modules load)."""
    for path in libraries:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "openblas_get_num_threads"):
            return int(lib.openblas_get_num_threads())
    return None


class TheanoAdapter(SteppedAdapter):
    @staticmethod
    def versions() -> dict:
        return {"framework_version": theano.__version__, "cuda_version": None, "cudnn_version": None}  # CPU only

    def prepare(self) -> None:
        if self.point["optimizer"] not in ("sgd", "adam"):  # before the data are read, never a substitute
            raise Unavailable(f"Theano's adapter has no {self.point['optimizer']} optimizer "
                              "(dlbench/frameworks/theano.py); no substitute is run")
        check_device(self.point)
        check_toolchain()

    def info(self) -> Info:
        libs = blas_libraries()
        blas_threads = openblas_threads(libs)
        omp_threads = requested_threads()
        resolved = ", ".join(libs) or "not found"
        return {
            "framework": "theano",
            "framework_version": theano.__version__,
            "numpy_version": np.__version__,
            "blas": f"{theano.config.blas__ldflags} -> {resolved}",
            "build": {"blas_ldflags": theano.config.blas__ldflags, "blas_libraries": libs,
                      "openblas_threads": blas_threads, "openmp": bool(theano.config.openmp),
                      "omp_num_threads": omp_threads,
                      "openblas_num_threads_env": os.environ.get("OPENBLAS_NUM_THREADS"),
                      "floatX": theano.config.floatX, "cxx": theano.config.cxx, "linker": theano.config.linker,
                      "compiledir": theano.config.compiledir, "theano_flags": os.environ.get("THEANO_FLAGS")},
            "threads_in_effect": blas_threads if blas_threads is not None
            else int(os.environ.get("OPENBLAS_NUM_THREADS") or omp_threads),
            # What the linker flags name; read back from the process once the compiled functions are loaded.
            "library_in_effect": ("mkl" if any("mkl" in lib for lib in libs)
                                  else "openblas" if any("openblas" in lib for lib in libs)
                                  else theano.config.blas__ldflags),
            "device_name": "cpu",
            "precision_in_effect": f"{theano.config.floatX} throughout (floatX)",
        }

    def build(self) -> None:
        p, inputs = self.point, self.inputs
        self.net = Network(p["layers"], inputs.shape, initial_weights(p, inputs.shape), p["seed"])
        self.train_x = theano.shared(inputs.train_x.astype(FLOATX), name="train_x", borrow=True)
        self.train_y = theano.shared(inputs.train_y.astype(np.int32), name="train_y", borrow=True)
        # The test split and, after it, the validation hold-out: one shared variable, one test function.
        eval_x, eval_y = [inputs.test_x], [inputs.test_y]
        self.ranges = {"test": (0, len(inputs.test_y))}
        if inputs.val_y is not None:
            eval_x.append(inputs.val_x)
            eval_y.append(inputs.val_y)
            self.ranges["validation"] = (len(inputs.test_y), len(inputs.test_y) + len(inputs.val_y))
        self.eval_x = theano.shared(np.concatenate(eval_x).astype(FLOATX), name="eval_x", borrow=True)
        self.eval_y = theano.shared(np.concatenate(eval_y).astype(np.int32), name="eval_y", borrow=True)
        self.lr = theano.shared(_f(p["learning_rate"]), name="lr")
        self.lr_now = float(p["learning_rate"])
        self.loss_sum = theano.shared(_f(0.0), name="loss_sum")
        self.loss_n = theano.shared(np.int64(0), name="loss_n")

        x, y = T.tensor4("x"), T.ivector("y")
        loss = T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(self.net.logits(x, train=True)), y))
        statistics = list(self.net.statistic_updates)  # batch normalisation's running mean and variance
        params = self.net.params
        mults = parameter_groups(p["layers"])
        grads = theano.grad(loss, params)
        if p["weight_decay"]:  # L2 added to the gradient, as torch.optim and Caffe do
            grads = [g + _c(p["weight_decay"] * decay_mult) * w if decay_mult else g
                     for g, w, (_, decay_mult) in zip(grads, params, mults)]
        lr_mults = [lr_mult for lr_mult, _ in mults]
        if p["optimizer"] == "adam":
            updates = adam_updates(params, grads, self.lr, lr_mults=lr_mults)
        else:
            updates = sgd_updates(params, grads, self.lr, p["momentum"], lr_mults)
        self.judged = params  # what the test function reads, and early stopping keeps
        if p.get("ema_decay"):
            self.judged, averaging = ema_updates(params, updates, p["ema_decay"])
            updates += averaging
        updates += statistics + [(self.loss_sum, self.loss_sum + loss), (self.loss_n, self.loss_n + 1)]
        self.idx = T.lvector("idx")
        self.train_givens = {x: self.train_x[self.idx], y: self.train_y[self.idx]}
        self.train_updates = updates

        logits = self.net.logits(x, train=False)
        if self.judged is not params:
            logits = theano.clone(logits, replace=dict(zip(params, self.judged)))
        self.start, self.stop = T.lscalar("start"), T.lscalar("stop")
        self.test_outputs = [T.sum(T.eq(T.argmax(logits, axis=1), y)),
                             T.sum(T.nnet.categorical_crossentropy(T.nnet.softmax(logits), y))]
        self.test_givens = {x: self.eval_x[self.start:self.stop], y: self.eval_y[self.start:self.stop]}

    def compile(self) -> None:
        # Graph optimisation and C compilation (or loading from the cache) happen here, not in training.
        self.train_fn = theano.function([self.idx], [], updates=self.train_updates, givens=self.train_givens,
                                        name="train")
        self.test_fn = theano.function([self.start, self.stop], self.test_outputs, givens=self.test_givens,
                                       name="test")
        # The compiled modules are loaded now: which BLAS they run is in this process's memory map.
        in_effect, mapped = blas_in_effect()
        self.reporter.emit("info", library_in_effect=in_effect, build={"blas_mapped": mapped})
        check_library(self.point, in_effect, "Theano's compiled functions")

    def train_step(self, batch: np.ndarray, lr: float) -> None:
        if lr != self.lr_now:
            self.lr.set_value(_f(lr))
            self.lr_now = lr
        self.train_fn(batch)

    def take_loss(self) -> float:
        # The loss is summed inside the compiled function (an update), so steps never return it.
        n = int(self.loss_n.get_value())
        mean = float(self.loss_sum.get_value()) / max(1, n)
        self.loss_sum.set_value(_f(0.0))
        self.loss_n.set_value(np.int64(0))
        return mean

    def evaluate(self, split: str = "test") -> tuple[float, float]:
        first, end = self.ranges[split]
        bs = self.point["test_batch_size"]
        correct, loss = 0, 0.0
        for start in range(first, end, bs):
            c, s = self.test_fn(start, min(end, start + bs))
            correct += int(c)
            loss += float(s)
        return correct / (end - first), loss / (end - first)

    def weights(self):
        return self.net.canonical()

    def keep_best(self) -> None:
        self.best = [v.get_value(borrow=False) for v in self.judged]

    def restore_best(self) -> None:
        for v, kept in zip(self.judged, self.best):
            v.set_value(kept)

    @staticmethod
    def forward(layers, weights, x, y, train=False):
        """(`train`: batch normalisation by the batch's statistics; dropout stays off.)"""
        net = Network(layers, x.shape[1:], weights)
        xs, ys = T.tensor4("x"), T.ivector("y")
        logits = net.logits(xs, train=False, batch_statistics=train)
        loss = T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(logits), ys))
        f = theano.function([xs, ys], [logits, loss], name="forward")
        got_logits, got_loss = f(x.astype(FLOATX), y.astype(np.int32))
        return np.asarray(got_logits), float(got_loss)

    @staticmethod
    def train_then_infer(layers, weights, x, y):
        """A training-mode pass (batch normalisation by the batch's statistics, its function updating the running
        ones), then an inference-mode pass with what it left: (train logits, inference logits, the canonical arrays
        after them)."""
        net = Network(layers, x.shape[1:], weights)
        xs = T.tensor4("x")
        trained = theano.function([xs], net.logits(xs, train=False, batch_statistics=True),
                                  updates=net.statistic_updates, name="train_pass")
        inferred = theano.function([xs], net.logits(xs, train=False), name="inference_pass")
        batch = x.astype(FLOATX)
        first = np.asarray(trained(batch))
        return first, np.asarray(inferred(batch)), net.canonical()

    def set_train_data(self, x: np.ndarray) -> None:
        # The compiled function reads the shared variable, so a new view needs no recompilation.
        self.train_x.set_value(np.asarray(x, dtype=FLOATX), borrow=True)

    @staticmethod
    def params(layers, input_shape):
        return trainable_params(layers, tuple(input_shape))


def check_device(point: dict) -> None:
    if point["device"] != "cpu":
        try:
            import pygpu  # noqa: F401
        except ImportError:
            raise Unavailable("Theano's GPU back end (libgpuarray/pygpu) is not installed in the Theano "
                              "environment; Theano points run on the CPU only") from None
        raise Unavailable("the dlbench Theano adapter runs Theano on the CPU only (device=cpu)")


def check_toolchain() -> None:
    """Theano without g++ or without its BLAS falls back to slow Python code or fails op by op: stop at once."""
    if not theano.config.cxx:
        raise RuntimeError("Theano found no C++ compiler (g++ on PATH); install g++ (Debian: g++ python3-dev)")
    if not blas_libraries():
        raise RuntimeError(f"Theano's BLAS flags {theano.config.blas__ldflags!r} name no library the linker finds; "
                           "install OpenBLAS (Debian: libopenblas-dev)")


ADAPTER = TheanoAdapter
