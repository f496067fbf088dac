"""The GPU paths of PyTorch and TensorFlow, once, on a machine with an NVIDIA GPU.

    .venv/bin/python bench/gpu_check.py [--iterations 2000] [--python-pytorch PY] [--python-tensorflow PY]

Trains LeNet (Caffe's preset) on the digits on `device: gpu` through the runner, so
the device is pinned, clocks are read after synchronising, and the monitor samples
the GPU through NVML. Prints per framework: status, training and test time,
throughput, accuracy, GPU utilisation, peak GPU memory, mean power and energy.
The framework environments must have CUDA builds (envs/*.yaml name them for
clusters; the pip pins in envs/*.txt are CPU builds); pass their Python with
--python-<framework>. Exits 2 when the machine shows no GPU.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from dlbench import envs, machine, runner, sweep
from dlbench.datasets import prepare

FIELDS = ("status", "train_time_s", "test_time_s", "throughput_img_s", "accuracy", "gpu_util_mean_pct",
          "gpu_mem_peak_mb", "gpu_power_mean_w", "gpu_energy_j", "device_name")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=64)
    for fw in ("pytorch", "tensorflow"):
        parser.add_argument(f"--python-{fw}", default=None)
    args = parser.parse_args()
    if not runner.gpu_visible():
        print("gpu_check: no NVIDIA GPU is visible on this machine; nothing to check", file=sys.stderr)
        return 2
    print(f"host: {machine.host()}")
    root = Path(tempfile.mkdtemp(prefix="dlbench-gpu-"))
    digits = root / "digits"
    prepare.prepare("digits", digits)
    for fw in ("pytorch", "tensorflow"):
        python = getattr(args, f"python_{fw}") or str(envs.build(fw) / "bin" / "python")
        point = sweep.one_point(fw, device="gpu", iterations=args.iterations, batch_size=args.batch_size)
        record = runner.run_point(point, digits, root / fw, python=python, interval_s=0.1)
        print(fw + ": " + ", ".join(f"{k}={record.get(k)}" for k in FIELDS))
        if record["status"] != "ok":
            print(f"  reason: {record.get('reason')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
