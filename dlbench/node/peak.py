"""This machine's matrix-multiply peaks, the yardsticks for the adapters' achieved GFLOP/s.

    dlbench peak --threads 1 2 --out results/machine/peak.json [--bf16-python PYTHON] [--lock FILE]
    python -m dlbench.node.peak --bf16 --threads 1 2          (in the PyTorch environment: prints JSON)

A measurement like a CPU point: it holds the node's measurement lock (`--lock`, default the workflow's or
measurement.lock_file's default; `--lock ''`: none), so it never runs beside a point or heavy work, waiting at
most measurement.lock_timeout_s. The bfloat16 peak's own process is given BF16_TIMEOUT_S: a hung PyTorch must
not hold the node's lock for ever.

float32: numpy's BLAS, in the base environment. bfloat16: numpy has no bfloat16 product, so the
bfloat16 peak is PyTorch's (torch.matmul of bfloat16 matrices, oneDNN's kernels, which use the CPU's
AVX-512 BF16 or AMX instructions where it has them), measured in the PyTorch environment whose
Python `--bf16-python` names. peak.json keeps its float32 keys as they were (gflops_by_threads) and
adds bf16_gflops_by_threads, bf16_measured_with and the CPU's native bfloat16 flags (cpu_bf16),
so that a bf16 point's peak fraction is taken against the bfloat16 peak and an fp32 point's against
the float32 one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time

import numpy as np

from dlbench.atomic import write_json
from dlbench.node import locks, procs
from dlbench.paths import ROOT


def gemm_gflops(n: int = 2048, threads: int = 1, repeats: int = 5) -> float:
    """Best of `repeats` float32 n x n x n products with the BLAS limited to `threads`."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    with threadpool_limits(limits=threads, user_api="blas"):
        best = _best_seconds(lambda: a @ b, repeats)
    return 2.0 * n**3 / best / 1e9


def _best_seconds(multiply, repeats: int) -> float:
    """The fastest of `repeats` calls of multiply(), after one that pages in, spins up the threads and picks
    the kernel."""
    multiply()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        multiply()
        best = min(best, time.perf_counter() - t0)
    return best


# A CPU without bfloat16 instructions multiplies bfloat16 matrices in software, at well under 1 GFLOP/s: one
# 2048-cube product then takes a minute, and the peak six of them. There the product is made smaller, until one
# takes about this long; peak.json says at which size each peak was measured.
BF16_PRODUCT_S = 0.5
MIN_GEMM_N = 256


def gemm_size_for(gflops: float, n_max: int, budget_s: float = BF16_PRODUCT_S, n_min: int = MIN_GEMM_N) -> int:
    """The largest n (a multiple of 64, from n_min to n_max) whose n x n x n product takes at most budget_s at
    `gflops`."""
    n = int((budget_s * gflops * 1e9 / 2.0) ** (1 / 3)) // 64 * 64
    return max(n_min, min(n_max, n))


def _bf16_seconds(n: int, repeats: int) -> float:
    """The best of `repeats` bfloat16 n x n x n products in PyTorch."""
    import torch

    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(torch.bfloat16)
    b = torch.randn(n, n, generator=gen).to(torch.bfloat16)
    return _best_seconds(lambda: torch.matmul(a, b), repeats)


def bf16_gemm_gflops(n: int = 2048, threads: int = 1, repeats: int = 5) -> tuple[float, int]:
    """(GFLOP/s, the n measured): the best of `repeats` bfloat16 products in PyTorch on `threads` threads (run in
    its environment), n x n x n, or smaller where one such product would take over BF16_PRODUCT_S (gemm_size_for,
    from the rate of a MIN_GEMM_N product)."""
    import torch

    torch.set_num_threads(threads)
    small = min(n, MIN_GEMM_N)
    n = gemm_size_for(2.0 * small**3 / _bf16_seconds(small, 1) / 1e9, n)
    return 2.0 * n**3 / _bf16_seconds(n, repeats) / 1e9, n


def bf16_here(thread_counts: list[int], n: int) -> dict:
    """The bfloat16 peaks, measured in this (PyTorch) interpreter, and the product size each was measured at."""
    import torch

    measured = {str(t): bf16_gemm_gflops(n, t) for t in sorted(set(thread_counts))}
    return {"bf16_gflops_by_threads": {t: round(g, 2) for t, (g, _) in measured.items()},
            "bf16_gemm_n_by_threads": {t: size for t, (_, size) in measured.items()},
            "bf16_measured_with": f"torch {torch.__version__} matmul (oneDNN: {torch.backends.mkldnn.is_available()})"}


# The longest the bfloat16 peak's process may take: it runs under the node's measurement lock, so a hang would stop
# every point on the node. Its products are sized to BF16_PRODUCT_S each (six per thread count, and an import of
# PyTorch): minutes only on a machine far slower than any it was measured on.
BF16_TIMEOUT_S = 600.0


def bf16_in(python: str, thread_counts: list[int], n: int, timeout_s: float = BF16_TIMEOUT_S) -> dict:
    """The bfloat16 peaks measured by another interpreter (the PyTorch environment's), within timeout_s (then
    RuntimeError; its process group ended)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
           "CUDA_VISIBLE_DEVICES": ""}
    cmd = [python, "-m", "dlbench.node.peak", "--bf16", "--n", str(n), "--threads", *map(str, thread_counts)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                             start_new_session=True, preexec_fn=procs.die_with_parent)
    try:
        stdout, stderr = child.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        procs.kill_tree(child.pid)
        child.communicate()
        raise RuntimeError(f"{python} did not measure the bfloat16 peak within {timeout_s:g} s (ended); see whether "
                           "its PyTorch imports (`python -c 'import torch'`), or leave the bf16 points out") from None
    proc = subprocess.CompletedProcess(cmd, child.returncode, stdout, stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{python} could not measure the bfloat16 peak: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(thread_counts: list[int], n: int = 2048, bf16_python: str | None = None) -> dict:
    from threadpoolctl import threadpool_info

    from dlbench.node import machine

    blas = [f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info() if i.get("user_api") == "blas"]
    out = {
        "gemm_n": n,
        "blas": blas,
        "gflops_by_threads": {str(t): round(gemm_gflops(n, t), 2) for t in sorted(set(thread_counts))},
        **{k: v for k, v in machine.host(gpu=False).items() if k.startswith("cpu") or k == "host"},
    }
    if bf16_python:
        out.update(bf16_in(bf16_python, thread_counts, n))
    return out


def write(out: str, thread_counts: list[int], n: int = 2048, bf16_python: str | None = None,
          lock: str | None = None, what: str | None = None) -> int:
    """Measure the peaks under the node's measurement lock (`lock`; None: none), alone on the node, and write them
    to `out`. what: said in one line if the wait for the lock begins (a command run by hand)."""
    with locks.measuring(lock, None, per_device=False, what=what) if lock else contextlib.nullcontext():
        result = measure(thread_counts, n, bf16_python)
    write_json(out, result)
    print(result["gflops_by_threads"], result.get("bf16_gflops_by_threads", ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dlbench peak",
                                     description="measure this machine's matrix-multiply peaks, the yardsticks for "
                                     "achieved GFLOP/s")
    from dlbench import arguments

    parser.add_argument("--threads", type=arguments.count(1, "a number of threads"), nargs="+", default=[1])
    parser.add_argument("--n", type=arguments.count(1, "a matrix size"), default=2048)
    parser.add_argument("--out", type=arguments.not_a_folder,  # said before the measurement, not after it
                        help="write peak.json here (float32, and bfloat16 with --bf16-python)")
    parser.add_argument("--bf16-python", help="the PyTorch environment's Python, to measure the bfloat16 peak")
    parser.add_argument("--bf16", action="store_true", help="print the bfloat16 peaks of this (PyTorch) interpreter")
    parser.add_argument("--lock", default=locks.node_lock() or "",
                        help="the node's measurement lock held while measuring (default %(default)s; '': none)")
    args = parser.parse_args(argv)
    if args.bf16:
        print(json.dumps(bf16_here(args.threads, args.n)))
        return 0
    if not args.out:
        parser.error("--out is required (or --bf16)")
    try:
        return write(args.out, args.threads, args.n, args.bf16_python, lock=args.lock or None, what="dlbench peak")
    except locks.LockTimeout as exc:
        print(f"dlbench peak: waited {locks.lock_timeout():g} s (measurement.lock_timeout_s) for the node's "
              f"measurement lock, and another measurement or heavy work held it the whole time ({exc})",
              file=sys.stderr)
        return 1
    except (locks.LockUnusable, RuntimeError) as exc:  # the node's lock unusable here, or the bf16 process
        print(f"dlbench peak: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
