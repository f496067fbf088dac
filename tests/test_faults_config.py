"""A study config that cannot run, refused in one line before any job: a NaN or an infinity in any numeric key, a
crop or a padding that does not fit the images, a lock file whose path climbs with `..` or whose folder is
missing, a yte template whose code would run when it is read. Each injected as a user would write it
(docs/reliability.md)."""

from __future__ import annotations

import sys

import pytest
import yaml

from dlbench.node import locks
from dlbench.paths import ROOT, SCHEMA
from dlbench.record import store
from dlbench.run import runner
from dlbench.run.options import RunOptions
from dlbench.study import config
from dlbench.testing import sandbox
from dlbench.testing.faults import point

BASE = {"datasets": ["digits"], "frameworks": ["pytorch"], "preset": ["caffe"]}
PRESET = {"network": "lenet", "optimizer": "sgd", "learning_rate": 0.01, "batch_size": 16, "iterations": 10}


def _resolved(schema: dict, ref: str) -> dict:
    node = schema
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def _numeric_keys(schema: dict, node: dict, path: tuple = ()) -> list[tuple[tuple, bool]]:
    """Every key of the schema whose value is a number, or a list of numbers (True), as a path of names (a map of
    names, such as presets, reached through the name `x`)."""
    if "$ref" in node:
        node = _resolved(schema, node["$ref"])
    found = []
    kinds = node.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if {"number", "integer"} & set(kinds):
        found.append((path, False))
    if "array" in kinds and isinstance(node.get("items"), dict):
        found += [(p, True) for p, listed in _numeric_keys(schema, node["items"], path) if p == path and not listed]
    for alternative in node.get("anyOf", []) + node.get("oneOf", []):
        found += _numeric_keys(schema, alternative, path)
    for key, sub in node.get("properties", {}).items():
        found += _numeric_keys(schema, sub, (*path, key))
    if isinstance(node.get("additionalProperties"), dict):
        found += _numeric_keys(schema, node["additionalProperties"], (*path, "x"))
    return list(dict.fromkeys(found))


def _nested(path: tuple, value) -> dict:
    for key in reversed(path):
        value = {key: value}
    return value


NUMERIC = _numeric_keys(config.load_schema(SCHEMA), config.load_schema(SCHEMA))


def test_the_walk_finds_the_numeric_keys_the_issue_named():
    paths = {".".join(p) for p, _ in NUMERIC}
    for key in ("monitor.interval_s", "limits.hang_s", "scale", "measurement.lock_timeout_s", "sweep.learning_rate",
                "presets.x.input.crop", "presets.x.input.pad_to"):
        assert key in paths, sorted(paths)
    assert len(paths) > 30


@pytest.mark.parametrize("text", [".nan", ".inf", "-.inf"])
def test_every_numeric_key_of_the_schema_refuses_nan_and_infinity_naming_it(tmp_path, text):
    """YAML reads `.nan` and `.inf` as floats, which pass every bound of the schema (NaN compares false): each is
    refused in one line that names its key, whichever key it is."""
    for path, listed in NUMERIC:
        value = [0.5, "@"] if listed else "@"
        file = tmp_path / "study.yaml"
        file.write_text(yaml.safe_dump({**BASE, **_nested(path, value)}).replace("'@'", text))
        with pytest.raises(config.ConfigError) as info:
            config.load(file)
        where = ".".join(path) + (".1" if listed else "")
        message = str(info.value)
        assert message.startswith(f"{where}: ") and "finite number" in message and "\n" not in message, message


def test_a_nan_in_the_config_stops_the_workflow_in_one_line_before_any_job(tmp_path):
    wf = sandbox.copy_workflow(tmp_path / "wf")
    (wf / "study.yaml").write_text("datasets: [digits]\nframeworks: [pytorch]\npreset: [caffe]\n"
                                   "monitor: {interval_s: .nan}\nmeasurement: {lock_file: " + str(tmp_path / "m.lock")
                                   + "}\n")
    proc = sandbox.snakemake(wf, "-n", "--configfile", "study.yaml", check=False, timeout=300)
    said = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("dlbench: config error")]
    assert proc.returncode != 0 and said == ["dlbench: config error: monitor.interval_s: nan is not a number a study "
                                             "can use; give a finite number"], proc.stderr[-2000:]
    assert "train" not in proc.stdout and not (wf / "results").exists()


@pytest.mark.parametrize("given, said", [
    ({"crop": 29}, "presets.mine.input.crop: 29 is larger than the 28x28 images of digits; give at most 28"),
    ({"pad_to": 20}, "presets.mine.input.pad_to: 20 is smaller than the 28x28 images of digits"),
    ({"pad_to": 32, "crop": 33}, "presets.mine.input.crop: 33 is larger than the 32x32 padded images of digits"),
])
def test_a_crop_or_padding_that_does_not_fit_the_images_is_refused_before_any_job(tmp_path, given, said):
    """A 29 crop of 28 rows is sliced past the edge (one row, not an error); padding to 20 cannot shrink 28."""
    file = tmp_path / "study.yaml"
    file.write_text(yaml.safe_dump({**BASE, "preset": ["mine"], "presets": {"mine": {**PRESET, "input": given}}}))
    with pytest.raises(config.ConfigError) as info:
        config.load(file)
    assert str(info.value).startswith(said) and "\n" not in str(info.value), str(info.value)
    fits = {"pad_to": 32, "crop": 32} if "pad_to" in given else {"crop": 24}
    file.write_text(yaml.safe_dump({**BASE, "preset": ["mine"], "presets": {"mine": {**PRESET, "input": fits}}}))
    assert config.load(file)["presets"]["mine"]["input"] == fits


def test_a_lock_file_that_climbs_with_dotdot_is_refused_in_one_line(tmp_path):
    file = tmp_path / "study.yaml"
    file.write_text(yaml.safe_dump({**BASE, "measurement": {"lock_file": f"{tmp_path}/a/../b/measure.lock"}}))
    with pytest.raises(config.ConfigError) as info:
        config.load(file)
    assert str(info.value).startswith("measurement.lock_file: ") and "`..`" in str(info.value)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_lock_files_missing_folder_is_never_made_and_the_point_is_lock_unusable(digits_dir, tmp_path):
    lock = tmp_path / "no" / "such" / "measure.lock"
    out = tmp_path / "point"
    record = runner.run_point(point(iterations=10), digits_dir, out, RunOptions(measure_lock=str(lock)))
    assert record["status"] == "lock_unusable" and "does not exist" in record["reason"], record
    assert (out / store.RESULT).exists()  # the last allowed attempt (retries 0) publishes it
    with pytest.raises(locks.LockUnusable, match="does not exist"):
        with locks.heavy_work(lock, "a test"):
            pass
    assert not (tmp_path / "no").exists()


TEMPLATE = """__use_yte__: true
__definitions__:
  - open({marker!r}, "w").write("the template's code ran")
datasets: [digits]
frameworks: [pytorch]
preset: [caffe]
"""


def test_a_yte_template_config_is_refused_before_its_code_runs(tmp_path):
    """Snakemake renders a --configfile's template before the Snakefile is read; the workflow profile, which
    Snakemake reads first, refuses it. Without that profile, the code runs and the workflow refuses it after."""
    wf = sandbox.copy_workflow(tmp_path / "wf")
    marker = tmp_path / "ran"
    (wf / "study.yaml").write_text(TEMPLATE.format(marker=str(marker)))
    proc = sandbox.snakemake(wf, "-n", "--configfile", "study.yaml", check=False, timeout=300)
    said = [ln for ln in proc.stderr.splitlines() if ln.startswith("dlbench: config error")]
    assert proc.returncode == 2 and not marker.exists(), proc.stderr[-2000:]
    assert said == ["dlbench: config error: study.yaml: __use_yte__: a yte template runs code when it is read; "
                    "dlbench reads plain YAML only: write its values out"], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    # abbreviated as Snakemake allows, beside --config: the same
    proc = sandbox.snakemake(wf, "-n", "--configf", "study.yaml", "--config", "scale=0.5", check=False, timeout=300)
    assert proc.returncode == 2 and not marker.exists(), proc.stderr[-2000:]
    # the workflow profile left out: what cannot be stopped (the code runs), then the workflow's own refusal
    proc = sandbox.snakemake(wf, "-n", "--configfile", "study.yaml", "--workflow-profile", "none", check=False,
                             timeout=300)
    assert proc.returncode != 0 and marker.exists()
    assert "__use_yte__: a yte template runs code" in proc.stdout + proc.stderr


def test_the_workflow_profile_renders_to_its_settings_and_passes_a_plain_config(tmp_path, monkeypatch):
    import yte

    plain = tmp_path / "plain.yaml"
    plain.write_text("datasets: [digits]\n")
    monkeypatch.setattr(sys, "argv", ["snakemake", "--configfile", str(plain), "-n"])
    with open(ROOT / "profiles" / "default" / "config.yaml") as fh:
        settings = yte.process_yaml(fh, require_use_yte=True)
    assert settings == {"resources": ["dlbench_measure=1"], "rerun-incomplete": True, "keep-going": True,
                        "printshellcmds": False, "show-failed-logs": True}
    monkeypatch.setattr(sys, "argv", ["snakemake", "--configfile", str(plain), str(tmp_path / "t.yaml")])
    (tmp_path / "t.yaml").write_text(TEMPLATE.format(marker=str(tmp_path / "ran")))
    with open(ROOT / "profiles" / "default" / "config.yaml") as fh, pytest.raises(SystemExit) as stop:
        yte.process_yaml(fh, require_use_yte=True)
    assert stop.value.code == 2 and not (tmp_path / "ran").exists()
