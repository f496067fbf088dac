"""The thread variables a trainer starts with: the point's threads, set before its framework is imported."""

from __future__ import annotations


def thread_env(threads: int, interop_threads: int | None = None) -> dict[str, str]:
    """The variables every threaded library reads.

    interop_threads: TensorFlow's inter-op pool where the point sets it, else 1.
    """
    n = str(threads)
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n, "OPENBLAS_NUM_THREADS": n,
            "TF_NUM_INTRAOP_THREADS": n, "TF_NUM_INTEROP_THREADS": str(interop_threads or 1)}
