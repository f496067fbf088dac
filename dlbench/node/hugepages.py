"""numpy's huge-page advice to the kernel, turned off where it costs more than it gives.

Runs inside a framework's environment (the data load): numpy and the standard library only.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def no_hugepage_advice():
    """numpy's arrays made inside the block are not advised to the kernel as huge-page memory.

    numpy advises every large array so (MADV_HUGEPAGE). With transparent huge pages set to
    `madvise`, the first touch of Fashion-MNIST's 220 MB float copy took 0.8-1.1 s with the
    advice and 0.3 s without it (fresh PyTorch processes on a 2-core KVM guest), the kernel
    finding huge pages for it. Only the data load is affected; the framework's own arrays keep
    numpy's default.
    """
    try:
        from numpy._core import multiarray  # numpy 2
    except ImportError:
        from numpy.core import multiarray  # numpy 1 (Theano's environment)
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)
