"""Theano: a symbolic graph built from the spec, trained by a compiled function with updates.

Written the way Theano's deep learning tutorials write LeNet (convolutional_mlp.py):
the weights are shared variables, the training data live in shared variables too and
the compiled training function takes a batch of indices into them (`givens`), the
updates (SGD with momentum, or Adam) are part of that function, and a second compiled
function tests a slice of the test split (or of the validation hold-out, kept after it in
the same shared variable). Where the point keeps a moving average of the weights, the
shadows are updated inside the training function and the test function reads them instead
of the weights.

Theano is configured and imported by dlbench.frameworks.theano_config (its flags, its compile cache, its BLAS);
the network is dlbench.frameworks.theano_network, the updates dlbench.frameworks.theano_updates.
"""

from __future__ import annotations

import os

import numpy as np

from dlbench.frameworks.base import Unavailable, check_library, initial_weights, parameter_groups
from dlbench.frameworks.stepped import SteppedAdapter
from dlbench.frameworks.theano_config import (
    FLOATX,
    T,
    blas_libraries,
    check_toolchain,
    constant,
    floatx,
    openblas_threads,
    requested_threads,
    theano,
)
from dlbench.frameworks.theano_network import Network, trainable_params
from dlbench.frameworks.theano_updates import adam_updates, ema_updates, sgd_updates
from dlbench.node.blas import blas_in_effect
from dlbench.record.fields import Info


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
        self.lr = theano.shared(floatx(p["learning_rate"]), name="lr")
        self.lr_now = float(p["learning_rate"])
        self.loss_sum = theano.shared(floatx(0.0), name="loss_sum")
        self.loss_n = theano.shared(np.int64(0), name="loss_n")

        x, y = T.tensor4("x"), T.ivector("y")
        loss = T.mean(T.nnet.categorical_crossentropy(T.nnet.softmax(self.net.logits(x, train=True)), y))
        statistics = list(self.net.statistic_updates)  # batch normalisation's running mean and variance
        params = self.net.params
        mults = parameter_groups(p["layers"])
        grads = theano.grad(loss, params)
        if p["weight_decay"]:  # L2 added to the gradient, as torch.optim and Caffe do
            grads = [g + constant(p["weight_decay"] * decay_mult) * w if decay_mult else g
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
            self.lr.set_value(floatx(lr))
            self.lr_now = lr
        self.train_fn(batch)

    def take_loss(self) -> float:
        # The loss is summed inside the compiled function (an update), so steps never return it.
        n = int(self.loss_n.get_value())
        mean = float(self.loss_sum.get_value()) / max(1, n)
        self.loss_sum.set_value(floatx(0.0))
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


ADAPTER = TheanoAdapter
