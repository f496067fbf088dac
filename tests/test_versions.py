"""Framework versions as an axis: one environment per version, ids that carry it only where several are listed,
a version that does not resolve refused before any job, and what the version changed in the findings."""

import re

import pandas as pd
import pytest
import yaml

from dlbench.environments import choice, pins, versions
from dlbench.present import comparison, findings
from dlbench.study import config, sweep
from dlbench.testing.sandbox import copy_workflow, snakemake, tiny_study


def study(**keys) -> dict:
    return config.validate({**tiny_study(), **keys})


def test_each_listed_version_is_a_point_of_its_own_and_only_then_in_its_id():
    plain = sweep.plan(study()).points
    two = sweep.plan(study(versions={"pytorch": ["2.13.0", "2.12.0"]})).points
    torch = [p for p in plain if p["framework"] == "pytorch"]
    assert len(two) == len(plain) + len(torch)
    versioned = [p for p in two if p.get("version")]
    assert sorted(p["version"] for p in versioned) == ["2.12.0"] * len(torch) + ["2.13.0"] * len(torch)
    assert all("-v2.1" in p["id"] for p in versioned)
    assert {p["id"] for p in two if p["framework"] == "tensorflow"} == {p["id"] for p in plain
                                                                         if p["framework"] == "tensorflow"}
    one = sweep.plan(study(versions={"pytorch": ["2.12.0"]})).points
    assert [p["id"] for p in one] == [p["id"] for p in plain]  # one version is the study's: no new ids


def test_a_version_runs_in_its_own_environment_and_the_pins_version_in_the_usual_one():
    cfg = study(versions={"pytorch": ["2.13.0", "2.12.0"]})
    got = {p["version"]: choice.point_env(cfg, p) for p in sweep.plan(cfg).points if p.get("version")}
    assert got == {"2.13.0": ("pytorch", None), "2.12.0": ("pytorch@2.12.0", None)}
    gpu = {**sweep.plan(cfg).points[0], "device": "gpu", "version": "2.12.0"}
    assert choice.point_env(cfg, gpu) == ("pytorch-cuda@2.12.0", None)


def test_the_pins_of_a_version_replace_only_the_frameworks_own_packages():
    pinned = [ln for ln in versions.pins_text("pytorch-cuda@2.12.0").splitlines() if ln and not ln.startswith("#")]
    assert pinned == ["torch===2.12.0", "numpy==2.4.6"]
    jax = versions.pins_text("jax@0.9.0")
    assert "jax==0.9.0" in jax and "jaxlib==0.9.0" in jax and "flax==0.12.8" in jax
    assert pins.variant_of("pytorch-cuda@2.12.0") == "cuda" and pins.variant_of("pytorch@2.12.0") is None


def test_versions_a_study_cannot_run_are_refused_in_one_line():
    with pytest.raises(config.ConfigError, match=r"^versions: 'caffe' is not allowed; choose one of"):
        study(versions={"caffe": ["1.0"]})
    with pytest.raises(config.ConfigError, match=r"^versions\.jax: jax is not among the study's frameworks"):
        study(versions={"jax": ["0.10.2"]})
    with pytest.raises(config.ConfigError, match=r"^versions\.pytorch: pytorch runs in a site's own build"):
        study(versions={"pytorch": ["2.12.0"]}, envs={"site": {"pytorch": "/usr/bin/python3"}})
    with pytest.raises(config.ConfigError, match=r"versions\.pytorch\.0: 'latest' has a character"):
        study(versions={"pytorch": ["latest"]})


@pytest.fixture()
def torch_only(tmp_path):
    one = {**tiny_study(), "frameworks": ["pytorch"]}
    return copy_workflow(tmp_path / "wf", one, "tiny.yaml"), one


def test_a_versions_dry_run_doubles_the_points_and_asks_no_index(torch_only, monkeypatch):
    root, one = torch_only
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # a dry run locks nothing: no package index is needed
    before = snakemake(root, "-n", "--configfile", "tiny.yaml")
    (root / "tiny.yaml").write_text(yaml.safe_dump({**one, "versions": {"pytorch": ["2.13.0", "2.12.0"]}}))
    after = snakemake(root, "-n", "--configfile", "tiny.yaml")
    n = len(one["sweep"]["learning_rate"])
    assert re.search(rf"^train\s+{n}$", before.stdout, re.M) and re.search(rf"^train\s+{2 * n}$", after.stdout, re.M)
    assert "dlbench: not locked yet, locked by the run before any job (it asks the package index): " \
           "pytorch@2.12.0" in after.stderr
    assert "resources/envs/pytorch@2.12.0.json" in after.stdout
    assert (root / "envs/versions/pytorch@2.12.0.txt").read_text() == versions.pins_text("pytorch@2.12.0")


def test_a_version_the_index_does_not_have_is_refused_before_any_job(torch_only, tmp_path, monkeypatch):
    root, one = torch_only
    # The package index here is a folder of wheels with no torch in it: it answers, without a network, that it
    # has no such version; pip's own resolver asks it, as the run would ask PyPI.
    (tmp_path / "index").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    (root / "tiny.yaml").write_text(yaml.safe_dump({**one, "versions": {"pytorch": ["2.13.7"]}}))
    proc = snakemake(root, "--configfile", "tiny.yaml", check=False)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("dlbench: versions.")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("dlbench: versions.pytorch: 2.13.7 does not resolve for the pytorch environment (")
    assert "torch==2.13.7" in lines[0] and "list a version the package index has as a wheel" in lines[0]
    assert not (root / "results").exists() and "rule train" not in proc.stdout
    assert not (root / "envs/versions/pytorch@2.13.7.lock").exists()


def test_findings_say_what_the_version_changed():
    rows = []
    for version, factor in (("2.12.0", 1.0), ("2.13.0", 0.8)):
        for lr in (0.01, 0.02):
            for repeat, jitter in enumerate((0.99, 1.0, 1.01)):
                rows.append({"run_id": f"p-{version}-{lr}-{repeat}", "framework": "pytorch", "dataset": "digits",
                             "preset": "caffe", "network": "lenet", "batch_size": 32, "learning_rate": lr,
                             "iterations_planned": 30, "device": "cpu", "threads": 1, "library": "default",
                             "version": version, "repeat": repeat, "status": "ok",
                             "train_time_s": 10 * factor * jitter, "test_time_s": 1.0 + repeat / 100,
                             "accuracy": 0.9 + repeat / 100, "setting_id": f"{version}{lr}"})
    runs = pd.DataFrame(rows)
    lines = comparison.version_section(runs)
    # 8 s against 10 s, within 1 % in each set: faster, by a ratio of 0.8
    assert "- pytorch 2.13.0 against 2.12.0, train_time_s: median ratio 0.800 over 2 settings; 2 faster" in lines
    # the same accuracies, a point apart between seeds: three runs cannot put them within 0.5 points
    assert "- pytorch 2.13.0 against 2.12.0, accuracy: median ratio 1.000 over 2 settings; 2 inconclusive" in lines
    # the same test times, 1 % apart between seeds: within 5 %
    assert "- pytorch 2.13.0 against 2.12.0, test_time_s: median ratio 1.000 over 2 settings; 2 equivalent" in lines
    assert "## What the framework version changed" in findings.render(runs)
    assert comparison.version_section(runs.drop(columns="version")) == []
