"""CIFAR-10's two published archives, read into the same arrays.

The binary version: records of 1 label byte + 3072 pixel bytes (R, G, B planes). The python version (the one
most users have): pickled dicts under cifar-10-batches-py/, b"data" an N x 3072 uint8 array in the same channel-major
order and b"labels" a list. Its members are unpickled by an unpickler that builds nothing but numpy arrays, and
only from an archive whose sha256 was checked first (dlbench.datasets.prepare).
"""

from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np

RECORD = 1 + 3 * 32 * 32
TRAIN_BATCHES = [f"data_batch_{i}.bin" for i in range(1, 6)]
TEST_BATCH = "test_batch.bin"
PYTHON_FOLDER = "cifar-10-batches-py"
PYTHON_BATCHES = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]


class CifarError(ValueError):
    pass


def parse_batch(data: bytes, *, name: str = "CIFAR batch") -> tuple[np.ndarray, np.ndarray]:
    if len(data) == 0 or len(data) % RECORD:
        raise CifarError(f"{name}: {len(data)} bytes is not a whole number of {RECORD}-byte records")
    records = np.frombuffer(data, dtype=np.uint8).reshape(-1, RECORD)
    labels = records[:, 0].astype(np.int64)
    if labels.max() > 9:
        raise CifarError(f"{name}: label {labels.max()} outside 0..9")
    return records[:, 1:].reshape(-1, 3, 32, 32).copy(), labels


def safe_members(archive: tarfile.TarFile, dest: Path) -> list[tarfile.TarInfo]:
    """Regular files and folders that stay inside dest; anything else refuses the archive."""
    dest = dest.resolve()
    members = []
    for m in archive.getmembers():
        target = (dest / m.name).resolve()
        if not (m.isfile() or m.isdir()) or (target != dest and dest not in target.parents):
            raise CifarError(f"archive member {m.name!r} would leave {dest} or is not a plain file; refusing it")
        members.append(m)
    return members


def extract(archive_path: str | Path, dest: str | Path) -> Path:
    """Extract the archive safely; returns the folder holding the .bin batches."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive_path, "r:gz") as tar:
        tar.extractall(dest, members=safe_members(tar, dest), filter="data")
    found = list(dest.rglob(TEST_BATCH))
    if not found:
        raise CifarError(f"{archive_path}: no {TEST_BATCH} inside; is it cifar-10-binary.tar.gz?")
    return found[0].parent


def load_folder(folder: str | Path) -> dict[str, np.ndarray]:
    folder = Path(folder)
    parts = []
    for name in TRAIN_BATCHES:
        path = folder / name
        if not path.exists():
            raise CifarError(f"{path} is missing; the folder must hold {', '.join(TRAIN_BATCHES)} and {TEST_BATCH}")
        parts.append(parse_batch(path.read_bytes(), name=str(path)))
    test_x, test_y = parse_batch((folder / TEST_BATCH).read_bytes(), name=str(folder / TEST_BATCH))
    return {
        "train_x": np.concatenate([p[0] for p in parts]),
        "train_y": np.concatenate([p[1] for p in parts]),
        "test_x": test_x,
        "test_y": test_y,
    }


# The only globals a python batch needs (numpy arrays as numpy 1 and 2 pickle them); numpy 2 keeps numpy.core as
# a deprecated alias of numpy._core, so the published (numpy 1) names are looked up there.
_ARRAY_GLOBALS = {("numpy", "ndarray"), ("numpy", "dtype"), ("numpy._core.multiarray", "_reconstruct"),
                  ("numpy._core.numeric", "_frombuffer")}


class _BatchUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module.startswith("numpy.core.") and hasattr(np, "_core"):
            module = "numpy._core." + module.removeprefix("numpy.core.")
        if (module, name) not in _ARRAY_GLOBALS:
            raise CifarError(f"a CIFAR-10 python batch refers to {module}.{name}, which no real batch holds")
        return super().find_class(module, name)


def parse_python_batch(data: bytes, *, name: str = "CIFAR python batch") -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = _BatchUnpickler(io.BytesIO(data), encoding="bytes").load()
    except CifarError as exc:
        raise CifarError(f"{name}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a damaged pickle fails in many ways, all of them one answer
        raise CifarError(f"{name}: not a readable pickled batch ({type(exc).__name__}: {exc})") from None
    if not isinstance(batch, dict) or b"data" not in batch or b"labels" not in batch:
        raise CifarError(f"{name}: not a dict with b'data' and b'labels'")
    pixels, labels = batch[b"data"], np.asarray(batch[b"labels"])
    if not isinstance(pixels, np.ndarray) or pixels.dtype != np.uint8 or pixels.ndim != 2 or pixels.shape[1] != 3072:
        raise CifarError(f"{name}: b'data' is not an N x 3072 uint8 array")
    if labels.shape != (len(pixels),) or labels.dtype.kind not in "iu" or labels.min() < 0 or labels.max() > 9:
        raise CifarError(f"{name}: b'labels' is not {len(pixels)} labels in 0..9")
    return pixels.reshape(-1, 3, 32, 32).copy(), labels.astype(np.int64)


def load_python_archive(archive_path: str | Path) -> dict[str, np.ndarray]:
    """The arrays of cifar-10-python.tar.gz, its members read in one pass and never written to disk."""
    wanted = {f"{PYTHON_FOLDER}/{b}": b for b in PYTHON_BATCHES}
    parts = {}
    with tarfile.open(archive_path, "r:gz") as tar:
        for member in tar:
            if member.name in wanted and member.isfile():
                parts[wanted[member.name]] = parse_python_batch(tar.extractfile(member).read(),
                                                                name=f"{archive_path}:{member.name}")
    missing = [b for b in PYTHON_BATCHES if b not in parts]
    if missing:
        raise CifarError(f"{archive_path}: no {PYTHON_FOLDER}/{missing[0]} inside; is it cifar-10-python.tar.gz?")
    train = [parts[b] for b in PYTHON_BATCHES[:-1]]
    return {
        "train_x": np.concatenate([p[0] for p in train]),
        "train_y": np.concatenate([p[1] for p in train]),
        "test_x": parts["test_batch"][0],
        "test_y": parts["test_batch"][1],
    }
