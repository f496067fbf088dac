#!/usr/bin/env bash
# Sets up dlbench and runs the default study (config/config.yaml) on all cores of this machine.
# Extra arguments go to snakemake (e.g. --configfile config/paper.yaml --config scale=0.01).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/snakemake --cores "$(nproc)" "$@"
