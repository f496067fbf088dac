"""Caffe's own layers on one small batch, for the checks that every framework builds the same network: the logits
of a forward pass (`caffe test`), a training-mode pass and what it leaves (one `caffe train` step at rate 0), and the
trainable parameters of the net Caffe builds (a snapshot's blobs counted)."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from dlbench.frameworks import caffe_log
from dlbench.frameworks.caffe_binary import caffe_env, find_binary
from dlbench.frameworks.caffe_prototxt import LOGITS_BLOB, names, net_prototxt, net_with_logits
from dlbench.frameworks.caffe_weights import caffe_blobs, canonical_from_blobs, initial_state, weights_file


def forward(layers, weights, x, y, train=False):
    """(`train`: batch normalisation by the batch's statistics, use_global_stats false; dropout stays off.)"""
    with tempfile.TemporaryDirectory(prefix="dlbench-forward-") as tmp:
        work = Path(tmp)
        shape = write_batch(work, x, y)
        weights_file(work / "weights.caffemodel.h5", caffe_blobs(layers, weights, shape))
        return caffe_test(work, layers, work / "weights.caffemodel.h5", shape, len(y), train)


def train_then_infer(layers, weights, x, y):
    """A training-mode pass in Caffe's own layers, then an inference-mode pass with the running statistics it
    left: (train logits, inference logits, the canonical arrays after them). The training-mode pass is one
    iteration of `caffe train` on the batch at base_lr 0 (its BatchNorm layers update their statistics, no
    weight moves), its snapshot read back; its logits are `caffe test`'s with use_global_stats false."""
    import h5py

    binary = str(find_binary())
    with tempfile.TemporaryDirectory(prefix="dlbench-forward-") as tmp:
        work = Path(tmp)
        shape = write_batch(work, x, y)
        blobs = caffe_blobs(layers, weights, shape)
        weights_file(work / "init.caffemodel.h5", blobs)
        trained, _ = caffe_test(work, layers, work / "init.caffemodel.h5", shape, len(y), True)
        initial_state(work / "init.solverstate.h5", work / "init.caffemodel.h5", blobs, "sgd")
        (work / "pass.prototxt").write_text(net_prototxt(layers, str(work / "data.txt"), None, len(y), len(y),
                                                         shuffle=False, input_shape=shape))
        (work / "solver.prototxt").write_text("\n".join([
            f'net: "{work / "pass.prototxt"}"', "base_lr: 0", 'lr_policy: "fixed"', 'type: "SGD"', "momentum: 0",
            "weight_decay: 0", "max_iter: 1", "display: 1", "snapshot_after_train: true",
            f'snapshot_prefix: "{work / "pass"}"', "snapshot_format: HDF5", "solver_mode: CPU",
            "random_seed: 1"]) + "\n")
        proc = subprocess.run([binary, "train", f"--solver={work / 'solver.prototxt'}",
                               f"--snapshot={work / 'init.solverstate.h5'}"], cwd=work, capture_output=True,
                              text=True, env=caffe_env(1), timeout=600)
        snapshot = work / "pass_iter_1.caffemodel.h5"
        if proc.returncode != 0 or not snapshot.exists():
            lines = caffe_log.parse((proc.stdout + proc.stderr).splitlines())
            raise RuntimeError(f"caffe train (one pass) failed: {caffe_log.fatal_message(lines)}")
        inferred, _ = caffe_test(work, layers, snapshot, shape, len(y), False)
        with h5py.File(snapshot, "r") as f:
            after = canonical_from_blobs(layers, f["data"], shape)
    return trained, inferred, after


def write_batch(work: Path, x, y) -> tuple[int, int, int]:
    """The batch as an HDF5 file and its list (data.h5, data.txt); its input shape."""
    import h5py
    import numpy as np

    with h5py.File(work / "data.h5", "w") as f:
        f.create_dataset("data", data=np.ascontiguousarray(x, np.float32))
        f.create_dataset("label", data=np.asarray(y).astype(np.float32))
    (work / "data.txt").write_text(f"{work / 'data.h5'}\n")
    return tuple(int(v) for v in x.shape[1:])


def caffe_test(work: Path, layers: list[dict], weights: Path, shape: tuple[int, int, int], n: int,
               batch_statistics: bool) -> tuple:
    """`caffe test` of one batch (data.txt in `work`) with the given weights: (logits (n, classes), loss), read from
    its log; batch normalisation by the batch's statistics where `batch_statistics`."""
    import numpy as np

    binary = str(find_binary())
    model = work / ("net_train_mode.prototxt" if batch_statistics else "net.prototxt")
    model.write_text(net_with_logits(layers, str(work / "data.txt"), n, shape,
                                     batch_statistics=True if batch_statistics else None))
    proc = subprocess.run([binary, "test", f"--model={model}", f"--weights={weights}", "--iterations=1"],
                          cwd=work, capture_output=True, text=True, env=caffe_env(1), timeout=600)
    lines = caffe_log.parse((proc.stdout + proc.stderr).splitlines())
    batch = [ln.fields for ln in lines if ln.kind == "test_batch" and ln.fields["batch"] == 0]
    logits = [f["value"] for f in batch if f["name"] == LOGITS_BLOB]
    loss = [f["value"] for f in batch if f["name"] == "loss"]
    classes = layers[-1]["units"]
    if proc.returncode != 0 or len(loss) != 1 or len(logits) != n * classes:
        fatal = caffe_log.fatal_message(lines) or (proc.stdout + proc.stderr)[-1500:]
        raise RuntimeError(f"caffe test failed (exit {proc.returncode}, {len(logits)} logits, {len(loss)} "
                           f"losses): {fatal}")
    return np.asarray(logits).reshape(n, classes), loss[0]


def trainable_params(layers: list[dict], input_shape: tuple[int, int, int], binary: str | None = None) -> int:
    """Trainable parameters of the net Caffe builds for a spec: the elements of a snapshot of its weights, but for
    its BatchNorm layers' statistics (never trained).

    Two zero images of the input shape in an HDF5 file, `caffe train` with max_iter 0 and an
    HDF5 snapshot after training, and the weights counted with h5py (the .caffemodel.h5 holds
    data/<layer>/<i> for every learnable blob).
    """
    import h5py
    import numpy as np

    binary = binary or str(find_binary())
    with tempfile.TemporaryDirectory(prefix="dlbench-caffe-params-") as tmp:
        work = Path(tmp)
        with h5py.File(work / "x.h5", "w") as f:
            f.create_dataset("data", data=np.zeros((2, *input_shape), np.float32))
            f.create_dataset("label", data=np.zeros(2, np.float32))
        (work / "x.txt").write_text(f"{work / 'x.h5'}\n")
        (work / "net.prototxt").write_text(net_prototxt(layers, str(work / "x.txt"), None, 2, 2,
                                                        input_shape=tuple(input_shape)))
        (work / "solver.prototxt").write_text("\n".join([
            f'net: "{work / "net.prototxt"}"', "base_lr: 0.01", 'lr_policy: "fixed"', "max_iter: 0",
            "snapshot_after_train: true", f'snapshot_prefix: "{work / "w"}"', "snapshot_format: HDF5",
            "solver_mode: CPU", "random_seed: 1"]) + "\n")
        proc = subprocess.run([binary, "train", f"--solver={work / 'solver.prototxt'}"], cwd=work,
                              capture_output=True, text=True, env=caffe_env(1), timeout=600)
        snapshot = work / "w_iter_0.caffemodel.h5"
        if proc.returncode != 0 or not snapshot.exists():
            lines = caffe_log.parse(proc.stdout.splitlines() + proc.stderr.splitlines())
            raise RuntimeError(f"caffe could not build the net: {caffe_log.fatal_message(lines) or proc.stderr[-500:]}")
        statistics = {name for layer, name in names(layers) if layer["type"] == "batchnorm"}  # BatchNorm's blobs
        with h5py.File(snapshot, "r") as f:
            return sum(_count(group) for name, group in f["data"].items() if name not in statistics)


def _count(group) -> int:
    import h5py

    n = 0
    for item in group.values():
        n += item.size if isinstance(item, h5py.Dataset) else _count(item)
    return n
