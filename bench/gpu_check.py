"""The GPU check's own steps, run by bench/gpu_device.sh: the frameworks this machine has, the study, and the
summary of what the points measured, with the check's verdicts.

  python bench/gpu_check.py frameworks PYTHON[:PYTHON...]        one 'name python' line per framework found
  python bench/gpu_check.py study OUT.yaml DEVICE NAME=PYTHON...  the study (DEVICE: gpu, or cpu to rehearse)
  python bench/gpu_check.py summary WORK OUT STUDY SNAKEMAKE_RC TOOK_S   the table, the verdicts; exit 0 if all hold

The study's limits come from the environment (bench/gpu_device.sh sets them): GPU_CHECK_ITERATIONS (GPU
points), GPU_CHECK_CPU_ITERATIONS, GPU_CHECK_POINT_S (limits.time_s), GPU_CHECK_HANG_S (limits.hang_s),
GPU_CHECK_LOCK_S (measurement.lock_timeout_s), GPU_CHECK_LOCK_FILE (measurement.lock_file);
GPU_CHECK_NEW_PATHS=0 leaves out the compiled and bf16 points (for a rehearsal on a CPU without bfloat16
instructions, where they would take many minutes).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from dlbench import atomic
from dlbench.environments import check
from dlbench.environments.errors import EnvError
from dlbench.frameworks import registry
from dlbench.paths import PACKAGE
from dlbench.record import store
from dlbench.study import config as dlconfig
from dlbench.study import sweep

LONG_ENOUGH_S = 10.0  # a GPU point that trains for less says more about its start than its speed
TIMED_OUT = 124  # `timeout`'s exit status when it stopped Snakemake


def frameworks(pythons: list[str]) -> list[tuple[str, str]]:
    """(framework, the first of `pythons` whose trainer imports it) for each framework with an adapter module."""
    names = [n for n in registry.names() if (PACKAGE / "frameworks" / f"{n}.py").exists()]

    def find(name: str) -> tuple[str, str | None, str]:
        why = []
        for python in pythons:
            python = shutil.which(python) or python  # a command name (python3) as its path, for the record
            try:
                v = check.probe(name, python, timeout_s=120)
            except EnvError as exc:
                why.append(str(exc))
                continue
            return name, python, (f"{v['framework_version']} (CUDA {v['cuda_version']}, cuDNN {v['cudnn_version']}, "
                                  f"Python {v['python_version']}, numpy {v['numpy_version']}) in {python}")
        return name, None, "not here (" + "; ".join(why) + ")"

    with ThreadPoolExecutor(len(names)) as pool:  # each probe starts a framework: side by side, not in turn
        found = list(pool.map(find, names))
    for name, _, note in found:
        print(f"  {name}: {note}", file=sys.stderr)
    return [(name, python) for name, python, _ in found if python]


def study(device: str, sites: dict[str, str], threads: int) -> dict:
    """The check's study: each framework on the digits at batch sizes 64 and 512 on `device`, one CPU point each,
    and the paths no GPU point had taken: PyTorch compiled in bf16, JAX in bf16."""
    env = os.environ
    gpu_iterations, cpu_iterations = int(env.get("GPU_CHECK_ITERATIONS", 20000)), int(
        env.get("GPU_CHECK_CPU_ITERATIONS", 2000))
    sub_studies = {"accelerator": {"sweep": {"device": [device], "batch_size": [64, 512]}},
               "cpu": {"sweep": {"device": ["cpu"], "batch_size": [64], "iterations": [cpu_iterations]}}}
    new_paths = env.get("GPU_CHECK_NEW_PATHS", "1") != "0"  # 0: a rehearsal on a CPU without bfloat16 instructions
    if new_paths and "pytorch" in sites:
        sub_studies["pytorch_compiled_bf16"] = {"frameworks": ["pytorch"], "sweep": {
            "device": [device], "batch_size": [512], "compile": ["compiled"], "precision": ["bf16"]}}
    if new_paths and "jax" in sites:
        sub_studies["jax_bf16"] = {"frameworks": ["jax"], "sweep": {"device": [device], "batch_size": [512],
                                                                "precision": ["bf16"]}}
    return {
        "datasets": ["digits"], "frameworks": list(sites), "preset": ["caffe"],
        "sweep": {"iterations": [gpu_iterations], "threads": [threads], "learning_rate": [0.01]},
        "studies": sub_studies,
        "monitor": {"interval_s": 0.1},
        # Bounded: a point that hangs or runs on is ended and recorded, and the others still run.
        "limits": {"time_s": float(env.get("GPU_CHECK_POINT_S", 150)),
                   "hang_s": float(env.get("GPU_CHECK_HANG_S", 100))},
        # GPU points hold the one GPU's lock with the node lock shared; the CPU points wait for the node lock alone.
        "measurement": {"gpu": "per_device", "lock_file": env.get("GPU_CHECK_LOCK_FILE", "/tmp/dlbench-measure.lock"),
                        "lock_timeout_s": float(env.get("GPU_CHECK_LOCK_S", 240))},
        "envs": {"site": sites},
    }


def expected_points(study_path: Path) -> list[dict]:
    return sweep.plan(dlconfig.load(study_path)).points


def record_of(work: Path, point: dict) -> tuple[dict | None, str]:
    """The point's record and where it came from: its result, else its last attempt (a point cut short)."""
    folder = work / "results" / "runs" / point["framework"] / point["dataset"] / point["id"]
    record = store.read_or_skip(folder / store.RESULT)
    if record is not None:
        return record, "result"
    attempts = sorted((folder / store.ATTEMPTS).glob(f"*/{store.RESULT}"))
    for path in reversed(attempts):
        if (record := store.read_or_skip(path)) is not None:
            return record, "attempt"
    return None, "none"


COLUMNS = [("framework", "{}"), ("device", "{}"), ("batch_size", "{}"), ("compile", "{}"), ("precision", "{}"),
           ("status", "{}"), ("train_time_s", "{:.2f}"), ("compile_time_s", "{:.1f}"), ("test_time_s", "{:.2f}"),
           ("startup_time_s", "{:.1f}"), ("wall_time_s", "{:.1f}"), ("accuracy", "{:.3f}"),
           ("throughput_img_s", "{:.0f}"), ("gpu_util_mean_pct", "{:.0f}"), ("gpu_mem_idle_mb", "{:.0f}"),
           ("gpu_mem_peak_above_idle_mb", "{:.0f}"), ("gpu_power_idle_w", "{:.0f}"), ("gpu_power_mean_w", "{:.0f}"),
           ("gpu_energy_train_j", "{:.0f}"), ("lock_mode", "{}"), ("lock_wait_s", "{:.1f}")]


def table(rows: list[dict]) -> list[str]:
    def cell(r: dict, key: str, fmt: str) -> str:
        v = r.get(key)
        return "-" if v is None else fmt.format(v)

    cells = [[c for c, _ in COLUMNS]] + [[cell(r, c, f) for c, f in COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COLUMNS))]
    return ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]


def verdicts(points: list[dict], found: list[tuple[dict | None, str]], snakemake_rc: int, gpu: bool) -> list[str]:
    """One line per check, 'ok: ...' or 'FAILED: ...'."""
    out = []
    out.append("ok: Snakemake finished" if snakemake_rc == 0 else
               f"FAILED: Snakemake stopped at the check's time bound (timeout, exit {snakemake_rc})"
               if snakemake_rc == TIMED_OUT else f"FAILED: Snakemake exited {snakemake_rc} (see snakemake.log)")
    missing = [p for p, (r, _) in zip(points, found) if r is None]
    bad = [r for r, _ in found if r is not None and r.get("status") != "ok"]
    out.append(f"ok: all {len(points)} points ended ok" if not missing and not bad else
               f"FAILED: {len(points) - len(missing) - len(bad)} of {len(points)} points ended ok; "
               + "; ".join([f"{_name(r)} {r.get('status')}" for r in bad]
                           + [f"{_name(p)} never ran" for p in missing]))
    ran = [r for r, _ in found if r is not None and r.get("status") == "ok"]
    compiled = [r for r in ran if r.get("compile") == "compiled" and r["framework"] == "pytorch"]
    bf16 = [r for r in ran if r.get("precision") == "bf16"]
    wrong = [r for r in compiled if "torch.compile" not in str(r.get("compile_in_effect"))]
    wrong += [r for r in bf16 if not str(r.get("precision_in_effect")).startswith("bfloat16")]
    out.append(("ok: " if not wrong else "FAILED: ") + f"compile and precision ran as asked ({len(compiled)} "
               f"PyTorch compiled, {len(bf16)} bf16 points)"
               + "".join(f"; {_name(r)}: {r.get('compile_in_effect')}, {r.get('precision_in_effect')}" for r in wrong))
    if gpu:
        gpu_ran = [r for r in ran if r.get("device") == "gpu"]
        locks = [r for r in gpu_ran if r.get("lock_mode") != "per_device" or r.get("gpu_device") is None]
        locks += [r for r in ran if r.get("device") == "cpu" and r.get("lock_mode") != "exclusive"]
        out.append(("ok: " if not locks else "FAILED: ") + "GPU points held their GPU's lock with the node lock "
                   "shared (per_device), CPU points the node lock alone (exclusive)"
                   + "".join(f"; {_name(r)}: {r.get('lock_mode')} on {r.get('gpu_device')}" for r in locks))
        nvml = [r for r in gpu_ran if None in (r.get("gpu_util_mean_pct"), r.get("gpu_mem_peak_mb"),
                                               r.get("gpu_power_mean_w"), r.get("gpu_energy_train_j"))]
        out.append(("ok: " if not nvml else "FAILED: ") + "NVML gave utilisation, memory, power and energy"
                   + "".join(f"; {_name(r)}: {r.get('gpu_nvml_failures') or 'no GPU samples'}" for r in nvml))
        short = [r for r in gpu_ran if (r.get("train_time_s") or 0) < LONG_ENOUGH_S]
        if short:  # not a failure: the next run's length
            out.append(f"note: {len(short)} GPU points trained under {LONG_ENOUGH_S:g} s ("
                       + ", ".join(f"{_name(r)} {r['train_time_s']:.1f} s" for r in short)
                       + "): raise GPU_CHECK_ITERATIONS next time")
    return out


def _name(r: dict) -> str:
    extra = "".join(f" {r[k]}" for k in ("compile", "precision") if r.get(k) in ("compiled", "bf16"))
    return f"{r['framework']} {r['device']} bs{r['batch_size']}{extra}"


def summary(work: Path, out: Path, study_path: Path, snakemake_rc: int, took_s: str) -> int:
    points = expected_points(study_path)
    found = [record_of(work, p) for p in points]
    rows = [r for r, _ in found if r is not None]
    device = yaml.safe_load(study_path.read_text())["studies"]["accelerator"]["sweep"]["device"][0]
    lines = table(rows)
    for (r, source), p in zip(found, points):
        if r is None:
            lines.append(f"{_name(p)}: no record (Snakemake ended before it ran)")
            continue
        lines.append(f"{_name(r)}: {r.get('framework_version')} CUDA {r.get('cuda_version')} cuDNN "
                     f"{r.get('cudnn_version')} on {r.get('device_name')} (gpu_device {r.get('gpu_device')}, "
                     f"env {r.get('env_kind')} {r.get('env_python')})"
                     + (" [its last attempt: cut short]" if source == "attempt" else ""))
        if r.get("gpu_nvml_failures"):
            lines.append(f"    NVML calls that failed: {r['gpu_nvml_failures']}")
        if r.get("status") != "ok":
            lines.append(f"    {r.get('status')}: {r.get('reason')}")
    checks = verdicts(points, found, snakemake_rc, device == "gpu")
    host = rows[0] if rows else {}
    lines += checks
    lines.append(f"{len(rows)} of {len(points)} points in {took_s} s on {host.get('gpu_model') or 'no GPU'} "
                 f"(driver {host.get('gpu_driver')}), {host.get('cpu_model')}, {host.get('cpu_cores_usable')} cores")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    atomic.write_text(out / "summary.txt", text)
    atomic.write_text(out / "records.json", json.dumps(rows, indent=1, default=str))
    for name in ("runs.parquet", "samples.parquet", "findings.md"):
        if (work / "results" / name).exists():
            shutil.copy(work / "results" / name, out / name)
    return 0 if all(c.startswith(("ok", "note")) for c in checks) else 1


def main(argv: list[str]) -> int:
    command, *rest = argv or [""]
    if command == "frameworks" and len(rest) == 1:
        for name, python in frameworks(rest[0].split(":")):
            print(name, python)
        return 0
    if command == "study" and len(rest) >= 3:
        out, device, *pairs = rest
        sites = dict(pair.split("=", 1) for pair in pairs)
        threads = min(4, len(os.sched_getaffinity(0)))  # a local run refuses more threads than the machine has
        atomic.write_text(out, yaml.safe_dump(study(device, sites, threads), sort_keys=False))
        return 0
    if command == "summary" and len(rest) == 5:
        work, out, study_path, rc, took = rest
        return summary(Path(work), Path(out), Path(study_path), int(rc), took)
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
