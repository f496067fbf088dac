"""The small trainer (dlbench.testing.small_trainer) that the runner's fault scenarios train, and the runner's one way
to start it (DLBENCH_TRAINER)."""

import json
import subprocess
import sys

import pytest

from dlbench.frameworks import protocol
from dlbench.frameworks.protocol import EXIT
from dlbench.paths import ROOT
from dlbench.run import measure, runner
from dlbench.study import sweep

SMALL = "dlbench.testing.small_trainer"


def _run_module(point: dict, dataset_dir, tmp_path) -> tuple[int, list[dict]]:
    """The small trainer run as the runner runs a trainer: its exit code and its events."""
    (tmp_path / "point.json").write_text(json.dumps(point))
    events = tmp_path / "events.jsonl"
    proc = subprocess.run([sys.executable, "-m", SMALL, str(tmp_path / "point.json"), str(dataset_dir), str(events)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    return proc.returncode, protocol.read(events)


def test_it_imports_no_framework():
    code = ("import sys, dlbench.testing.small_trainer; "
            "print(sorted({'torch', 'tensorflow', 'jax', 'theano', 'caffe'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         timeout=120).stdout
    assert out.strip() == "[]"


def test_it_trains_the_digits_through_the_runner(digits_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(measure.TRAINER_VARIABLE, SMALL)
    r = runner.run_point(sweep.one_point("pytorch", iterations=300), digits_dir, tmp_path / "ok")
    assert r["status"] == "ok" and r["iterations_done"] == r["iterations"] == 300, r["reason"]
    assert r["accuracy"] > 0.5 and r["framework_version"].startswith("small trainer")  # chance is 0.1
    assert all(r[f"{phase}_time_s"] is not None for phase in ("import", "data_load", "build", "compile", "train",
                                                              "test"))
    curve = (tmp_path / "ok" / "curve.csv").read_text().splitlines()
    header, rows = curve[0].split(","), [dict(zip(curve[0].split(","), line.split(","))) for line in curve[1:]]
    losses = [float(row["loss"]) for row in rows if row["kind"] == "train"]
    assert "loss" in header and len(losses) >= 50
    assert sum(losses[-10:]) / 10 < 0.5 * sum(losses[:5]) / 5  # the loss goes down
    assert rows[-1]["kind"] == "test" and float(rows[-1]["accuracy"]) == pytest.approx(r["accuracy"])


def test_a_huge_learning_rate_diverges_at_its_iteration(digits_dir, tmp_path):
    code, events = _run_module(sweep.one_point("pytorch", iterations=300, learning_rate=1000.0), digits_dir,
                               tmp_path)
    assert code == EXIT["diverged"] and events[-1]["e"] == "status" and events[-1]["status"] == "diverged"
    (diverged,) = [e for e in events if e["e"] == "diverged"]
    steps = [e for e in events if e["e"] == "step"]
    assert 0 < diverged["iteration"] < 300 and steps[-1]["iteration"] == diverged["iteration"]
    assert not all(isinstance(s["loss"], float) and s["loss"] < 1e30 for s in steps)  # inf or nan


def test_a_missing_dataset_is_an_error_naming_it(tmp_path):
    code, events = _run_module(sweep.one_point("pytorch", iterations=10), tmp_path / "no-such-dataset", tmp_path)
    assert code == EXIT["error"] and events[-1]["status"] == "error"
    assert "FileNotFoundError" in events[-1]["reason"] and any(e["e"] == "traceback" for e in events)


@pytest.mark.parametrize("name", ["os", "dlbench.cli", "dlbench.testing", "dlbench.testingx.small_trainer",
                                  "dlbench.testing.small_trainer;id", "dlbench.testing..small_trainer"])
def test_the_runner_refuses_a_trainer_outside_dlbench_testing(name, tmp_path, monkeypatch):
    monkeypatch.setenv(measure.TRAINER_VARIABLE, name)
    with pytest.raises(ValueError) as refused:
        runner.run_point(sweep.one_point("pytorch", iterations=10), tmp_path / "data", tmp_path / "point")
    said = str(refused.value)
    assert "\n" not in said and measure.TRAINER_VARIABLE in said and repr(name) in said
    assert not list(tmp_path.glob(".point.partial-*")) and not (tmp_path / "point" / "metrics.json").exists()


def test_the_runner_starts_its_own_trainer_or_one_under_dlbench_testing(monkeypatch):
    monkeypatch.delenv(measure.TRAINER_VARIABLE, raising=False)
    assert measure.trainer_module() == "dlbench.frameworks.trainer"
    for name in ("dlbench.frameworks.trainer", SMALL):
        monkeypatch.setenv(measure.TRAINER_VARIABLE, name)
        assert measure.trainer_module() == name
