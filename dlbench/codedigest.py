"""Digests of the code a result depends on, so that Snakemake reruns exactly what a change invalidates."""

from __future__ import annotations

import functools
import hashlib

from dlbench.paths import PACKAGE

# Code every trainer runs, whatever its framework.
SHARED = ("trainer.py", "runner.py", "monitor.py", "procs.py", "lr.py", "models.py", "inputs.py",
          "frameworks/base.py", "frameworks/registry.py", "frameworks/__init__.py", "datasets/store.py")
# Code that writes Caffe's HDF5 input (rules/data.smk, caffe_data).
CAFFE_DATA = ("frameworks/caffe_data.py", "frameworks/base.py", "inputs.py", "datasets/store.py")


def files_digest(relative_paths) -> str:
    """A digest of the package files named (relative to dlbench/), names and contents."""
    h = hashlib.sha256()
    for rel in relative_paths:
        path = PACKAGE / rel
        h.update(rel.encode())
        h.update(path.read_bytes() if path.exists() else b"")
    return h.hexdigest()[:16]


@functools.cache
def adapter_digest(framework: str) -> str:
    """The shared trainer code, the framework's adapter and its helpers (caffe_log.py, caffe_data.py, ...)."""
    own = sorted(p.relative_to(PACKAGE).as_posix() for p in (PACKAGE / "frameworks").glob(f"{framework}*.py"))
    return files_digest((*SHARED, *own))


@functools.cache
def caffe_data_digest() -> str:
    return files_digest(CAFFE_DATA)
