"""Rule caffe_data: Caffe's HDF5 input for one (dataset, input handling) (dlbench.frameworks.caffe_data)."""

from pathlib import Path

from dlbench.frameworks import caffe_data
from dlbench.rules import joblog

sm = snakemake  # noqa: F821 - the object Snakemake gives a script


def main() -> int:
    meta = caffe_data.prepare(Path(sm.input.meta).parent, sm.params.input, Path(sm.output.meta).parent)
    print(f"caffe data: {meta['train_samples']} train / {meta['test_samples']} test images {meta['input_shape']}"
          + (" (one augmented view)" if meta["augmented"] else ""))
    return 0


joblog.run(sm.log[0], main)
