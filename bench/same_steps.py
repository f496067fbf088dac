"""Same point, same steps? The weights of every framework after N steps of one point, side by side.

    PYTHONPATH=. .venv/bin/python bench/same_steps.py DATASET_DIR [--iterations 20] [--fixed-lr] [--seed 1]
                                                      [--threads 2] [FRAMEWORK ...]

Caffe's LeNet preset (batch 64, momentum 0.9, decay 5e-4, bias lr_mult 2, inv policy, the file
order every epoch) on a prepared dataset (resources/datasets/<name>), trained by each framework's
adapter through dlbench.testing.trained: the same initial weights and the same batches everywhere.
Printed: how far each weight blob moved in PyTorch, and each framework's largest difference from
PyTorch's (and TensorFlow's from Caffe's) per blob, then each framework's test accuracy. With
--fixed-lr the rate stays at 0.01, which makes the two momentum forms (Caffe's and Keras's rate
inside the velocity, PyTorch's and Theano's outside) the same. docs/reproduction.md quotes it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from dlbench.environments import build
from dlbench.frameworks import registry
from dlbench.paths import ROOT
from dlbench.run.threads import thread_env
from dlbench.study.sweep import one_point


def train(framework: str, point: dict, dataset_dir: str, work: Path, threads: int) -> tuple[dict, float]:
    (work / f"{framework}.json").write_text(json.dumps(dict(point, framework=framework)))
    # The environment a training job gets (measure.trainer_env): the caller's, with the point's threads. It matters:
    # OPENBLAS_CORETYPE, where set, picks OpenBLAS's kernels, and with them Caffe's and Theano's rounding.
    env = {**os.environ, **thread_env(threads), "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "",
           "TF_CPP_MIN_LOG_LEVEL": "2"}
    python = str(build.build(framework) / "bin" / "python")
    proc = subprocess.run([python, "-m", "dlbench.testing.trained", str(work / f"{framework}.json"), dataset_dir,
                           str(work / f"{framework}.events"), str(work / f"{framework}.npz")], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"{framework}: {(proc.stdout + proc.stderr)[-2000:]}")
    tests = [json.loads(line) for line in (work / f"{framework}.events").read_text().splitlines()
             if '"test"' in line]
    with np.load(work / f"{framework}.npz") as f:
        return {k: f[k] for k in f.files}, tests[-1]["accuracy"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset_dir")
    parser.add_argument("frameworks", nargs="*", default=registry.names())
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fixed-lr", action="store_true")
    args = parser.parse_args()
    point = one_point("pytorch", "caffe", dataset=Path(args.dataset_dir).name, iterations=args.iterations,
                      threads=args.threads)
    point["seed"] = args.seed
    point["test_interval"] = args.iterations - 1  # Caffe then snapshots its final weights
    if args.fixed_lr:
        point["lr_policy"] = {"name": "fixed"}
    with tempfile.TemporaryDirectory(prefix="dlbench-same-steps-") as tmp:
        runs = {fw: train(fw, point, args.dataset_dir, Path(tmp), args.threads) for fw in args.frameworks}
    ref = runs["pytorch"][0]
    print(f"{args.iterations} steps, lr policy {point['lr_policy']['name']}, seed {args.seed}: max |W - PyTorch's W|")
    print(f"{'blob':5s} {'moved':>9s} " + " ".join(f"{fw:>11s}" for fw in args.frameworks if fw != "pytorch")
          + ("   tf-caffe" if {"tensorflow", "caffe"} <= set(runs) else ""))
    for key in (k for k in ref if not k.startswith("init")):
        row = [f"{float(np.abs(runs[fw][0][key] - ref[key]).max()):11.3g}" for fw in args.frameworks if fw != "pytorch"]
        if {"tensorflow", "caffe"} <= set(runs):
            row.append(f"{float(np.abs(runs['tensorflow'][0][key] - runs['caffe'][0][key]).max()):11.3g}")
        print(f"{key:5s} {float(np.abs(ref[key] - ref['init_' + key]).max()):9.3g} " + " ".join(row))
    print("test accuracy: " + ", ".join(f"{fw} {acc:.4f}" for fw, (_, acc) in runs.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
