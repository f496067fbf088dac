"""Code digests from the import graph: what a framework's training job imports, found by parsing, not listed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dlbench.frameworks import registry
from dlbench.paths import PACKAGE
from dlbench.rules import code_digest

FRAMEWORKS = registry.names()


def names(framework: str, package: Path = PACKAGE) -> set[str]:
    return {p.relative_to(package).as_posix() for p in code_digest.framework_files(framework, package)}


def test_every_framework_depends_on_the_shared_trainer_code_that_the_old_hand_list_missed():
    for framework in FRAMEWORKS:
        files = names(framework)
        assert {"frameworks/trainer.py", "run/runner.py", "run/monitor.py", f"frameworks/{framework}.py",
                "frameworks/base.py", "spec/initial_weights.py", "spec/inputs.py", "spec/networks.py",
                "spec/lr_policies.py", "datasets/store.py", "__init__.py", "frameworks/__init__.py",
                "node/hostload.py", "node/locks.py"} <= files, (framework, files)
        # What no training job runs: the drawing, the words, the tables, the sweep's expansion, the schema's check.
        assert not files & {"present/charts/draw.py", "present/findings.py", "analysis/frames.py", "study/sweep.py",
                            "study/config.py", "aggregate/collect.py"}, files
        others = {f"frameworks/{name}.py" for name in FRAMEWORKS if name != framework}
        assert not files & others, (framework, files & others)
    assert {"frameworks/caffe_log.py", "frameworks/caffe_data.py"} <= names("caffe")
    assert "paths.py" in names("theano")  # its compile cache lies under dlbench's cache root


@pytest.fixture
def package(tmp_path) -> Path:
    """A copy of the dlbench package to edit (the digests read it as the real one)."""
    return Path(shutil.copytree(PACKAGE, tmp_path / "dlbench", ignore=shutil.ignore_patterns("__pycache__")))


def digests(package: Path) -> dict[str, str]:
    out = {f: code_digest.files_digest(code_digest.framework_files(f, package), package) for f in FRAMEWORKS}
    out["caffe_data"] = code_digest.files_digest(code_digest.caffe_data_files(package), package)
    return out


def edited(package: Path, rel: str, text: str = "\n# changed\n") -> None:
    path = package / rel
    path.write_text(path.read_text() + text)


def test_a_change_in_initialisers_changes_every_digest_and_one_in_charts_none(package):
    before = digests(package)
    edited(package, "present/charts/draw.py")
    assert digests(package) == before
    edited(package, "spec/initial_weights.py")
    after = digests(package)
    assert all(after[k] != before[k] for k in FRAMEWORKS), (before, after)
    # Caffe's data preparation draws no weights: its prepared data stays (it once came in with the adapters'
    # contract module, which imported the initialisers)
    assert after["caffe_data"] == before["caffe_data"]


def test_a_change_in_a_frameworks_own_helper_changes_its_digest_only(package):
    before = digests(package)
    edited(package, "frameworks/caffe_log.py")
    after = digests(package)
    assert {k for k in before if after[k] != before[k]} == {"caffe"}


def test_an_import_inside_a_function_and_a_relative_one_are_followed(package):
    """A module imported only inside a function body (and, from there, relatively) is part of the digest."""
    (package / "frameworks" / "extra_step.py").write_text("from ..extra_leaf import VALUE\n")
    (package / "extra_leaf.py").write_text("VALUE = 1\n")
    edited(package, "frameworks/pytorch.py", "\n\ndef _helper():\n    from dlbench.frameworks import extra_step\n"
                                            "    return extra_step\n")
    assert {"frameworks/extra_step.py", "extra_leaf.py"} <= names("pytorch", package)
    assert "extra_leaf.py" not in names("tensorflow", package)
    before = digests(package)
    (package / "extra_leaf.py").write_text("VALUE = 2\n")
    after = digests(package)
    assert {k for k in before if after[k] != before[k]} == {"pytorch"}


def test_a_data_file_the_trainer_opens_is_digested_with_its_code(package):
    (package / "extra_table.yaml").write_text("a: 1\n")
    edited(package, "spec/initial_weights.py", '\nTABLE = "extra_table.yaml"  # read at run time\n')
    assert "extra_table.yaml" in names("jax", package)
    before = digests(package)
    (package / "extra_table.yaml").write_text("a: 2\n")
    after = digests(package)
    assert all(after[f] != before[f] for f in FRAMEWORKS)


def test_no_package_data_is_read_by_a_trainer_today():
    """Stated in docs: the trainer process opens none of the package's data files (presets.yaml is read when the
    sweep is expanded, and its values are each point's parameters, in its id)."""
    for framework in FRAMEWORKS:
        trainer = code_digest.closure(code_digest.framework_roots(framework)[:2])
        assert code_digest.data_files(trainer) == set(), framework
