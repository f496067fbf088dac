"""Shared fixtures: the prepared datasets, the framework environments, one-point training."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dlbench import config, envs, runner, sweep  # noqa: E402
from dlbench.datasets import prepare  # noqa: E402

FASHION_DIR = Path("/usr/share/datasets/fashion-mnist")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: trains real models or runs the whole workflow (minutes)")
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU")
    config.addinivalue_line("markers", "slurm: needs the test SLURM cluster (cluster/slurm-up.sh)")


@pytest.fixture(scope="session")
def datasets_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("datasets")


@pytest.fixture(scope="session")
def digits_dir(datasets_root) -> Path:
    out = datasets_root / "digits"
    prepare.prepare("digits", out)
    return out


@pytest.fixture(scope="session")
def env_python():
    """The Python of a framework's environment (built on first use, cached outside the clone)."""
    found = {}

    def get(framework: str) -> str:
        if framework not in found:
            found[framework] = str(envs.build(framework) / "bin" / "python")
        return found[framework]

    return get


def make_point(framework: str, preset: str = "caffe", dataset: str = "digits", **sweep_values) -> dict:
    sweep_cfg = {k: [v] for k, v in sweep_values.items()}
    cfg = config.validate({"datasets": [dataset], "frameworks": [framework], "preset": [preset], "sweep": sweep_cfg})
    (point,) = sweep.expand(cfg)
    return point


@pytest.fixture
def train(env_python, digits_dir, tmp_path):
    """Train one point for real and return its record."""

    def run(framework: str, preset: str = "caffe", *, dataset_dir: Path | None = None, runner_kw=None, **sweep_values):
        point = make_point(framework, preset, **sweep_values)
        out = tmp_path / framework / point["id"]
        record = runner.run_point(point, dataset_dir or digits_dir, out, python=env_python(framework),
                                  **(runner_kw or {}))
        record["_out"] = out
        return record

    return run


def have_fashion() -> bool:
    return (FASHION_DIR / "train-images-idx3-ubyte.gz").exists()


os.environ.setdefault("DLBENCH_TESTING", "1")
