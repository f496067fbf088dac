"""bench/gpu_device.sh, the GPU check: it refuses without a GPU, checks its wheel folder before the trip
(--preflight), shows why an import fails, rehearses on CPU points end to end, and bounds its own run.

The preflight's folders hold tiny wheels made here (the names, versions, tags and Requires-Dist lines of
real ones; no code): test inputs for the checks, which read only those.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from dlbench.paths import ROOT

SCRIPT = ROOT / "bench" / "gpu_device.sh"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_wheels = _module("gpu_wheels")
gpu_check = _module("gpu_check")


def script(*args, env=None, timeout=120, cwd=None) -> subprocess.CompletedProcess:
    base = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "PYTHON": sys.executable}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**base, **(env or {})}, cwd=cwd or ROOT)


@pytest.mark.skipif(bool(glob.glob("/dev/nvidia[0-9]*")) or bool(shutil.which("nvidia-smi")),
                    reason="this machine may have an NVIDIA GPU: the script would run the check")
def test_without_a_gpu_it_refuses_in_one_line_before_anything_else(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    started = time.monotonic()
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "OUT": str(out), "TMPDIR": str(tmp_path),
                               "PYTHON": "/nonexistent/python"})
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpu_device.sh: no NVIDIA GPU on this machine"), proc.stderr
    assert "--rehearse" in lines[0]  # and what to do instead
    # nothing was done: no Python started (PYTHON does not exist), no folder made, nothing written
    assert list(out.iterdir()) == [] and [p.name for p in tmp_path.iterdir()] == ["out"]
    assert time.monotonic() - started < 5


def test_an_unknown_argument_is_refused_in_one_line(tmp_path):
    proc = subprocess.run(["bash", str(SCRIPT), "--gpu"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "usage:" in proc.stderr


# ---------------------------------------------------------------------------------------------- the preflight


def make_wheel(folder: Path, name: str, version: str, tags: str = "py3-none-any", requires: list[str] = ()) -> Path:
    """A wheel file as pip names and builds one: its METADATA and WHEEL, no code."""
    dist = name.replace("-", "_")
    path = folder / f"{dist}-{version}-{tags}.whl"
    meta = "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{dist}-{version}.dist-info/METADATA",
                    f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{meta}")
        zf.writestr(f"{dist}-{version}.dist-info/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tags}\n")
    return path


COMPILED = "cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64"


def fill(folder: Path, *, skip: tuple[str, ...] = (), snakemake_requires: tuple[str, ...] = ()) -> dict[str, str]:
    """Every package bench/gpu_wheels.txt pins, once, at its version; Snakemake asks for all the others (the
    closure the real wheels make, flattened), with a version bound where the real ones have one."""
    folder.mkdir(exist_ok=True)
    pins, _ = gpu_wheels.read_pins()
    assert len(pins) > 40 and "snakemake" in pins and "typing-extensions" in pins
    others = [f"{name}>={version}" if name in ("typing-extensions", "packaging", "jinja2") else name
              for name, version in pins.items() if name != "snakemake"]
    others += ['pulp<3.4,>=2.3.1', 'psutil', 'colorama; sys_platform == "win32"', 'sphinx; extra == "docs"']
    for name, version in pins.items():
        if name not in skip:
            make_wheel(folder, name, version, COMPILED if name in ("pydantic-core", "rpds-py") else "py3-none-any",
                       [*others, *snakemake_requires] if name == "snakemake" else [])
    return pins


def preflight(folder: Path) -> subprocess.CompletedProcess:
    return script("--preflight", env={"GPU_WHEELS": str(folder)})


def test_the_preflight_passes_a_folder_of_every_pinned_wheel_and_says_what_travels(tmp_path):
    fill(tmp_path / "wheels")
    proc = preflight(tmp_path / "wheels")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    (line,) = proc.stdout.splitlines()
    assert line.startswith(f"{tmp_path / 'wheels'}/: ") and line.endswith(": ready")
    assert "of the 64 MiB one call may copy" in line


def test_the_preflight_names_each_problem_in_one_line_and_fails(tmp_path):
    folder = tmp_path / "wheels"
    pins = fill(folder, skip=("typing-extensions",))
    (folder / f"pydantic_core-{pins['pydantic-core']}-{COMPILED}.whl").unlink()
    make_wheel(folder, "pydantic_core", pins["pydantic-core"], "cp312-cp312-macosx_11_0_arm64")  # wrong platform
    make_wheel(folder, "attrs", "25.3.0")  # a second attrs
    proc = preflight(folder)
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 3, proc.stderr
    assert all(line.startswith(f"{folder}/: ") for line in lines)
    wrong, = [ln for ln in lines if "macosx_11_0_arm64" in ln]
    assert "not x86-64 manylinux" in wrong
    twice, = [ln for ln in lines if "attrs is there 2 times" in ln]
    assert "attrs-25.3.0-py3-none-any.whl" in twice and f"attrs-{pins['attrs']}-py3-none-any.whl" in twice
    missing, = [ln for ln in lines if "no wheel of" in ln]
    assert f"typing-extensions=={pins['typing-extensions']}" in missing


def test_the_preflight_finds_what_neither_travels_nor_is_on_the_machine(tmp_path):
    folder = tmp_path / "wheels"
    # psutil is on the GPU machine, at a version its list does not give; left-pad is nowhere
    fill(folder, snakemake_requires=("psutil>=5.9", "left-pad>=1"))
    make_wheel(folder, "leftover", "1.0")
    (folder / "notes.bin").write_bytes(b"")
    os.truncate(folder / "notes.bin", 65 * 2**20)  # a folder that would not fit (sparse: no disk used)
    proc = preflight(folder)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 4, proc.stderr
    assert any("psutil may be too old on the GPU machine" in ln and "needs psutil>=5.9" in ln for ln in lines)
    assert any("left-pad is not on the GPU machine" in ln and "snakemake" in ln for ln in lines)
    assert any("leftover-1.0-py3-none-any.whl is not in bench/gpu_wheels.txt" in ln for ln in lines)
    assert any("over the 64 MiB one call may copy" in ln for ln in lines)


def test_an_empty_or_absent_wheel_folder_is_one_line_with_the_fix(tmp_path):
    proc = preflight(tmp_path / "nowhere")
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1
    assert "no wheels there" in proc.stderr and "pip download" in proc.stderr


def test_the_wheel_tags_the_gpu_machine_takes():
    ok = gpu_wheels.tag_problem
    assert ok(["cp312"], ["cp312"], ["manylinux_2_17_x86_64", "manylinux2014_x86_64"]) is None
    assert ok(["cp39"], ["abi3"], ["manylinux_2_28_x86_64"]) is None  # the stable ABI
    assert ok(["py2", "py3"], ["none"], ["any"]) is None
    assert "not CPython 3.12" in ok(["cp311"], ["cp311"], ["manylinux_2_17_x86_64"])
    assert "not x86-64 manylinux" in ok(["cp312"], ["cp312"], ["manylinux_2_17_aarch64"])
    assert "not x86-64 manylinux" in ok(["cp312"], ["cp312"], ["musllinux_1_2_x86_64"])
    assert "not x86-64 manylinux" in ok(["cp312"], ["cp312"], ["manylinux_2_40_x86_64"])  # past its glibc
    assert "not Python 3" in ok(["py2"], ["none"], ["any"])


def test_the_pins_are_the_base_environments_and_the_charts_do_not_travel():
    pins, left_out = gpu_wheels.read_pins()
    lock = gpu_wheels.read_lock()
    assert {name: lock.get(name) for name in pins} == pins
    assert not {"altair", "vl-convert-python", "vegafusion", "narwhals"} & set(pins)
    assert "pulp" in left_out and "connection-pool" in pins  # the one built from its sdist
    machine = gpu_wheels.read_machine()
    assert machine["torch"] == "2.11.0" and machine["numpy"] == "2.5.2" and machine["pandas"] is None
    assert "snakemake" not in machine and "jsonschema" not in machine


# ---------------------------------------------------------------------------------------------- on the machine


def test_an_import_that_fails_is_shown_by_its_last_line(tmp_path):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "sklearn.py").write_text("raise RuntimeError('this scikit-learn is broken')\n")
    (shadow / "pynvml.py").write_text("import no_such_module_here\n")
    proc = script("--rehearse", env={"PYTHONPATH": str(shadow), "GPU_WHEELS": str(tmp_path / "none"),
                                     "TMPDIR": str(tmp_path), "OUT": str(tmp_path / "out")})
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert "cannot import what the workflow needs" in lines[0]
    assert lines[1:] == ["  pynvml: ModuleNotFoundError: No module named 'no_such_module_here'",
                         "  sklearn: RuntimeError: this scikit-learn is broken"]


def test_the_wheels_unpacked_are_those_this_python_lacks_at_their_version(tmp_path):
    from importlib.metadata import version

    make_wheel(tmp_path, "jsonschema", version("jsonschema"))  # this Python has it at that version
    other = make_wheel(tmp_path, "pyyaml", "5.1")
    absent = make_wheel(tmp_path, "left-pad", "1.3.0")
    assert gpu_wheels.unpack_list(tmp_path) == sorted([other, absent])


def test_the_study_takes_the_paths_no_gpu_point_has_taken(tmp_path, monkeypatch):
    for key in ("GPU_CHECK_ITERATIONS", "GPU_CHECK_NEW_PATHS", "GPU_CHECK_POINT_S", "GPU_CHECK_HANG_S"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("GPU_CHECK_LOCK_FILE", str(tmp_path / "measure.lock"))
    path = tmp_path / "study.yaml"
    path.write_text(json.dumps(gpu_check.study("gpu", {"pytorch": sys.executable, "jax": sys.executable}, 4)))
    points = gpu_check.expected_points(path)
    kinds = {(p["framework"], p["device"], p["batch_size"], p.get("compile"), p.get("precision")) for p in points}
    assert ("pytorch", "gpu", 512, "compiled", "bf16") in kinds and ("jax", "gpu", 512, None, "bf16") in kinds
    assert {(fw, "cpu", 64) for fw in ("pytorch", "jax")} <= {k[:3] for k in kinds}
    assert {(fw, "gpu", bs) for fw in ("pytorch", "jax") for bs in (64, 512)} <= {k[:3] for k in kinds}
    gpu_points = [p for p in points if p["device"] == "gpu"]
    assert len(points) == 8 and all(p["iterations"] == 20000 for p in gpu_points)
    cfg = json.loads(path.read_text())
    assert cfg["limits"] == {"time_s": 150.0, "hang_s": 100.0}
    assert cfg["measurement"]["gpu"] == "per_device" and cfg["measurement"]["lock_timeout_s"] > 0


def _record(framework="pytorch", device="gpu", **kw) -> dict:
    r = {"framework": framework, "device": device, "batch_size": 512, "status": "ok", "compile": "eager",
         "precision": "fp32", "compile_in_effect": "eager", "precision_in_effect": "float32 compute, float32 weights",
         "lock_mode": "per_device" if device == "gpu" else "exclusive", "gpu_device": "0" if device == "gpu" else None,
         "gpu_util_mean_pct": 40.0, "gpu_mem_peak_mb": 1500.0, "gpu_power_mean_w": 200.0,
         "gpu_energy_train_j": 4000.0, "train_time_s": 20.0}
    return {**r, **kw}


def test_the_verdicts_fail_on_a_failed_snakemake_even_when_every_point_ended_ok():
    records = [_record(), _record(device="cpu")]
    found = [(r, "result") for r in records]
    assert all(v.startswith("ok") for v in gpu_check.verdicts(records, found, 0, gpu=True))
    failed = gpu_check.verdicts(records, found, 1, gpu=True)
    assert failed[0] == "FAILED: Snakemake exited 1 (see snakemake.log)" and all(v.startswith("ok") for v in failed[1:])
    assert gpu_check.verdicts(records, found, 124, gpu=True)[0].startswith("FAILED: Snakemake stopped at the check's")


def test_the_verdicts_name_what_a_gpu_point_got_wrong():
    points = [_record(lock_mode="exclusive"),
              _record(framework="jax", gpu_power_mean_w=None, gpu_energy_train_j=None, gpu_nvml_failures=(
                  "nvmlDeviceGetPowerUsage: NVMLError_NotSupported (Not Supported) (9 of 9 calls)")),
              _record(compile="compiled", precision="bf16", compile_in_effect="eager",
                      precision_in_effect="bfloat16 compute, float32 weights", train_time_s=3.0),
              _record(device="cpu", status="timeout")]
    found = [(r, "result") for r in points[:3]] + [(None, "none")]
    lines = gpu_check.verdicts(points, found, 0, gpu=True)
    assert lines[1] == "FAILED: 3 of 4 points ended ok; pytorch cpu bs512 never ran"
    assert lines[2].startswith("FAILED: compile and precision") and "pytorch gpu bs512 compiled bf16: eager" in lines[2]
    assert lines[3].startswith("FAILED: GPU points held") and "pytorch gpu bs512: exclusive on 0" in lines[3]
    assert lines[4].startswith("FAILED: NVML") and "jax gpu bs512: nvmlDeviceGetPowerUsage" in lines[4]
    assert lines[5].startswith("note: 1 GPU points trained under 10 s")


# ---------------------------------------------------------------------------------------------- rehearsals


@pytest.mark.long
def test_the_rehearsal_runs_the_workflow_on_cpu_points_and_writes_every_file(env_python, tmp_path):
    out = tmp_path / "out"
    proc = script("--rehearse", timeout=900, env={
        "SITE_PYTHON": env_python("pytorch"), "OUT": str(out), "TMPDIR": str(tmp_path),
        "GPU_WHEELS": str(tmp_path / "no-wheels"), "GPU_CHECK_NEW_PATHS": "0", "GPU_CHECK_ITERATIONS": "30",
        "GPU_CHECK_CPU_ITERATIONS": "30", "GPU_CHECK_TIME_S": "800", "GPU_CHECK_POINT_S": "600"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["findings.md", "records.json", "runs.parquet",
                                                      "samples.parquet", "snakemake.log", "summary.txt"]
    summary = (out / "summary.txt").read_text()
    assert "ok: Snakemake finished" in summary and "ok: all 2 points ended ok" in summary
    assert "ok: compile and precision ran as asked (0 PyTorch compiled, 0 bf16 points)" in summary
    records = json.loads((out / "records.json").read_text())
    assert sorted(r["batch_size"] for r in records) == [64, 512]  # the CPU point is the batch-64 one: it ran once
    assert all(r["status"] == "ok" and r["device"] == "cpu" and r["env_kind"] == "site" for r in records)
    assert all(r["env_python"] == env_python("pytorch") and r["lock_mode"] == "exclusive" for r in records)
    assert "tensorflow: not here" in proc.stderr and "pytorch: " in proc.stderr


@pytest.mark.long
def test_a_run_past_its_time_bound_is_stopped_and_still_summarised(env_python, tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    proc = script("--rehearse", timeout=300, env={
        "SITE_PYTHON": env_python("pytorch"), "OUT": str(out), "TMPDIR": str(tmp_path),
        "GPU_WHEELS": str(tmp_path / "no-wheels"), "GPU_CHECK_NEW_PATHS": "0",
        "GPU_CHECK_ITERATIONS": str(10**7), "GPU_CHECK_CPU_ITERATIONS": str(10**7), "GPU_CHECK_TIME_S": "75"})
    took = time.monotonic() - started
    assert proc.returncode == 1
    assert took < 75 + 30, took  # its own bound, and the kill 10 s after
    summary = (out / "summary.txt").read_text()
    assert "FAILED: Snakemake stopped at the check's time bound (timeout, exit 124)" in summary
    assert "FAILED: 0 of 2 points ended ok" in summary
    # a point cut short is there as its last attempt, cancelled, if it had started
    assert all(r["status"] == "cancelled" for r in json.loads((out / "records.json").read_text()))
