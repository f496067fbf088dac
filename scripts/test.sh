#!/usr/bin/env bash
# Sets up dlbench with everything the tests need, starts the test SLURM cluster, runs the tests.
# Extra arguments go to pytest (e.g. -m "not slow" for the quick ones).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --tests
# The SLURM tests need the one-node cluster; without root they skip and say so.
cluster_started=0
if [[ $(id -u) -eq 0 ]]; then
  if bash cluster/slurm-up.sh; then
    cluster_started=1
  elif [[ "${CI:-}" == "true" ]]; then
    echo "dlbench tests: the test SLURM cluster did not start (see above)" >&2
    exit 1
  fi
fi
status=0
.venv/bin/python -m pytest "$@" || status=$?
((cluster_started)) && bash cluster/slurm-down.sh || true
exit $status
