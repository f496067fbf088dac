"""Caffe: generated prototxt and `caffe train`, as the study drove it.

The point's network becomes a net prototxt (HDF5Data layers for the train and test phases,
the spec's layers, SoftmaxWithLoss, Accuracy in TEST), its settings a solver prototxt (both
written as text by dlbench.frameworks.caffe_prototxt), and
`<prefix>/bin/caffe train --solver=...` runs as a child of the trainer (so the runner's
monitor sees it in the trainer's process tree). Its log (glog on stderr) is read line by
line as it is written, copied into the trainer's log and turned into the events every
adapter emits (dlbench.frameworks.caffe_log): phases build (process start to `Starting
Optimization`), train and test, `step`, `test`, `info`.

Same point, same run as the other adapters:
  - iterations: base.Plan.of (max_iter = total iterations; display = the plan's display
    interval, with average_loss = display so a step's loss is the mean since the last one);
  - tests every `test_every` iterations and a final one over the whole test split
    (test_iter = ceil(test samples / test batch); Caffe's last batch wraps around to the first
    images). Caffe tests after its loop only when test_interval divides max_iter; otherwise
    the final weights are snapshotted and `caffe test` scores them;
  - the lr policies of dlbench.spec.lr_policies written as Caffe's (decay = inv with power 1);
  - weights: the point's initial weights (dlbench.spec.initial_weights, the numbers every framework
    starts from) in an HDF5 weights file, and a solver state at iteration 0 that names it
    with zero histories: `caffe train --snapshot=init.solverstate.h5` starts from those
    weights (this build's `train` ignores --weights). The fillers in the prototxt are
    overwritten by them. lr_mult and decay_mult are the spec's multipliers;
    random_seed = the point's seed (dropout);
  - batch order: HDF5Data reads the file in order when the point does not shuffle, as the
    other adapters' batch_order does (the same batches); see below where it shuffles;
  - a sparse convolution (a connection table) is a Slice of the input planes, a Concat that
    gathers each output map's planes in table order, and a Convolution with one group per
    output map: Caffe has no connection tables, and this is the same network (the grouped
    weights are exactly the connected ones), its outputs in the spec's order;
  - batch normalisation is a BatchNorm layer (the statistics; use_global_stats false in TRAIN,
    true in TEST, Caffe's own defaults by phase; eps the spec's) and a Scale layer with bias_term
    (gamma, beta); the spec's decay is BatchNorm's moving_average_fraction with its scale-factor
    blob kept at 1 / (1 - decay), which makes Caffe's update the spec's running average exactly
    (caffe_blobs). A residual block is an Eltwise SUM of its body and its shortcut (the 1x1
    projection of the spec, or the block's input), global average pooling a Pooling AVE with
    global_pooling.
Timings come from the log's own time stamps (Caffe prints no throughput): see caffe_log.Tracker.

What Caffe's solver cannot do, said in the record or refused:
  - a moving average of the weights (`ema_decay`): trained and tested without it, the record's
    `ema` says "not applied";
  - validation with early stopping (`validation`): refused before any data are read, as
    `unavailable` (its patience rule needs the weights of the best validation kept and the run
    stopped at an exact iteration; `caffe train` can do neither).

Caffe's own ways, kept because they are Caffe's:
  - SGD with momentum keeps lr inside its history (v = m v + lr g); PyTorch's keeps it outside.
    Same updates for a fixed lr; Adam: momentum 0.9, momentum2 0.999, delta 1e-8.
  - HDF5Data's `shuffle` uses std::random_shuffle (C rand(), which random_seed does not seed):
    the batch order is the same for every seed, and not the other adapters'.
  - HDF5Data cannot augment: where a preset augments, the training file holds one augmented
    view drawn once (caffe_data.py); build_json's `input_augmentation` says so.

Where Caffe comes from and what it is: dlbench.frameworks.caffe_binary; running it as a child and reading its
failures: caffe_process; the weights as Caffe's blobs and snapshots: caffe_weights; the network on one batch
(forward passes, the parameter count): caffe_inspect.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path

from dlbench.frameworks import caffe_data, caffe_inspect, caffe_log, registry
from dlbench.frameworks.base import (
    Adapter,
    Diverged,
    Loaded,
    Outcome,
    Plan,
    Reporter,
    Unavailable,
    check_library,
    initial_weights,
)
from dlbench.frameworks.caffe_binary import build_info, check_device, find_binary, openblas_threads_in_effect
from dlbench.frameworks.caffe_process import CaffeProcess, failure
from dlbench.frameworks.caffe_prototxt import net_prototxt, solver_prototxt, test_interval_of
from dlbench.frameworks.caffe_weights import caffe_blobs, initial_state, weights_file
from dlbench.node.blas import blas_in_effect


def info_event(point: dict, binary: str, info: dict, meta: dict) -> dict:
    threads = openblas_threads_in_effect(point["threads"])
    blas = info.get("blas") or "unknown"
    if info.get("blas_library"):
        blas = f"{blas} ({info['blas_library']})"
    keep = ("caffe_version", "upstream_commit", "sdist", "device", "blas", "blas_library", "cmake_flags",
            "compiler", "protoc", "build_script_sha256", "built_at")
    return {
        "framework": "caffe",
        "framework_version": info["version"],
        "blas": blas,
        "build": {**{k: info[k] for k in keep if k in info}, "binary": binary, "version_line": info["version_line"],
                  "openblas_num_threads_env": str(point["threads"]),
                  "input": "HDF5Data (float32, written already transformed)",
                  "input_augmentation": meta.get("augmentation"),
                  "batch_order": ("HDF5Data shuffle: std::random_shuffle, not seeded by random_seed"
                                  if point.get("shuffle", True) else "HDF5Data in file order (batch_order's)"),
                  "momentum_form": "v = momentum * v + lr * g; w -= v (Caffe's SGD)"},
        "threads_in_effect": threads,
        "library_in_effect": info.get("blas") or "unknown",
        "device_name": "cpu" if point["device"] != "gpu" else "gpu",
    }


EMA_NOT_APPLIED = "not applied: Caffe's solver keeps no moving average of the weights; the final weights were tested"


def check_procedure(point: dict) -> None:
    """Refuse, in one line, what `caffe train` cannot run: validation with early stopping, AdamW (Caffe's solvers
    couple weight decay into the gradient), warm-up + cosine (no such lr_policy in Caffe 1.0)."""
    if point.get("optimizer") == "adamw":
        raise Unavailable("Caffe has no AdamW (decoupled weight decay) solver; no substitute is run")
    if (point.get("lr_policy") or {}).get("name") == "cosine":
        raise Unavailable("Caffe has no warm-up + cosine lr_policy; no substitute is run")
    if point.get("validation"):
        raise Unavailable(f"Caffe cannot run preset {point.get('preset')!r}'s validation with early stopping "
                          "(caffe train neither keeps the best validation's weights nor stops on a patience rule); "
                          f"run it on {_one_of(registry.early_stoppers())}")


def _one_of(names: list[str]) -> str:
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


class CaffeAdapter(Adapter):
    """`caffe train` on generated prototxt: Caffe runs the loop, its log is read back as the events."""

    @staticmethod
    def versions() -> dict:
        """The binary's (a missing binary fails here: an environment without Caffe cannot run a point)."""
        info = build_info(str(find_binary()))
        return {"framework_version": info["version"], "cuda_version": info.get("cuda_version"),
                "cudnn_version": None}

    def prepare(self) -> None:
        check_procedure(self.point)
        self.binary = str(find_binary())
        self.build_info = build_info(self.binary)
        check_device(self.point, self.binary, self.build_info)  # before the data are read
        self.gpu = self.point["device"] == "gpu"
        self._tmp = tempfile.TemporaryDirectory(prefix="dlbench-caffe-")
        self.work = Path(self._tmp.name)

    def close(self) -> None:
        if getattr(self, "_tmp", None) is not None:
            self._tmp.cleanup()

    def load(self) -> Loaded:
        """The HDF5 files for this point's input handling (prepared now if the workflow has not)."""
        cfg = self.point.get("input", {})
        folder = caffe_data.data_dir(self.dataset_dir, cfg)
        if not caffe_data.is_current(folder, self.dataset_dir, cfg):
            caffe_data.prepare(self.dataset_dir, cfg, folder)
        self.meta = json.loads((folder / "meta.json").read_text())
        self.lists = {}
        for split in ("train", "test"):
            h5, listed = folder / f"{split}.h5", folder / f"{split}.txt"
            if not caffe_data.list_points_at(listed, h5):  # the folder moved since: a list of our own
                listed = self.work / f"{split}.txt"
                listed.write_text(f"{h5.resolve()}\n")
            self.lists[split] = str(listed.resolve())
        meta = self.meta
        return Loaded(meta["train_samples"], meta["test_samples"], meta["dataset_digest"], meta["input_shape"],
                      extra={"caffe_data": str(folder), "augmented": meta["augmented"]})

    def info(self) -> dict:
        return info_event(self.point, self.binary, self.build_info, self.meta)

    def train(self, plan: Plan) -> Outcome:
        point, work = self.point, self.work
        _, caffe_tests_last = test_interval_of(plan)
        shape = tuple(self.meta["input_shape"])
        net = net_prototxt(point["layers"], self.lists["train"], self.lists["test"], point["batch_size"],
                           point["test_batch_size"], shuffle=point.get("shuffle", True), input_shape=shape)
        (work / "net.prototxt").write_text(net)
        solver = solver_prototxt(point, plan, str(work / "net.prototxt"), self.meta["test_samples"],
                                 str(work / "final"), gpu=self.gpu, snapshot_after_train=not caffe_tests_last)
        (work / "solver.prototxt").write_text(solver)
        # The point's initial weights, the numbers every framework starts from, and a state at iteration 0 naming them.
        blobs = caffe_blobs(point["layers"], initial_weights(point, shape), shape)
        weights_file(work / "init.caffemodel.h5", blobs)
        initial_state(work / "init.solverstate.h5", work / "init.caffemodel.h5", blobs, point["optimizer"])
        print(f"# dlbench: solver.prototxt\n{solver}# dlbench: net.prototxt\n{net}", flush=True)
        outcome = self._train(plan)
        if not caffe_tests_last:
            outcome = self._test_snapshot(plan, outcome)
        if point.get("ema_decay"):
            outcome = dataclasses.replace(outcome, extra={**outcome.extra, "ema": EMA_NOT_APPLIED})
        return outcome

    def _train(self, plan: Plan) -> Outcome:
        point, reporter = self.point, self.reporter
        args = ["train", f"--solver={self.work / 'solver.prototxt'}", f"--snapshot={self.work / 'init.solverstate.h5'}"]
        args += ["--gpu=0"] if self.gpu else []
        tracker = caffe_log.Tracker(plan.total_iterations, plan.steps_per_epoch)
        reporter.emit("phase_start", name="build")
        run = CaffeProcess(self.binary, args, str(self.work), point["threads"])
        train_open = False
        try:
            for line in run:
                for event, f in tracker.feed(line):
                    if event == "build_end":
                        reporter.emit("phase_end", name="build", duration_s=time.monotonic() - run.started)
                        # Only now is there a caffe process: its threads, and the BLAS its memory map shows.
                        in_effect, mapped = blas_in_effect(run.proc.pid)
                        reporter.emit("info", library_in_effect=in_effect,
                                      build={"caffe_process_threads": run.threads(), "blas_mapped": mapped})
                        check_library(point, in_effect, "the caffe process")
                        # Caffe compiles nothing and has no warm-up apart from its first iteration: a compile
                        # phase of zero, so that its records have the columns of the others.
                        reporter.emit("phase_start", name="compile")
                        reporter.emit("phase_end", name="compile", duration_s=0.0)
                    elif event == "train_start":
                        reporter.emit("phase_start", name="train")
                        train_open = True
                    elif event == "step":
                        reporter.emit("step", **f)
                        if not math.isfinite(f["loss"]):
                            run.stop()  # Caffe goes on after a nan (and may crash later): stop it now
                            raise Diverged(f["iteration"], f["loss"])
                    elif event == "train_end":
                        reporter.emit("phase_end", name="train", duration_s=f["train_time_s"])
                        train_open = False
                    elif event == "test_start" and f["final"]:
                        reporter.emit("phase_start", name="test")
                    elif event == "test":
                        _emit_test(reporter, f, final_phase=f["final"])
            for event, f in tracker.finish():
                if event == "step":
                    reporter.emit("step", **f)
                elif event == "test":
                    _emit_test(reporter, f, final_phase=f["final"])
            code = run.wait()
        except BaseException:
            run.stop()
            raise
        nonfinite = caffe_log.first_nonfinite_loss(run.lines)
        if code != 0 or nonfinite is not None or not tracker.done:
            raise failure(run, code, "caffe train")
        if train_open:
            reporter.emit("phase_end", name="train", duration_s=tracker.train_time())
        final = tracker.final_test or {}
        return Outcome(train_time_s=tracker.train_time(), test_time_s=final.get("test_time_s"),
                       accuracy=final.get("accuracy"), test_loss=final.get("loss"),
                       final_loss=tracker.steps[-1]["loss"] if tracker.steps else None,
                       interval_test_time_s=tracker.test_total_s)

    def _test_snapshot(self, plan: Plan, trained: Outcome) -> Outcome:
        """The final test where Caffe's solver does not make one: `caffe test` on the snapshotted final weights."""
        point, reporter, work = self.point, self.reporter, self.work
        weights = work / f"final_iter_{plan.total_iterations}.caffemodel.h5"
        batches = math.ceil(self.meta["test_samples"] / point["test_batch_size"])
        args = ["test", f"--model={work / 'net.prototxt'}", f"--weights={weights}", f"--iterations={batches}"]
        reporter.emit("phase_start", name="test")
        run = CaffeProcess(self.binary, args + (["--gpu=0"] if self.gpu else []), str(work), point["threads"])
        try:
            for _ in run:
                pass
            code = run.wait()
        except BaseException:
            run.stop()
            raise
        summary = caffe_log.test_summary(run.lines)
        if code != 0 or summary is None:
            raise failure(run, code, "caffe test")
        reporter.emit("phase_end", name="test", duration_s=summary["test_time_s"])
        reporter.emit("test", iteration=plan.total_iterations, accuracy=summary["accuracy"], loss=summary["loss"],
                      test_time_s=summary["test_time_s"], train_time_s=trained.train_time_s)
        return dataclasses.replace(trained, accuracy=summary["accuracy"], test_loss=summary["loss"],
                                   test_time_s=summary["test_time_s"])

    @staticmethod
    def forward(layers, weights, x, y, train=False):
        """(`train`: batch normalisation by the batch's statistics, use_global_stats false; dropout stays off.)"""
        return caffe_inspect.forward(layers, weights, x, y, train)

    @staticmethod
    def train_then_infer(layers, weights, x, y):
        """A training-mode pass in Caffe's own layers, then an inference-mode pass with the running statistics it
        left: (train logits, inference logits, the canonical arrays after them); caffe_inspect.train_then_infer."""
        return caffe_inspect.train_then_infer(layers, weights, x, y)

    @staticmethod
    def params(layers, input_shape):
        return caffe_inspect.trainable_params(layers, tuple(input_shape))


def _emit_test(reporter: Reporter, f: dict, final_phase: bool) -> None:
    if final_phase:  # the stepped loop's order: the test phase ends, then its test event
        reporter.emit("phase_end", name="test", duration_s=f["test_time_s"])
    reporter.emit("test", iteration=f["iteration"], accuracy=f["accuracy"], loss=f["loss"],
                  test_time_s=f["test_time_s"], train_time_s=f["train_time_s"])


ADAPTER = CaffeAdapter

