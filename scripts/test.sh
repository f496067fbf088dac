#!/usr/bin/env bash
# Sets up dlbench with everything the tests need, starts the test SLURM cluster, runs the tests.
# Extra arguments go to pytest (e.g. -m "not slow" for the quick ones).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
cluster_started=0
if [[ $(id -u) -eq 0 && -x cluster/slurm-up.sh ]]; then
  bash cluster/slurm-up.sh && cluster_started=1
fi
status=0
.venv/bin/python -m pytest "$@" || status=$?
((cluster_started)) && bash cluster/slurm-down.sh || true
exit $status
