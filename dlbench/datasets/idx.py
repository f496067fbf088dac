"""The IDX format of MNIST and Fashion-MNIST (gzip-compressed or raw)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


class IdxError(ValueError):
    pass


def read_bytes(path: str | Path) -> bytes:
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        return fh.read()


def parse(data: bytes, *, name: str = "IDX data") -> np.ndarray:
    """An IDX buffer as an array of its declared type and shape."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise IdxError(f"{name}: not an IDX file (bad magic number)")
    dtype = _DTYPES.get(data[2])
    if dtype is None:
        raise IdxError(f"{name}: unknown IDX element type 0x{data[2]:02x}")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise IdxError(f"{name}: truncated header")
    dims = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    expected = int(np.prod(dims, dtype=np.int64)) * np.dtype(dtype).itemsize
    if len(data) - header != expected:
        raise IdxError(f"{name}: {len(data) - header} data bytes, the header promises {expected} for shape {dims}")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)


def load(path: str | Path) -> np.ndarray:
    return parse(read_bytes(path), name=str(path))


def write(path: str | Path, array: np.ndarray, *, compress: bool = False) -> None:
    """Write an uint8 array as IDX (used by tests to make files in the real format)."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    payload = bytes([0, 0, 0x08, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    payload += array.tobytes()
    opener = gzip.open if compress else open
    with opener(path, "wb") as fh:
        fh.write(payload)
