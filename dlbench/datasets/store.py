"""The prepared form every framework reads: uint8 images NCHW, int64 labels, metadata with a digest.

Imported by the trainer inside framework environments: numpy only.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
import zlib
from pathlib import Path

import numpy as np

ARRAYS = ("train_x", "train_y", "test_x", "test_y")


def content_digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for key in ARRAYS:
        a = np.ascontiguousarray(arrays[key])
        h.update(f"{key}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save(folder: str | Path, arrays: dict[str, np.ndarray], meta: dict) -> dict:
    """Write data.npz and meta.json atomically; returns the metadata written."""
    from dlbench.atomic import atomic_path, write_json

    folder = Path(folder)
    arrays = {
        "train_x": np.ascontiguousarray(arrays["train_x"], dtype=np.uint8),
        "train_y": np.ascontiguousarray(arrays["train_y"], dtype=np.int64),
        "test_x": np.ascontiguousarray(arrays["test_x"], dtype=np.uint8),
        "test_y": np.ascontiguousarray(arrays["test_y"], dtype=np.int64),
    }
    meta = dict(meta)
    meta.update(
        shape=list(arrays["train_x"].shape[1:]),
        classes=int(max(arrays["train_y"].max(), arrays["test_y"].max()) + 1),
        train_count=len(arrays["train_y"]),
        test_count=len(arrays["test_y"]),
        digest=content_digest(arrays),
    )
    with atomic_path(folder / "data.npz", suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    write_json(folder / "meta.json", meta)
    return meta


class ChangedSincePrepared(ValueError):
    """data.npz no longer holds what meta.json's digest says was prepared."""


def load(folder: str | Path) -> tuple[dict[str, np.ndarray], dict]:
    """The arrays and the metadata, the arrays checked against the digest taken when they were prepared: the
    record's digest is that of what the trainer read (a copy changed or damaged since is refused)."""
    folder = Path(folder)
    meta = json.loads((folder / "meta.json").read_text())
    try:
        with np.load(folder / "data.npz") as npz:
            arrays = {k: npz[k] for k in ARRAYS}
    except FileNotFoundError:
        raise
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        # damaged in place (a flipped bit fails the archive's CRC, a truncation its directory): the same case as a
        # digest that differs, so that the point's retry prepares it again rather than failing for good
        raise ChangedSincePrepared(f"{folder / 'data.npz'} can no longer be read ({type(exc).__name__}: {exc}), "
                                   f"though meta.json says it was prepared: it changed since; delete {folder} "
                                   "and run again") from exc
    read = content_digest(arrays)
    if read != meta.get("digest"):
        claimed = str(meta.get("digest"))[:16]
        raise ChangedSincePrepared(f"{folder / 'data.npz'} holds data of digest {read[:16]}, not the {claimed} "
                                   f"prepared (meta.json): it changed since; delete {folder} and run again")
    meta["digest"] = read
    return arrays, meta
