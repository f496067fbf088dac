"""Shared fixtures: the prepared digits, the framework environments, one-point training."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlbench import envs, runner
from dlbench.datasets import prepare
from dlbench.sweep import one_point, point_id


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


@pytest.fixture
def train(env_python, digits_dir, tmp_path):
    """Train one point for real and return its record; `update` changes the point's settings before it runs."""

    def run(framework: str, preset: str = "caffe", *, dataset_dir: Path | None = None, runner_kw=None,
            update: dict | None = None, **sweep_values):
        point = one_point(framework, preset, **sweep_values)
        if update:
            point.update(update)
            point["id"] = point_id({k: v for k, v in point.items() if k != "id"})
        out = tmp_path / framework / point["id"]
        record = runner.run_point(point, dataset_dir or digits_dir, out, python=env_python(framework),
                                  **(runner_kw or {}))
        record["_out"] = out
        return record

    return run
