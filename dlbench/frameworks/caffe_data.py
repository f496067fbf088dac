"""Caffe's input: the prepared dataset after the point's input handling, as HDF5 files Caffe's HDF5Data layer reads.

    python -m dlbench.frameworks.caffe_data --dataset-dir resources/datasets/digits \\
        --input '{"scale": 0.00390625}' --out resources/caffe/digits/<key>

writes into --out: train.h5 and test.h5 (datasets `data`, float32 NCHW, and `label`, float32),
train.txt and test.txt (the list files the HDF5Data layers read: one absolute path each) and
meta.json (what was written, from what). The arrays are exactly what the other frameworks
train on (dlbench.datasets.loading.load_inputs, hence dlbench.spec.inputs.static): Caffe's HDF5Data
layer takes no transform_param, so the data are written already transformed.

HDF5Data cannot augment. Where a preset augments (random crops, flips, brightness...), the
training file holds ONE augmented view, drawn once with seed AUGMENT_SEED (the view the other
frameworks draw for their first epoch with the default seed 1), and meta.json says so; the
adapter copies that into the record (build_json: input_augmentation).

The files depend on the dataset and the point's `input` settings only, not on its seed:
`input_key` digests those settings, so all Caffe points with the same input handling share
one folder, resources/caffe/<dataset>/<input_key>/ (workflow/rules/data.smk). `data_dir` derives
that folder from the dataset's folder (resources/datasets/<name>), which is how the adapter
finds it without being told.

Runs in the base environment (numpy and h5py; the workflow's caffe_data rule) and in Caffe's (the
adapter prepares the folder itself when it is missing). The module's top imports little: the
Snakefile imports it for input_key.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

from dlbench.node.locks import flocked, heavy_work, lock_timeout, node_lock

FORMAT = 2  # bump when the files change meaning: every input key changes with it
AUGMENT_SEED = 1
FILES = ("train.h5", "test.h5", "train.txt", "test.txt", "meta.json")


def input_key(input_cfg: dict | None) -> str:
    """A short digest of a point's `input` settings (and of the file format): the data folder's name."""
    body = json.dumps({"format": FORMAT, "input": input_cfg or {}}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode()).hexdigest()[:12]


def data_dir(dataset_dir: str | os.PathLike, input_cfg: dict | None) -> Path:
    """resources/datasets/<name> -> resources/caffe/<name>/<input_key>."""
    dataset_dir = Path(dataset_dir)
    return dataset_dir.parent.parent / "caffe" / dataset_dir.name / input_key(input_cfg)


def _dataset_digest(dataset_dir: Path) -> str | None:
    try:
        return json.loads((dataset_dir / "meta.json").read_text())["digest"]
    except (OSError, ValueError, KeyError):
        return None


def is_current(out: str | os.PathLike, dataset_dir: str | os.PathLike, input_cfg: dict | None) -> bool:
    """The folder holds every file, written from this dataset (same digest) with these settings."""
    out = Path(out)
    if not all((out / name).exists() for name in FILES):
        return False
    try:
        meta = json.loads((out / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return meta.get("input_key") == input_key(input_cfg) and meta.get("dataset_digest") == _dataset_digest(
        Path(dataset_dir))


def _write_h5(path: Path, x, y) -> None:
    import h5py
    import numpy as np

    from dlbench.atomic import atomic_path

    with atomic_path(path, suffix=".h5") as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("data", data=np.ascontiguousarray(x, dtype=np.float32))
            f.create_dataset("label", data=np.asarray(y, dtype=np.float32))


def prepare(dataset_dir: str | os.PathLike, input_cfg: dict | None, out: str | os.PathLike) -> dict:
    """Write the HDF5 files, their list files and meta.json into `out` (each file atomically); returns the meta."""
    from dlbench.atomic import write_json, write_text
    from dlbench.datasets.loading import load_inputs

    dataset_dir, out = Path(dataset_dir), Path(out)
    cfg = dict(input_cfg or {})
    # Heavy work, never beside a measurement (a point's trainer preparing its own input is part of that point);
    # the heavy side first, then the folder's lock (dlbench/node/locks.py: the order that cannot deadlock).
    # The folder's lock bounded as every wait of a job (measurement.lock_timeout_s): inside a point's measurement
    # a writer that hangs would hold the node's lock with it.
    with heavy_work(node_lock(), "preparing Caffe's input"), flocked(out.parent / f".{out.name}.lock",
                                                                     timeout_s=lock_timeout()):
        if is_current(out, dataset_dir, cfg):
            return json.loads((out / "meta.json").read_text())
        inputs = load_inputs(dataset_dir, {"input": cfg, "seed": AUGMENT_SEED})
        out.mkdir(parents=True, exist_ok=True)
        _write_h5(out / "train.h5", inputs.train_x, inputs.train_y)
        _write_h5(out / "test.h5", inputs.test_x, inputs.test_y)
        augmented = inputs.augmenter is not None
        meta = {
            "format": FORMAT,
            "input": cfg,
            "input_key": input_key(cfg),
            "dataset_digest": inputs.digest,
            "train_samples": int(len(inputs.train_y)),
            "test_samples": int(len(inputs.test_y)),
            "input_shape": [int(v) for v in inputs.shape],
            "test_input_shape": [int(v) for v in inputs.test_x.shape[1:]],
            "classes": inputs.classes,
            "dtype": "float32",
            "augmented": augmented,
            "augmentation": (f"one augmented view of the training images, drawn once (seed {AUGMENT_SEED}) when "
                             "the HDF5 file was written: Caffe's HDF5Data layer cannot augment, so every epoch "
                             "sees that view") if augmented else None,
        }
        # The lists last: Caffe reads the paths they hold, so they appear only once the files are whole.
        write_text(out / "train.txt", f"{(out / 'train.h5').resolve()}\n")
        write_text(out / "test.txt", f"{(out / 'test.h5').resolve()}\n")
        write_json(out / "meta.json", meta)
        return meta


def list_points_at(list_file: Path, h5: Path) -> bool:
    """The list file names exactly this HDF5 file (a moved folder leaves lists naming the old place)."""
    try:
        lines = [ln.strip() for ln in list_file.read_text().splitlines() if ln.strip()]
    except OSError:
        return False
    return len(lines) == 1 and os.path.exists(lines[0]) and os.path.samefile(lines[0], h5)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m dlbench.frameworks.caffe_data")
    parser.add_argument("--dataset-dir", required=True, help="the prepared dataset (resources/datasets/<name>)")
    parser.add_argument("--input", default="{}", help="the points' `input` settings, as JSON")
    parser.add_argument("--out", required=True, help="the folder to write (resources/caffe/<name>/<input_key>)")
    args = parser.parse_args(argv)
    cfg = json.loads(args.input)
    if Path(args.out).name != input_key(cfg):
        print(f"dlbench: caffe data: --out {args.out} does not end in the input key {input_key(cfg)} "
              f"of --input {args.input}", file=sys.stderr)
        return 2
    meta = prepare(args.dataset_dir, cfg, args.out)
    print(f"caffe data: {meta['train_samples']} train / {meta['test_samples']} test images "
          f"{meta['input_shape']} -> {args.out}" + (" (one augmented view)" if meta["augmented"] else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
