#!/usr/bin/env bash
# Sets up dlbench with everything the tests need, starts the test SLURM cluster, runs one tier of the tests.
#
#   bash scripts/test.sh            the CI tier: every test not marked `long` (what .ci/run runs)
#   bash scripts/test.sh --long     the long tier: the full fault matrices, the SLURM fault scenarios, the
#                                   20,000-record report, the MKL builds, the CIFAR-10 presets, the modern study
#
# Extra arguments go to pytest (e.g. -m "not slow" for the quick tests alone, or -k NAME). The whole run is
# bounded: past DLBENCH_TEST_LIMIT_S pytest stops between tests, and a minute later it is interrupted; either way
# it prints its durations table first.
set -euo pipefail
cd "$(dirname "$0")/.."

tier=(-m "not long")
limit_s=${DLBENCH_TEST_LIMIT_S:-3600}
setup=(--tests)
if [[ "${1:-}" == "--long" ]]; then
  shift
  tier=(-m long)
  limit_s=${DLBENCH_TEST_LIMIT_S:-14400}
  setup=(--tests --long-tests)
fi

bash scripts/setup.sh "${setup[@]}"
# The SLURM tests need the one-node cluster; without root they skip and say so (in CI they fail).
cluster_started=0
if [[ $(id -u) -eq 0 ]]; then
  if bash slurm-testbed/slurm-up.sh; then
    cluster_started=1
  elif [[ "${CI:-}" == "true" ]]; then
    echo "dlbench tests: the test SLURM cluster did not start (see above)" >&2
    exit 1
  fi
fi
status=0
# pytest's own session limit ends the run between tests; `timeout` interrupts a test that outlives it (SIGINT:
# pytest still prints its summary and durations), and kills what is left two minutes after that.
timeout -s INT -k 120 $((limit_s + 60)) \
  .venv/bin/python -m pytest "${tier[@]}" --session-timeout="$limit_s" "$@" || status=$?
((status == 124)) && echo "dlbench tests: stopped at the limit of $((limit_s + 60)) s (DLBENCH_TEST_LIMIT_S)" >&2
((cluster_started)) && bash slurm-testbed/slurm-down.sh || true
exit $status
