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

Where Caffe comes from: $DLBENCH_CAFFE (the binary), else the environment's own build
(sys.prefix/caffe/bin/caffe, envs/caffe/build.sh, with BUILD_INFO.json), else a conda
package's (sys.prefix/bin/caffe), else `caffe` on PATH. No pycaffe is needed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlbench.frameworks import caffe_data, caffe_log, registry
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
from dlbench.frameworks.caffe_prototxt import (
    LAYER_NAMES,  # noqa: F401  (dlbench.testing.trained names a snapshot's layers by it)
    LOGITS_BLOB,
    names,
    net_prototxt,
    net_with_logits,
    scale_name,
    solver_prototxt,
    test_interval_of,
    unit_names,
)
from dlbench.node.blas import blas_in_effect
from dlbench.node.procs import die_with_parent
from dlbench.spec import networks

# ---------------------------------------------------------------------------------------------- the binary


def find_binary() -> Path:
    candidates = []
    if os.environ.get("DLBENCH_CAFFE"):
        candidates.append(Path(os.environ["DLBENCH_CAFFE"]))
    candidates += [Path(sys.prefix) / "caffe" / "bin" / "caffe", Path(sys.prefix) / "bin" / "caffe"]
    on_path = shutil.which("caffe")
    if on_path:
        candidates.append(Path(on_path))
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise RuntimeError("no Caffe binary: build the Caffe environment (dlbench envs build caffe, which "
                       "runs envs/caffe/build.sh) or set DLBENCH_CAFFE to a `caffe` executable; looked at "
                       + ", ".join(map(str, candidates)))


def caffe_env(threads: int | None = None) -> dict[str, str]:
    """The child's environment: glog to stderr (not files in /tmp), OpenBLAS threads as the point asks."""
    env = dict(os.environ)
    env.update(GLOG_logtostderr="1", GLOG_minloglevel="0", GLOG_colorlogtostderr="0")
    if threads:
        env.update(OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    return env


@functools.cache
def build_info(binary: str) -> dict:
    """BUILD_INFO.json beside the binary (envs/caffe/build.sh writes it), else what `caffe --version` says."""
    path = Path(binary).resolve().parent.parent / "BUILD_INFO.json"
    info = json.loads(path.read_text()) if path.exists() else {}
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, env=caffe_env())
        line = (proc.stdout + proc.stderr).strip().splitlines()
        version_line = next((ln for ln in line if "version" in ln), "")
    except (OSError, subprocess.SubprocessError):
        version_line = ""
    info["version_line"] = version_line or info.get("version_output", "")
    version = version_line.rsplit(" ", 1)[-1] if version_line else ""
    info["version"] = version or info.get("caffe_version") or "unknown"
    info["build_info_file"] = str(path) if path.exists() else None
    return info


def built_with_cuda(binary: str, info: dict) -> bool:
    """A CPU_ONLY build cannot run a GPU point: BUILD_INFO.json says which; else ask the binary."""
    if info.get("build_info_file"):
        flags = info.get("cmake_flags", [])
        return info.get("device") != "cpu" and "-DCPU_ONLY=ON" not in flags
    try:
        proc = subprocess.run([binary, "device_query", "--gpu=0"], capture_output=True, text=True, timeout=60,
                              env=caffe_env())
    except (OSError, subprocess.SubprocessError):
        return False
    return "CPU-only" not in proc.stdout + proc.stderr and proc.returncode == 0


def check_device(point: dict, binary: str, info: dict) -> None:
    if point["device"] == "gpu" and not built_with_cuda(binary, info):
        raise Unavailable(f"this Caffe ({binary}) is a CPU_ONLY build (no CUDA): a GPU point needs Caffe built with "
                          "CUDA (config envs.opt_in: [caffe-cuda], which runs envs/caffe/build.sh --cuda where nvcc "
                          "is; not yet run on a GPU)")



# ---------------------------------------------------------------------------------------------- running caffe


class CaffeProcess:
    """`caffe ARGS` as a child, its log read line by line, copied to our stdout (the trainer's log)."""

    def __init__(self, binary: str, args: list[str], cwd: str, threads: int | None):
        self.started = time.monotonic()
        self.proc = subprocess.Popen([binary, *args], cwd=cwd, env=caffe_env(threads), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                     bufsize=1, preexec_fn=die_with_parent)
        self.lines: list[caffe_log.Line] = []
        self.year = time.localtime().tm_year

    def __iter__(self):
        for text in self.proc.stdout:
            sys.stdout.write(text)
            sys.stdout.flush()
            line = caffe_log.parse_line(text, self.year)
            self.lines.append(line)
            yield line

    def wait(self) -> int:
        return self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def threads(self) -> int | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return None


def failure(run: CaffeProcess, returncode: int, what: str = "caffe") -> Exception:
    """A finished child's failure: divergence if its log shows a nan/inf loss, else its F line."""
    nonfinite = caffe_log.first_nonfinite_loss(run.lines)
    if nonfinite is not None:  # Caffe 1.0 may crash (double free, SIGABRT) after a nan: divergence comes first
        return Diverged(*nonfinite)
    fatal = caffe_log.fatal_message(run.lines)
    if fatal:
        return RuntimeError(f"{what}: {fatal} ({_how(returncode)})")
    tail = " | ".join(ln.message for ln in run.lines[-3:] if ln.message)
    return RuntimeError(f"{what} ended ({_how(returncode)}) without an F line; last lines: {tail}")


def _how(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}"
    return f"exit {returncode}"


def openblas_threads_in_effect(threads: int) -> int:
    """OpenBLAS runs min(OPENBLAS_NUM_THREADS, CPUs it may use) threads."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(threads, cpus))


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
        _weights_file(work / "init.caffemodel.h5", blobs)
        _initial_state(work / "init.solverstate.h5", work / "init.caffemodel.h5", blobs, point["optimizer"])
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
        with tempfile.TemporaryDirectory(prefix="dlbench-forward-") as tmp:
            work = Path(tmp)
            shape = _write_batch(work, x, y)
            _weights_file(work / "weights.caffemodel.h5", caffe_blobs(layers, weights, shape))
            return _caffe_test(work, layers, work / "weights.caffemodel.h5", shape, len(y), train)

    @staticmethod
    def train_then_infer(layers, weights, x, y):
        """A training-mode pass in Caffe's own layers, then an inference-mode pass with the running statistics it
        left: (train logits, inference logits, the canonical arrays after them). The training-mode pass is one
        iteration of `caffe train` on the batch at base_lr 0 (its BatchNorm layers update their statistics, no
        weight moves), its snapshot read back; its logits are `caffe test`'s with use_global_stats false."""
        import h5py

        binary = str(find_binary())
        with tempfile.TemporaryDirectory(prefix="dlbench-forward-") as tmp:
            work = Path(tmp)
            shape = _write_batch(work, x, y)
            blobs = caffe_blobs(layers, weights, shape)
            _weights_file(work / "init.caffemodel.h5", blobs)
            trained, _ = _caffe_test(work, layers, work / "init.caffemodel.h5", shape, len(y), True)
            _initial_state(work / "init.solverstate.h5", work / "init.caffemodel.h5", blobs, "sgd")
            (work / "pass.prototxt").write_text(net_prototxt(layers, str(work / "data.txt"), None, len(y), len(y),
                                                             shuffle=False, input_shape=shape))
            (work / "solver.prototxt").write_text("\n".join([
                f'net: "{work / "pass.prototxt"}"', "base_lr: 0", 'lr_policy: "fixed"', 'type: "SGD"', "momentum: 0",
                "weight_decay: 0", "max_iter: 1", "display: 1", "snapshot_after_train: true",
                f'snapshot_prefix: "{work / "pass"}"', "snapshot_format: HDF5", "solver_mode: CPU",
                "random_seed: 1"]) + "\n")
            proc = subprocess.run([binary, "train", f"--solver={work / 'solver.prototxt'}",
                                   f"--snapshot={work / 'init.solverstate.h5'}"], cwd=work, capture_output=True,
                                  text=True, env=caffe_env(1), timeout=600)
            snapshot = work / "pass_iter_1.caffemodel.h5"
            if proc.returncode != 0 or not snapshot.exists():
                lines = caffe_log.parse((proc.stdout + proc.stderr).splitlines())
                raise RuntimeError(f"caffe train (one pass) failed: {caffe_log.fatal_message(lines)}")
            inferred, _ = _caffe_test(work, layers, snapshot, shape, len(y), False)
            with h5py.File(snapshot, "r") as f:
                after = canonical_from_blobs(layers, f["data"], shape)
        return trained, inferred, after

    @staticmethod
    def params(layers, input_shape):
        return trainable_params(layers, tuple(input_shape))


ADAPTER = CaffeAdapter


def caffe_blobs(layers: list[dict], weights, input_shape: tuple[int, int, int]) -> list[tuple[str, list]]:
    """Canonical weights as Caffe's layers hold them: (layer name, blobs) per Caffe layer with blobs, in net order:
    conv [W, b] ([W] without bias), dense [W, b], a batchnorm two layers, BatchNorm bn<k> and Scale scale<k>.

    A sparse conv's grouped weights (out, fan-in, kh, kw) are the canonical (out, in, kh, kw) at
    the table's planes, in table order (the order its Concat gathers them in).

    BatchNorm keeps sums, not averages: blobs mean_sum, var_sum and a scale factor s, its running statistics
    mean_sum / s and var_sum / s, and a training pass does s = f s + 1, mean_sum = batch mean + f mean_sum,
    var_sum = m / (m - 1) batch var + f var_sum (f its moving_average_fraction). With f the spec's decay and s
    1 / (1 - decay) (where it stays: f / (1 - f) + 1 = 1 / (1 - f)), that is the spec's running average exactly:
    mean_sum / s becomes decay * mean + (1 - decay) * batch mean. So the canonical running statistics are written as
    mean / (1 - decay), var / (1 - decay) and s = 1 / (1 - decay) (Caffe's own start, s = 0, would instead take the
    first batch's statistics whole).
    """
    import numpy as np

    out = []
    for name, arrays, (_, layer, _) in zip(unit_names(layers), weights, networks.trainable(layers, input_shape)):
        if layer["type"] == "batchnorm":
            gamma, beta, mean, var = (np.asarray(a, np.float64) for a in arrays)
            factor = 1.0 / (1.0 - layer["decay"])
            out.append((name, [np.asarray(mean * factor, np.float32), np.asarray(var * factor, np.float32),
                               np.array([factor], np.float32)]))
            out.append((scale_name(name), [np.asarray(gamma, np.float32), np.asarray(beta, np.float32)]))
            continue
        w, *b = arrays
        if "table" in layer:
            w = np.stack([w[o, row] for o, row in enumerate(layer["table"])])
        out.append((name, [np.ascontiguousarray(a, np.float32) for a in (w, *b)]))
    return out


def canonical_from_blobs(layers: list[dict], data, input_shape: tuple[int, int, int]) -> list[tuple]:
    """The canonical arrays of every conv, dense and batchnorm layer from a snapshot's `data` group (h5py): a
    batchnorm's running statistics are its sums over its scale factor (caffe_blobs). A sparse conv keeps Caffe's
    grouped layout."""
    import numpy as np

    out = []
    for name, (_, layer, _) in zip(unit_names(layers), networks.trainable(layers, input_shape)):
        blobs = [np.asarray(data[name][str(i)]) for i in range(len(data[name]))]
        if layer["type"] == "batchnorm":
            scale = data[scale_name(name)]
            factor = float(blobs[2][0])
            inverse = 0.0 if factor == 0 else 1.0 / factor  # Caffe's own rule for s = 0
            out.append((np.asarray(scale["0"]), np.asarray(scale["1"]), blobs[0] * inverse, blobs[1] * inverse))
        else:
            out.append(tuple(blobs))
    return out


def _write_batch(work: Path, x, y) -> tuple[int, int, int]:
    """The batch as an HDF5 file and its list (data.h5, data.txt); its input shape."""
    import h5py
    import numpy as np

    with h5py.File(work / "data.h5", "w") as f:
        f.create_dataset("data", data=np.ascontiguousarray(x, np.float32))
        f.create_dataset("label", data=np.asarray(y).astype(np.float32))
    (work / "data.txt").write_text(f"{work / 'data.h5'}\n")
    return tuple(int(v) for v in x.shape[1:])


def _caffe_test(work: Path, layers: list[dict], weights: Path, shape: tuple[int, int, int], n: int,
                batch_statistics: bool) -> tuple:
    """`caffe test` of one batch (data.txt in `work`) with the given weights: (logits (n, classes), loss), read from
    its log; batch normalisation by the batch's statistics where `batch_statistics`."""
    import numpy as np

    binary = str(find_binary())
    model = work / ("net_train_mode.prototxt" if batch_statistics else "net.prototxt")
    model.write_text(net_with_logits(layers, str(work / "data.txt"), n, shape,
                                     batch_statistics=True if batch_statistics else None))
    proc = subprocess.run([binary, "test", f"--model={model}", f"--weights={weights}", "--iterations=1"],
                          cwd=work, capture_output=True, text=True, env=caffe_env(1), timeout=600)
    lines = caffe_log.parse((proc.stdout + proc.stderr).splitlines())
    batch = [ln.fields for ln in lines if ln.kind == "test_batch" and ln.fields["batch"] == 0]
    logits = [f["value"] for f in batch if f["name"] == LOGITS_BLOB]
    loss = [f["value"] for f in batch if f["name"] == "loss"]
    classes = layers[-1]["units"]
    if proc.returncode != 0 or len(loss) != 1 or len(logits) != n * classes:
        fatal = caffe_log.fatal_message(lines) or (proc.stdout + proc.stderr)[-1500:]
        raise RuntimeError(f"caffe test failed (exit {proc.returncode}, {len(logits)} logits, {len(loss)} "
                           f"losses): {fatal}")
    return np.asarray(logits).reshape(n, classes), loss[0]


def _weights_file(path: Path, blobs: list[tuple[str, list]]) -> None:
    """Weights as Caffe's HDF5 snapshot holds them: data/<layer name>/0 (weights) and 1 (bias)."""
    import h5py

    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        for name, arrays in blobs:
            group = data.create_group(name)
            for i, array in enumerate(arrays):
                group.create_dataset(str(i), data=array)


def _initial_state(path: Path, weights: Path, blobs: list[tuple[str, list]], optimizer: str) -> None:
    """A solver state as Caffe's HDF5 snapshot writes it, at iteration 0: the weights file it loads, histories 0.

    SGD keeps one history per learnable blob, Adam two (first moments, then second moments).
    """
    import h5py
    import numpy as np

    shapes = [array.shape for _, arrays in blobs for array in arrays]
    histories = shapes * (2 if optimizer == "adam" else 1)
    with h5py.File(path, "w") as f:
        f.create_dataset("iter", data=np.int32(0))
        f.create_dataset("current_step", data=np.int32(0))
        name = str(weights).encode() + b"\0"  # read back as a C string
        f.create_dataset("learned_net", data=np.array(name, dtype=f"S{len(name)}"))
        history = f.create_group("history")
        for i, shape in enumerate(histories):
            history.create_dataset(str(i), data=np.zeros(shape, np.float32))


def _emit_test(reporter: Reporter, f: dict, final_phase: bool) -> None:
    if final_phase:  # the stepped loop's order: the test phase ends, then its test event
        reporter.emit("phase_end", name="test", duration_s=f["test_time_s"])
    reporter.emit("test", iteration=f["iteration"], accuracy=f["accuracy"], loss=f["loss"],
                  test_time_s=f["test_time_s"], train_time_s=f["train_time_s"])


# ---------------------------------------------------------------------------------------------- parameters


def trainable_params(layers: list[dict], input_shape: tuple[int, int, int], binary: str | None = None) -> int:
    """Trainable parameters of the net Caffe builds for a spec: the elements of a snapshot of its weights, but for
    its BatchNorm layers' statistics (never trained).

    Two zero images of the input shape in an HDF5 file, `caffe train` with max_iter 0 and an
    HDF5 snapshot after training, and the weights counted with h5py (the .caffemodel.h5 holds
    data/<layer>/<i> for every learnable blob).
    """
    import h5py
    import numpy as np

    binary = binary or str(find_binary())
    with tempfile.TemporaryDirectory(prefix="dlbench-caffe-params-") as tmp:
        work = Path(tmp)
        with h5py.File(work / "x.h5", "w") as f:
            f.create_dataset("data", data=np.zeros((2, *input_shape), np.float32))
            f.create_dataset("label", data=np.zeros(2, np.float32))
        (work / "x.txt").write_text(f"{work / 'x.h5'}\n")
        (work / "net.prototxt").write_text(net_prototxt(layers, str(work / "x.txt"), None, 2, 2,
                                                        input_shape=tuple(input_shape)))
        (work / "solver.prototxt").write_text("\n".join([
            f'net: "{work / "net.prototxt"}"', "base_lr: 0.01", 'lr_policy: "fixed"', "max_iter: 0",
            "snapshot_after_train: true", f'snapshot_prefix: "{work / "w"}"', "snapshot_format: HDF5",
            "solver_mode: CPU", "random_seed: 1"]) + "\n")
        proc = subprocess.run([binary, "train", f"--solver={work / 'solver.prototxt'}"], cwd=work,
                              capture_output=True, text=True, env=caffe_env(1), timeout=600)
        snapshot = work / "w_iter_0.caffemodel.h5"
        if proc.returncode != 0 or not snapshot.exists():
            lines = caffe_log.parse(proc.stdout.splitlines() + proc.stderr.splitlines())
            raise RuntimeError(f"caffe could not build the net: {caffe_log.fatal_message(lines) or proc.stderr[-500:]}")
        statistics = {name for layer, name in names(layers) if layer["type"] == "batchnorm"}  # BatchNorm's blobs
        with h5py.File(snapshot, "r") as f:
            return sum(_count(group) for name, group in f["data"].items() if name not in statistics)


def _count(group) -> int:
    import h5py

    n = 0
    for item in group.values():
        n += item.size if isinstance(item, h5py.Dataset) else _count(item)
    return n
