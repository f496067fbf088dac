"""The training loop the Python-driven adapters share: PyTorch, TensorFlow, Theano and JAX.

Runs inside a framework's environment: numpy and the standard library only.

A `SteppedAdapter` implements build, train_step, take_loss and evaluate (dlbench.frameworks.base has the
contract every adapter keeps); the loop here owns the clocks, the learning-rate schedule, the batch order,
the validation with early stopping, the reports and the divergence check, the same code for all of them.
"""

from __future__ import annotations

import contextlib
import math
import time
from abc import abstractmethod

import numpy as np

from dlbench.datasets.loading import Inputs, load_inputs
from dlbench.frameworks.base import (
    Adapter,
    Diverged,
    Loaded,
    Outcome,
    Plan,
    optional_hook,
)
from dlbench.spec import inputs as input_handling
from dlbench.spec import lr_policies

PROGRESS_EVERY_S = 2.0  # a slow point reports its progress at least this often


def ema_rate(decay: float, updates: int) -> float:
    """The moving average's decay after `updates` updates: TensorFlow's rule with num_updates,
    min(decay, (1 + updates) / (10 + updates)), so that the average follows the weights early on."""
    return min(decay, (1.0 + updates) / (10.0 + updates))


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
        """Every stepped adapter reads its weights back (Adapter.weights)."""

    @optional_hook
    def keep_best(self) -> None:
        """Copy aside the weights evaluate() uses (early stopping: the best validation so far)."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep weights for early stopping")

    @optional_hook
    def restore_best(self) -> None:
        """Put back the weights keep_best() copied."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore weights for early stopping")

    def sync(self) -> None:
        """Wait for queued device work before a clock is read."""

    @optional_hook
    def set_train_data(self, x: np.ndarray) -> None:
        """A new augmented view of the training images."""
        raise NotImplementedError(f"{type(self).__name__} does not take augmented data")

    def needs(self) -> dict[str, tuple[str, ...]]:
        """The loop's optional hooks this point calls: early stopping's where it validates, set_train_data where
        its input handling augments (a new view each epoch)."""
        out = {}
        if self.point.get("validation"):
            out["validation with early stopping"] = ("keep_best", "restore_best")
        if input_handling.augments(self.point.get("input", {})):
            out["augmented input (a new view each epoch)"] = ("set_train_data",)
        return out

    def train(self, plan: Plan) -> Outcome:
        with self.reporter.phase("build"):
            self.build()
        with self.reporter.phase("compile"):
            self.compile()
        loop = Loop(self, plan)
        with loop.training():  # the `train` phase, on its own clock
            for epoch in loop.epochs():  # a fresh augmented view each epoch; early stopping may end them sooner
                for done, batch, lr in loop.batches(epoch):
                    self.train_step(batch, lr)
                    loop.after_step(done, lr)  # report, test, validate
        return loop.final_test()


class Loop:
    """What a stepped adapter's training does around its steps: the clock, the batch order and learning rate,
    the reports and divergence check, the interval tests, the validation with early stopping, the final test."""

    def __init__(self, adapter: SteppedAdapter, plan: Plan):
        point = adapter.point
        self.adapter, self.plan, self.point, self.reporter = adapter, plan, point, adapter.reporter
        self.inputs = adapter.inputs
        self.order = batch_order(len(self.inputs.train_y), point["batch_size"], point["seed"],
                                 point.get("shuffle", True))
        self.stopper = EarlyStopping(point["validation"], plan.steps_per_epoch) if point.get("validation") else None
        self.clock = Stopwatch(adapter.sync)
        self.interval_test_s = self.augment_s = 0.0
        self.last_loss = float("nan")
        self.stopped_at: int | None = None  # the last iteration trained, where early stopping ended the training
        self._last_report = 0.0

    @contextlib.contextmanager
    def training(self):
        self.reporter.emit("phase_start", name="train")
        self.clock.start()
        self._last_report = time.perf_counter()
        yield
        self.reporter.emit("phase_end", name="train", duration_s=self.clock.stop())

    def epochs(self):
        """The epochs to train, each after the first with a fresh augmented view where the point augments."""
        spe, total = self.plan.steps_per_epoch, self.plan.total_iterations
        for epoch in range(-(-total // spe)):
            if self.stopped_at is not None:
                return
            if epoch and self.inputs.augmenter is not None:
                self._new_view()
            yield epoch

    def batches(self, epoch: int):
        """(iterations done after the step, the batch's indices, the learning rate) for each step of the epoch."""
        spe = self.plan.steps_per_epoch
        for it in range(epoch * spe, min((epoch + 1) * spe, self.plan.total_iterations)):
            if self.stopped_at is not None:
                return
            yield it + 1, next(self.order), lr_policies.rate(self.plan.lr_policy, self.point["learning_rate"], it)

    def after_step(self, done: int, lr: float) -> None:
        """Report, test and validate as the plan says after `done` iterations; note where early stopping ends."""
        stopping = self._patience_out(done)
        if self._report_due(done) or stopping:
            self._report(done, lr)
        if self.plan.test_every and done % self.plan.test_every == 0 and done < self.plan.total_iterations:
            self._interval_test(done)
        if self.stopper is not None and self.stopper.due(done):
            self._validate(done)
            stopping = self._patience_out(done)
        if stopping:
            self.stopped_at = done

    def _new_view(self) -> None:
        # A fresh augmented view per epoch; its cost is reported apart, as an input pipeline's would be.
        with self.clock.paused() as span:
            self.adapter.set_train_data(self.inputs.augmenter())
        self.augment_s += span.seconds

    def _patience_out(self, done: int) -> bool:
        return (self.stopper is not None and self.stopper.should_stop(done)
                and done < self.plan.total_iterations)

    def _report_due(self, done: int) -> bool:
        # Every display interval, and at least every PROGRESS_EVERY_S on slow points, so that a point cut short
        # (timeout, kill) still shows how far it got.
        return (done % self.plan.display_every == 0 or done == self.plan.total_iterations
                or time.perf_counter() - self._last_report >= PROGRESS_EVERY_S)

    def _report(self, done: int, lr: float) -> None:
        self._last_report = time.perf_counter()
        self.last_loss = self.adapter.take_loss()
        self.reporter.emit("step", iteration=done, epoch=done / self.plan.steps_per_epoch, loss=self.last_loss,
                           lr=lr, train_time_s=self.clock.read())
        if not math.isfinite(self.last_loss):
            raise Diverged(done, self.last_loss)

    def _interval_test(self, done: int) -> None:
        with self.clock.paused() as span:
            acc, loss = self.adapter.evaluate()
        self.interval_test_s += span.seconds
        self.reporter.emit("test", iteration=done, epoch=done / self.plan.steps_per_epoch, accuracy=acc, loss=loss,
                           test_time_s=span.seconds, train_time_s=self.clock.total)

    def _validate(self, done: int) -> None:
        stopper = self.stopper
        with self.clock.paused() as span:
            acc, loss = self.adapter.evaluate("validation")
            if stopper.record(done, acc):
                self.adapter.keep_best()
        self.interval_test_s += span.seconds
        self.reporter.emit("validation", iteration=done, epoch=done / self.plan.steps_per_epoch, accuracy=acc,
                           loss=loss, best=stopper.best_iteration == done, patience=stopper.patience,
                           test_time_s=span.seconds, train_time_s=self.clock.total)

    def final_test(self) -> Outcome:
        """The test on the whole test split, with the best validation's weights where the point validates (as
        the tutorial reports), and what the training measured."""
        adapter, point, stopper = self.adapter, self.point, self.stopper
        iterations = self.stopped_at or self.plan.total_iterations
        if stopper is not None and stopper.best_iteration is not None:
            adapter.restore_best()
        with self.reporter.phase("test"):
            t0 = time.perf_counter()
            acc, test_loss = adapter.evaluate()
            adapter.sync()
            test_s = time.perf_counter() - t0
        self.reporter.emit("test", iteration=iterations, epoch=iterations / self.plan.steps_per_epoch,
                           accuracy=acc, loss=test_loss, test_time_s=test_s, train_time_s=self.clock.total)
        extra = {}
        if point.get("ema_decay"):
            extra["ema"] = f"applied (decay {point['ema_decay']:g}, min(decay, (1 + n) / (10 + n)) after n updates)"
        if stopper is not None:
            extra.update(validation_samples=len(self.inputs.val_y), best_validation_iteration=stopper.best_iteration,
                         best_validation_accuracy=stopper.best_accuracy, stopped_early_at=self.stopped_at,
                         accuracy_at_best=acc)
        return Outcome(self.clock.total, test_s, acc, test_loss, self.last_loss, self.interval_test_s, self.augment_s,
                       iterations=self.stopped_at, extra=extra)


def warms_up(point: dict) -> bool:
    """Whether a point takes one untimed step in its `compile` phase whatever its compile mode: a GPU point,
    whose first steps pay one-time costs (cuDNN handles, lazy kernel loading, the allocator's first blocks)
    that would otherwise fall into the training time of an eager point. Compiled points take it anyway.
    """
    return point["device"] == "gpu"
