"""Shared fixtures: the prepared digits, the framework environments, one-point training, the session's tiny study.
The tiers' rules (markers, time limits, no skip in CI) are the plugin dlbench.testing.tiers."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlbench.datasets import prepare
from dlbench.environments import build
from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study.sweep import one_point, point_id
from dlbench.testing.sandbox import copy_run, copy_workflow, snakemake, tiny_study

pytest_plugins = ["dlbench.testing.tiers"]


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
            found[framework] = str(build.build(framework) / "bin" / "python")
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
        record = runner.run_point(point, dataset_dir or digits_dir, out,
                                  RunOptions(python=env_python(framework), **(runner_kw or {})))
        record["_out"] = out
        return record

    return run


# What the tiny study's run asks for: every rule's output, the findings among them.
TINY_TARGETS = ("all", "results/findings.md")


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    """The tiny study (.test/config/config.yaml, as tiny.yaml) trained once per test session through the whole
    workflow (points, aggregation, findings, charts, the results page) with its Snakemake report (report.html), in a
    copy of the workflow; run.out holds what the run printed. Read-only: a test that changes code, config or results
    works on `tiny_run_copy`."""
    root = copy_workflow(tmp_path_factory.mktemp("tiny-run"), tiny_study(), "tiny.yaml")
    proc = snakemake(root, *TINY_TARGETS, "--configfile", "tiny.yaml")
    (root / "run.out").write_text(proc.stdout + proc.stderr)  # what the user saw (its last lines name the page)
    snakemake(root, *TINY_TARGETS, "--configfile", "tiny.yaml", "--report", "report.html")
    return root


@pytest.fixture(scope="module")
def tiny_run_copy(tiny_run, tmp_path_factory) -> Path:
    """A copy of the tiny study's finished run for one test module to change (Snakemake sees it up to date)."""
    return copy_run(tiny_run, tmp_path_factory.mktemp("tiny-copy") / "wf")
