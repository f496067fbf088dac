"""Write files so that a reader sees either the old file or the whole new one, never half.

Durable too: the data is fsynced before the rename and the folder after it, so that after a power
loss the new name points at the whole file (a rename alone may reach the disk before the data).
"""

from __future__ import annotations

import contextlib
import json
import math
import numbers
import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ""):
    """Yields a temporary path beside `path`; renamed onto it only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=f".tmp{suffix}", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; results are for everyone who may read the folder
    try:
        yield Path(tmp)
        fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def fsync_file(path: str | os.PathLike) -> None:
    with open(path, "rb+") as fh:
        os.fsync(fh.fileno())


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a folder's entries (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | os.PathLike, obj) -> None:
    """JSON that every parser reads: a value that is not finite is written null (finite)."""
    write_text(path, dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def dumps(obj, **kw) -> str:
    """json.dumps, strict: NaN and Infinity (which Python writes and other parsers refuse) become null."""
    return json.dumps(finite(obj), allow_nan=False, **kw)


def finite(obj):
    """obj with every float that is not finite (NaN, +-Infinity; numpy's too) as None."""
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if isinstance(obj, numbers.Real) and not isinstance(obj, numbers.Integral):
        value = float(obj)
        return value if math.isfinite(value) else None
    return obj


def not_finite(fields: dict) -> dict[str, str]:
    """The fields that are numbers and not finite, by name, as text: {"loss": "inf"} (float() reads it back)."""
    return {k: str(float(v)) for k, v in fields.items()
            if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral) and not math.isfinite(float(v))}
