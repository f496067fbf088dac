"""The contract every framework adapter keeps.

Runs inside a framework's environment: numpy and the standard library only.

Every adapter is an `Adapter` (one contract: prepare, load, info, train, forward) and
`Adapter.run` drives it the same way for every framework, so the plan, the events and the
result record are made in one place. Its optional hooks say up front whether it can: `can(hook)`,
and `run` refuses a point that needs a hook its adapter lacks before anything is read. The
PyTorch, TensorFlow, Theano and JAX adapters are `SteppedAdapter`s (dlbench.frameworks.stepped:
the training loop they share).
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlbench.frameworks import protocol, registry
from dlbench.record.fields import Info, check_info
from dlbench.spec import lr_policies, networks
from dlbench.spec.initial_weights import draw


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
    """Events as JSON lines (dlbench.frameworks.protocol), flushed one by one so that a killed trainer leaves its
    progress. An event or phase the protocol does not name, or an `info` key the record has no field for, fails
    here, not as an event nobody reads or an empty column."""

    def __init__(self, path: str | os.PathLike):
        self._fh = open(path, "a", buffering=1)

    def emit(self, event: str, **fields) -> None:
        if event == protocol.INFO:
            check_info(fields)
        self._fh.write(protocol.encode(event, time.monotonic(), fields, default=_plain) + "\n")
        self._fh.flush()

    @contextlib.contextmanager
    def phase(self, name: str):
        self.emit(protocol.PHASE_START, name=name)
        start = time.perf_counter()
        yield
        self.emit(protocol.PHASE_END, name=name, duration_s=time.perf_counter() - start)

    def close(self) -> None:
        self._fh.close()


def _plain(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    return str(obj)


def initial_weights(point: dict, input_shape: tuple[int, int, int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """The point's initial (W, b) per conv and dense layer, canonical layout: the same numbers in every framework."""
    return draw(point["layers"], tuple(input_shape), point.get("init"), point["seed"])


def parameter_groups(layers: list[dict]) -> list[tuple[float, float]]:
    """(lr multiplier, decay multiplier) of every trained parameter, in the order W0, b0, W1, b1, ... of the
    conv, dense and batchnorm layers (networks.trainable's order; a conv without bias has no b, a batchnorm's
    gamma and beta stand for W and b): the spec's lr_mult / decay_mult (weights) and bias_lr_mult /
    bias_decay_mult."""
    return [pair for layer in networks.leaves(layers) if layer["type"] in networks.PARAMETRISED
            for pair in networks.array_multipliers(layer)]


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
                   lr_policies.normalise(point.get("lr_policy", {"name": "fixed"}), train_size, point["batch_size"],
                                         total))


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


def optional_hook(method):
    """Mark a hook's default, which an adapter overrides where it can (Adapter.can); the default raises."""
    method.unimplemented = True
    return method


class Adapter(ABC):
    """One framework's way to train one point; the trainer process calls `run()`, which calls the rest.

    Each adapter module names its class ADAPTER. `run()` is the same for every framework:
    refuse() (what the point needs that the adapter cannot do) -> prepare() (before any data are
    read) -> load() (the `data_load` phase and the `data` event) -> the Plan (`plan` event) ->
    info() (`info` event) -> train(plan) -> result().
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
    def info(self) -> Info:
        """What the framework says of itself: framework, framework_version, numpy_version, blas, build
        (BLAS, oneDNN, CUDA, ...), threads_in_effect, library_in_effect, device_name; where it has the compile
        and precision switches, compile_in_effect and precision_in_effect (what it ran, as it reports it).
        Each key is a field of the record (dlbench.record.fields.INFO), checked as it is reported."""

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
        connected weights only (masked weights are not parameters): it must equal networks.param_count."""

    def close(self) -> None:  # noqa: B027 (an optional hook)
        """Release what prepare() and load() made (temporary files, child processes)."""

    @optional_hook
    def weights(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The current (W, b) of every conv and dense layer in the canonical layout (see `forward`), as stored:
        a sparse conv's unconnected weights included, not masked (they must still be 0)."""
        raise NotImplementedError(f"{type(self).__name__} cannot read its weights back")

    @classmethod
    def can(cls, hook: str) -> bool:
        """Whether this adapter implements the optional hook `hook` (weights, keep_best, set_train_data, ...)."""
        return not getattr(getattr(cls, hook), "unimplemented", False)

    def needs(self) -> dict[str, tuple[str, ...]]:
        """What the point asks of this adapter beyond the contract: {what, in words: the optional hooks it
        takes}. None here: an adapter that runs its own loop refuses what it cannot run in prepare()."""
        return {}

    def refuse(self) -> None:
        """Unavailable, in one line, where the point's network holds a layer type its framework's adapter does
        not build (registry `cannot_build`) or the point needs an optional hook its adapter lacks: said before
        any data are read, not when the loop first calls the hook."""
        refuse_layers(self.point)
        for what, hooks in self.needs().items():
            missing = [hook for hook in hooks if not self.can(hook)]
            if missing:
                raise Unavailable(f"{self.point['framework']} cannot run this point's {what}: its adapter has no "
                                  f"{', '.join(missing)} (dlbench/frameworks/{self.point['framework']}.py)")

    def run(self) -> dict:
        try:
            self.refuse()
            self.prepare()
            with self.reporter.phase("data_load"):
                loaded = self.load()
            self.reporter.emit(protocol.DATA, digest=loaded.digest, train_samples=loaded.train_samples,
                               test_samples=loaded.test_samples, input_shape=loaded.input_shape, **loaded.extra)
            plan = Plan.of(self.point, loaded.train_samples)
            self.reporter.emit(protocol.PLAN, total_iterations=plan.total_iterations,
                               steps_per_epoch=plan.steps_per_epoch, test_every=plan.test_every,
                               display_every=plan.display_every, train_samples=loaded.train_samples,
                               test_samples=loaded.test_samples)
            info = {"python_version": platform.python_version(), **self.versions(), **self.info()}
            self.reporter.emit(protocol.INFO, **info)
            return result(self.point, plan, loaded, self.train(plan))
        finally:
            self.close()


def refuse_layers(point: dict) -> None:
    """Unavailable, in one line, where the point's network holds layer types its framework cannot build."""
    framework = registry.get(point["framework"])
    lacking = sorted(networks.kinds(point["layers"]) & set(framework.cannot_build))
    if lacking:
        raise Unavailable(f"{framework.label} cannot build network {point.get('network', '(inline)')}: its adapter "
                          f"has no {', '.join(lacking)} layer (dlbench/frameworks/{framework.name}.py); no "
                          "substitute is run")

