"""The contract every adapter keeps, and the training loop the Python-driven adapters share.

Runs inside a framework's environment: numpy and the standard library only.

An adapter module exposes `run(point, dataset_dir, reporter) -> dict`. The PyTorch,
TensorFlow and Theano adapters implement a `Trainer` (build, train_step, evaluate) and
hand it to `drive`, so that the loop, the clocks, the learning-rate schedule, the batch
order and the divergence check are the same code for all of them.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dlbench import inputs as input_handling
from dlbench import lr as lr_policies
from dlbench.datasets import store

PROGRESS_EVERY_S = 2.0


class Unavailable(RuntimeError):
    """The point cannot run here (no GPU, no GPU build); the message says why."""


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
    with no_hugepage_advice():
        arrays, meta = store.load(dataset_dir)
        train_x, train_y, test_x, test_y = input_handling.static(
            arrays["train_x"], arrays["train_y"], arrays["test_x"], arrays["test_y"], cfg)
    augmenter = None
    if input_handling.augments(cfg):
        augmenter = input_handling.Augmenter(train_x, cfg, point["seed"])
        train_x = augmenter()
    return Inputs(train_x, train_y, test_x, test_y, int(meta["classes"]), meta["digest"], augmenter)


def read_inputs(dataset_dir: str | os.PathLike, point: dict, reporter: Reporter) -> Inputs:
    """load_inputs as the trainer's `data_load` phase, reporting what was loaded."""
    with reporter.phase("data_load"):
        inputs = load_inputs(dataset_dir, point)
    reporter.emit("data", digest=inputs.digest, train_samples=len(inputs.train_y),
                  test_samples=len(inputs.test_y), input_shape=list(inputs.shape))
    return inputs


@dataclass
class Plan:
    """How long a point trains and when it reports, in iterations."""

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


def batch_order(n: int, batch_size: int, seed: int):
    """Endless batches of indices: a new permutation each epoch, wrapping across epochs like Caffe's readers."""
    rng = np.random.RandomState(seed)
    pending = np.empty(0, dtype=np.int64)
    while True:
        while len(pending) < batch_size:
            pending = np.concatenate([pending, rng.permutation(n).astype(np.int64)])
        yield pending[:batch_size]
        pending = pending[batch_size:]


def test_batches(n: int, batch_size: int):
    for start in range(0, n, batch_size):
        yield start, min(n, start + batch_size)


class Trainer:
    """What a Python-driven adapter implements; `drive` calls it."""

    def info(self) -> dict:  # framework, version, build, threads in effect, device
        raise NotImplementedError

    def build(self) -> None:  # the model, its weights and the optimizer
        raise NotImplementedError

    def compile(self) -> None:  # tracing / compiling / warm-up that is not training
        pass

    def train_step(self, batch: np.ndarray, lr: float) -> None:  # one update on these indices
        raise NotImplementedError

    def take_loss(self) -> float:  # mean training loss since the last call; synchronises
        raise NotImplementedError

    def evaluate(self) -> tuple[float, float]:  # (accuracy, mean loss) on the whole test split
        raise NotImplementedError

    def sync(self) -> None:  # wait for queued device work before a clock is read
        pass

    def set_train_data(self, x: np.ndarray) -> None:  # a new augmented view of the training images
        raise NotImplementedError(f"{type(self).__name__} does not take augmented data")


def drive(trainer: Trainer, point: dict, inputs: Inputs, reporter: Reporter) -> dict:
    """The common loop: same schedule, batch order, clocks and checks for every adapter."""
    plan = Plan.of(point, len(inputs.train_y))
    reporter.emit("plan", total_iterations=plan.total_iterations, steps_per_epoch=plan.steps_per_epoch,
                  test_every=plan.test_every, display_every=plan.display_every,
                  train_samples=len(inputs.train_y), test_samples=len(inputs.test_y))
    reporter.emit("info", **trainer.info())
    with reporter.phase("build"):
        trainer.build()
    with reporter.phase("compile"):
        trainer.compile()
    order = batch_order(len(inputs.train_y), point["batch_size"], point["seed"])
    train_s = interval_test_s = augment_s = 0.0
    last_loss = float("nan")
    reporter.emit("phase_start", name="train")
    seg_start = last_report = time.perf_counter()
    for it in range(plan.total_iterations):
        if inputs.augmenter is not None and it and it % plan.steps_per_epoch == 0:
            # A fresh augmented view per epoch; its cost is reported apart, as an input pipeline's would be.
            trainer.sync()
            train_s += time.perf_counter() - seg_start
            t0 = time.perf_counter()
            trainer.set_train_data(inputs.augmenter())
            augment_s += time.perf_counter() - t0
            seg_start = time.perf_counter()
        lr = lr_policies.rate(plan.lr_policy, point["learning_rate"], it)
        trainer.train_step(next(order), lr)
        done = it + 1
        # Report every display interval, and at least every PROGRESS_EVERY_S on slow points,
        # so a point cut short (timeout, kill) still shows how far it got.
        if (done % plan.display_every == 0 or done == plan.total_iterations
                or time.perf_counter() - last_report >= PROGRESS_EVERY_S):
            last_report = time.perf_counter()
            last_loss = trainer.take_loss()
            reporter.emit("step", iteration=done, epoch=done / plan.steps_per_epoch, loss=last_loss, lr=lr,
                          train_time_s=train_s + time.perf_counter() - seg_start)
            if not math.isfinite(last_loss):
                raise Diverged(done, last_loss)
        if plan.test_every and done % plan.test_every == 0 and done < plan.total_iterations:
            trainer.sync()
            train_s += time.perf_counter() - seg_start
            t0 = time.perf_counter()
            acc, loss = trainer.evaluate()
            took = time.perf_counter() - t0
            interval_test_s += took
            reporter.emit("test", iteration=done, epoch=done / plan.steps_per_epoch, accuracy=acc, loss=loss,
                          test_time_s=took, train_time_s=train_s)
            seg_start = time.perf_counter()
    trainer.sync()
    train_s += time.perf_counter() - seg_start
    reporter.emit("phase_end", name="train", duration_s=train_s)
    with reporter.phase("test"):
        t0 = time.perf_counter()
        acc, test_loss = trainer.evaluate()
        trainer.sync()
        test_s = time.perf_counter() - t0
    reporter.emit("test", iteration=plan.total_iterations, epoch=plan.total_iterations / plan.steps_per_epoch,
                  accuracy=acc, loss=test_loss, test_time_s=test_s, train_time_s=train_s)
    images = plan.total_iterations * point["batch_size"]
    return {
        "train_time_s": train_s,
        "test_time_s": test_s,
        "interval_test_time_s": interval_test_s,
        "augment_time_s": augment_s,
        "accuracy": acc,
        "test_loss": test_loss,
        "final_loss": last_loss,
        "iterations": plan.total_iterations,
        "epochs_trained": plan.total_iterations / plan.steps_per_epoch,
        "images_trained": images,
        "throughput_img_s": images / train_s if train_s > 0 else None,
        "test_throughput_img_s": len(inputs.test_y) / test_s if test_s > 0 else None,
        "train_samples": len(inputs.train_y),
        "test_samples": len(inputs.test_y),
    }


def thread_env(threads: int) -> dict[str, str]:
    """The variables every threaded library reads, set before the framework is imported."""
    n = str(threads)
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n,
            "TF_NUM_INTRAOP_THREADS": n, "TF_NUM_INTEROP_THREADS": "1"}


def dataset_dir_of(point: dict, root: str | os.PathLike = "resources/datasets") -> Path:
    return Path(root) / point["dataset"]
