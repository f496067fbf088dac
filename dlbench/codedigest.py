"""Digests of the code a point's result depends on, so that Snakemake reruns exactly those points."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PKG = Path(__file__).resolve().parent
# Code every trainer runs, whatever its framework.
SHARED = ("trainer.py", "runner.py", "monitor.py", "lr.py", "models.py", "inputs.py", "frameworks/base.py",
          "frameworks/__init__.py", "datasets/store.py")


@functools.cache
def adapter_digest(framework: str) -> str:
    h = hashlib.sha256()
    own = sorted(p.relative_to(PKG).as_posix() for p in (PKG / "frameworks").glob(f"{framework}*.py"))
    for rel in (*SHARED, *own):  # the adapter and its helpers (caffe_log.py, caffe_data.py, ...)
        path = PKG / rel
        h.update(rel.encode())
        h.update(path.read_bytes() if path.exists() else b"")
    return h.hexdigest()[:16]
