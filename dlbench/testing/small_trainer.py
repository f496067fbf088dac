"""A small trainer for the tests of the runner: dlbench.frameworks.trainer with no framework in it.

    python -m dlbench.testing.small_trainer POINT_JSON DATASET_DIR EVENTS_JSONL

The runner starts it in place of dlbench.frameworks.trainer where DLBENCH_TRAINER names it (dlbench.run.runner): the
fault
scenarios that test the runner (its time budget, hang watch, memory guards, a killed or raising trainer, ...),
not a framework, run it so that no trainer imports a framework (seconds each; this one starts in the time it
takes to import numpy). Its arguments, events, statuses and exit codes are dlbench.frameworks.trainer's own: this module
runs `dlbench.frameworks.trainer.main` with the adapter of the point's framework replaced by `SmallAdapter`.

`SmallAdapter` trains for real, in numpy: softmax regression on the flattened images of the point's dataset
(read by dlbench.datasets.loading.load_inputs, as every adapter reads it: a missing dataset raises
FileNotFoundError, a changed one ChangedSincePrepared), one SGD step (with the point's momentum and weight decay)
per iteration on a batch of the point's batch_size, at the point's learning rate and policy, through the loop the
Python-driven adapters share (dlbench.frameworks.stepped: the same phases, step, test and result events). The
point's network (`layers`) and optimizer are not what it trains. Its loss is the mean of -log p(true class) from
the float32 softmax, the textbook way: at a huge learning rate the true class's probability underflows to 0, the
loss is inf, and the point ends `diverged` at that iteration, as a diverging network's does.

Environment variables, read by this program only (behaviour a fault scenario needs):
    DLBENCH_SMALL_TRAINER_STEP_S            each step lasts at least this many seconds, sleeping the rest: a
                                            long point that leaves the CPU to others (default 0)
    DLBENCH_SMALL_TRAINER_ALLOCATE_MB_PER_S while it trains it allocates, touches and keeps this much memory per
                                            second (up to ALLOCATE_CEILING_MB): a point that outgrows its budget.
                                            An allocation that fails says so in the log (as a framework's
                                            allocator does) and the point ends `oom`.
    DLBENCH_SMALL_TRAINER_CHILD_S           it starts a child that sleeps this long and leaves it behind when it
                                            exits, printing "left a child: PID" to its log (a trainer whose
                                            helper outlives it)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types

import numpy as np

from dlbench.frameworks import trainer
from dlbench.frameworks.base import Unavailable
from dlbench.frameworks.stepped import SteppedAdapter
from dlbench.node.blas import blas_in_effect

STEP_S = "DLBENCH_SMALL_TRAINER_STEP_S"
ALLOCATE_MB_PER_S = "DLBENCH_SMALL_TRAINER_ALLOCATE_MB_PER_S"
CHILD_S = "DLBENCH_SMALL_TRAINER_CHILD_S"
ALLOCATE_CEILING_MB = 2048  # never more than this, whatever the rate: a cap that failed must not take the machine
CHUNK_MB = 16


class SmallAdapter(SteppedAdapter):
    """Softmax regression in numpy, trained by the stepped adapters' loop (see the module's docstring)."""

    @staticmethod
    def versions() -> dict:
        return {"framework_version": f"small trainer (numpy {np.__version__})", "cuda_version": None,
                "cudnn_version": None}

    def prepare(self) -> None:
        if self.point["device"] == "gpu":
            raise Unavailable("the small trainer (dlbench.testing.small_trainer) runs on the CPU only")
        self.step_s = float(os.environ.get(STEP_S) or 0)
        self.allocate_mb_per_s = float(os.environ.get(ALLOCATE_MB_PER_S) or 0)
        self.held: list[np.ndarray] = []
        if os.environ.get(CHILD_S):
            child = subprocess.Popen(["sleep", os.environ[CHILD_S]])  # never waited for: it is left behind
            print(f"left a child: {child.pid}", file=sys.stderr, flush=True)

    def load(self):
        loaded = super().load()
        self.x = self._flat(self.inputs.train_x)
        return loaded

    @staticmethod
    def _flat(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x.reshape(len(x), -1), dtype=np.float32)

    def info(self):
        return {"framework": "small_trainer", "framework_version": self.versions()["framework_version"],
                "numpy_version": np.__version__, "blas": blas_in_effect()[0],
                "build": {"model": "softmax regression", "trainer": "dlbench.testing.small_trainer"},
                "device_name": "cpu"}

    def build(self) -> None:
        rng = np.random.RandomState(self.point["seed"])
        features, classes = self.x.shape[1], self.inputs.classes
        self.w = (rng.randn(features, classes) * np.sqrt(1.0 / features)).astype(np.float32)
        self.b = np.zeros(classes, np.float32)
        self.velocity = [np.zeros_like(self.w), np.zeros_like(self.b)]
        self.losses: list[float] = []
        self.train_started = time.perf_counter()

    def _probabilities(self, x: np.ndarray) -> np.ndarray:
        z = x @ self.w + self.b
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    @staticmethod
    def _loss(p: np.ndarray, y: np.ndarray) -> float:
        return float(-np.log(p[np.arange(len(y)), y]).mean())

    def train_step(self, batch: np.ndarray, lr: float) -> None:
        t0 = time.perf_counter()
        x, y = self.x[batch], self.inputs.train_y[batch]
        momentum, decay = self.point.get("momentum") or 0.0, self.point.get("weight_decay") or 0.0
        with np.errstate(all="ignore"):  # a diverging point overflows: its loss says so
            p = self._probabilities(x)
            self.losses.append(self._loss(p, y))
            p[np.arange(len(y)), y] -= 1.0
            grads = (x.T @ p / len(y) + decay * self.w, p.mean(axis=0))
            for param, v, g in zip((self.w, self.b), self.velocity, grads):
                v *= momentum
                v -= lr * g
                param += v
        self._allocate()
        if self.step_s:
            time.sleep(max(0.0, self.step_s - (time.perf_counter() - t0)))

    def _allocate(self) -> None:
        """Memory kept as the point trains, at ALLOCATE_MB_PER_S (see the module's docstring)."""
        if not self.allocate_mb_per_s:
            return
        due = min(ALLOCATE_CEILING_MB, self.allocate_mb_per_s * (time.perf_counter() - self.train_started))
        try:
            while CHUNK_MB * len(self.held) < due:
                self.held.append(np.ones(CHUNK_MB * 2**20, np.uint8))  # ones: every page touched, resident
        except MemoryError as exc:
            held_mb, self.held = CHUNK_MB * len(self.held), []  # let go, so that the trainer can still report
            print(f"MemoryError: {exc} (holding {held_mb} MB)", file=sys.stderr, flush=True)
            raise

    def take_loss(self) -> float:
        loss = float(np.mean(self.losses)) if self.losses else float("nan")
        self.losses = []
        return loss

    def evaluate(self, split: str = "test") -> tuple[float, float]:
        x, y = (self.inputs.test_x, self.inputs.test_y) if split == "test" else (self.inputs.val_x, self.inputs.val_y)
        with np.errstate(all="ignore"):
            p = self._probabilities(self._flat(x))
            return float((p.argmax(axis=1) == y).mean()), self._loss(p, y)

    def weights(self) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(self.w.T.copy(), self.b.copy())]

    def keep_best(self) -> None:
        self.best = (self.w.copy(), self.b.copy())

    def restore_best(self) -> None:
        self.w, self.b = (a.copy() for a in self.best)

    def set_train_data(self, x: np.ndarray) -> None:
        self.x = self._flat(x)

    @staticmethod
    def forward(layers, weights, x, y):
        raise NotImplementedError("the small trainer trains softmax regression, not the point's layers")

    @staticmethod
    def params(layers, input_shape):
        raise NotImplementedError("the small trainer trains softmax regression, not the point's layers")


def main(argv: list[str]) -> int:
    """dlbench.frameworks.trainer's main, the point's framework's adapter being SmallAdapter."""
    if argv[:1] == ["--probe"]:
        framework = argv[1]
    else:
        with open(argv[0]) as fh:
            framework = json.load(fh)["framework"]
    stand_in = types.ModuleType(f"dlbench.frameworks.{framework}", "the small trainer in place of the framework")
    stand_in.ADAPTER = SmallAdapter
    sys.modules[stand_in.__name__] = stand_in  # what trainer's import of the adapter finds
    return trainer.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
