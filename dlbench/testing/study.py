"""A small hand-made study (runs, curves and samples tables) with every axis varied and failures of
several kinds: what the chart, table and findings tests compute on, without training anything.
make_runs: the study's four frameworks; make_modern_runs: the compile and precision axes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

# The study's four frameworks with a base training time each (Caffe fastest, Theano slowest, as published).
BASE_TIME = {"pytorch": 2.0, "tensorflow": 3.0, "caffe": 1.0, "theano": 5.0}
FRAMEWORKS = list(BASE_TIME)


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
