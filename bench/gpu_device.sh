#!/usr/bin/env bash
# The GPU check: the workflow end to end with GPU points, on a machine with an NVIDIA GPU, its own
# Python and framework builds, and no network (docs/gpu.md).
#
#   bash bench/gpu_device.sh               on the GPU machine (from anywhere; about 3 minutes)
#   bash bench/gpu_device.sh --rehearse    anywhere else: the same steps with CPU points, to check the script
#
# 1. Where no NVIDIA GPU is visible it stops at once with one line (exit 2), unless --rehearse.
# 2. What $PYTHON lacks of what the workflow needs (Snakemake and its dependencies, jsonschema,
#    Altair, vl-convert) it unpacks from bench/gpu_wheels/ into a temporary folder on PYTHONPATH;
#    a package $PYTHON has is not shadowed. Fill that folder (git-ignored, about 44 MB; it travels
#    with the checkout) where pip reaches the package index, from the repository root:
#      python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#        --platform manylinux1_x86_64 -d bench/gpu_wheels -r bench/gpu_wheels.txt
#      python3 -m pip wheel --no-deps -w bench/gpu_wheels connection-pool==0.0.3
#    (Python 3.12, x86-64: the GPU machine's; --python-version 3.11 for a rehearsal with Python 3.11.)
# 3. The frameworks checked are those of dlbench/frameworks/registry.py whose adapter module exists
#    and whose trainer imports in $SITE_PYTHON (dlbench.trainer --probe); no other is asked for.
# 4. The study: those frameworks on the digits (embedded in scikit-learn), LeNet with Caffe's
#    settings, GPU points at two batch sizes and one CPU point each (up to 4 threads), every framework in $SITE_PYTHON
#    as a site environment (config envs.site), through the same runner, lock and monitor as any run.
# 5. It prints each point's status, times, accuracy, GPU utilisation, GPU memory peak, power and
#    energy, and copies the records into $OUT (set by the machine's runner), else $DLBENCH_GPU_OUT,
#    else results/gpu-check/: summary.txt, records.json (every metrics.json), runs.parquet,
#    samples.parquet, findings.md, snakemake.log.
#
# Variables: PYTHON (default python3) runs the workflow; SITE_PYTHON (default $PYTHON) is the
# framework builds' interpreter; GPU_CHECK_ITERATIONS (default 2000) the length of each point.
set -euo pipefail

rehearse=0
case "${1:-}" in
    --rehearse) rehearse=1 ;;
    "") ;;
    *) echo "gpu_device.sh: unknown argument '$1' (usage: bash bench/gpu_device.sh [--rehearse])" >&2; exit 2 ;;
esac
if ((!rehearse)) && ! compgen -G "/dev/nvidia[0-9]*" >/dev/null &&
    ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }; then
    echo "gpu_device.sh: no NVIDIA GPU on this machine (no /dev/nvidia0, nvidia-smi lists none): run it on a GPU machine, or with --rehearse to check the script on CPU points" >&2
    exit 2
fi

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
SITE_PYTHON="$(command -v "${SITE_PYTHON:-$PYTHON}")" ||
    { echo "gpu_device.sh: no Python '${SITE_PYTHON:-$PYTHON}' here; set PYTHON (and SITE_PYTHON) to the machine's own" >&2; exit 2; }
OUT_DIR="${OUT:-${DLBENCH_GPU_OUT:-$REPO/results/gpu-check}}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/dlbench-gpu-check.XXXXXX")"
mkdir -p "$OUT_DIR"
log() { printf '[gpu-check %(%H:%M:%S)T] %s\n' -1 "$*"; }
T0=$(date +%s)

# ---- 2. what this Python lacks, from the wheels folder
WHEELS="$REPO/bench/gpu_wheels"
SITE="$WORK/site-packages"
mkdir -p "$SITE"
missing="$("$PYTHON" - "$WHEELS" <<'PY'
import importlib.metadata as md, pathlib, re, sys
folder = pathlib.Path(sys.argv[1])
for wheel in sorted(folder.glob("*.whl")) if folder.is_dir() else []:
    name = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
    try:
        md.distribution(name)
    except md.PackageNotFoundError:
        print(wheel)
PY
)"
if [[ -n "$missing" ]]; then
    mapfile -t to_install <<<"$missing"
    log "unpacking ${#to_install[@]} wheels this Python lacks from bench/gpu_wheels/"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "${to_install[@]}"
fi
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}"
for module in snakemake jsonschema altair yaml pandas pyarrow psutil pynvml sklearn; do
    "$PYTHON" -c "import $module" 2>/dev/null ||
        { echo "gpu_device.sh: $PYTHON cannot import $module; fill bench/gpu_wheels/ as this script's header says" >&2; exit 2; }
done

# ---- 3. the frameworks this machine has
mapfile -t frameworks < <("$PYTHON" - "$SITE_PYTHON" <<'PY'
import sys
from dlbench import envs
from dlbench.frameworks import registry
from dlbench.paths import PACKAGE
for name in registry.names():
    if not (PACKAGE / "frameworks" / f"{name}.py").exists():
        continue
    try:
        v = envs.probe(name, sys.argv[1], timeout_s=300)
    except envs.EnvError as exc:
        print(f"  {name}: not here ({exc})", file=sys.stderr)
        continue
    print(f"  {name}: {v['framework_version']} (CUDA {v['cuda_version']}, cuDNN {v['cudnn_version']}, "
          f"Python {v['python_version']}, numpy {v['numpy_version']})", file=sys.stderr)
    print(name)
PY
)
((${#frameworks[@]})) || { echo "gpu_device.sh: no framework of dlbench imports in $SITE_PYTHON; nothing to check" >&2; exit 2; }
log "frameworks: ${frameworks[*]} in $SITE_PYTHON"

# ---- 4. the study, run by the workflow in a folder of its own
device=gpu
((rehearse)) && device=cpu
"$PYTHON" - "$WORK/study.yaml" "$SITE_PYTHON" "$device" "${GPU_CHECK_ITERATIONS:-2000}" "${frameworks[@]}" <<'PY'
import os, sys
import yaml
out, site, device, iterations, *frameworks = sys.argv[1:]
threads = min(4, len(os.sched_getaffinity(0)))  # a local run refuses more threads than the machine has
study = {
    "datasets": ["digits"], "frameworks": frameworks, "preset": ["caffe"],
    "sweep": {"iterations": [int(iterations)], "threads": [threads], "learning_rate": [0.01]},
    "studies": {"accelerator": {"sweep": {"device": [device], "batch_size": [64, 512]}},
                "cpu": {"sweep": {"device": ["cpu"], "batch_size": [64]}}},
    "monitor": {"interval_s": 0.1},
    "envs": {"site": {fw: site for fw in frameworks}},
}
with open(out, "w") as fh:
    yaml.safe_dump(study, fh)
PY
targets=(results/runs.parquet results/findings.md)
# The charts need vl-convert and VegaFusion; VegaFusion's wheel (24 MB) is not among the carried ones (with it
# they would pass the 64 MiB a checkout may carry to the GPU machine), so there the check ends at the tables.
"$PYTHON" -c "import vl_convert, vegafusion" 2>/dev/null && targets=(all)
log "running the workflow in $WORK (targets: ${targets[*]})"
status=0
(cd "$REPO" && "$PYTHON" -m snakemake --snakefile "$REPO/workflow/Snakefile" --directory "$WORK" --configfile "$WORK/study.yaml" \
    --cores "$(nproc)" --resources dlbench_measure=1 --scheduler greedy --keep-going --rerun-incomplete \
    "${targets[@]}") >"$OUT_DIR/snakemake.log" 2>&1 || status=$?
((status == 0)) || log "snakemake exited $status: see $OUT_DIR/snakemake.log"

# ---- 5. what each point measured
"$PYTHON" - "$WORK" "$OUT_DIR" "$(($(date +%s) - T0))" <<'PY'
import json, pathlib, shutil, sys
work, out, took = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
records = [json.loads(p.read_text()) for p in sorted(work.glob("results/runs/*/*/*/metrics.json"))]
cols = [("framework", "{}"), ("device", "{}"), ("batch_size", "{}"), ("status", "{}"), ("train_time_s", "{:.2f}"),
        ("test_time_s", "{:.2f}"), ("startup_time_s", "{:.2f}"), ("wall_time_s", "{:.1f}"), ("accuracy", "{:.3f}"),
        ("throughput_img_s", "{:.0f}"), ("gpu_util_mean_pct", "{:.0f}"), ("gpu_mem_peak_mb", "{:.0f}"),
        ("gpu_power_mean_w", "{:.0f}"), ("gpu_energy_j", "{:.0f}"), ("lock_wait_s", "{:.1f}")]
def cell(r, key, fmt):
    v = r.get(key)
    return "-" if v is None else fmt.format(v)
rows = [[c for c, _ in cols]] + [[cell(r, c, f) for c, f in cols] for r in records]
widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
lines = ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in rows]
for r in records:
    extra = (f"{r['framework']} {r['device']} bs{r['batch_size']}: {r.get('framework_version')} CUDA {r.get('cuda_version')}"
             f" cuDNN {r.get('cudnn_version')} on {r.get('device_name')} (gpu_device {r.get('gpu_device')}, "
             f"lock {r.get('lock_mode')}, env {r.get('env_kind')} {r.get('env_python')})")
    lines.append(extra + (f"\n    reason: {r.get('reason')}" if r.get("status") != "ok" else ""))
host = records[0] if records else {}
lines.append(f"{len(records)} points in {took} s on {host.get('gpu_model') or 'no GPU'} "
             f"(driver {host.get('gpu_driver')}), {host.get('cpu_model')}, {host.get('cpu_cores_usable')} cores")
text = "\n".join(lines) + "\n"
print(text, end="")
(out / "summary.txt").write_text(text)
(out / "records.json").write_text(json.dumps(records, indent=1, default=str))
for name in ("runs.parquet", "samples.parquet", "findings.md"):
    if (work / "results" / name).exists():
        shutil.copy(work / "results" / name, out / name)
sys.exit(0 if records and all(r.get("status") == "ok" for r in records) else 1)
PY
