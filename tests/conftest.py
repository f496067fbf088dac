"""Shared fixtures: the prepared digits, the framework environments, one-point training; and the tiers' rules.

Two tiers: the CI tier (every test not marked `long`: `bash scripts/test.sh`) and the long tier
(`bash scripts/test.sh --long`). Under CI (CI=true) a test that would skip because something the tier needs is
missing (SLURM, Chromium, root, a framework environment, a dataset) fails instead: a green CI then means every test
ran. Only a test marked `gpu` still skips there, with its reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dlbench import envs, runner
from dlbench.datasets import prepare
from dlbench.sweep import one_point, point_id
from dlbench.testing.sandbox import copy_run, copy_workflow, snakemake, tiny_study

IN_CI = os.environ.get("CI") == "true"


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: trains real models or runs the whole workflow (minutes)")
    config.addinivalue_line("markers", "long: the long tier (scripts/test.sh --long), not run by CI")
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (the one kind of test that may skip in CI)")
    config.addinivalue_line("markers", "slurm: needs the test SLURM cluster (cluster/slurm-up.sh)")


# Time limits beyond pyproject.toml's 600 s (pytest-timeout, setup and call together): the first test to ask for
# the session's tiny study trains it; a long test may run a whole fault scenario or study.
TINY_RUN_TIMEOUT_S = 1200
LONG_TIMEOUT_S = 1800


def pytest_collection_modifyitems(config, items):
    """A long test is also slow (`-m "not slow"` keeps the quick tests of either tier); time limits by what a test
    sets up, unless it names its own."""
    for item in items:
        long = item.get_closest_marker("long") is not None
        if long and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("timeout") is None:
            if long:
                item.add_marker(pytest.mark.timeout(LONG_TIMEOUT_S))
            elif "tiny_run" in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.timeout(TINY_RUN_TIMEOUT_S))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a skip is a failure unless the test needs a GPU: what the tier needs must be there."""
    report = yield
    if IN_CI and report.skipped and not hasattr(report, "wasxfail") and item.get_closest_marker("gpu") is None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} would skip in CI ({reason}); CI must provide what it needs "
                           "(scripts/setup.sh --tests, cluster/slurm-up.sh, root)")
    return report


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


# What the tiny study's run asks for: every rule's output, the findings among them.
TINY_TARGETS = ("all", "results/findings.md")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The tiny study (.test/config/config.yaml, as tiny.yaml) trained once per test session through the whole
    workflow (points, aggregation, findings, charts, runs table) with its Snakemake report (report.html), in a copy
    of the workflow. Read-only: a test that changes code, config or results works on `tiny_run_copy`."""
    root = copy_workflow(tmp_path_factory.mktemp("tiny-run"), tiny_study(), "tiny.yaml")
    snakemake(root, *TINY_TARGETS, "--configfile", "tiny.yaml")
    snakemake(root, *TINY_TARGETS, "--configfile", "tiny.yaml", "--report", "report.html")
    return root


@pytest.fixture(scope="module")
def tiny_run_copy(tiny_run, tmp_path_factory) -> Path:
    """A copy of the tiny study's finished run for one test module to change (Snakemake sees it up to date)."""
    return copy_run(tiny_run, tmp_path_factory.mktemp("tiny-copy") / "wf")
