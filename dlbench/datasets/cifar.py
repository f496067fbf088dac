"""CIFAR-10's binary version: records of 1 label byte + 3072 pixel bytes (R, G, B planes)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np

RECORD = 1 + 3 * 32 * 32
TRAIN_BATCHES = [f"data_batch_{i}.bin" for i in range(1, 6)]
TEST_BATCH = "test_batch.bin"


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
