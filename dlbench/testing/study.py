"""Hand-made studies, without training anything: a small one (runs, curves and samples tables) with every
axis varied and failures of several kinds, what the chart, table and findings tests compute on (make_runs: the
study's four frameworks; make_modern_runs: the compile and precision axes); and a large one (20,000 records with
curves and samples of realistic length, as run folders) for the benchmarks and the slow tests of everything after
training at scale."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from dlbench.frameworks import registry
from dlbench.study import presets

# A made-up base training time for each framework of the study (registry: published_as), Caffe fastest and
# Theano slowest, as published; the rows of the hand-made studies come in this order.
BASE_TIME = {"pytorch": 2.0, "tensorflow": 3.0, "caffe": 1.0, "theano": 5.0}
FRAMEWORKS = list(BASE_TIME)
# Each framework's own preset, and its own network on MNIST (the registry's and the presets' facts).
OWN = {f: registry.get(f).own_preset for f in FRAMEWORKS}
OWN_NETWORK = {f: presets.study_presets()["mnist"][OWN[f]]["network"] for f in FRAMEWORKS}


def preset_matrix(accs: dict, reading: str = "settings") -> pd.DataFrame:
    """Points on MNIST, CPU: framework -> {whose preset: accuracy}, a framework's own preset being its own
    defaults and every other one cross-applied in `reading`; run ids `<framework>-<whose>-<reading>`."""
    rows = []
    for fw, per in accs.items():
        for whose, acc in per.items():
            own = registry.get(fw).own_preset == whose
            rows.append({"run_id": f"{fw}-{whose}-{reading}", "framework": fw, "dataset": "mnist", "device": "cpu",
                         "preset": "own" if own else whose, "cross_apply": None if own else reading,
                         "batch_size": 64, "learning_rate": 0.01, "iterations": 100, "status": "ok",
                         "train_time_s": 1.0, "accuracy": acc})
    return pd.DataFrame(rows)


def make_runs() -> pd.DataFrame:
    """A small study with every axis varied and failures of several kinds."""
    rows = []
    grid = itertools.product(FRAMEWORKS, ["digits", "cifar10"], ["own", "caffe"], [32, 128], [0.01, 0.1], [2, 8],
                             ["cpu", "gpu"], [1, 4])
    for i, (fw, ds, preset, bs, lr, ep, dev, th) in enumerate(grid):
        t = BASE_TIME[fw] * ep * (1 + 32 / bs) / th ** 0.6
        t *= (0.1 if dev == "gpu" else 1) * (3 if ds == "cifar10" else 1)
        acc = min(0.995, 0.80 + 0.04 * math.log2(ep) - 0.03 * (bs == 128) + 0.02 * (lr == 0.01)
                  + 0.01 * (preset == "own") - 0.1 * (ds == "cifar10"))
        status, reason = "ok", None
        if fw == "theano" and lr == 0.1 and bs == 32:
            status, reason = "diverged", "loss became nan at iteration 7"
        elif fw == "caffe" and dev == "gpu" and th == 4 and ds == "cifar10":
            status, reason = "oom", "resident memory over the 1000 MB limit"
        elif fw == "tensorflow" and ep == 8 and bs == 128 and lr == 0.01 and ds == "digits" and dev == "cpu":
            status, reason = "timeout", "over the 60 s limit"
        elif fw == "pytorch" and i % 37 == 0:
            status, reason = "error", "the trainer exited with code 1"
        ok = status == "ok"
        rows.append({
            "run_id": f"{fw}-{ds}-{preset}-bs{bs}-lr{lr}-e{ep}-{dev}-t{th}", "framework": fw, "dataset": ds,
            "preset": preset, "network": "lenet", "optimizer": "sgd", "learning_rate": lr, "batch_size": bs,
            "iterations": ep * 1000 // bs if ok else np.nan, "iterations_planned": ep * 1000 // bs, "epochs": ep,
            "device": dev, "threads": th, "library": "default", "repeat": 0, "seed": 1, "status": status,
            "reason": reason, "train_time_s": t if ok else np.nan, "test_time_s": t / 20 if ok else np.nan,
            "accuracy": acc if ok else np.nan, "final_loss": 0.1, "throughput_img_s": 1000 / t,
            "cpu_util_mean_pct": 80.0 * th + bs / 10, "rss_peak_mb": 300 + bs + 100 * (ds == "cifar10"),
            "rss_mean_mb": 250 + bs / 2, "gpu_util_mean_pct": 60.0 if dev == "gpu" else np.nan,
            "threads_in_effect": th, "framework_version": "1.0", "log_tail": "x" * 500,
            # The own-defaults points form tuning grids of batch size x learning rate around bs 32, lr 0.01.
            "tuning_grid": f"tuning:{fw}-{ds}-e{ep}-{dev}-t{th}" if preset == "own" else None,
            "tuning_is_default": (bs == 32 and lr == 0.01) if preset == "own" else None,
        })
    return pd.DataFrame(rows)


def one_default(runs: pd.DataFrame) -> pd.DataFrame:
    """make_runs' points with each framework's own points at one setting only: epochs 8, 1 thread, the tuning
    grids' defaults (batch size 32, learning rate 0.01). make_runs is a full factorial whose own points split
    evenly over every axis, so none of their settings is a framework's default point (frames.default_points: a
    tie) and nothing is set beside the published figures; here that one setting is. The cross-applied points
    (Caffe's preset on the other frameworks) keep every sweep."""
    own = (runs["preset"] == "own") | (runs["preset"] == runs["framework"].map(OWN))  # Caffe's own is `caffe`
    default = ((runs["epochs"] == 8) & (runs["threads"] == 1) & (runs["batch_size"] == 32)
               & (runs["learning_rate"] == 0.01))
    return runs[~own | default].reset_index(drop=True)


def with_preset_points(runs: pd.DataFrame, seeds: tuple[int, ...] = (1, 2, 3)) -> pd.DataFrame:
    """make_runs' points and, beside them, each preset's own point on each framework, dataset and device: the
    preset's batch size and learning rate (dlbench/study/presets.yaml), 8 epochs, 1 thread, one run per seed, ok
    but for one diverged, one oom and one timeout on digits' own defaults.
    make_runs sweeps batch sizes and learning rates no preset has, so that none of its points is a preset's point
    (groups.preset_points); the charts and tables drawn at presets' points need these."""
    base = runs[(runs["epochs"] == 8) & (runs["threads"] == 1) & (runs["batch_size"] == 32)
                & (runs["learning_rate"] == 0.01)].drop_duplicates(["framework", "dataset", "preset", "device"])
    rows = []
    for r in base.to_dict("records"):
        family = "cifar10" if r["dataset"] == "cifar10" else "mnist"
        whose = OWN[r["framework"]] if r["preset"] == "own" else r["preset"]
        preset = presets.study_presets()[family][whose]
        t = BASE_TIME[r["framework"]] * 8 * (1 + 32 / preset["batch_size"]) * (0.1 if r["device"] == "gpu" else 1)
        t *= 3 if r["dataset"] == "cifar10" else 1
        for seed in seeds:
            run_id = f"{r['framework']}-{r['dataset']}-{r['preset']}-{r['device']}-at-preset-s{seed}"
            rows.append({**r, "run_id": run_id,
                         "batch_size": preset["batch_size"], "learning_rate": preset["learning_rate"],
                         "iterations": 8 * 1000 // preset["batch_size"],
                         "iterations_planned": 8 * 1000 // preset["batch_size"], "seed": seed, "repeat": seed - 1,
                         "status": "ok", "reason": None, "train_time_s": t * (1 + 0.02 * (seed - 2)),
                         "test_time_s": t / 20, "accuracy": 0.93 - 0.1 * (r["dataset"] == "cifar10") + 0.002 * seed,
                         "throughput_img_s": 8000 / t, "tuning_grid": None, "tuning_is_default": None})
    # and a failure of three kinds at a preset's point (a fourth seed), where the charts drawn there show them
    failing = {("theano", "diverged"): "loss became nan at iteration 7", ("caffe", "oom"): "resident memory over the "
               "1000 MB limit", ("tensorflow", "timeout"): "over the 60 s limit"}
    for (framework, status), reason in failing.items():
        first = next(r for r in rows if r["framework"] == framework and r["dataset"] == "digits"
                     and r["preset"] == "own" and r["device"] == "cpu")
        rows.append({**first, "run_id": first["run_id"].replace("-s1", f"-s{len(seeds) + 1}"), "seed": len(seeds) + 1,
                     "status": status, "reason": reason, "train_time_s": np.nan, "test_time_s": np.nan,
                     "accuracy": np.nan, "iterations": np.nan})
    return pd.concat([runs, pd.DataFrame(rows)], ignore_index=True)


# The compile and precision axes on the frameworks that have them: (speed-up of compiling, of bf16, compile time s).
MODERN = {"pytorch": (1.3, 1.6, 25.0), "tensorflow": (0.7, 1.4, 3.0), "jax": (6.0, 0.8, 3.5)}


def make_modern_runs() -> pd.DataFrame:
    """Flax's preset on the frameworks with a compile and a precision switch: eager and compiled, fp32 and bf16,
    1 and 2 threads, on Fashion-MNIST; bf16 costs a little accuracy, and one compiled point failed."""
    rows = []
    for fw, (compiled_x, bf16_x, compile_s) in MODERN.items():
        for compile_, precision, threads in itertools.product(["eager", "compiled"], ["fp32", "bf16"], [1, 2]):
            speed = (compiled_x if compile_ == "compiled" else 1.0) * (bf16_x if precision == "bf16" else 1.0)
            speed *= threads ** 0.7 * (1.0 if fw != "jax" else 0.5)
            img_s = 2000.0 * speed
            t = 60000 / img_s
            failed = fw == "tensorflow" and compile_ == "compiled" and precision == "bf16" and threads == 2
            rows.append({
                "run_id": f"{fw}-modern-{compile_}-{precision}-t{threads}", "framework": fw,
                "dataset": "fashion_mnist", "preset": "flax", "network": "flax_cnn", "optimizer": "sgd",
                "learning_rate": 0.1, "batch_size": 128, "iterations": np.nan if failed else 469,
                "iterations_planned": 469, "epochs": 1, "device": "cpu", "threads": threads, "library": "default",
                "repeat": 0, "seed": 1, "status": "error" if failed else "ok",
                "reason": "the trainer exited with code 1" if failed else None,
                "train_time_s": np.nan if failed else t, "test_time_s": np.nan if failed else 0.5,
                "accuracy": np.nan if failed else 0.88 - 0.004 * (precision == "bf16"),
                "final_loss": 0.3, "throughput_img_s": np.nan if failed else img_s,
                "achieved_gflops": np.nan if failed else img_s * 3 * 2.6e6 / 1e9, "compile": compile_,
                "precision": precision,
                "compile_time_s": compile_s if compile_ == "compiled" else 0.0,
                "cpu_util_mean_pct": 95.0 * threads, "rss_peak_mb": 700.0, "rss_mean_mb": 650.0,
                "threads_in_effect": threads, "framework_version": "1.0", "log_tail": "x" * 500,
            })
    return pd.DataFrame(rows)


def make_curves(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in runs[runs.status == "ok"].itertuples():
        for k in (1, 2, 3):
            rows.append({"run_id": r.run_id, "framework": r.framework, "dataset": r.dataset, "kind": "test",
                         "iteration": k * 10, "epoch": np.nan, "loss": 1 / k, "accuracy": r.accuracy - 0.1 / k,
                         "lr": r.learning_rate, "train_time_s": r.train_time_s * k / 3, "test_time_s": 0.1})
            rows.append({"run_id": r.run_id, "framework": r.framework, "dataset": r.dataset, "kind": "train",
                         "iteration": k * 10, "epoch": k / 3, "loss": 1.2 / k, "accuracy": np.nan,
                         "lr": r.learning_rate, "train_time_s": r.train_time_s * k / 3, "test_time_s": np.nan})
    return pd.DataFrame(rows)


def make_samples(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    phases = [(0.0, "startup"), (0.5, "import"), (1.5, "data_load"), (2.0, "build"), (2.5, "train"),
              (5.0, "test"), (5.5, "other")]
    for r in runs.itertuples():
        for t in np.arange(0.1, 6.0, 0.25):
            phase = [p for start, p in phases if t >= start][-1]
            gpu = r.device == "gpu"
            rows.append({"run_id": r.run_id, "framework": r.framework, "dataset": r.dataset, "phase": phase,
                         "t": round(float(t), 3), "cpu_pct": 100 + 50 * (phase == "train"), "rss_mb": 100 + 40 * t,
                         "threads": 4, "processes": 1, "gpu_util_pct": 70.0 if gpu and phase == "train" else
                         (5.0 if gpu else np.nan), "gpu_mem_mb": 500.0 if gpu else np.nan})
    return pd.DataFrame(rows)


def small_runs() -> pd.DataFrame:
    return pd.DataFrame({"run_id": ["a", "b"], "framework": ["pytorch", "tensorflow"], "dataset": ["digits"] * 2,
                         "preset": ["caffe"] * 2, "batch_size": [32, 32], "learning_rate": [0.01, 0.01],
                         "iterations": [30, np.nan], "epochs": [np.nan, np.nan], "device": ["cpu"] * 2,
                         "threads": [1, 1], "status": ["ok", "error"], "reason": [None, "crash"],
                         "train_time_s": [1.0, np.nan], "test_time_s": [0.1, np.nan], "accuracy": [0.9, np.nan],
                         "cpu_util_mean_pct": [100.0, 90.0], "rss_peak_mb": [300.0, 310.0],
                         "rss_mean_mb": [250.0, 255.0]})


# ---------------------------------------------------------------------------------------------
# A large study: 20,000 records as real runs leave them, with curves and samples of realistic length
# ---------------------------------------------------------------------------------------------

LARGE_PRESETS = ["own", "tensorflow", "caffe", "torch", "theano"]
# (status, share of points, reason): about 3% of a large sweep fails, in every way a point can.
LARGE_FAILURES = [("diverged", 0.012, "loss became nan at iteration 41"), ("error", 0.005, "the trainer exited 1"),
                  ("timeout", 0.004, "over the 600 s limit"), ("oom", 0.003, "resident memory over 4000 MB"),
                  ("killed", 0.002, "killed by signal 9"), ("unavailable", 0.004, "no GPU on this node")]
SAMPLE_COLUMNS = ["phase", "t", "cpu_pct", "rss_mb", "threads", "processes", "gpu_util_pct", "gpu_mem_mb",
                  "gpu_power_w", "gpu_energy_j"]
CURVE_COLUMNS = ["kind", "iteration", "epoch", "loss", "accuracy", "lr", "train_time_s", "test_time_s", "t"]


def large_records(n: int = 20000, seed: int = 0) -> list[dict]:
    """n records (metrics.json content) of a sweep of 4 frameworks x 2 datasets x 2 devices x 5 presets x
    batch size x learning rate x 2 thread counts x repeats, every key a real record has, with realistic
    times, accuracies and failures; `curve_rows` and `sample_rows` say how long each run's CSVs are."""
    rng = np.random.default_rng(seed)
    grid = list(itertools.product(FRAMEWORKS, ["mnist", "cifar10"], ["cpu", "gpu"], LARGE_PRESETS,
                                  [16, 32, 64, 128, 256], [0.001, 0.005, 0.01, 0.05, 0.1], [1, 2]))
    statuses = ["ok"] + [s for s, _, _ in LARGE_FAILURES]
    shares = [1 - sum(p for _, p, _ in LARGE_FAILURES)] + [p for _, p, _ in LARGE_FAILURES]
    reasons = {s: r for s, _, r in LARGE_FAILURES}
    drawn = rng.choice(len(statuses), size=n, p=shares)
    out = []
    for i in range(n):
        fw, ds, dev, preset, bs, lr, th = grid[i % len(grid)]
        repeat = i // len(grid)
        status = statuses[drawn[i]]
        ok = status == "ok"
        iterations = int(rng.choice([500, 1000, 2000, 5000]))
        t = BASE_TIME[fw] * iterations / 500 * (bs / 64) ** 0.7 / th ** 0.6 * (0.15 if dev == "gpu" else 1)
        t *= (3 if ds == "cifar10" else 1) * rng.lognormal(0, 0.05)
        acc = min(0.995, (0.97 if ds == "mnist" else 0.72) - 0.02 * abs(math.log10(lr / 0.01))
                  - 0.01 * (bs == 256) + rng.normal(0, 0.004))
        wall = t * 1.15 + 4.0 + rng.uniform(0, 2)
        record = {
            "id": f"{preset}-{OWN_NETWORK[fw]}-bs{bs}-lr{lr:g}-i{iterations}-{dev}-t{th}-r{repeat}-{i:010x}",
            "framework": fw, "dataset": ds, "preset": preset, "network": OWN_NETWORK[fw],
            "cross_apply": None if preset in ("own", OWN[fw]) else "settings", "optimizer": "sgd",
            "momentum": 0.9, "weight_decay": 0.0005, "learning_rate": lr, "lr_policy": "fixed",
            "lr_policy_json": '{"name": "fixed"}', "batch_size": bs, "test_batch_size": 100,
            "iterations": iterations, "iterations_planned": iterations, "epochs": None, "test_interval": 500,
            "device": dev, "threads": th, "interop_threads": None, "library": "default", "repeat": repeat,
            "seed": 1 + repeat, "status": status, "reason": None if ok else reasons[status],
            "returncode": 0 if ok else 1, "train_time_s": t if ok else None, "test_time_s": t / 15 if ok else None,
            "interval_test_time_s": t / 20 if ok else None, "accuracy": acc if ok else None,
            "test_loss": 0.1 if ok else None, "final_loss": float(rng.uniform(0.01, 0.5)),
            "throughput_img_s": iterations * bs / t if ok else None, "test_throughput_img_s": 10000 / (t / 15),
            "images_trained": iterations * bs, "epochs_trained": iterations * bs / 60000,
            "iterations_done": iterations if ok else int(iterations * rng.uniform(0.05, 0.9)),
            "diverged_at_iteration": 41 if status == "diverged" else None, "params": 431080,
            "flops_per_image_train": 13758000, "achieved_gflops": iterations * bs / t * 0.013758 if ok else None,
            "wall_time_s": wall, "startup_time_s": 0.07, "import_time_s": 1.2, "data_load_time_s": 0.3,
            "build_time_s": 0.5, "compile_time_s": 3.5 if fw == "theano" else 0.0, "augment_time_s": 0.0,
            "cpu_util_mean_pct": 95.0 * th + rng.normal(0, 3), "cpu_util_peak_pct": 100.0 * th + 15,
            "rss_peak_mb": 300 + bs * 1.5 + 200 * (ds == "cifar10") + rng.normal(0, 5),
            "rss_mean_mb": 250 + bs + rng.normal(0, 5), "threads_peak": th + 3,
            "gpu_util_mean_pct": 60.0 + rng.normal(0, 5) if dev == "gpu" else None,
            "gpu_mem_peak_mb": 900.0 + bs if dev == "gpu" else None,
            "gpu_power_mean_w": 150.0 if dev == "gpu" else None,
            "threads_requested": th, "threads_in_effect": th, "interop_threads_in_effect": None,
            "library_in_effect": "onednn" if fw in ("pytorch", "tensorflow") else "openblas",
            "framework_version": {"pytorch": "2.13.0", "tensorflow": "2.21.0", "theano": "1.1.2", "caffe": "1.0.0"}[fw],
            "framework_python_version": "3.11.7", "framework_numpy_version": "2.4.6", "cuda_version": None,
            "cudnn_version": None, "env_name": fw, "env_kind": "built", "env_key": "0123456789ab",
            "env_python": f"/cache/envs/{fw}-0123456789ab/bin/python", "python_runner": "3.11.7",
            "blas": "openblas 0.3.31", "build_json": '{"layout": "NCHW", "loss": "softmax cross-entropy"}' * 3,
            "input_json": '{"scale": 0.00390625}', "dataset_digest": "1b8df08954e4076ab25d9515bc20bf15",
            "dataset_dir": f"/data/resources/datasets/{ds}", "device_name": "NVIDIA H100" if dev == "gpu" else "cpu",
            "gpu_count": 1 if dev == "gpu" else 0, "gpu_device": "0" if dev == "gpu" else None,
            "gpu_driver": "570.1" if dev == "gpu" else None, "gpu_model": "H100" if dev == "gpu" else None,
            "cpu_model": "Intel Xeon", "cpu_cores_logical": 32, "cpu_cores_physical": 16, "cpu_cores_usable": 16,
            "memory_total_mb": 257000, "memory_limit_mb": None, "memory_cap": None, "oom_by": None,
            "time_limit_s": None, "hang_limit_s": 1800, "lock_mode": "exclusive", "lock_wait_s": 0.001,
            "monitor_cpu_s": 0.05, "monitor_interval_s": 0.2, "samples": 0, "slurm_job_id": str(400000 + i),
            "host": f"node{i % 16:02d}", "os": "Linux 6.1", "started_at": "2026-12-01T02:22:02+0000",
            "train_samples": 60000 if ds == "mnist" else 50000, "test_samples": 10000,
            "log_tail": "I1201 02:22:02 solver.cpp:218] Iteration 100, loss = 0.2\n" * 30 if not ok else "",
            "curve_rows": iterations // max(1, iterations // 100) + iterations // 500 + 1 if ok else 20,
            "sample_rows": int(wall / 0.2),
        }
        record["samples"] = record["sample_rows"]
        out.append(record)
    return out



def large_curve(record: dict, rng: np.random.Generator) -> pd.DataFrame:
    """A run's learning curve: the loss every 1% of training, a test every 500 iterations."""
    return pd.DataFrame(_curve_columns(record, rng))


def _curve_columns(record: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """large_curve's columns as arrays (a DataFrame per run is what made 20,000 runs slow to make)."""
    iterations = record["iterations"]
    every = max(1, iterations // 100)
    steps = np.arange(0, iterations if record["status"] == "ok" else every * 20, every)
    t = record["train_time_s"] or record["wall_time_s"] / 2
    frac = steps / max(1, iterations)
    loss = 2.3 * np.exp(-4 * frac) + rng.uniform(0, 0.05, len(steps))
    train = {"kind": np.full(len(steps), "train", dtype=object), "iteration": steps,
             "epoch": steps * record["batch_size"] / 60000, "loss": loss, "accuracy": np.full(len(steps), np.nan),
             "lr": np.full(len(steps), record["learning_rate"]), "train_time_s": frac * t,
             "test_time_s": np.full(len(steps), np.nan), "t": 4.0 + frac * t}
    if record["status"] != "ok":
        return train
    tests = np.arange(500, iterations + 1, 500)
    test = {"kind": np.full(len(tests), "test", dtype=object), "iteration": tests,
            "epoch": tests * record["batch_size"] / 60000, "loss": 0.3 * np.exp(-2 * tests / iterations),
            "accuracy": record["accuracy"] - 0.1 * np.exp(-4 * tests / iterations),
            "lr": np.full(len(tests), record["learning_rate"]), "train_time_s": tests / iterations * t,
            "test_time_s": np.full(len(tests), record["test_time_s"] / max(1, len(tests))),
            "t": 4.0 + tests / iterations * t}
    both = {c: np.concatenate([train[c], test[c]]) for c in CURVE_COLUMNS}
    order = np.lexsort((both["kind"].astype(str), both["iteration"]))  # by iteration, then kind; stable
    return {c: v[order] for c, v in both.items()}


def large_samples(record: dict, rng: np.random.Generator) -> pd.DataFrame:
    """The monitor's readings every 0.2 s, through the phases of a run."""
    return pd.DataFrame(_sample_columns(record, rng))


def _sample_columns(record: dict, rng: np.random.Generator) -> dict[str, np.ndarray]:
    n = record["sample_rows"]
    t = np.round(0.2 * np.arange(1, n + 1), 3)
    wall = record["wall_time_s"]
    edges = [(0.0, "startup"), (0.1, "import"), (1.3, "data_load"), (1.6, "build"), (2.1, "compile"),
             (2.1 + (record["compile_time_s"] or 0), "train"), (wall - (record["test_time_s"] or 0.5) - 0.3, "test"),
             (wall - 0.3, "other")]
    phase = np.full(n, "startup", dtype=object)
    for start, name in edges:  # the last edge a reading is past names its phase
        phase[t >= start] = name
    gpu = record["device"] == "gpu"
    training = phase == "train"
    nothing = np.full(n, np.nan)
    return {
        "phase": phase, "t": t, "cpu_pct": np.where(training, 95.0 * record["threads"], 40.0) + rng.normal(0, 3, n),
        "rss_mb": np.minimum(record["rss_peak_mb"], 30 + 40 * t), "threads": np.full(n, record["threads"] + 3),
        "processes": np.ones(n, dtype=np.int64), "gpu_util_pct": np.where(training, 70.0, 5.0) if gpu else nothing,
        "gpu_mem_mb": np.full(n, 900.0) if gpu else nothing,
        "gpu_power_w": np.where(training, 150.0, 60.0) if gpu else nothing,
        "gpu_energy_j": np.cumsum(np.where(training, 30.0, 12.0)) if gpu else nothing}


def write_large_study(root: str | Path, n: int = 20000, seed: int = 0) -> list[Path]:
    """The large study as run folders under root/<framework>/<dataset>/<id>/ (metrics.json, curve.csv,
    samples.csv, as the runner writes them); the paths of the metrics.json files, in the study's order."""
    import json

    rng = np.random.default_rng(seed + 1)
    paths = []
    for record in large_records(n, seed):
        folder = Path(root) / record["framework"] / record["dataset"] / record["id"]
        folder.mkdir(parents=True, exist_ok=True)
        curve, samples = large_curve(record, rng), large_samples(record, rng)
        body = {k: v for k, v in record.items() if k not in ("curve_rows", "sample_rows")}
        (folder / "metrics.json").write_text(json.dumps(body, indent=2, sort_keys=True))
        curve[CURVE_COLUMNS].to_csv(folder / "curve.csv", index=False)
        samples[SAMPLE_COLUMNS].to_csv(folder / "samples.csv", index=False)
        paths.append(folder / "metrics.json")
    return paths


def large_frames(n: int = 20000, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The large study's runs, curves and samples tables as the aggregation writes them, made in memory
    (the same records, curves and samples as write_large_study, without 60,000 files)."""
    rng = np.random.default_rng(seed + 1)
    records = large_records(n, seed)
    curves, samples = [], []
    for record in records:
        curves.append(_curve_columns(record, rng))
        samples.append(_sample_columns(record, rng))
    runs = pd.DataFrame([{k: v for k, v in r.items() if k not in ("curve_rows", "sample_rows")} for r in records])
    runs = runs.rename(columns={"id": "run_id"}).assign(attempts=1, studies="main")
    return runs, _stacked(records, curves, CURVE_COLUMNS), _stacked(records, samples, SAMPLE_COLUMNS)


def _stacked(records: list[dict], parts: list[dict], columns: list[str]) -> pd.DataFrame:
    """One table of every run's columns, each row led by its run's id, framework and dataset."""
    lengths = [len(part[columns[0]]) for part in parts]
    lead = {key: np.repeat(np.array([r[field] for r in records], dtype=object), lengths)
            for key, field in (("run_id", "id"), ("framework", "framework"), ("dataset", "dataset"))}
    return pd.DataFrame({**lead, **{c: np.concatenate([part[c] for part in parts]) for c in columns}})
