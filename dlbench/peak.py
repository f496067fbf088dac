"""This machine's float32 matrix-multiply peak, the yardstick for the adapters' achieved GFLOP/s.

    python -m dlbench.peak --threads 1 2 --out results/machine/peak.json
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from dlbench import machine
from dlbench.atomic import write_json


def gemm_gflops(n: int = 2048, threads: int = 1, repeats: int = 5) -> float:
    """Best of `repeats` float32 n x n x n products with the BLAS limited to `threads`."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    best = float("inf")
    with threadpool_limits(limits=threads, user_api="blas"):
        a @ b  # warm-up: page in, spin up the threads
        for _ in range(repeats):
            t0 = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best / 1e9


def measure(thread_counts: list[int], n: int = 2048) -> dict:
    blas = [f"{i.get('internal_api')} {i.get('version')}" for i in threadpool_info() if i.get("user_api") == "blas"]
    return {
        "gemm_n": n,
        "blas": blas,
        "gflops_by_threads": {str(t): round(gemm_gflops(n, t), 2) for t in sorted(set(thread_counts))},
        **{k: v for k, v in machine.host().items() if k.startswith("cpu") or k == "host"},
    }


def write(out: str, thread_counts: list[int], n: int = 2048) -> int:
    result = measure(thread_counts, n)
    write_json(out, result)
    print(result["gflops_by_threads"])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbench.peak")
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    return write(args.out, args.threads, args.n)


if __name__ == "__main__":
    sys.exit(main())
