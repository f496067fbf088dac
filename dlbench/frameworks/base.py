"""The contract every framework adapter keeps, and the training loop the Python-driven adapters share.

Runs inside a framework's environment: numpy and the standard library only.

Every adapter is an `Adapter` (one contract: prepare, load, info, train, forward) and
`Adapter.run` drives it the same way for every framework, so the plan, the events and the
result record are made in one place. The PyTorch, TensorFlow, Theano and JAX adapters are
`SteppedAdapter`s (build, train_step, take_loss, evaluate): the training loop, the clocks,
the learning-rate schedule, the batch order, the validation with early stopping and the
divergence check are shared code.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlbench import initialisers, models
from dlbench import inputs as input_handling
from dlbench import lr as lr_policies
from dlbench.datasets import store

PROGRESS_EVERY_S = 2.0


# The BLAS libraries a process can have loaded, by their file name, and what each is called in the records.
BLAS_FILES = (("libmkl_rt", "mkl"), ("libmkl_core", "mkl"), ("libopenblas", "openblas"), ("libblis", "blis"),
              ("libcblas", "cblas"))


def blas_in_effect(pid: int | str = "self") -> tuple[str | None, list[str]]:
    """The BLAS a running process has loaded, read from its memory map (not assumed from how it was built):
    its name in the records (mkl before openblas where both are mapped: MKL is only loaded when asked for)
    and the paths of every BLAS library mapped."""
    try:
        with open(f"/proc/{pid}/maps") as fh:
            paths = sorted({line.split()[-1] for line in fh if "/" in line and ".so" in line})
    except OSError:
        return None, []
    found = [(name, path) for path in paths for prefix, name in BLAS_FILES if Path(path).name.startswith(prefix)]
    names = {name for name, _ in found}
    return (next((n for n in ("mkl", "openblas", "blis", "cblas") if n in names), None),
            sorted({path for _, path in found}))


def check_library(point: dict, in_effect: str | None, where: str) -> None:
    """Refuse a point whose asked-for BLAS is not the one the process runs (a wrong environment, say)."""
    if point.get("library") == "mkl" and in_effect != "mkl":
        raise Unavailable(f"the point asks for MKL, but {where} runs {in_effect or 'no BLAS that dlbench knows'} "
                          "(the framework's -mkl environment is needed: envs/<framework>-mkl.txt)")


class Unavailable(RuntimeError):
    """The point cannot run here (no GPU, no GPU build); the message says why."""

    status = "unavailable"  # a result: this machine or build cannot run it


class GpuNotVisible(Unavailable):
    """A GPU build sees no GPU on a node that has one: the GPU is away for a while (a driver reset, a
    device taken by another job), a failure of the machine that a later attempt may not meet."""

    status = "gpu_lost"


def no_gpu(built_with_cuda: bool, message: str) -> Unavailable:
    """The exception for a GPU point that sees no GPU: a GPU build's is retried, a CPU build's is a result."""
    return GpuNotVisible(message) if built_with_cuda else Unavailable(message)


class Diverged(RuntimeError):
    def __init__(self, iteration: int, loss: float):
        super().__init__(f"loss became {loss} at iteration {iteration}")
        self.iteration = iteration
        self.loss = loss


class Reporter:
    """Events as JSON lines, flushed one by one so that a killed trainer leaves its progress."""

    def __init__(self, path: str | os.PathLike):
        self._fh = open(path, "a", buffering=1)

    def emit(self, event: str, **fields) -> None:
        fields = {"e": event, "t": time.monotonic(), **fields}
        self._fh.write(json.dumps(fields, default=_plain) + "\n")
        self._fh.flush()

    @contextlib.contextmanager
    def phase(self, name: str):
        self.emit("phase_start", name=name)
        start = time.perf_counter()
        yield
        self.emit("phase_end", name=name, duration_s=time.perf_counter() - start)

    def close(self) -> None:
        self._fh.close()


def _plain(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    return str(obj)


@dataclass
class Inputs:
    """Float32 NCHW arrays ready for any framework, after the preset's input handling."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    classes: int
    digest: str
    augmenter: input_handling.Augmenter | None = None  # redraws train_x each epoch where the preset augments
    val_x: np.ndarray | None = None  # the validation hold-out, where the point validates
    val_y: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.train_x.shape[1:])


@contextlib.contextmanager
def no_hugepage_advice():
    """numpy's arrays made inside the block are not advised to the kernel as huge-page memory.

    numpy advises every large array so (MADV_HUGEPAGE). With transparent huge pages set to
    `madvise`, the first touch of Fashion-MNIST's 220 MB float copy took 0.8-1.1 s with the
    advice and 0.3 s without it (fresh PyTorch processes on a 2-core KVM guest), the kernel
    finding huge pages for it. Only the data load is affected; the framework's own arrays keep
    numpy's default.
    """
    try:
        from numpy._core import multiarray  # numpy 2
    except ImportError:
        from numpy.core import multiarray  # numpy 1 (Theano's environment)
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)


def load_inputs(dataset_dir: str | os.PathLike, point: dict) -> Inputs:
    cfg = point.get("input", {})
    holdout = (point.get("validation") or {}).get("fraction", 0.0)
    with no_hugepage_advice():
        arrays, meta = store.load(dataset_dir)
        split = input_handling.splits(arrays["train_x"], arrays["train_y"], arrays["test_x"], arrays["test_y"], cfg,
                                      holdout)
    (train_x, train_y), (test_x, test_y) = split["train"], split["test"]
    val_x, val_y = split.get("validation", (None, None))
    augmenter = None
    if input_handling.augments(cfg):
        augmenter = input_handling.Augmenter(train_x, cfg, point["seed"])
        train_x = augmenter()
    return Inputs(train_x, train_y, test_x, test_y, int(meta["classes"]), meta["digest"], augmenter, val_x, val_y)


def initial_weights(point: dict, input_shape: tuple[int, int, int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The point's initial (W, b) per conv and dense layer, canonical layout: the same numbers in every framework."""
    return initialisers.draw(point["layers"], tuple(input_shape), point.get("init"), point["seed"])


def ema_rate(decay: float, updates: int) -> float:
    """The moving average's decay after `updates` updates: TensorFlow's rule with num_updates,
    min(decay, (1 + updates) / (10 + updates)), so that the average follows the weights early on."""
    return min(decay, (1.0 + updates) / (10.0 + updates))


def parameter_groups(layers: list[dict]) -> list[tuple[float, float]]:
    """(lr multiplier, decay multiplier) of every parameter, in the order W0, b0, W1, b1, ... of the
    conv and dense layers: the spec's lr_mult / decay_mult (weights) and bias_lr_mult / bias_decay_mult."""
    out = []
    for layer in layers:
        if layer["type"] in ("conv", "dense"):
            m = models.multipliers(layer)
            out += [(m["lr"][0], m["decay"][0]), (m["lr"][1], m["decay"][1])]
    return out


@dataclass
class Plan:
    """How long a point trains and when it reports, in iterations (at most: early stopping may end it sooner)."""

    total_iterations: int
    steps_per_epoch: int
    display_every: int
    test_every: int | None
    lr_policy: dict

    @classmethod
    def of(cls, point: dict, train_size: int) -> Plan:
        spe = lr_policies.steps_per_epoch(train_size, point["batch_size"])
        if point.get("iterations"):
            total = int(point["iterations"])
        else:
            total = max(1, math.ceil(point["epochs"] * spe))
        test_every = point.get("test_interval") or spe
        test_every = test_every if test_every < total else None
        return cls(total, spe, max(1, total // 100), test_every,
                   lr_policies.normalise(point.get("lr_policy", {"name": "fixed"}), train_size, point["batch_size"]))


def batch_order(n: int, batch_size: int, seed: int, shuffle: bool = True):
    """Endless batches of indices, wrapping across epochs like Caffe's readers: a new permutation each
    epoch, or (shuffle False) the file order every epoch, as Caffe's LMDB, Torch's and Theano's scripts read."""
    rng = np.random.RandomState(seed)
    pending = np.empty(0, dtype=np.int64)
    while True:
        while len(pending) < batch_size:
            epoch = rng.permutation(n) if shuffle else np.arange(n)
            pending = np.concatenate([pending, epoch.astype(np.int64)])
        yield pending[:batch_size]
        pending = pending[batch_size:]


class EarlyStopping:
    """The Theano tutorial's patience rule, validated every `every` iterations.

    Counting iterations from 0 as the tutorial does (`it` = iterations done - 1): a validation error
    below the best is the new best; below best x threshold it also raises the patience to
    it x increase; training stops once the patience is at most `it`. Validation comes every
    min(steps per epoch, patience // 2) iterations.
    """

    def __init__(self, cfg: dict, steps_per_epoch: int):
        self.patience = int(cfg["patience"])
        self.increase = float(cfg.get("patience_increase", 2.0))
        self.threshold = float(cfg.get("improvement_threshold", 0.995))
        self.every = max(1, min(steps_per_epoch, self.patience // 2))
        self.best_error = math.inf
        self.best_iteration: int | None = None
        self.best_accuracy: float | None = None

    def due(self, done: int) -> bool:
        return done % self.every == 0

    def record(self, done: int, accuracy: float) -> bool:
        """A validation after `done` iterations; whether it is the best so far (its weights to be kept)."""
        error = 1.0 - accuracy
        if error >= self.best_error:
            return False
        if error < self.best_error * self.threshold:
            self.patience = max(self.patience, int((done - 1) * self.increase))
        self.best_error, self.best_iteration, self.best_accuracy = error, done, accuracy
        return True

    def should_stop(self, done: int) -> bool:
        return self.patience <= done - 1


@dataclass
class Loaded:
    """What an adapter's load() read: sizes, digest and shape, plus anything it wants in the `data` event."""

    train_samples: int
    test_samples: int
    digest: str
    input_shape: list[int]
    extra: dict = field(default_factory=dict)


@dataclass
class Outcome:
    """What an adapter's train() measured: clocks (seconds) and the final test on the whole test split.

    iterations: those trained where fewer than planned (early stopping). extra: what the record should
    say of the point's procedure (validation, early stopping, moving average), see `procedure_fields`.
    """

    train_time_s: float
    test_time_s: float
    accuracy: float
    test_loss: float
    final_loss: float
    interval_test_time_s: float = 0.0
    augment_time_s: float = 0.0
    iterations: int | None = None
    extra: dict = field(default_factory=dict)


# The record's columns for the training procedure, with the value of a point that has none of it.
PROCEDURE_FIELDS = {
    "validation_samples": 0,  # images held out of training for validation
    "best_validation_iteration": None,  # the iteration whose weights were tested (early stopping)
    "best_validation_accuracy": None,
    "stopped_early_at": None,  # the last iteration trained, where the patience ran out before the plan
    "accuracy_at_best": None,  # test accuracy of the best-validation weights (= accuracy where validating)
    "ema": None,  # "applied (decay d)", or "not applied: why", where the point asks for a moving average
}


def result(point: dict, plan: Plan, loaded: Loaded, outcome: Outcome) -> dict:
    """The trainer's `result` event: the one place its fields are made, for every adapter."""
    iterations = outcome.iterations or plan.total_iterations
    images = iterations * point["batch_size"]
    train_s, test_s = outcome.train_time_s, outcome.test_time_s
    return {
        "train_time_s": train_s,
        "test_time_s": test_s,
        "interval_test_time_s": outcome.interval_test_time_s,
        "augment_time_s": outcome.augment_time_s,
        "accuracy": outcome.accuracy,
        "test_loss": outcome.test_loss,
        "final_loss": outcome.final_loss,
        "iterations": iterations,
        "epochs_trained": iterations / plan.steps_per_epoch,
        "images_trained": images,
        "throughput_img_s": images / train_s if train_s else None,
        "test_throughput_img_s": loaded.test_samples / test_s if test_s else None,
        "train_samples": loaded.train_samples,
        "test_samples": loaded.test_samples,
        **PROCEDURE_FIELDS, **outcome.extra,
    }


class Adapter(ABC):
    """One framework's way to train one point; the trainer process calls `run()`, which calls the rest.

    Each adapter module names its class ADAPTER. `run()` is the same for every framework:
    prepare() (before any data are read) -> load() (the `data_load` phase and the `data`
    event) -> the Plan (`plan` event) -> info() (`info` event) -> train(plan) -> result().
    train() emits the phases `build`, `compile`, `train` and `test`, a `step` event per
    display interval and a `test` event per test, the last one the final test.
    """

    def __init__(self, point: dict, dataset_dir: str | os.PathLike, reporter: Reporter):
        self.point = point
        self.dataset_dir = Path(dataset_dir)
        self.reporter = reporter

    def prepare(self) -> None:  # noqa: B027 (an optional hook)
        """Configure the framework for the point (threads, seed, device, library) and refuse, by raising
        Unavailable, a point it cannot run here; called before any data are read."""

    @abstractmethod
    def load(self) -> Loaded:
        """Read the point's data, after its input handling; the sizes and digest of what was read."""

    @staticmethod
    @abstractmethod
    def versions() -> dict:
        """The framework's versions as it reports them, without a point: framework_version, cuda_version and
        cudnn_version (None for a build without them). Checks an environment (trainer --probe) and goes into
        every record."""

    @abstractmethod
    def info(self) -> dict:
        """What the framework says of itself: framework, framework_version, numpy_version, blas, build
        (BLAS, oneDNN, CUDA, ...), threads_in_effect, library_in_effect, device_name; where it has the compile
        and precision switches, compile_in_effect and precision_in_effect (what it ran, as it reports it)."""

    @abstractmethod
    def train(self, plan: Plan) -> Outcome:
        """Build the network of point["layers"] with its initial weights, train it for plan.total_iterations
        with the point's optimizer and learning-rate policy, test it every plan.test_every iterations and
        at the end on the whole test split, and report as it goes (see the class docstring)."""

    @staticmethod
    @abstractmethod
    def forward(layers: list[dict], weights: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                y: np.ndarray) -> tuple[np.ndarray, float]:
        """The network of `layers` as this adapter builds it, with the given canonical weights (conv W (out,
        in, kh, kw) applied as a cross-correlation, dense W (out, in) on the input flattened in C, H, W
        order; one (W, b) per conv and dense layer), run in inference mode on x (N, C, H, W): the logits
        and the mean softmax cross-entropy against y. It shows that every framework builds the same network."""

    @staticmethod
    @abstractmethod
    def params(layers: list[dict], input_shape: tuple[int, int, int]) -> int:
        """Trainable parameters of the network of `layers` as this adapter builds it, counting a sparse conv's
        connected weights only (masked weights are not parameters): it must equal models.param_count."""

    def close(self) -> None:  # noqa: B027 (an optional hook)
        """Release what prepare() and load() made (temporary files, child processes)."""

    def run(self) -> dict:
        try:
            self.prepare()
            with self.reporter.phase("data_load"):
                loaded = self.load()
            self.reporter.emit("data", digest=loaded.digest, train_samples=loaded.train_samples,
                               test_samples=loaded.test_samples, input_shape=loaded.input_shape, **loaded.extra)
            plan = Plan.of(self.point, loaded.train_samples)
            self.reporter.emit("plan", total_iterations=plan.total_iterations, steps_per_epoch=plan.steps_per_epoch,
                               test_every=plan.test_every, display_every=plan.display_every,
                               train_samples=loaded.train_samples, test_samples=loaded.test_samples)
            info = {"python_version": platform.python_version(), **self.versions(), **self.info()}
            self.reporter.emit("info", **info)
            return result(self.point, plan, loaded, self.train(plan))
        finally:
            self.close()


class Stopwatch:
    """Training time in segments: stopped while the loop tests or draws new augmented data.

    `sync` waits for queued device work, so that a stop covers the work already launched.
    """

    def __init__(self, sync):
        self._sync = sync
        self.total = 0.0
        self._since: float | None = None

    def start(self) -> None:
        self._since = time.perf_counter()

    def stop(self) -> float:
        """Synchronise, add the running segment; the total so far."""
        self._sync()
        if self._since is not None:
            self.total += time.perf_counter() - self._since
            self._since = None
        return self.total

    def read(self) -> float:
        """The total with the running segment, without synchronising (for progress reports)."""
        return self.total + (time.perf_counter() - self._since if self._since is not None else 0.0)

    @contextlib.contextmanager
    def paused(self):
        """Stopped for the block; yields a span whose `seconds` is the block's own duration once it ends."""
        self.stop()
        span = _Span()
        t0 = time.perf_counter()
        try:
            yield span
        finally:
            span.seconds = time.perf_counter() - t0
            self.start()


class _Span:
    seconds = 0.0


class SteppedAdapter(Adapter):
    """An adapter whose training loop runs in Python, one step at a time: PyTorch, TensorFlow, Theano, JAX.

    It implements build, train_step, take_loss and evaluate (and compile, sync, set_train_data where
    the framework needs them; keep_best and restore_best for early stopping); `train` is the loop they
    share, so that the clocks, the learning-rate schedule, the batch order, the validation and early
    stopping, the reports and the divergence check are the same code for all of them.

    build() starts the network from initial_weights(point, shape) and honours the spec's per-layer
    multipliers (parameter_groups), and, where the point has `ema_decay`, keeps a moving average of the
    weights (updated after every step at ema_rate) that evaluate() then uses.
    """

    inputs: Inputs

    def load(self) -> Loaded:
        self.inputs = load_inputs(self.dataset_dir, self.point)
        extra = {"validation_samples": len(self.inputs.val_y)} if self.inputs.val_y is not None else {}
        return Loaded(len(self.inputs.train_y), len(self.inputs.test_y), self.inputs.digest, list(self.inputs.shape),
                      extra)

    @abstractmethod
    def build(self) -> None:
        """The model, its initial weights and the optimizer; the data on the device."""

    def compile(self) -> None:
        """Tracing, compiling or warm-up that is not training (reported as the `compile` phase); where
        warms_up(point), one untimed step too, eager points included."""

    @abstractmethod
    def train_step(self, batch: np.ndarray, lr: float) -> None:
        """One update on the training images at these indices, at this learning rate."""

    @abstractmethod
    def take_loss(self) -> float:
        """The mean training loss since the last call (synchronises)."""

    @abstractmethod
    def evaluate(self, split: str = "test") -> tuple[float, float]:
        """(accuracy, mean loss) on the whole split ("test", or "validation": the hold-out), with the weights
        the point is judged by (the moving average where the point keeps one)."""

    @abstractmethod
    def weights(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The current (W, b) of every conv and dense layer in the canonical layout (see `forward`), as stored:
        a sparse conv's unconnected weights included, not masked (they must still be 0)."""

    def keep_best(self) -> None:
        """Copy aside the weights evaluate() uses (early stopping: the best validation so far)."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep weights for early stopping")

    def restore_best(self) -> None:
        """Put back the weights keep_best() copied."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore weights for early stopping")

    def sync(self) -> None:
        """Wait for queued device work before a clock is read."""

    def set_train_data(self, x: np.ndarray) -> None:
        """A new augmented view of the training images."""
        raise NotImplementedError(f"{type(self).__name__} does not take augmented data")

    def train(self, plan: Plan) -> Outcome:
        point, reporter, inputs = self.point, self.reporter, self.inputs
        with reporter.phase("build"):
            self.build()
        with reporter.phase("compile"):
            self.compile()
        order = batch_order(len(inputs.train_y), point["batch_size"], point["seed"], point.get("shuffle", True))
        stopper = EarlyStopping(point["validation"], plan.steps_per_epoch) if point.get("validation") else None
        clock = Stopwatch(self.sync)
        interval_test_s = augment_s = 0.0
        last_loss = float("nan")
        stopped_at = None
        reporter.emit("phase_start", name="train")
        clock.start()
        last_report = time.perf_counter()
        for it in range(plan.total_iterations):
            if inputs.augmenter is not None and it and it % plan.steps_per_epoch == 0:
                # A fresh augmented view per epoch; its cost is reported apart, as an input pipeline's would be.
                with clock.paused() as span:
                    self.set_train_data(inputs.augmenter())
                augment_s += span.seconds
            lr = lr_policies.rate(plan.lr_policy, point["learning_rate"], it)
            self.train_step(next(order), lr)
            done = it + 1
            stopping = stopper is not None and stopper.should_stop(done) and done < plan.total_iterations
            # Report every display interval, and at least every PROGRESS_EVERY_S on slow points,
            # so a point cut short (timeout, kill) still shows how far it got.
            if (done % plan.display_every == 0 or done == plan.total_iterations or stopping
                    or time.perf_counter() - last_report >= PROGRESS_EVERY_S):
                last_report = time.perf_counter()
                last_loss = self.take_loss()
                reporter.emit("step", iteration=done, epoch=done / plan.steps_per_epoch, loss=last_loss, lr=lr,
                              train_time_s=clock.read())
                if not math.isfinite(last_loss):
                    raise Diverged(done, last_loss)
            if plan.test_every and done % plan.test_every == 0 and done < plan.total_iterations:
                with clock.paused() as span:
                    acc, loss = self.evaluate()
                interval_test_s += span.seconds
                reporter.emit("test", iteration=done, epoch=done / plan.steps_per_epoch, accuracy=acc, loss=loss,
                              test_time_s=span.seconds, train_time_s=clock.total)
            if stopper is not None and stopper.due(done):
                with clock.paused() as span:
                    acc, loss = self.evaluate("validation")
                    if stopper.record(done, acc):
                        self.keep_best()
                interval_test_s += span.seconds
                reporter.emit("validation", iteration=done, epoch=done / plan.steps_per_epoch, accuracy=acc,
                              loss=loss, best=stopper.best_iteration == done, patience=stopper.patience,
                              test_time_s=span.seconds, train_time_s=clock.total)
                stopping = stopper.should_stop(done) and done < plan.total_iterations
            if stopping:
                stopped_at = done
                break
        train_s = clock.stop()
        reporter.emit("phase_end", name="train", duration_s=train_s)
        iterations = stopped_at or plan.total_iterations
        if stopper is not None and stopper.best_iteration is not None:
            self.restore_best()  # the tested weights are those of the best validation, as the tutorial reports
        with reporter.phase("test"):
            t0 = time.perf_counter()
            acc, test_loss = self.evaluate()
            self.sync()
            test_s = time.perf_counter() - t0
        reporter.emit("test", iteration=iterations, epoch=iterations / plan.steps_per_epoch,
                      accuracy=acc, loss=test_loss, test_time_s=test_s, train_time_s=train_s)
        extra = {}
        if point.get("ema_decay"):
            extra["ema"] = f"applied (decay {point['ema_decay']:g}, min(decay, (1 + n) / (10 + n)) after n updates)"
        if stopper is not None:
            extra.update(validation_samples=len(inputs.val_y), best_validation_iteration=stopper.best_iteration,
                         best_validation_accuracy=stopper.best_accuracy, stopped_early_at=stopped_at,
                         accuracy_at_best=acc)
        return Outcome(train_s, test_s, acc, test_loss, last_loss, interval_test_s, augment_s,
                       iterations=stopped_at, extra=extra)


def warms_up(point: dict) -> bool:
    """Whether a point takes one untimed step in its `compile` phase whatever its compile mode: a GPU point,
    whose first steps pay one-time costs (cuDNN handles, lazy kernel loading, the allocator's first blocks)
    that would otherwise fall into the training time of an eager point. Compiled points take it anyway.
    """
    return point["device"] == "gpu"


def thread_env(threads: int, interop_threads: int | None = None) -> dict[str, str]:
    """The variables every threaded library reads, set before the framework is imported.

    interop_threads: TensorFlow's inter-op pool where the point sets it, else 1.
    """
    n = str(threads)
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n,
            "TF_NUM_INTRAOP_THREADS": n, "TF_NUM_INTEROP_THREADS": str(interop_threads or 1)}
