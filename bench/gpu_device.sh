#!/usr/bin/env bash
# The GPU check: the workflow end to end with GPU points, on a machine with an NVIDIA GPU, its own
# Python and framework builds, and no network (docs/gpu.md).
#
#   bash bench/gpu_device.sh --preflight   where the wheels were downloaded, before any GPU time: exit 0 if ready
#   bash bench/gpu_device.sh               on the GPU machine, from anywhere (bounded by GPU_CHECK_TIME_S)
#   bash bench/gpu_device.sh --rehearse    anywhere else: the same steps with CPU points, to check the script
#
# What travels: the checkout (tracked and untracked-not-ignored files) and bench/gpu_wheels/, which is
# git-ignored and so is copied only when the copy names it. Fill it where pip reaches the package index,
# from the repository root (about 12 MiB: Snakemake and jsonschema with what they need that the GPU
# machine lacks, for CPython 3.12 on x86-64), then check it:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#     --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d bench/gpu_wheels -r bench/gpu_wheels.txt
#   python3 -m pip wheel --no-deps -w bench/gpu_wheels connection-pool==0.0.3
#   bash bench/gpu_device.sh --preflight
# On the GPU machine, one command: copy the checkout with bench/gpu_wheels/ named besides it, run
# `bash bench/gpu_device.sh` from its root, and bound the command at 270 s. The script ends itself within
# GPU_CHECK_TIME_S (240 s), its summary written, so two tries and two machine starts fit 15 minutes.
#
# 1. Where no NVIDIA GPU is visible it stops at once with one line (exit 2), unless --rehearse.
# 2. It unpacks each wheel of bench/gpu_wheels/ whose package $PYTHON lacks at that version into a
#    temporary folder on PYTHONPATH (bench/gpu_wheels.py unpack), then imports what the workflow needs,
#    printing each failure's last line (exit 2).
# 3. The frameworks checked are those of dlbench/frameworks/registry.py whose trainer imports in one of
#    $SITE_PYTHON's interpreters (':'-separated; dlbench.frameworks.trainer --probe); no other is asked for.
# 4. The study (bench/gpu_check.py study): the digits, LeNet with Caffe's settings, GPU points at batch
#    sizes 64 and 512, a PyTorch GPU point compiled in bf16 and a JAX one in bf16, and one CPU point each,
#    with every framework's interpreter as its site environment (config envs.site), through the same
#    runner, per-GPU lock and monitor as any run. Each point is bounded (limits.time_s, limits.hang_s, the
#    lock timeout), and so is Snakemake (`timeout`), so that the summary is written whatever hangs.
# 5. It prints each point's figures and the check's verdicts (bench/gpu_check.py summary) and copies them
#    into $OUT (set by the machine's runner), else $DLBENCH_GPU_OUT, else results/gpu-check/: summary.txt,
#    records.json, runs.parquet, samples.parquet, findings.md, snakemake.log. Exit 0 only when Snakemake
#    finished and every verdict holds; 1 otherwise.
#
# Variables: PYTHON (default python3) runs the workflow; SITE_PYTHON (default $PYTHON) the frameworks;
# GPU_WHEELS (default bench/gpu_wheels) the wheel folder; GPU_CHECK_TIME_S (default 240) the whole run;
# GPU_CHECK_ITERATIONS (default 20000) the GPU points' length, GPU_CHECK_CPU_ITERATIONS (2000) the CPU
# points'; GPU_CHECK_POINT_S (150) and GPU_CHECK_HANG_S (100) each point's limits; GPU_CHECK_NEW_PATHS=0
# leaves out the compiled and bf16 points (a rehearsal on a CPU without bfloat16 instructions).
set -euo pipefail

mode=check
case "${1:-}" in
    --rehearse) mode=rehearse ;;
    --preflight) mode=preflight ;;
    "") ;;
    *) echo "gpu_device.sh: unknown argument '$1' (usage: bash bench/gpu_device.sh [--preflight | --rehearse])" >&2; exit 2 ;;
esac
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
WHEELS="${GPU_WHEELS:-$REPO/bench/gpu_wheels}"
if [[ $mode == preflight ]]; then
    exec "$PYTHON" "$REPO/bench/gpu_wheels.py" preflight "$WHEELS"
fi
if [[ $mode == check ]] && ! compgen -G "/dev/nvidia[0-9]*" >/dev/null &&
    ! { command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; }; then
    echo "gpu_device.sh: no NVIDIA GPU on this machine (no /dev/nvidia0, nvidia-smi lists none): run it on a GPU machine, or with --rehearse to check the script on CPU points" >&2
    exit 2
fi

T0=$(date +%s)
BUDGET_S="${GPU_CHECK_TIME_S:-240}"
RESERVE_S=20 # kept for Snakemake's jobs to record their cancelled points, and for the summary
command -v "$PYTHON" >/dev/null ||
    { echo "gpu_device.sh: no Python '$PYTHON' here; set PYTHON (and SITE_PYTHON) to the machine's own" >&2; exit 2; }
OUT_DIR="${OUT:-${DLBENCH_GPU_OUT:-$REPO/results/gpu-check}}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/dlbench-gpu-check.XXXXXX")"
mkdir -p "$OUT_DIR"
log() { printf '[gpu-check %(%H:%M:%S)T] %s\n' -1 "$*"; }

# ---- 2. what this Python lacks, from the wheel folder; then what the workflow imports
SITE="$WORK/site-packages"
mkdir -p "$SITE"
mapfile -t to_unpack < <("$PYTHON" "$REPO/bench/gpu_wheels.py" unpack "$WHEELS")
if ((${#to_unpack[@]})) && [[ -n "${to_unpack[0]}" ]]; then
    log "unpacking ${#to_unpack[@]} wheels this Python lacks at their version from $WHEELS"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "${to_unpack[@]}"
fi
export PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}"
if ! failures="$("$PYTHON" "$REPO/bench/gpu_wheels.py" imports 2>&1)"; then
    echo "gpu_device.sh: $PYTHON cannot import what the workflow needs (fill $WHEELS as this script's header says, then --preflight):" >&2
    sed 's/^/  /' <<<"$failures" >&2
    exit 2
fi

# ---- 3. the frameworks this machine has
sites=()
while read -r name python; do sites+=("$name=$python"); done < <("$PYTHON" "$REPO/bench/gpu_check.py" frameworks "${SITE_PYTHON:-$PYTHON}")
((${#sites[@]})) || { echo "gpu_device.sh: no framework of dlbench imports in ${SITE_PYTHON:-$PYTHON}; nothing to check" >&2; exit 2; }
log "frameworks: ${sites[*]}"

# ---- 4. the study, run by the workflow in a folder of its own, within the time left
device=gpu
[[ $mode == rehearse ]] && device=cpu
export GPU_CHECK_LOCK_FILE="${GPU_CHECK_LOCK_FILE:-$WORK/measure.lock}" GPU_CHECK_LOCK_S="${GPU_CHECK_LOCK_S:-$BUDGET_S}"
"$PYTHON" "$REPO/bench/gpu_check.py" study "$WORK/study.yaml" "$device" "${sites[@]}"
# The charts need vl-convert and VegaFusion, which do not travel: the check ends at the tables and the findings.
targets=(results/runs.parquet results/findings.md)
left=$((T0 + BUDGET_S - RESERVE_S - $(date +%s)))
status=0
if ((left < 10)); then
    log "no time left for the workflow (GPU_CHECK_TIME_S=$BUDGET_S, $((BUDGET_S - RESERVE_S - left)) s spent before it)"
    status=124
    : >"$OUT_DIR/snakemake.log"
else
    log "running the workflow in $WORK for at most $left s (targets: ${targets[*]})"
    (cd "$REPO" && timeout --kill-after=10 "$left" "$PYTHON" -m snakemake --snakefile "$REPO/workflow/Snakefile" \
        --directory "$WORK" --configfile "$WORK/study.yaml" --cores "$(nproc)" --resources dlbench_measure=1 \
        --scheduler greedy --keep-going --rerun-incomplete "${targets[@]}") >"$OUT_DIR/snakemake.log" 2>&1 || status=$?
fi
((status == 0)) || log "snakemake exited $status$( ((status == 124)) && echo " (its time bound)"): see $OUT_DIR/snakemake.log"

# ---- 5. what each point measured, and the verdicts
"$PYTHON" "$REPO/bench/gpu_check.py" summary "$WORK" "$OUT_DIR" "$WORK/study.yaml" "$status" "$(($(date +%s) - T0))"
